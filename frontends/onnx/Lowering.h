//===- Lowering.h - Shared state of one ONNX import -------------*- C++ -*-===//
//
// Internal to the ONNX frontend. The importer walks the ONNX nodes in their
// (checked, topological) order; each ONNX name maps to a Term: a graph value,
// a constant known at import time (Constant nodes, small initializers, and
// everything computed from them: Shape/Gather/Concat chains fold here), or
// both. An initializer becomes a state tensor only when a node uses it as
// data, so shape and axes tensors never turn into parameters.
//
// Each ONNX op type maps to a builder through one table (OpTable.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_ONNX_LOWERING_H
#define AMPC_FRONTENDS_ONNX_LOWERING_H

#include "frontends/onnx/OnnxImporter.h"

#include "ir/Builder.h"
#include "ir/Graph.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ampc::onnxfe {

/// A double as an int64, saturating at +-2^62: constants hold doubles, and a
/// hostile file's 2^63 would make the plain conversion undefined.
inline int64_t saturatingInt(double v) {
  constexpr double kLimit = 4611686018427387904.0; // 2^62
  if (!(v > -kLimit))
    return v != v ? 0 : -(int64_t(1) << 62);
  if (!(v < kLimit))
    return int64_t(1) << 62;
  return int64_t(v);
}

/// A tensor known at import time, kept as doubles (exact for the integers
/// of shapes and axes).
struct ConstTensor {
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 4> dims;
  std::vector<double> values;

  int64_t numElements() const { return int64_t(values.size()); }
  bool isScalarLike() const { return values.size() == 1; }
  std::vector<int64_t> asInts() const {
    std::vector<int64_t> out;
    for (double v : values)
      out.push_back(saturatingInt(v));
    return out;
  }
};

/// What an ONNX name stands for.
struct Term {
  Value *value = nullptr;
  std::optional<ConstTensor> constant;
  /// An initializer not yet materialised (its data stays in the file).
  const onnx::TensorProto *initializer = nullptr;
  /// The constant came from a Constant node of this output name: the
  /// tensor reader can find its data in the file.
  bool fromConstantNode = false;
  /// A float initializer that only ever feeds masks (compared, or moved and
  /// then compared: nanoGPT's causal `bias` buffer): it folds like a
  /// constant instead of becoming a parameter that gets no gradient.
  bool onlyFeedsMasks = false;
  TensorType type;
};

/// A term that folds at import: a constant, an integer initializer (shape
/// arithmetic), or a float initializer that only feeds masks.
inline bool isFoldable(const Term *t) {
  return t &&
         (t->constant || (t->initializer && (!isFloating(t->type.dtype()) || t->onlyFeedsMasks)));
}

class OnnxLowering;

/// A builder: lowers one ONNX node; false after reporting an error.
using NodeBuilder = bool (*)(OnnxLowering &l, const onnx::NodeProto &n);

struct OpTableEntry {
  const char *opType;
  int64_t sinceOpset; ///< the first opset whose semantics this builder follows
  NodeBuilder build;
};
/// The builder of `opType` at `opset`; nullptr when unsupported.
const OpTableEntry *findOnnxOp(llvm::StringRef opType, int64_t opset);
/// Every supported op type (docs and "supported ops" messages).
std::vector<std::string> supportedOnnxOps();

class OnnxLowering {
public:
  OnnxLowering(Graph &g, DiagnosticEngine &diag, const onnx::ModelProto &model,
               const OnnxImportSettings &settings);

  /// Lowers the graph; `bound` are graph inputs already declared by the
  /// caller (a model file), by ONNX input name.
  bool run(const llvm::StringMap<Value *> &bound);
  /// The ONNX graph's outputs, in order, as values.
  const std::vector<std::pair<std::string, Value *>> &outputs() const { return outputs_; }
  /// What was recognised or folded ("2 decomposed layernorms → layernorm").
  const std::vector<std::string> &notes() const { return notes_; }

  // --- For the builders -------------------------------------------------
  Graph &graph() { return g_; }
  int64_t opset() const { return opset_; }
  bool training() const { return settings_.training; }
  const Location &loc() const { return nodeLoc_; }

  /// Reports at the current node; returns false.
  bool error(const llvm::Twine &msg);
  /// The term of input `i` of n ("" or a missing input: nullptr).
  const Term *input(const onnx::NodeProto &n, int i);
  bool hasInput(const onnx::NodeProto &n, int i) {
    return i < n.input_size() && !n.input(i).empty();
  }
  /// Input i as a graph value (materialising initializers and constants as
  /// state). `kind` is used when an initializer becomes state here.
  Value *valueOf(const onnx::NodeProto &n, int i, StateKind kind = StateKind::Parameter);
  /// A buffer of `type` filled with `value` (a bias or scale an ONNX node
  /// left out), named `base` or a fresh variant of it.
  Value *constantState(llvm::StringRef base, TensorType type, double value);
  /// A buffer holding constant `c` (a folded mask or index tensor), named
  /// `base` or a fresh variant of it; nullptr after an error.
  Value *constantBuffer(llvm::StringRef base, const ConstTensor &c);
  /// Input i as a buffer this node alone updates (batchnorm statistics):
  /// an initializer that something else uses too (exporters merge equal
  /// initializers) gets a copy of its own, named after it.
  Value *privateBuffer(const onnx::NodeProto &n, int i);
  /// Input i as a constant known now; nullptr (after an error naming
  /// `what`) if it is computed at run time.
  const ConstTensor *constantOf(const onnx::NodeProto &n, int i, llvm::StringRef what);
  /// A static shape (inputs are always static here).
  const TensorType &typeOf(const onnx::NodeProto &n, int i);

  /// By ONNX name, for pattern lowerings (which span several nodes).
  Value *valueOfName(llvm::StringRef name, StateKind kind = StateKind::Parameter);
  void setOutputName(llvm::StringRef name, Value *v);
  /// A scalar known before lowering (a one-element Constant node value or
  /// initializer), for pattern recognition.
  std::optional<double> staticScalar(llvm::StringRef name) const;
  /// An initializer by name, or nullptr.
  const onnx::TensorProto *initializer(llvm::StringRef name) const;

  /// Builds a registry op at the current node; nullptr after an error.
  /// `names`: none (fresh names) or one per result (empty: fresh).
  Node *build(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs = {},
              llvm::ArrayRef<std::string> names = {});
  /// A one-result op whose result is named after the ONNX value `onnxName`
  /// (fresh when empty).
  Value *build1(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs = {},
                llvm::StringRef onnxName = "");
  /// The IR name for an ONNX name: its spelling where free.
  std::string valueName(llvm::StringRef onnxName);
  Value *reshape(Value *v, llvm::ArrayRef<int64_t> dims, llvm::StringRef resultName = "");

  /// Binds output `i` of n to a value / a folded constant.
  void setOutput(const onnx::NodeProto &n, int i, Value *v);
  void setConstant(const onnx::NodeProto &n, int i, ConstTensor c);
  /// Output i of n is input j (Identity, Dropout in eval mode).
  void alias(const onnx::NodeProto &n, int i, int j);

  /// Attributes of the current node.
  const onnx::AttributeProto *attr(const onnx::NodeProto &n, llvm::StringRef name);
  int64_t intAttr(const onnx::NodeProto &n, llvm::StringRef name, int64_t dflt);
  double floatAttr(const onnx::NodeProto &n, llvm::StringRef name, double dflt);
  std::string stringAttr(const onnx::NodeProto &n, llvm::StringRef name, llvm::StringRef dflt);
  std::optional<std::vector<int64_t>> intsAttr(const onnx::NodeProto &n, llvm::StringRef name);
  /// Refuses attributes other than `known` (an attribute we would ignore
  /// silently could change the result).
  bool checkAttrs(const onnx::NodeProto &n, std::initializer_list<llvm::StringRef> known);

  /// Normalises an axis against a rank; false after an error.
  bool normAxis(int64_t axis, unsigned rank, unsigned &out, llvm::StringRef what);

  /// Nodes a pattern consumed (the pattern's last node lowers them all).
  llvm::DenseSet<const onnx::NodeProto *> &fused() { return fused_; }
  void note(std::string s) { notes_.push_back(std::move(s)); }

  /// The consumers of an ONNX name (for pattern recognition).
  llvm::ArrayRef<const onnx::NodeProto *> consumers(llvm::StringRef name) const;
  const onnx::NodeProto *producer(llvm::StringRef name) const;
  bool isGraphOutput(llvm::StringRef name) const { return graphOutputs_.count(name); }

private:
  /// Reports every op type of the graph that has no builder, in one error.
  bool checkOpTypes();
  bool declareInputs(const llvm::StringMap<Value *> &bound);
  /// The .npy file a graph input is fixed to (LoadOptions::fixedInputs).
  const std::string *fixedInputFile(llvm::StringRef name) const;
  /// Makes graph input `name` the constant that `file` holds.
  bool fixInput(llvm::StringRef name, DType dtype, const onnx::TypeProto::Tensor &declared,
                const std::string &file);
  /// Whether every path from ONNX name `name` ends in a comparison or a
  /// mask (Equal, Where's condition, a Cast to bool...), through data
  /// movement only.
  bool onlyFeedsMasks(llvm::StringRef name, unsigned depth = 0) const;
  bool lowerNode(const onnx::NodeProto &n);
  Value *materialise(llvm::StringRef name, Term &t, StateKind kind);

  Graph &g_;
  DiagnosticEngine &diag_;
  const onnx::ModelProto &model_;
  const OnnxImportSettings &settings_;
  int64_t opset_;
  std::string fileLabel_;
  Location nodeLoc_;
  llvm::StringMap<Term> terms_;
  llvm::StringMap<llvm::SmallVector<const onnx::NodeProto *, 2>> consumers_;
  llvm::StringMap<const onnx::NodeProto *> producers_;
  llvm::StringSet<> graphOutputs_;
  llvm::DenseSet<const onnx::NodeProto *> fused_;
  std::vector<std::pair<std::string, Value *>> outputs_;
  std::vector<std::string> notes_;
};

/// Pattern recognition before lowering: erf-GELU and decomposed layernorm
/// subgraphs. Returns per pattern-ending node the builder that lowers the
/// whole subgraph; marks the other nodes of each as fused.
using PatternLowering = std::function<bool(OnnxLowering &l)>;
void recogniseOnnxPatterns(OnnxLowering &l, const onnx::GraphProto &g,
                           llvm::DenseMap<const onnx::NodeProto *, PatternLowering> &replaced);

} // namespace ampc::onnxfe

#endif
