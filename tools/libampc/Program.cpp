//===- Program.cpp - Compile, run, train, evaluate, checkpoints -----------===//
#include "Internal.h"
#if AMPC_HAVE_ONNX
#include "frontends/onnx/OnnxExporter.h"
#endif
#include "ir/support/AtomicFile.h"
#include "ir/support/NpyFile.h"

#include "ampc/ModelExport.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/OpAttrs.h"
#include "ir/Verifier.h"
#include "kernels/common/Storage.h"
#include "passes/DeadCodeElimination.h"
#include "passes/EvalMode.h"
#include "passes/PassManager.h"
#include "passes/StandardPipeline.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"
#include "runtime/ThreadGovernor.h"
#include "runtime/Threads.h"
#include "runtime/data/DataSource.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Trainer.h"

#include "Prediction.h"
#include "WorldInternal.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <unistd.h>

namespace ampc::api {

struct Program::Impl {
  const Model::Impl *model = nullptr;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<ampc::Program> program;
  ampc::CompileOptions compileOptions;
  std::shared_ptr<World> world;
  int64_t stepsDone = 0;
  uint64_t microSteps = 0;
  /// The checkpoint loadCheckpoint restored: train() resumes from it.
  std::string resumePath;
  /// The model's data (shared with it when Model::openData opened it) and
  /// planTraining's split of it.
  std::shared_ptr<DataSource> data, trainPart, evalPart;
  /// Inference graphs compiled for a data set's batches: one at the
  /// model's batch, one for the last partial batch (when there is one).
  struct InferencePrograms {
    std::unique_ptr<Graph> graph, tailGraph;
    std::unique_ptr<ampc::Program> program, tail;
  };
  /// evaluate()'s (with the loss) and predict()'s (without it: the
  /// prediction is the output, the labels go unread).
  InferencePrograms eval, prediction;
  /// Data given to evaluate(DataSpec) / predict(): the graph its spec was
  /// read into (the source refers to its inputs) and the source.
  std::unique_ptr<Graph> specGraph;
  std::shared_ptr<DataSource> specData;

  const Graph &graph() const { return *model->graph; }
};

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::Program(Program &&) noexcept = default;
Program &Program::operator=(Program &&) noexcept = default;
Program::~Program() = default;

namespace {

/// Hands progress to the host one line at a time, as the lines complete.
class LineStream final : public llvm::raw_ostream {
public:
  explicit LineStream(const std::function<void(std::string_view)> &sink) : sink_(sink) {
    SetUnbuffered();
  }
  ~LineStream() override {
    if (!pending_.empty())
      sink_(pending_);
  }

private:
  void write_impl(const char *ptr, size_t size) override {
    pos_ += size;
    for (size_t i = 0; i < size; ++i) {
      // A progress bar redraws with '\r': each redraw is a line of its own.
      if (ptr[i] == '\n' || ptr[i] == '\r') {
        if (!pending_.empty())
          sink_(pending_);
        pending_.clear();
        continue;
      }
      pending_ += ptr[i];
    }
  }
  uint64_t current_pos() const override { return pos_; }

  const std::function<void(std::string_view)> &sink_;
  std::string pending_;
  uint64_t pos_ = 0;
};

/// Forwards the trainer's progress to the host as raw text, at the points
/// the trainer flushes it (each progress update), so the host can pass
/// those on as they come.
class TextStream final : public llvm::raw_ostream {
public:
  explicit TextStream(const std::function<void(std::string_view)> &sink) : sink_(sink) {}
  ~TextStream() override { flush(); }

private:
  void write_impl(const char *ptr, size_t size) override {
    pos_ += size;
    sink_(std::string_view(ptr, size));
  }
  uint64_t current_pos() const override { return pos_; }

  const std::function<void(std::string_view)> &sink_;
  uint64_t pos_ = 0;
};

ProgressStyle toInternal(Progress p) {
  switch (p) {
  case Progress::Auto:
    return ProgressStyle::Auto;
  case Progress::Bar:
    return ProgressStyle::Bar;
  case Progress::Lines:
    return ProgressStyle::Lines;
  case Progress::None:
    return ProgressStyle::None;
  }
  return ProgressStyle::None;
}

/// The evaluation program: the model as written (imported again, with
/// `batch` if given), in inference mode, at the training graph's policy (so
/// the parameters it shares by name have the same dtypes), its loss's input
/// kept as an output for accuracy.
std::unique_ptr<Graph> importAgain(const Program::Impl &p, std::optional<int64_t> batch,
                                   DiagnosticEngine &diag) {
  const Model::Impl &m = *p.model;
  if (!canImportAgain(m.source)) {
    diag.error(Location(), m.asWritten ? graphFileSubject(m) +
                                             ": evaluating needs the model file, which builds "
                                             "the inference graph"
                                       : std::string("evaluating imports the model again in "
                                                     "inference mode; a model read from "
                                                     "textual IR cannot be"));
    return nullptr;
  }
  ampc::LoadOptions load = toInternal(m.source.load);
  load.batchOverride = batch ? batch : m.source.load.batch;
  return m.source.kind == ModelSource::Kind::File
             ? loadAnyModelFile(m.source.pathOrText, diag, load)
             : loadModelString(m.source.pathOrText, m.source.bufferName, diag, load,
                               m.source.baseDir);
}

/// What an inference program is for: evaluating (the loss runs, and its
/// input is kept as an output for accuracy) or predicting (the loss is
/// gone and the prediction is the only output, so labels go unread).
enum class Inference { Evaluate, Predict };

Program::Impl::InferencePrograms &programsFor(Program::Impl &p, Inference purpose) {
  return purpose == Inference::Predict ? p.prediction : p.eval;
}

bool buildEvalProgram(Program::Impl &p, std::optional<int64_t> batch, DiagnosticEngine &diag,
                      bool tail = false, Inference purpose = Inference::Evaluate) {
  std::unique_ptr<Graph> g = importAgain(p, batch, diag);
  if (!g)
    return false;
  for (const auto &[key, value] : p.graph().meta())
    if (llvm::StringRef(key).startswith("amp."))
      g->meta()[key] = value;
  PassManager pm;
  pm.setTarget(p.backend.get());
  pm.add(std::make_unique<EvalModePass>());
  if (!addStandardPipeline(pm, PipelineStage::Forward, diag) || !pm.run(*g, diag) ||
      !verifyGraph(*g, diag))
    return false;
  if (purpose == Inference::Predict) {
    // The values after the pipeline, as evaluating computes them; the loss
    // and what only it reads go.
    ampc::Value *pred = const_cast<ampc::Value *>(predictionValue(*g));
    if (!pred) {
      diag.error(Location(), "the model has no output to predict");
      return false;
    }
    g->setOutputs({pred});
    PassContext ctx{diag};
    if (DeadCodeEliminationPass().run(*g, ctx) == PassResult::Failed || !verifyGraph(*g, diag))
      return false;
  } else {
    for (Node &n : g->nodes())
      if (n.role() == ampc::NodeRole::Loss && n.numOperands() > 0 && !ampc::combinesLosses(n) &&
          !llvm::is_contained(g->outputs(), n.operand(0)))
        g->addOutput(n.operand(0));
  }
  std::unique_ptr<ampc::Program> ev =
      ampc::Program::compile(*g, *p.backend, diag, p.compileOptions);
  if (!ev)
    return false;
  Program::Impl::InferencePrograms &slot = programsFor(p, purpose);
  if (tail) {
    slot.tail.reset();
    slot.tailGraph = std::move(g);
    slot.tail = std::move(ev);
  } else {
    slot.program.reset();
    slot.graph = std::move(g);
    slot.program = std::move(ev);
  }
  return true;
}

int64_t batchOf(const ampc::Program &prog) {
  const Graph &g = prog.graph();
  return g.inputs().empty() || g.inputs()[0]->type().rank() == 0 ? 1 : g.inputs()[0]->type().dim(0);
}

/// Inference programs that cover `samples` samples exactly: one at the
/// model's batch (or `samples`, when fewer), and one for the last partial
/// batch when the batch does not divide them. A model that builds at its
/// own batch but not at those (an ONNX export whose reshapes hold the
/// batch it was traced with) gets no tail: its last samples run padded to
/// a whole batch (Trainer::evaluate, predict).
bool buildEvalPrograms(Program::Impl &p, int64_t samples, DiagnosticEngine &diag,
                       Inference purpose = Inference::Evaluate) {
  if (samples <= 0) {
    diag.error(Location(), "the evaluation data has no samples");
    return false;
  }
  Program::Impl::InferencePrograms &slot = programsFor(p, purpose);
  if (!slot.program && !buildEvalProgram(p, std::nullopt, diag, false, purpose))
    return false;
  DiagnosticEngine otherBatch; // a failure there leaves the padded batch
  if (batchOf(*slot.program) > samples)
    buildEvalProgram(p, samples, otherBatch, false, purpose);
  int64_t rest = samples % batchOf(*slot.program);
  bool tailFits = slot.tail && batchOf(*slot.tail) == rest;
  if (rest == 0 || (!tailFits && !buildEvalProgram(p, rest, otherBatch, /*tail=*/true, purpose))) {
    // No partial batch, or none the model builds at: no tail program.
    slot.tail.reset();
    slot.tailGraph.reset();
  }
  return true;
}

/// The data a DataSpec names, into p.specData ("" = the model's data, which
/// has every input). `optional`: inputs the data may lack (createDataSource).
/// Whether `--data` names a folder (relative to the spec's base folder).
bool isFolderSpec(const DataSpec &data, llvm::StringRef spec) {
  llvm::SmallString<256> path(spec);
  if (!data.baseDir.empty() && !llvm::sys::path::is_absolute(spec)) {
    path = data.baseDir;
    llvm::sys::path::append(path, spec);
  }
  return llvm::sys::fs::is_directory(path);
}

bool openSpecData(Program::Impl &p, const DataSpec &data, DiagnosticEngine &diag,
                  llvm::ArrayRef<std::string> optional = {}) {
  p.specData.reset();
  if (data.spec.empty()) {
    if (!p.data)
      p.data = createDataSource(p.graph(), p.compileOptions.baseDir, diag);
    p.specData = p.data;
    return p.specData != nullptr;
  }
  // The spec is read against a fresh import of the model, as written: the
  // data source checks it against the inputs and their uses.
  std::unique_ptr<Graph> g = importAgain(p, std::nullopt, diag);
  if (!g)
    return false;
  llvm::StringRef spec = llvm::StringRef(data.spec).trim();
  if (spec.startswith("{")) {
    if (!parseDataSpec(spec, "--data", *g, "eval.data", g->meta(), diag, optional))
      return false;
  } else if (spec.endswith_insensitive(".csv")) {
    g->meta()["eval.data"] = Attribute("csv");
    g->meta()["eval.data.path"] = Attribute(spec.str());
  } else if (isFolderSpec(data, spec) || spec.endswith_insensitive(".bin")) {
    // A folder of images, or a token stream: read as the model's training
    // data of that kind is (its size, normalisation, token dtype), with the
    // path replaced.
    const char *kind = spec.endswith_insensitive(".bin") ? "tokens" : "image_folder";
    AttrMap &meta = g->meta();
    if (metaString(*g, "train.data", "") == kind)
      for (const auto &[k, v] : AttrMap(meta))
        if (llvm::StringRef(k).startswith("train.data."))
          meta["eval.data." + llvm::StringRef(k).drop_front(11).str()] = v;
    meta["eval.data"] = Attribute(kind);
    meta["eval.data.path"] = Attribute(spec.str());
  } else {
    diag.error(Location(), "data '" + spec.str() +
                               "': give a .csv file, a folder of images, a .bin token stream, or "
                               "a data source as in train.data, e.g. "
                               "'{npy: {x: x.npy, y: y.npy}}' (docs/cli.md, \"Data\")");
    return false;
  }
  std::shared_ptr<DataSource> source =
      createDataSource(*g, data.baseDir.empty() ? "." : data.baseDir, diag, "eval.data", optional);
  if (!source)
    return false;
  p.specGraph = std::move(g);
  p.specData = std::move(source);
  return true;
}

/// Copies the program's parameters and buffers into an evaluation program.
bool copyState(const ampc::Program &from, ampc::Program &to, std::string &err) {
  for (const ampc::Value *v : to.graph().state()) {
    const ampc::Value *src = from.graph().lookup(v->name());
    if (!src || src->type() != v->type()) {
      err = "evaluation graph state '" + v->name().str() + "' has no match in the program";
      return false;
    }
    std::memcpy(to.dataToOverwrite(v), from.data(src),
                static_cast<size_t>(v->type().sizeInBytes()));
  }
  return true;
}
} // namespace

Result<DeviceChoice> selectDevice(std::string_view device) {
  std::string err, note;
  std::unique_ptr<Backend> backend =
      createBackend(llvm::StringRef(device.data(), device.size()), err, &note);
  if (!backend)
    return Status::error(err);
  return DeviceChoice{backend->name().str(), note};
}

namespace {
/// This machine's memory, or 0 (no limit) when the OS does not say.
uint64_t physicalMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize) : 0;
}
} // namespace

ampc::CompileOptions runtimeCompileOptions(const Model::Impl &m, const CompileOptions &opts,
                                           const Backend &backend) {
  const Graph &g = *m.graph;
  ampc::CompileOptions c;
  c.initSeed = static_cast<uint64_t>(metaInt(g, "init.seed", 0));
  c.runSeed = static_cast<uint64_t>(metaInt(g, "train.seed", 0));
  c.baseDir = opts.baseDir.empty() ? m.source.baseDir : opts.baseDir;
  c.castCache = opts.castCache;
  c.fuseElementwise = opts.fuseElementwise;
  c.maxPlannedBytes = opts.maxMemoryBytes;
  c.communicator = opts.world ? opts.world->impl().comm.get() : nullptr;
  if (!c.maxPlannedBytes && backend.hostAccessible())
    c.maxPlannedBytes = physicalMemoryBytes();
  return c;
}

Result<Program> Program::compile(const Model &model, const CompileOptions &opts) {
  auto impl = std::make_unique<Impl>();
  impl->model = &Access::impl(model);
  std::string err;
  impl->backend = createBackend(opts.device, err);
  if (!impl->backend)
    return Status::error(err);
  const Graph &g = impl->graph();
  impl->compileOptions = runtimeCompileOptions(*impl->model, opts, *impl->backend);
  ampc::CompileOptions &c = impl->compileOptions;
  impl->world = opts.world;
  DiagnosticEngine diag;
  bool outOfMemory = false;
  impl->program = ampc::Program::compile(g, *impl->backend, diag, c, &outOfMemory);
  if (!impl->program) {
    Status s = toStatus(diag);
    s.setOutOfMemory(outOfMemory);
    return s;
  }
  const Model::Impl &m = *impl->model;
  impl->data = m.data;
  impl->trainPart = m.trainPart;
  impl->evalPart = m.evalPart;
  // A training run that evaluates on a held-out part: its evaluation
  // program now, so a model the evaluation graph cannot be built for fails
  // here, before anything runs. Its batch fits the held-out samples.
  if (impl->evalPart && m.rewritten == Stage::Train && canImportAgain(m.source) &&
      !buildEvalPrograms(*impl, impl->evalPart->numSamples(), diag))
    return toStatus(diag);
  return Result<Program>(Program(std::move(impl)), toStatus(diag));
}

std::string Program::device() const { return impl_->backend->name().str(); }
uint64_t Program::plannedBytes() const { return impl_->program->plan().peakBytes(); }
uint64_t Program::kernelHeldBytes() const { return impl_->program->kernelHeldBytes(); }
size_t Program::numScheduledOps() const { return impl_->program->schedule().size(); }

std::string Program::collectives() const { return Access::graph(&impl_->graph()).collectives(); }

std::string Program::memoryPlan() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  impl_->program->plan().print(os);
  return os.str();
}

MemoryPlanSummary Program::memoryPlanSummary() const {
  return summarizePlan(impl_->program->plan());
}

MemoryPlanSummary summarizePlan(const MemoryPlan &plan) {
  MemoryPlanSummary out;
  for (unsigned c = 0; c < kNumBufferClasses; ++c) {
    auto cls = static_cast<BufferClass>(c);
    out.classes.push_back(
        {bufferClassName(cls).str(), plan.bytesAtPeak[c], isPersistentClass(cls)});
  }
  out.persistentBytes = plan.persistentBytes;
  out.stepBytes = plan.stepBytes;
  out.stepBytesWithoutReuse = plan.stepBytesWithoutReuse;
  out.peakBytes = plan.peakBytes();
  return out;
}

CastCacheStats Program::castCacheStats() const {
  const ampc::CastCacheStats &c = impl_->program->castCacheStats();
  CastCacheStats out{c.hits, c.misses, c.bytesSaved, {}};
  llvm::raw_string_ostream os(out.str);
  c.print(os);
  os.flush();
  while (!out.str.empty() && out.str.back() == '\n')
    out.str.pop_back();
  return out;
}

DeviceActivity Program::deviceActivity() const {
  const ampc::DeviceActivity &a = impl_->program->deviceActivity();
  DeviceActivity out{a.hostFallbackNodes,
                     a.hostFallbackOps,
                     a.eagerSteps,
                     a.capturedSteps,
                     a.replayedSteps,
                     a.deviceCollectiveNodes,
                     {}};
  llvm::raw_string_ostream os(out.str);
  os << "device: " << a.hostFallbackNodes << " node" << (a.hostFallbackNodes == 1 ? "" : "s")
     << " on the host fallback";
  if (!a.hostFallbackOps.empty())
    os << " (" << llvm::join(a.hostFallbackOps, ", ") << ")";
  os << "; steps: " << a.eagerSteps << " eager, " << a.capturedSteps
     << " captured into a CUDA graph, " << a.replayedSteps << " replayed";
  if (a.deviceCollectiveNodes)
    os << "; " << a.deviceCollectiveNodes << " all-reduce"
       << (a.deviceCollectiveNodes == 1 ? "" : "s") << " through NCCL";
  os.flush();
  return out;
}

Result<ForwardReport> Program::runForward() {
  Impl &p = *impl_;
  const Graph &g = p.graph();
  DiagnosticEngine diag;
  if (!p.data) {
    p.data = createDataSource(g, p.compileOptions.baseDir, diag);
    if (!p.data)
      return toStatus(diag);
  }
  Batcher batcher(*p.data, batchOptionsFromMeta(g));
  auto batch = makeBatchTensors(g);
  ForwardReport report;
  std::string err;
  if (!batcher.next(batch, report.samples, err))
    return Status::error(err);
  for (size_t i = 0; i < g.inputs().size(); ++i)
    std::memcpy(p.program->dataToOverwrite(g.inputs()[i]), batch[i].data(), batch[i].sizeInBytes());
  p.program->run(0);
  MeasuredMemory measured = p.program->measure();
  report.dataKind = p.data->kind().str();
  for (const ampc::Value *out : g.outputs()) {
    ForwardReport::Output o;
    o.name = out->name();
    o.info = Access::value(out).info();
    o.typeStr = out->type().str();
    const void *data = p.program->data(out);
    int64_t n = out->type().numElements();
    if (out->type().rank() == 0) {
      o.value = kernels::loadAsDouble(out->dtype(), data, 0);
    } else {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i)
        sum += kernels::loadAsDouble(out->dtype(), data, i);
      o.value = sum / n;
    }
    report.outputs.push_back(std::move(o));
  }
  report.plannedBytes = p.program->plan().peakBytes();
  report.allocatedBytes = measured.allocatedBytes;
  report.touchedStepBytes = measured.touchedStepBytes;
  report.stepBytes = p.program->plan().stepBytes;
  report.guardsIntact = measured.guardsIntact;
  report.kernelHeldBytes = measured.kernelHeldBytes;
  return report;
}
int64_t Program::stepsDone() const { return impl_->stepsDone; }

static Result<const ampc::Value *> findTensor(const Graph &g, std::string_view name) {
  const ampc::Value *v = g.lookup(llvm::StringRef(name.data(), name.size()));
  if (!v)
    return Status::error("no tensor named '" + std::string(name) + "' in graph " + g.name());
  return v;
}

Status Program::write(std::string_view name, const std::vector<double> &values) {
  Result<const ampc::Value *> v = findTensor(impl_->graph(), name);
  if (!v)
    return v.status();
  const ampc::Value *value = *v;
  if (!value->isInput() && !value->isState())
    return Status::error("'" + std::string(name) +
                         "' is computed by the graph; only inputs and "
                         "state tensors can be written");
  int64_t n = value->type().numElements();
  if (static_cast<int64_t>(values.size()) != n)
    return Status::error("'" + std::string(name) + "' has " + std::to_string(n) +
                         " elements, got " + std::to_string(values.size()) + " values");
  // Non-const access: a state tensor's version moves on, so cached casts of
  // it are recomputed.
  void *data = impl_->program->data(value);
  for (int64_t i = 0; i < n; ++i)
    kernels::storeFromDouble(value->dtype(), data, i, values[i]);
  return {};
}

Result<std::vector<double>> Program::read(std::string_view name) const {
  Result<const ampc::Value *> v = findTensor(impl_->graph(), name);
  if (!v)
    return v.status();
  const ampc::Value *value = *v;
  const ampc::Program &p = *impl_->program;
  const void *data = p.data(value);
  if (!data)
    return Status::error("'" + std::string(name) + "' has no storage after the step");
  std::vector<double> out(value->type().numElements());
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i)
    out[i] = kernels::loadAsDouble(value->dtype(), data, i);
  return out;
}

Status Program::step() {
  impl_->program->run(impl_->microSteps++);
  return {};
}

Result<TrainReport> Program::train(const TrainOptions &opts) {
  Impl &p = *impl_;
  const Graph &g = p.graph();
  if (!g.lookup("loss") || !g.meta().count("optimizer"))
    return Status::error("train() needs a model rewritten at the Train stage (a loss and an "
                         "optimizer)");
  if (p.stepsDone > 0 && p.resumePath.empty())
    return Status::error("this program has trained " + std::to_string(p.stepsDone) +
                         " steps already; to continue, saveCheckpoint() and loadCheckpoint() "
                         "(training resumes from a checkpoint, bit for bit)");
  DiagnosticEngine diag;
  if (!p.data) {
    p.data = createDataSource(g, p.compileOptions.baseDir, diag);
    if (!p.data)
      return toStatus(diag);
  }
  // A separate evaluation set is evaluated at the end at least.
  int64_t evalEvery = opts.evalEvery;
  if (evalEvery == 0 && p.evalPart && g.meta().count("train.eval_data"))
    evalEvery = opts.steps ? *opts.steps : metaInt(g, "train.steps", 1);
  if (evalEvery > 0 && !p.evalPart)
    return Status::error("evaluating while training needs a held-out part of the data: plan the "
                         "model with train.eval_every > 0 (Model::planTraining) before compiling");
  if (evalEvery > 0 && !buildEvalPrograms(p, p.evalPart->numSamples(), diag))
    return toStatus(diag);
  ampc::TrainOptions t;
  t.steps = opts.steps ? *opts.steps : metaInt(g, "train.steps", 1);
  t.accumulate = std::max<int64_t>(1, metaInt(g, "train.accumulate", 1));
  t.logEvery = opts.logEvery;
  t.evalEvery = evalEvery;
  // Recorded in checkpoints and checked on resume.
  t.batchSize = batchOptionsFromMeta(g).batchSize;
  for (const auto &[key, value] : g.meta()) {
    llvm::StringRef k(key);
    std::string entry = k.str() + "=" + value.str();
    if (k == "train.data" || k.startswith("train.data."))
      t.dataDescription += (t.dataDescription.empty() ? "" : " ") + entry;
    else if (k == "optimizer.lr" || k.startswith("train.lr_schedule"))
      t.scheduleDescription += (t.scheduleDescription.empty() ? "" : " ") + entry;
  }
  t.progress = opts.progress       ? toInternal(*opts.progress)
               : opts.logEvery > 0 ? ProgressStyle::Lines
                                   : ProgressStyle::None;
  t.metricsPath = opts.metricsPath;
  t.checkpointPath = opts.checkpointPath;
  t.checkpointEvery = opts.checkpointEvery;
  t.specialOutputs = opts.writeThrough ? SpecialOutputs::WriteThrough : SpecialOutputs::Refuse;
  t.resumePath = p.resumePath;
  t.prefetch = opts.prefetch;
  t.dataWorkers = opts.dataWorkers;
  t.adaptThreads = opts.adaptThreads && p.backend->name() == "cpu";
  t.profile = opts.profile || opts.traceSteps > 0;
  t.traceSteps = opts.traceSteps;
  t.optLevel = optLevelOf(g);
  if (t.steps <= 0)
    return Status::error("train steps must be positive");

  DataSource &trainData = p.trainPart ? *p.trainPart : *p.data;
  Evaluator evaluator;
  if (evalEvery > 0)
    evaluator = {p.eval.program.get(), p.evalPart.get(), p.eval.tail.get()};
  BatchOptions batching = batchOptionsFromMeta(g);
  dist::Communicator *comm = p.compileOptions.communicator;
  bool silent = false;
  if (comm && comm->size() > 1) {
    // Each rank its shard of every global batch; rank 0 alone writes.
    batching.ranks = comm->size();
    batching.rank = comm->rank();
    t.communicator = comm;
    if (comm->rank() != 0) {
      t.metricsPath.clear();
      t.checkpointPath.clear();
      t.progress = ProgressStyle::None;
      silent = true;
    }
  }
  ampc::Trainer trainer(*p.program, trainData, batching, t, evaluator);
  ampc::TrainResult r;
  std::string err;
  bool ok;
  if (silent) {
    llvm::raw_null_ostream out;
    ok = trainer.run(out, r, err);
  } else if (opts.output) {
    TextStream out(opts.output);
    ok = trainer.run(out, r, err);
  } else if (opts.log) {
    LineStream out(opts.log);
    ok = trainer.run(out, r, err);
  } else {
    ok = trainer.run(llvm::outs(), r, err);
    llvm::outs().flush();
  }
  if (!ok)
    return Status::error(err);
  p.stepsDone = r.steps;
  p.microSteps = static_cast<uint64_t>(r.steps * t.accumulate);
  p.resumePath.clear();

  TrainReport report;
  report.firstStep = r.firstStep;
  report.steps = r.steps;
  report.firstLoss = r.firstLoss;
  report.finalLoss = r.finalLoss;
  report.skippedSteps = r.skippedSteps;
  report.finalLossScale = r.finalLossScale;
  report.meanStepMs = r.meanStepMs;
  report.meanDataMs = r.meanDataMs;
  report.stepMs = r.stepMs;
  if (r.eval)
    report.eval = EvalReport{r.eval->loss, r.eval->accuracy, r.eval->top5, r.eval->samples, {}};
  report.plannedBytes = r.plannedBytes;
  report.allocatedBytes = r.allocatedBytes;
  if (t.profile && p.program->profiledRuns() > 0)
    report.profile = collectProfile(*p.program);
  llvm::raw_string_ostream os(report.summary);
  printTrainSummary(r, os);
  os.flush();
  return report;
}

namespace {
/// The data a command's steps read: `data`'s spec, else the model's
/// training data (its training part when planTraining split it).
DataSource *stepData(Program::Impl &p, const DataSpec &data, DiagnosticEngine &diag) {
  if (!data.spec.empty())
    return openSpecData(p, data, diag) ? p.specData.get() : nullptr;
  if (!p.data) {
    p.data = createDataSource(p.graph(), p.compileOptions.baseDir, diag);
    if (!p.data)
      return nullptr;
  }
  return p.trainPart ? p.trainPart.get() : p.data.get();
}

/// Runs `steps` training steps on the first batches of `source` in order,
/// with `observer` handed each kernel's position as its results are made.
Status runObservedSteps(Program::Impl &p, DataSource &source, int64_t steps,
                        std::function<void(unsigned)> observer) {
  const Graph &g = p.graph();
  Batcher batcher(source, batchOptionsFromMeta(g));
  auto batch = makeBatchTensors(g);
  p.program->setKernelObserver(std::move(observer));
  std::string err;
  for (int64_t i = 0; i < steps; ++i) {
    int64_t rows = 0;
    if (!batcher.next(batch, rows, err))
      break;
    for (size_t k = 0; k < g.inputs().size(); ++k)
      std::memcpy(p.program->data(g.inputs()[k]), batch[k].data(), batch[k].sizeInBytes());
    p.program->run(p.microSteps++);
  }
  p.program->setKernelObserver({});
  p.stepsDone =
      static_cast<int64_t>(p.microSteps) / std::max<int64_t>(1, metaInt(g, "train.accumulate", 1));
  return err.empty() ? Status() : Status::error(err);
}

Status checkRecordable(const Program::Impl &p, const char *what) {
  if (p.model->rewritten != Stage::Train)
    return Status::error(std::string(what) +
                         " runs training steps: it needs a model rewritten at the Train stage");
  if (!p.backend->hostAccessible())
    return Status::error(std::string(what) + " reads every node's results in host memory; the '" +
                         p.backend->name().str() + "' device's are not");
  return {};
}
} // namespace

Result<CalibrationReport> Program::calibrate(const CalibrateOptions &opts) {
  if (opts.halfType != DType::F16 && opts.halfType != DType::BF16)
    return Status::error("calibrate checks against a half type: f16 or bf16");
  if (opts.batches <= 0)
    return Status::error("calibrate needs at least one batch");
  if (Status s = checkRecordable(*impl_, "calibrate()"); !s)
    return s;
  DiagnosticEngine diag;
  DataSource *source = stepData(*impl_, opts.data, diag);
  if (!source)
    return toStatus(diag);
  Calibrator calibrator(*impl_->program, opts.halfType);
  if (Status s = runObservedSteps(*impl_, *source, opts.batches,
                                  [&](unsigned position) { calibrator.observe(position); });
      !s)
    return s;
  CalibrationReport report = calibrator.report();
  report.batches = opts.batches;
  return report;
}

Result<StepRecord> Program::recordStep(const DataSpec &data) {
  if (Status s = checkRecordable(*impl_, "recordStep()"); !s)
    return s;
  DiagnosticEngine diag;
  DataSource *source = stepData(*impl_, data, diag);
  if (!source)
    return toStatus(diag);
  StepRecord record;
  StepRecorder recorder(*impl_->program,
                        [&](RecordedValue &&v) { record.values.push_back(std::move(v)); });
  if (Status s = runObservedSteps(*impl_, *source, 1,
                                  [&](unsigned position) { recorder.observe(position); });
      !s)
    return s;
  record.level = recorder.level();
  record.device = device();
  record.lossScale = recorder.lossScale();
  return record;
}

Result<ComparisonReport> Program::compareStep(const StepRecord &reference, const StepRecord *f64,
                                              const DataSpec &data, const CompareOptions &opts) {
  if (Status s = checkRecordable(*impl_, "compareStep()"); !s)
    return s;
  DiagnosticEngine diag;
  DataSource *source = stepData(*impl_, data, diag);
  if (!source)
    return toStatus(diag);
  ComparisonBuilder builder(reference, f64, opts);
  StepRecorder recorder(*impl_->program, [&](RecordedValue &&v) { builder.add(v); });
  if (Status s = runObservedSteps(*impl_, *source, 1,
                                  [&](unsigned position) { recorder.observe(position); });
      !s)
    return s;
  return builder.finish(recorder.level(), recorder.lossScale());
}

Status Program::writeTrace(const std::string &path, bool writeThrough) const {
  const ampc::Program &p = *impl_->program;
  if (p.trace().empty())
    return Status::error("no timeline to write: train with TrainOptions::traceSteps > 0 first");
  return writeFileAtomically(path, traceJson(p), writeThrough);
}

namespace {
Result<EvalReport> evaluateOn(Program::Impl &p, DataSource &data, DiagnosticEngine &diag,
                              const InferenceRunOptions &opts = {}) {
  if (!buildEvalPrograms(p, data.numSamples(), diag))
    return toStatus(diag);
  const ampc::Node *loss = nullptr;
  for (const ampc::Node &n : p.eval.graph->nodes())
    if (n.role() == ampc::NodeRole::Loss)
      loss = &n;
  if (!loss)
    return Status::error("the model has no loss to evaluate; predict() gives its outputs");
  ampc::TrainOptions trainOptions;
  trainOptions.adaptThreads = opts.adaptThreads && p.backend->name() == "cpu";
  ampc::Trainer trainer(*p.program, data, batchOptionsFromMeta(p.graph()), trainOptions,
                        {p.eval.program.get(), &data, p.eval.tail.get()});
  ampc::EvalResult r;
  std::string err;
  if (!trainer.evaluate(r, err))
    return Status::error(err);
  // A sum of losses is named by its terms' kinds ("cross_entropy,mse_loss").
  std::string kind =
      ampc::combinesLosses(*loss) ? metaString(p.graph(), "loss", "losses") : loss->opName().str();
  return EvalReport{r.loss, r.accuracy, r.top5, r.samples, kind};
}

Status checkEvaluable(const Program::Impl &p, const char *what) {
  if (p.model->asWritten)
    return Status::error(graphFileSubject(*p.model) + ": " + what +
                         " imports the model file again in inference mode; give it the model "
                         "file");
  if (!canImportAgain(p.model->source))
    return Status::error(std::string(what) +
                         " imports the model again in inference mode; a model read from "
                         "textual IR cannot be");
  return {};
}
} // namespace

Result<EvalReport> Program::evaluate() {
  Impl &p = *impl_;
  if (Status s = checkEvaluable(p, "evaluate()"); !s)
    return s;
  DiagnosticEngine diag;
  if (!p.data) {
    p.data = createDataSource(p.graph(), p.compileOptions.baseDir, diag);
    if (!p.data)
      return toStatus(diag);
  }
  return evaluateOn(p, p.evalPart ? *p.evalPart : *p.data, diag);
}

Result<EvalReport> Program::evaluate(const DataSpec &data, const InferenceRunOptions &opts) {
  Impl &p = *impl_;
  if (Status s = checkEvaluable(p, "evaluate()"); !s)
    return s;
  DiagnosticEngine diag;
  if (!openSpecData(p, data, diag))
    return toStatus(diag);
  return evaluateOn(p, *p.specData, diag, opts);
}

Result<Predictions> Program::predict(const DataSpec &data, const InferenceRunOptions &runOpts) {
  Impl &p = *impl_;
  if (Status s = checkEvaluable(p, "predict()"); !s)
    return s;
  DiagnosticEngine diag;
  // The model as imported: the inputs the prediction reads (the others, a
  // loss's targets, the data may lack).
  std::unique_ptr<Graph> imported = importAgain(p, std::nullopt, diag);
  if (!imported)
    return toStatus(diag);
  const ampc::Value *pred = predictionValue(*imported);
  if (!pred)
    return Status::error("the model has no output to predict");
  std::vector<std::string> read = inputsReadBy(*pred), optional;
  for (const ampc::Value *in : imported->inputs())
    if (!llvm::is_contained(read, in->name()))
      optional.push_back(in->name().str());
  if (!openSpecData(p, data, diag, optional))
    return toStatus(diag);
  DataSource &source = *p.specData;
  int64_t n = source.numSamples();
  if (!buildEvalPrograms(p, n, diag, Inference::Predict))
    return toStatus(diag);
  Impl::InferencePrograms &programs = p.prediction;
  std::string err;
  for (ampc::Program *ev : {programs.program.get(), programs.tail.get()})
    if (ev && !copyState(*p.program, *ev, err))
      return Status::error(err);
  // Which rows are whose: the model at the programs' batch and at one more
  // shows where the batch is in each value (a [B*T, V] output has T rows a
  // sample). The imports go before the batches run.
  int64_t batch = batchOf(*programs.program);
  Predictions out;
  SampleLayout layout;
  {
    std::unique_ptr<Graph> at1 = std::move(imported);
    if (at1->inputs().empty() || at1->inputs()[0]->type().rank() == 0 ||
        at1->inputs()[0]->type().dim(0) != batch)
      at1 = importAgain(p, batch, diag);
    if (!at1)
      return toStatus(diag);
    DiagnosticEngine otherBatch;
    std::unique_ptr<Graph> at2 = importAgain(p, batch + 1, otherBatch);
    if (at2 ? !sampleLayout(*at1, batch, *at2, batch + 1, layout, err)
            : !fixedBatchLayout(*at1, batch, layout, err))
      return Status::error(err);
    // The model's name for it, not a cast's the passes added (logits.f32).
    out.name = predictionValue(*at1)->name().str();
  }
  const Graph &eg = *programs.graph;
  out.dataKind = source.kind().str();
  if (n > 0 && !source.sampleName(0).empty())
    for (int64_t i = 0; i < n; ++i)
      out.sampleNames.push_back(source.sampleName(i));
  out.shape.push_back(n);
  out.shape.insert(out.shape.end(), layout.sampleShape.begin(), layout.sampleShape.end());
  int64_t perSample = layout.sampleElements();
  out.values.reserve(static_cast<size_t>(n * perSample));
  BatchOptions opts;
  opts.batchSize = batch;
  opts.shuffle = false;
  opts.dropLast = false;
  opts.evaluation = true;
  Batcher batcher(source, opts);
  auto tensors = makeBatchTensors(eg);
  ampc::ThreadGovernor governor(
      runOpts.adaptThreads && p.backend->name() == "cpu" ? ampc::kernelThreads() : 1);
  for (int64_t b = 0, batches = batcher.batchesPerEpoch(); b < batches; ++b) {
    int64_t rows = 0;
    if (!batcher.next(tensors, rows, err))
      return Status::error(err);
    // A partial batch without a program of its own (a fixed-batch model)
    // runs padded with zero rows, whose predictions are dropped.
    bool padded = rows < batch && !programs.tail;
    ampc::Program &ev = rows < batch && !padded ? *programs.tail : *programs.program;
    const Graph &g = ev.graph();
    for (size_t i = 0; i < g.inputs().size(); ++i)
      std::memcpy(ev.dataToOverwrite(g.inputs()[i]), tensors[i].data(),
                  static_cast<size_t>(g.inputs()[i]->type().sizeInBytes()));
    ev.run(0);
    governor.afterStep();
    const ampc::Value *v = g.outputs()[0];
    // Every row of every sample of the batch, and nothing of the rows
    // past them (a partial batch's program has exactly its rows).
    if (v->type().numElements() != (padded ? batch : rows) * perSample)
      return Status::error("the prediction '" + out.name + "' is " + v->type().str() +
                           " for a batch of " + std::to_string(rows) + ", not " +
                           std::to_string(perSample) + " values a sample");
    const void *values = std::as_const(ev).data(v);
    for (int64_t i = 0; i < rows * perSample; ++i)
      out.values.push_back(static_cast<float>(kernels::loadAsDouble(v->dtype(), values, i)));
  }
  return out;
}

/// A CSV field as RFC 4180 writes it: quoted, quotes doubled, when it holds
/// a comma, a quote or a line break.
static void writeCsvField(llvm::raw_ostream &os, llvm::StringRef field) {
  if (field.find_first_of(",\"\r\n") == llvm::StringRef::npos) {
    os << field;
    return;
  }
  os << '"';
  for (char c : field)
    os << (c == '"' ? "\"\"" : llvm::StringRef(&c, 1));
  os << '"';
}

Status savePredictions(const Predictions &predictions, const std::string &path, bool argmax,
                       bool writeThrough) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  bool npy = ext.equals_insensitive(".npy");
  if (!npy && !ext.equals_insensitive(".csv"))
    return Status::error("output '" + path + "': the extension picks the format: .npy or .csv");
  const std::vector<int64_t> &shape = predictions.shape;
  if (shape.empty())
    return Status::error("no predictions to write");
  int64_t rows = shape[0];
  int64_t cols = rows ? static_cast<int64_t>(predictions.values.size()) / rows : 0;
  int64_t last = shape.back();
  std::vector<int64_t> ids;
  if (argmax) {
    if (shape.size() < 2 || last < 1)
      return Status::error("--argmax needs predictions with a class dimension, got rank " +
                           std::to_string(shape.size()));
    for (size_t r = 0; r * last < predictions.values.size(); ++r) {
      const float *row = predictions.values.data() + r * last;
      ids.push_back(std::max_element(row, row + last) - row);
    }
  }
  std::string bytes, err;
  if (npy) {
    bool ok = argmax
                  ? encodeNpy(path, ampc::DType::I64, llvm::ArrayRef<int64_t>(shape).drop_back(),
                              ids.data(), bytes, err)
                  : encodeNpy(path, ampc::DType::F32, shape, predictions.values.data(), bytes, err);
    if (!ok)
      return Status::error(err);
  } else {
    llvm::raw_string_ostream os(bytes);
    int64_t perRow = argmax ? cols / last : cols;
    bool named = static_cast<int64_t>(predictions.sampleNames.size()) == rows;
    for (int64_t r = 0; r < rows; ++r) {
      if (named)
        writeCsvField(os, predictions.sampleNames[r]);
      for (int64_t c = 0; c < perRow; ++c) {
        if (c || named)
          os << ',';
        if (argmax)
          os << ids[r * perRow + c];
        else
          os << llvm::format("%.9g", predictions.values[r * cols + c]);
      }
      os << '\n';
    }
    os.flush();
  }
  if (!writeFileAtomically(path, bytes, err,
                           writeThrough ? SpecialOutputs::WriteThrough : SpecialOutputs::Refuse))
    return Status::error(err);
  return {};
}

Status Program::saveCheckpoint(const std::string &path) const {
  const Graph &g = impl_->graph();
  CheckpointInfo info;
  info.model = g.name();
  info.modelHash = modelHash(g);
  info.optLevel = optLevelOf(g);
  info.optimizer = optimizerOf(g);
  info.step = static_cast<uint64_t>(impl_->stepsDone);
  info.microStep = impl_->microSteps;
  std::string err;
  if (!ampc::saveCheckpoint(path, *impl_->program, info, err))
    return Status::error(err);
  return {};
}

Status Program::loadCheckpoint(const std::string &path) {
  return loadCheckpoint(path, Weights::Trained);
}

Status Program::loadCheckpoint(const std::string &path, Weights weights) {
  CheckpointInfo info;
  std::string err;
  if (!ampc::loadCheckpoint(path, *impl_->program, info, err,
                            weights == Weights::Average ? CheckpointWeights::Average
                                                        : CheckpointWeights::Trained))
    return Status::error(err);
  impl_->stepsDone = static_cast<int64_t>(info.step);
  impl_->microSteps = info.microStep;
  impl_->resumePath = path;
  Status s;
  if (!info.conversionNote.empty())
    s.add({Severity::Note, "", 0, 0, info.conversionNote});
  return s;
}

Result<std::vector<Weight>> weightsOf(const Program &program) {
  const Program::Impl &p = *program.impl_;
  const Graph &g = p.graph();
  const ampc::Program &prog = *p.program;
  std::vector<Weight> out;
  for (const ampc::Value *v : g.state()) {
    if (v->stateKind() != ampc::StateKind::Parameter && v->stateKind() != ampc::StateKind::Buffer)
      continue;
    Weight w;
    w.name = v->name().str();
    w.kind = static_cast<StateKind>(v->stateKind());
    w.shape.assign(v->type().dims().begin(), v->type().dims().end());
    // The truth is the fp32 master where the level keeps one.
    const ampc::Value *source = v;
    if (const ampc::Value *m = g.lookup(v->name().str() + ".master");
        m && m->isState() && m->stateKind() == ampc::StateKind::MasterWeight &&
        m->type().dims() == v->type().dims()) {
      source = m;
      w.fromMaster = true;
    }
    // A buffer the ONNX import made is a constant, not state: a folded mask
    // or index tensor (Data, named after the ONNX value, '/' and all), a
    // scale or bias a node left out (Constant), or any bool or integer
    // buffer. A model's state_dict has no such entry, so it is left out.
    if (v->stateKind() == ampc::StateKind::Buffer &&
        (!isFloating(source->dtype()) || v->init().kind == ampc::InitSpec::Kind::Data ||
         v->init().kind == ampc::InitSpec::Kind::Constant))
      continue;
    if (!isFloating(source->dtype()))
      return Status::error("cannot export '" + w.name + "' as fp32: it is " + source->type().str());
    const void *data = prog.data(source);
    int64_t n = source->type().numElements();
    w.values.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      w.values[i] = static_cast<float>(kernels::loadAsDouble(source->dtype(), data, i));
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<BatchNormCount> batchNormCounts(const Program &program) {
  const Program::Impl &p = *program.impl_;
  const Graph &g = p.graph();
  std::vector<BatchNormCount> out;
  std::set<std::string> seen;
  for (const ampc::Node &n : g.nodes()) {
    if (n.kind() != ampc::OpKind::BatchNorm2d)
      continue;
    // The running mean may be read through a cast (a half batchnorm).
    const ampc::Value *mean = n.operand(3);
    while (mean->definingNode() && mean->definingNode()->kind() == ampc::OpKind::Cast)
      mean = mean->definingNode()->operand(0);
    llvm::StringRef prefix = mean->name();
    if (!mean->isState() || !prefix.consume_back(".running_mean"))
      continue;
    std::string name = (prefix + ".num_batches_tracked").str();
    if (g.lookup(name) || !seen.insert(name).second)
      continue;
    // Every training micro-batch ran every batchnorm in training mode (a
    // Forward-stage program's batchnorm is in eval mode: it counts as well).
    out.push_back({name, static_cast<int64_t>(p.microSteps)});
  }
  return out;
}

#if AMPC_HAVE_ONNX
namespace {

/// Gives output `v` the name `name` again where a pass gave it a new one
/// (O2's cast back to f32, `logits.f32`): the value holding the name takes
/// a fresh one (`logits.f16`). An input or parameter keeps its name.
void restoreOutputName(ampc::Graph &g, ampc::Value *v, const std::string &name) {
  if (v->name() == name || v->isInput() || v->isState())
    return;
  if (ampc::Value *holder = g.lookup(name)) {
    if (holder->isInput() || holder->isState() || llvm::is_contained(g.outputs(), holder))
      return;
    g.renameValue(holder, g.uniqueName(name + "." + ampc::dtypeName(holder->dtype()).str()));
  }
  g.renameValue(v, name);
}

/// `g`, the program's model as imported, made its inference graph at the
/// program's policy: batchnorm and dropout in eval mode, the forward
/// pipeline run, and the loss replaced by its prediction input; the
/// outputs keep the names they had as imported (the prediction's for a
/// loss).
bool toInferenceGraph(const Program::Impl &p, ampc::Graph &g, ampc::DiagnosticEngine &diag) {
  for (const auto &[key, value] : p.graph().meta())
    if (llvm::StringRef(key).startswith("amp."))
      g.meta()[key] = value;
  // An output that is a loss stands for the predictions it reads: those of
  // each of its terms for a sum of losses.
  auto predictionsOf = [](ampc::Value *o) {
    std::vector<ampc::Value *> preds;
    const ampc::Node *def = o->isResult() ? o->definingNode() : nullptr;
    if (!def || def->role() != ampc::NodeRole::Loss)
      return std::vector<ampc::Value *>{o};
    for (ampc::Value *term : ampc::lossTerms(o)) {
      const ampc::Node *n = term->definingNode();
      while (ampc::combinesLosses(*n)) // a weighted term
        n = n->operand(0)->definingNode();
      if (!llvm::is_contained(preds, n->operand(0)))
        preds.push_back(n->operand(0));
    }
    return preds;
  };
  auto expandOutputs = [&] {
    std::vector<ampc::Value *> outputs;
    for (ampc::Value *o : g.outputs())
      for (ampc::Value *v : predictionsOf(o))
        if (!llvm::is_contained(outputs, v))
          outputs.push_back(v);
    return outputs;
  };
  std::vector<std::string> names;
  for (const ampc::Value *o : expandOutputs())
    names.push_back(o->name().str());
  PassManager pm;
  pm.add(std::make_unique<EvalModePass>());
  if (!addStandardPipeline(pm, PipelineStage::Forward, diag) || !pm.run(g, diag))
    return false;
  std::vector<ampc::Node *> losses;
  for (ampc::Node &n : g.nodes())
    if (n.role() == ampc::NodeRole::Loss)
      losses.push_back(&n);
  std::vector<ampc::Value *> outputs = expandOutputs();
  g.setOutputs(outputs);
  // Sums before their terms.
  for (auto it = losses.rbegin(); it != losses.rend(); ++it)
    if (!(*it)->result()->hasUses())
      g.eraseNode(*it);
  if (names.size() == outputs.size())
    for (size_t i = 0; i < outputs.size(); ++i)
      restoreOutputName(g, outputs[i], names[i]);
  return verifyGraph(g, diag);
}

/// Which dims of `g` (as imported) are the batch: the model imported again
/// at twice its batch, matched node for node (BatchShapes.h). False, saying
/// why, when that cannot tell.
bool probeBatch(const Program::Impl &p, const ampc::Graph &g, ampc::BatchProbe &probe,
                std::string &why) {
  int64_t batch = metaInt(g, "batch", 0);
  if (batch <= 0) {
    why = "the model has no batch size";
    return false;
  }
  ampc::DiagnosticEngine otherDiag;
  std::unique_ptr<ampc::Graph> other = importAgain(p, 2 * batch, otherDiag);
  if (!other) {
    why = "the model does not import at batch " + std::to_string(2 * batch);
    for (const ampc::Diagnostic &d : otherDiag.diagnostics())
      if (d.severity == ampc::Severity::Error) {
        why += " (" + d.message + ")";
        break;
      }
    return false;
  }
  return probe.match(g, *other, why);
}

} // namespace
#endif

/// The inference graph of the program's model at its policy (toInferenceGraph),
/// its batch symbolic where the model imported at another batch says which
/// dims it is. Its state takes the program's values by name: the program's
/// own tensor where it has one of the same type, else the fp32 truth
/// (weightsOf) rounded to the graph's dtype.
Result<ExportReport> exportOnnxFile(const Program &program, const ExportOptions &opts) {
#if AMPC_HAVE_ONNX
  const Program::Impl &p = *program.impl_;
  const Model::Impl &m = *p.model;
  if (!canImportAgain(m.source))
    return Status::error("ONNX export needs a model loaded from a model file or an ONNX file, "
                         "not textual IR or an emitted graph");
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = importAgain(p, std::nullopt, diag);
  if (!g)
    return toStatus(diag);
  ampc::BatchProbe probe;
  ampc::BatchShapes shapes;
  std::string fixedBecause;
  bool symbolic = probeBatch(p, *g, probe, fixedBecause);
  if (!toInferenceGraph(p, *g, diag))
    return toStatus(diag);
  symbolic = symbolic && probe.propagate(*g, shapes, fixedBecause);
  if (!symbolic)
    diag.warning({}, "the exported model's batch is fixed at " +
                         llvm::Twine(metaInt(*g, "batch", 0)) + ": " + fixedBecause);

  Result<std::vector<Weight>> weights = weightsOf(program);
  if (!weights)
    return weights.status();
  const ampc::Program &prog = *p.program;
  auto stateBytes = [&](const ampc::Value *v, std::vector<char> &bytes) {
    bytes.assign(static_cast<size_t>(v->type().sizeInBytes()), 0);
    const ampc::Value *mine = p.graph().lookup(v->name());
    if (mine && mine->isState() && mine->type() == v->type()) {
      std::memcpy(bytes.data(), prog.data(mine), bytes.size());
      return true;
    }
    for (const Weight &w : *weights)
      if (w.name == v->name() && llvm::ArrayRef<int64_t>(w.shape) == v->type().dims()) {
        for (size_t i = 0; i < w.values.size(); ++i)
          kernels::storeFromDouble(v->dtype(), bytes.data(), int64_t(i), w.values[i]);
        return true;
      }
    diag.error(v->loc(), "no value for %" + v->name() + " " + v->type().str() +
                             " in the program being exported");
    return false;
  };
  std::string bytes;
  bool batchKept = false;
  if (!exportOnnxModel(*g, stateBytes, bytes, diag, symbolic ? &shapes : nullptr, &batchKept))
    return toStatus(diag);
  std::string err;
  if (!writeFileAtomically(opts.output, bytes, err,
                           opts.writeThrough ? SpecialOutputs::WriteThrough
                                             : SpecialOutputs::Refuse))
    return Status::error(err);
  ExportReport report;
  report.files.push_back(opts.output);
  size_t initializers = 0;
  for (const ampc::Value *v : g->state())
    initializers += v->hasUses() || llvm::is_contained(g->outputs(), v);
  report.summary =
      "wrote " + g->name() + " at " + optLevelOf(*g) + " (" + std::to_string(g->numNodes()) +
      " ops, " + std::to_string(initializers) + " initializers) as an ONNX model (opset 17, " +
      (batchKept ? std::string("any batch") : "batch " + std::to_string(metaInt(*g, "batch", 0))) +
      ") to " + opts.output;
  return Result<ExportReport>(std::move(report), toStatus(diag));
#else
  (void)program;
  (void)opts;
  return Status::error("this ampc was built without the ONNX frontend (AMPC_WITH_ONNX=OFF)");
#endif
}

} // namespace ampc::api
