//===- Internal.h - What the API's implementation files share -------------===//
//
// Conversions between the public types and the internal IR, and the Access
// struct the public classes befriend so their handles stay private.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TOOLS_LIBAMPC_INTERNAL_H
#define AMPC_TOOLS_LIBAMPC_INTERNAL_H

#include "ampc/ampc.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/MetaReader.h"
#include "kernels/KernelArgs.h"
#include "runtime/data/DataSource.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

namespace ampc {
class Backend;
class Program;
struct CompileOptions;
struct MemoryPlan;
} // namespace ampc

namespace ampc::api {

inline ampc::DType toInternal(DType t) { return static_cast<ampc::DType>(t); }
inline DType toPublic(ampc::DType t) { return static_cast<DType>(t); }
static_assert(static_cast<int>(ampc::DType::Bool) == static_cast<int>(DType::Bool));
static_assert(static_cast<int>(ampc::NodeRole::LossScale) == static_cast<int>(NodeRole::LossScale));
static_assert(static_cast<int>(ampc::StateKind::ScalerState) ==
              static_cast<int>(StateKind::ScalerState));
static_assert(static_cast<int>(ampc::PrecisionCategory::Banned) ==
              static_cast<int>(Category::Banned));

ampc::Attribute toInternal(const AttrValue &v);
AttrValue toPublic(const ampc::Attribute &a);

/// Every diagnostic of `diag` as a Status (a failure when any is an error).
Status toStatus(const DiagnosticEngine &diag);
Diagnostic toPublic(const ampc::Diagnostic &d);

/// printf-style formatting into a string (report tables' columns; one
/// row at most 512 characters).
template <class... Args> std::string format(const char *fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

/// The profile a program kept (ampc::Program::setProfiling), by kernel.
StepProfile collectProfile(const ampc::Program &program);
/// Its timeline as Chrome trace-event JSON.
std::string traceJson(const ampc::Program &program);

/// Each node's value range as a program runs (Program::calibrate).
class Calibrator {
public:
  Calibrator(const ampc::Program &program, DType halfType);
  /// Reads the results of the node at `position`, just computed.
  void observe(unsigned position);
  CalibrationReport report() const;

private:
  struct Stats {
    double maxAbs = 0;
    uint64_t nonzero = 0, subnormal = 0, flushed = 0;
    bool seen = false;
  };
  const ampc::Program &program_;
  DType halfType_;
  double maxFinite_, minNormal_, flushBelow_;
  std::vector<Stats> stats_;
};

/// Reads one step's node results (Program::recordStep, compareStep):
/// construct it before the step (it reads the loss scale the step uses),
/// hand it every kernel's position as the program's observer; each
/// forward, loss and backward floating result goes to the sink.
class StepRecorder {
public:
  StepRecorder(const ampc::Program &program, std::function<void(RecordedValue &&)> sink);
  void observe(unsigned position);
  double lossScale() const { return lossScale_; }
  /// "O0".."O3", or "f64" for a model retyped by Model::widenToF64.
  const std::string &level() const { return level_; }

private:
  const ampc::Program &program_;
  std::function<void(RecordedValue &&)> sink_;
  llvm::DenseMap<const ampc::Value *, uint64_t> keys_;
  /// The values computed from the loss scale (the scaled gradients).
  llvm::DenseSet<const ampc::Value *> scaled_;
  double lossScale_ = 1;
  bool wide_ = false; ///< an f64 program: values kept as doubles
  std::string level_;
};

/// Measures a level's values, one at a time, against a reference record
/// (and an f64 one): compareSteps and Program::compareStep.
class ComparisonBuilder {
public:
  ComparisonBuilder(const StepRecord &reference, const StepRecord *f64, const CompareOptions &opts);
  void add(const RecordedValue &candidate);
  ComparisonReport finish(std::string level, double lossScale);

private:
  const StepRecord &reference_;
  const StepRecord *f64_;
  CompareOptions opts_;
  std::unordered_map<uint64_t, size_t> referenceByKey_, f64ByKey_;
  std::unordered_map<uint64_t, size_t> comparedByKey_;
  ComparisonReport report_;
};

/// The frontend's load options (limits, batch) from the public ones.
ampc::LoadOptions toInternal(const LoadOptions &o);
/// A model file by its extension: .onnx through the ONNX frontend (when
/// built), .ir as textual IR, anything else as YAML: a model file or a graph
/// written by `ampc --emit yaml`. `graphFile` (when given) says whether it
/// was a graph file (.ir or an emitted YAML graph), to be run as written.
std::unique_ptr<ampc::Graph> loadAnyModelFile(const std::string &path, ampc::DiagnosticEngine &diag,
                                              const ampc::LoadOptions &load,
                                              bool *graphFile = nullptr);

/// Where the model came from, so evaluation can import it again.
struct ModelSource {
  /// File and String: a model file, or its text. IR: textual IR given to
  /// parseIR (pathOrText is the text). Graph: a graph file loaded as
  /// written by loadFile (pathOrText is its path) or loadString (empty).
  enum class Kind { File, String, IR, Graph } kind = Kind::IR;
  std::string pathOrText;
  std::string bufferName;
  std::string baseDir = ".";
  LoadOptions load;
};

/// Whether the model can be imported again from its source (the evaluation
/// and export graphs are built that way): only a model file or its text.
inline bool canImportAgain(const ModelSource &s) {
  return s.kind == ModelSource::Kind::File || s.kind == ModelSource::Kind::String;
}

struct Model::Impl {
  std::unique_ptr<ampc::Graph> graph;
  ModelSource source;
  std::optional<Stage> rewritten;
  /// A graph file loaded as written (GraphFile.cpp): `rewritten` is the
  /// stage it holds, and no pass runs on it.
  bool asWritten = false;
  // The training data once openData() opened it, and planTraining()'s split
  // (the subsets read `data`): shared with the Programs compiled from the
  // model, which may outlive a moved-from Model's handles.
  std::shared_ptr<DataSource> data, trainPart, evalPart;
  DataInfo dataInfo;
};

/// The graph's "amp.opt_level" ("O0" when none is set).
std::string optLevelOf(const ampc::Graph &g);

// Graph files (GraphFile.cpp): a graph rewritten already, run as written.

/// Reads textual IR from `path`, checks it against the limits of `load`
/// and verifies it; the verifier's findings are located in the .ir file.
std::unique_ptr<ampc::Graph> loadIRFile(const std::string &path, ampc::DiagnosticEngine &diag,
                                        const ampc::LoadOptions &load);
/// The stage a graph as written holds: Train when it has backward,
/// loss-scaling or optimizer nodes, else Forward.
Stage stageOfGraph(const ampc::Graph &g);
/// Refuses load options that would change a graph as written: another opt
/// level, a policy property with another value, another batch. `path`
/// names the file in the messages.
bool checkLoadKeepsGraph(const ampc::Graph &g, const std::string &path, const LoadOptions &load,
                         ampc::DiagnosticEngine &diag);
/// "'g.yaml' holds a training graph rewritten at O2, which runs as
/// written": the start of every refusal a graph file gets.
std::string graphFileSubject(const Model::Impl &m);

/// The plan's rows by class and its totals (Program::memoryPlanSummary,
/// planProgram).
MemoryPlanSummary summarizePlan(const ampc::MemoryPlan &plan);

/// The runtime's options for compiling `m`'s program with `opts` on
/// `backend` (Program::compile, planProgram): seeds, data folder, limits.
ampc::CompileOptions runtimeCompileOptions(const Model::Impl &m, const CompileOptions &opts,
                                           const Backend &backend);

struct Access {
  static ValueView value(const ampc::Value *v) { return ValueView(v); }
  static NodeView node(const ampc::Node *n) { return NodeView(n); }
  static GraphView graph(const ampc::Graph *g) { return GraphView(g); }
  static GraphEditor editor(ampc::Graph *g) { return GraphEditor(g); }
  static const ampc::Value *get(const ValueView &v) { return v.v_; }
  static const ampc::Node *get(const NodeView &n) { return n.n_; }
  static const ampc::Graph *get(const GraphView &g) { return g.g_; }
  static Model::Impl &impl(const Model &m) { return *m.impl_; }
  static Model make(std::unique_ptr<Model::Impl> impl) { return Model(std::move(impl)); }
  static ShapeContext shapeContext(const ampc::InferContext &ctx) { return ShapeContext(ctx); }
  static GradientContext gradientContext(ampc::GradientBuilder &gb, const ampc::Node &n,
                                         void *resultGrads, void *operandGrads) {
    return GradientContext(gb, n, resultGrads, operandGrads);
  }
  static KernelContext kernelContext(const ampc::kernels::KernelArgs &args);
};

} // namespace ampc::api

#endif
