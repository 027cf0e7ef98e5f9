//===- Model.cpp - Import, policy, pipeline --------------------------------===//
#include "Internal.h"
#include "PolicyInternal.h"

#include "frontends/yaml/ModelLoader.h"
#if AMPC_HAVE_ONNX
#include "frontends/onnx/OnnxImporter.h"
#endif
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/EvalMode.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/Recompute.h"
#include "passes/StandardPipeline.h"
#include "passes/WidenToF64.h"
#include "runtime/Backend.h"
#include "runtime/data/DataSource.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace ampc::api {

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model &&) noexcept = default;
Model &Model::operator=(Model &&) noexcept = default;
Model::~Model() = default;

ampc::LoadOptions toInternal(const LoadOptions &o) {
  ampc::LoadOptions l;
  l.maxElements = o.maxElements;
  l.maxNesting = o.maxNesting;
  l.maxYamlNodes = o.maxYamlNodes;
  l.maxNodes = o.maxNodes;
  l.batchOverride = o.batch;
  l.fixedInputs = o.fixedInputs;
  return l;
}

std::unique_ptr<ampc::Graph> loadAnyModelFile(const std::string &path, ampc::DiagnosticEngine &diag,
                                              const ampc::LoadOptions &load, bool *graphFile) {
  if (graphFile)
    *graphFile = false;
  if (llvm::StringRef(path).endswith_insensitive(".onnx")) {
#if AMPC_HAVE_ONNX
    return loadOnnxModel(path, diag, load);
#else
    diag.error({}, "cannot read '" + path +
                       "': this ampc was built without the ONNX frontend "
                       "(configure with -DAMPC_WITH_ONNX=ON and libonnx-dev installed)");
    return nullptr;
#endif
  }
  // Textual IR and the YAML of `--emit yaml` are graphs after the passes,
  // with fixed shapes: loaded as written (GraphFile.cpp).
  if (llvm::StringRef(path).endswith_insensitive(".ir")) {
    if (graphFile)
      *graphFile = true;
    return loadIRFile(path, diag, load);
  }
  YamlContent content = YamlContent::Model;
  std::unique_ptr<Graph> g = loadModelFile(path, diag, load, &content);
  if (graphFile)
    *graphFile = content == YamlContent::Graph;
  return g;
}

namespace {

/// The load options' policy settings, on top of the file's `amp:` section.
bool applyPolicyOverrides(Graph &g, const LoadOptions &opts, DiagnosticEngine &diag) {
  if (!opts.optLevel.empty() && !setPolicyOverride(g.meta(), "opt_level", opts.optLevel, diag))
    return false;
  for (const auto &[property, value] : opts.policyOverrides)
    if (!setPolicyOverride(g.meta(), property, value, diag))
      return false;
  return true;
}

/// What `ampc` checks after importing: the verifier, and a policy that
/// resolves (the model file's `amp:` section with the load's overrides).
/// Warnings ride along.
Result<Model> finishImport(std::unique_ptr<Graph> g, DiagnosticEngine &diag, ModelSource source) {
  if (!g || !verifyGraph(*g, diag) || !applyPolicyOverrides(*g, source.load, diag) ||
      !resolvePolicy(*g, diag))
    return toStatus(diag);
  auto impl = std::make_unique<Model::Impl>();
  impl->graph = std::move(g);
  impl->source = std::move(source);
  return Result<Model>(Access::make(std::move(impl)), toStatus(diag));
}

/// A graph file as written (its reader verified it): its policy resolved,
/// the load options checked against it (they cannot rewrite it) and the
/// stage it holds recorded, so that rewrite() refuses it.
Result<Model> finishGraphLoad(std::unique_ptr<Graph> g, DiagnosticEngine &diag,
                              ModelSource source) {
  if (!g || !resolvePolicy(*g, diag) ||
      !checkLoadKeepsGraph(*g, source.bufferName, source.load, diag))
    return toStatus(diag);
  auto impl = std::make_unique<Model::Impl>();
  impl->rewritten = stageOfGraph(*g);
  impl->asWritten = true;
  impl->graph = std::move(g);
  impl->source = std::move(source);
  return Result<Model>(Access::make(std::move(impl)), toStatus(diag));
}

std::string dirOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Wraps a host program's pass as one of ours.
class HostPassAdapter final : public Pass {
public:
  explicit HostPassAdapter(HostPass pass) : pass_(std::move(pass)) {}
  llvm::StringRef name() const override { return pass_.name; }
  llvm::StringRef description() const override { return "a host program's pass"; }
  PassResult run(Graph &g, PassContext &ctx) override {
    GraphEditor editor = Access::editor(&g);
    Status s = pass_.run(editor);
    for (const Diagnostic &d : s.diagnostics()) {
      Location loc = d.file.empty() ? Location() : Location::inFile(d.file, d.line, d.column);
      std::string msg = d.severity == Severity::Error ? pass_.name + ": " + d.message : d.message;
      ctx.diag.add(d.severity == Severity::Error     ? ampc::Severity::Error
                   : d.severity == Severity::Warning ? ampc::Severity::Warning
                                                     : ampc::Severity::Note,
                   loc, msg);
    }
    if (!s)
      return PassResult::Failed;
    return editor.changed() ? PassResult::Changed : PassResult::Unchanged;
  }

private:
  HostPass pass_;
};

} // namespace

Result<Model> Model::loadFile(const std::string &path, const LoadOptions &opts) {
  DiagnosticEngine diag;
  bool graphFile = false;
  std::unique_ptr<Graph> g = loadAnyModelFile(path, diag, toInternal(opts), &graphFile);
  if (graphFile)
    return finishGraphLoad(std::move(g), diag,
                           {ModelSource::Kind::Graph, path, path, dirOf(path), opts});
  ModelSource source{ModelSource::Kind::File, path, path, dirOf(path), opts};
  return finishImport(std::move(g), diag, std::move(source));
}

Result<Model> Model::loadString(std::string_view yaml, std::string_view bufferName,
                                const LoadOptions &opts, std::string_view baseDir) {
  DiagnosticEngine diag;
  llvm::StringRef text(yaml.data(), yaml.size()), name(bufferName.data(), bufferName.size()),
      dir(baseDir.data(), baseDir.size());
  YamlContent content = YamlContent::Model;
  std::unique_ptr<Graph> g = loadModelString(text, name, diag, toInternal(opts), dir, &content);
  if (content == YamlContent::Graph)
    return finishGraphLoad(
        std::move(g), diag,
        {ModelSource::Kind::Graph, "", std::string(bufferName), std::string(baseDir), opts});
  ModelSource source{ModelSource::Kind::String, std::string(yaml), std::string(bufferName),
                     std::string(baseDir), opts};
  return finishImport(std::move(g), diag, std::move(source));
}

Result<Model> Model::parseIR(std::string_view text, std::string_view bufferName) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g =
      parseGraph(llvm::StringRef(text.data(), text.size()),
                 llvm::StringRef(bufferName.data(), bufferName.size()), diag);
  ModelSource source{ModelSource::Kind::IR, std::string(text), std::string(bufferName), ".", {}};
  return finishImport(std::move(g), diag, std::move(source));
}

Result<Model> Model::clone() const {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(printGraphToString(*impl_->graph), "<clone>", diag);
  if (!g)
    return toStatus(diag);
  auto impl = std::make_unique<Impl>();
  impl->graph = std::move(g);
  impl->source = impl_->source;
  impl->rewritten = impl_->rewritten;
  impl->asWritten = impl_->asWritten;
  return Access::make(std::move(impl));
}

GraphView Model::graph() const { return Access::graph(impl_->graph.get()); }
std::string Model::name() const { return impl_->graph->name(); }

bool Model::asWritten() const { return impl_->asWritten; }

bool Model::trainable() const {
  // A graph as written trains when it is a training graph: the forward
  // graph of a trainable model keeps its optimizer settings in meta.
  if (impl_->asWritten)
    return impl_->rewritten == Stage::Train;
  const AttrMap &meta = impl_->graph->meta();
  return meta.count("optimizer") && meta.count("loss");
}

Status Model::setPolicy(const Policy &policy) {
  if (impl_->asWritten)
    return Status::error(graphFileSubject(*impl_) +
                         ": its policy cannot change (load the model file to rewrite it)");
  if (impl_->rewritten)
    return Status::error("the model is rewritten already; set the policy before rewrite()");
  DiagnosticEngine diag;
  AttrMap meta = impl_->graph->meta();
  if (!writePolicyMeta(policy.level(), policy.overrides(), meta, diag) ||
      !resolvePolicy(meta, diag))
    return toStatus(diag);
  impl_->graph->meta() = std::move(meta);
  return {};
}

Result<Policy> Model::policy() const { return policyFromMeta(impl_->graph->meta()); }

Status Model::setTrainSettings(const TrainSettings &settings) {
  // A graph as written reads the run's settings (steps, seeds, intervals)
  // when it runs; the learning rate is a node of it (a cosine schedule's
  // length too, which stays the graph's).
  if (impl_->asWritten) {
    if (settings.learningRate)
      return Status::error(graphFileSubject(*impl_) +
                           ": its learning rate is part of it (the learning_rate node) and "
                           "cannot change (give ampc the model file to train at another rate)");
  } else if (impl_->rewritten == Stage::Train)
    return Status::error("the training graph is built already; change the training settings "
                         "before rewrite()");
  AttrMap &meta = impl_->graph->meta();
  if (settings.steps && settings.epochs)
    return Status::error("train for steps or for epochs, not both");
  if (settings.steps) {
    if (*settings.steps <= 0)
      return Status::error("train steps must be positive, got " + std::to_string(*settings.steps));
    meta["train.steps"] = Attribute(*settings.steps);
    meta.erase("train.epochs");
  }
  if (settings.learningRate) {
    if (!(*settings.learningRate > 0))
      return Status::error("the learning rate must be positive");
    meta["optimizer.lr"] = Attribute(*settings.learningRate);
  }
  if (settings.seed) {
    meta["train.seed"] = Attribute(*settings.seed);
    meta["init.seed"] = Attribute(*settings.seed);
  }
  if (settings.epochs) {
    if (*settings.epochs <= 0)
      return Status::error("train epochs must be positive, got " +
                           std::to_string(*settings.epochs));
    meta["train.epochs"] = Attribute(*settings.epochs);
    meta.erase("train.steps");
  }
  if (settings.evalEvery) {
    if (*settings.evalEvery < 0)
      return Status::error("eval_every must not be negative");
    meta["train.eval_every"] = Attribute(*settings.evalEvery);
  }
  if (settings.logEvery) {
    if (*settings.logEvery < 0)
      return Status::error("log_every must not be negative");
    meta["train.log_every"] = Attribute(*settings.logEvery);
  }
  if (settings.recompute) {
    if (!isRecomputeMode(*settings.recompute))
      return Status::error(recomputeModeError(*settings.recompute));
    meta["train.recompute"] = Attribute(*settings.recompute);
  }
  return {};
}

std::string optLevelOf(const Graph &g) { return metaString(g, "amp.opt_level", "O0"); }

Result<DataInfo> Model::openData() {
  Impl &m = *impl_;
  if (!m.data) {
    DiagnosticEngine diag;
    std::unique_ptr<DataSource> data = createDataSource(*m.graph, m.source.baseDir, diag);
    if (!data)
      return toStatus(diag);
    m.data = std::move(data);
    m.trainPart.reset();
    m.evalPart.reset();
    DataInfo &info = m.dataInfo;
    info = DataInfo();
    info.kind = m.data->kind().str();
    info.samples = info.trainSamples = m.data->numSamples();
    info.batchSize = batchOptionsFromMeta(*m.graph).batchSize;
    info.accumulate = std::max<int64_t>(1, metaInt(*m.graph, "train.accumulate", 1));
  }
  return m.dataInfo;
}

Result<DataInfo> Model::planTraining(int ranks) {
  Result<DataInfo> opened = openData();
  if (!opened)
    return opened.status();
  Impl &m = *impl_;
  Graph &g = *m.graph;
  DataInfo &info = m.dataInfo;
  BatchOptions batching = batchOptionsFromMeta(g);
  DataSource *trainData = m.data.get();
  m.trainPart.reset();
  m.evalPart.reset();
  info.trainSamples = info.samples;
  info.heldOut = 0;
  info.evalSamples = 0;
  info.evalKind.clear();
  // A separate evaluation set (train.eval_data), else hold out the last
  // tenth of the samples for evaluation (when asked for).
  // Evaluating builds an inference graph from the model file, which a
  // graph as written does not have. The held-out tenth would change the
  // batches it trains on, so that is refused; a separate evaluation set
  // changes nothing in training and is left out.
  if (m.asWritten && metaInt(g, "train.eval_every", 0) > 0)
    return Status::error(graphFileSubject(m) +
                         ": evaluating while training needs the model file, which builds the "
                         "evaluation graph; train the graph without it (eval_every 0, "
                         "--eval-every 0)");
  if (g.meta().count("train.eval_data") && !m.asWritten) {
    DiagnosticEngine diag;
    std::unique_ptr<DataSource> evalData =
        createDataSource(g, m.source.baseDir, diag, "train.eval_data");
    if (!evalData)
      return toStatus(diag);
    info.evalSamples = evalData->numSamples();
    info.evalKind = evalData->kind().str();
    m.evalPart = std::move(evalData);
  } else if (metaInt(g, "train.eval_every", 0) > 0) {
    int64_t n = m.data->numSamples();
    int64_t heldOut = std::max<int64_t>(1, n / 10);
    if (n - heldOut < batching.batchSize)
      return Status::error("the data has " + std::to_string(n) +
                           " samples: too few to hold out a tenth for evaluation and still fill "
                           "a training batch of " +
                           std::to_string(batching.batchSize));
    if (m.data->groupedByClass()) {
      // An image folder lists its classes one after another: its last tenth
      // would be the last class alone. Every tenth sample is held out.
      std::vector<int64_t> train, held;
      for (int64_t i = 0; i < n; ++i)
        (i % 10 == 9 && static_cast<int64_t>(held.size()) < heldOut ? held : train).push_back(i);
      heldOut = static_cast<int64_t>(held.size());
      m.trainPart = makeSubset(*m.data, std::move(train));
      m.evalPart = makeSubset(*m.data, std::move(held));
    } else {
      m.trainPart = makeSubset(*m.data, 0, n - heldOut);
      m.evalPart = makeSubset(*m.data, n - heldOut, heldOut);
    }
    trainData = m.trainPart.get();
    info.trainSamples = n - heldOut;
    info.heldOut = heldOut;
  }
  // Steps: the model's, or epochs over the training samples.
  batching.ranks = std::max(1, ranks);
  Batcher probe(*trainData, batching);
  info.batchesPerEpoch = probe.batchesPerEpoch();
  if (info.batchesPerEpoch == 0)
    return Status::error("the data has " + std::to_string(trainData->numSamples()) +
                         " training samples, fewer than one " +
                         (ranks > 1 ? "global batch (" + std::to_string(ranks) + " ranks x " +
                                          std::to_string(batching.batchSize) + ")"
                                    : "batch of " + std::to_string(batching.batchSize)));
  AttrMap &meta = g.meta();
  if (meta.count("train.steps"))
    info.steps = metaInt(g, "train.steps", 1);
  else if (meta.count("train.epochs")) {
    int64_t epochs = metaInt(g, "train.epochs", 1), batches = 0;
    if (llvm::MulOverflow(epochs, info.batchesPerEpoch, batches))
      return Status::error(std::to_string(epochs) + " epochs of " +
                           std::to_string(info.batchesPerEpoch) +
                           " batches are more steps than int64 counts");
    info.steps = std::max<int64_t>(1, batches / info.accumulate);
  } else
    info.steps = 1;
  // The schedule (cosine) needs the total before the optimizer is lowered.
  meta["train.steps"] = Attribute(info.steps);
  return info;
}

std::optional<Stage> Model::rewrittenStage() const { return impl_->rewritten; }

std::vector<std::string> standardPasses(Stage stage) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  standardPipeline(stage == Stage::Train ? PipelineStage::Train : PipelineStage::Forward)
      .split(parts, ',', -1, /*KeepEmpty=*/false);
  std::vector<std::string> out;
  for (llvm::StringRef p : parts)
    out.push_back(p.trim().str());
  return out;
}

PipelineOptions &PipelineOptions::insertAfter(std::string anchor, HostPass pass) {
  insertions.push_back({std::move(anchor), false, std::move(pass)});
  return *this;
}

PipelineOptions &PipelineOptions::insertBefore(std::string anchor, HostPass pass) {
  insertions.push_back({std::move(anchor), true, std::move(pass)});
  return *this;
}

Status Model::widenToF64() {
  if (impl_->rewritten)
    return Status::error("widenToF64() retypes an imported model; this one is rewritten already");
  Graph &g = *impl_->graph;
  if (optLevelOf(g) != "O0")
    return Status::error("widenToF64() makes an fp32 model f64; this one is at " + optLevelOf(g) +
                         " (load it at O0)");
  DiagnosticEngine diag;
  PassContext ctx{diag};
  if (WidenToF64Pass().run(g, ctx) == PassResult::Failed)
    return toStatus(diag);
  return {};
}

Status Model::rewrite(const PipelineOptions &opts) {
  if (impl_->asWritten)
    return Status::error(graphFileSubject(*impl_) +
                         ": no pass runs on it again (give ampc the model file to rewrite it; "
                         "ampc-opt runs passes on textual IR)");
  if (impl_->rewritten)
    return Status::error("the model is rewritten already (a model is rewritten once; load it "
                         "again or clone() it before rewriting)");
  Graph &g = *impl_->graph;
  DiagnosticEngine diag;
  std::optional<PrecisionPolicy> policy = resolvePolicy(g, diag);
  if (!policy)
    return toStatus(diag);
  if (opts.stage == Stage::Train && !trainable())
    return Status::error("the Train stage needs a model with a loss and an 'optimizer' section");
  std::string err;
  std::unique_ptr<Backend> target = createBackend(opts.device, err);
  if (!target && opts.device != "cuda")
    return Status::error(err);
  // An unavailable CUDA backend still names the target: without it the
  // passes assume every op runs in half, which is what CUDA does.

  std::vector<std::string> names = standardPasses(opts.stage);
  for (const PipelineOptions::Insertion &in : opts.insertions) {
    if (!in.pass.run || in.pass.name.empty())
      return Status::error("a host pass needs a name and a run function");
    if (in.anchor != "begin" && in.anchor != "end" && !llvm::is_contained(names, in.anchor)) {
      std::string known = "begin";
      for (const std::string &n : names)
        known += ", " + n;
      return Status::error("cannot insert pass '" + in.pass.name + "' at unknown pass '" +
                           in.anchor + "' (the " +
                           (opts.stage == Stage::Train ? "train" : "forward") +
                           " pipeline has: " + known + ", end)");
    }
  }
  // A misspelt name would print nothing and look like success.
  for (const std::string &p : opts.printAfter) {
    bool hostPass = llvm::any_of(
        opts.insertions, [&](const PipelineOptions::Insertion &in) { return in.pass.name == p; });
    if (p == "all" || hostPass || llvm::is_contained(names, p))
      continue;
    std::string known;
    for (const std::string &n : names)
      known += n + ", ";
    return Status::error("cannot print the IR after unknown pass '" + p + "' (the " +
                         (opts.stage == Stage::Train ? "train" : "forward") +
                         " pipeline has: " + known + "or all)");
  }
  PassManager pm;
  auto addHost = [&](const std::string &anchor, bool before) {
    for (const PipelineOptions::Insertion &in : opts.insertions)
      if (in.anchor == anchor && in.before == before)
        pm.add(std::make_unique<HostPassAdapter>(in.pass));
  };
  // A forward graph is an inference graph unless asked otherwise:
  // batchnorm on its running statistics, dropout off.
  bool training = opts.training ? *opts.training : metaBool(g, "train.forward_training", false);
  if (opts.stage == Stage::Forward && !training)
    pm.add(std::make_unique<EvalModePass>());
  addHost("begin", true);
  addHost("begin", false);
  for (const std::string &n : names) {
    addHost(n, true);
    pm.add(createPass(n));
    addHost(n, false);
  }
  addHost("end", true);
  addHost("end", false);

  pm.setVerifyEach(opts.verifyEach);
  pm.setTimePasses(opts.timePasses);
  pm.setTarget(target.get());
  std::set<std::string> printAfter(opts.printAfter.begin(), opts.printAfter.end());
  pm.setAfterPassHook([&](llvm::StringRef pass, const Graph &graph) {
    if (printAfter.count("all") || printAfter.count(pass.str())) {
      std::string ir = printGraphToString(graph);
      if (opts.print)
        opts.print(std::string_view(pass.data(), pass.size()), ir);
      else
        llvm::errs() << "// ----- IR after " << pass << " -----\n" << ir;
    }
    if (opts.afterPass)
      opts.afterPass(std::string_view(pass.data(), pass.size()), Access::graph(&graph));
  });

  if (opts.stage == Stage::Train && opts.ranks > 1) {
    if (opts.allreduceDtype != "f32" && opts.allreduceDtype != "half")
      return Status::error("the all-reduce dtype must be f32 or half, got '" + opts.allreduceDtype +
                           "'");
    if (opts.bucketBytes < 1)
      return Status::error("the all-reduce bucket must hold at least 1 byte");
    g.meta()["dist.ranks"] = Attribute(int64_t(opts.ranks));
    g.meta()["dist.allreduce_dtype"] = Attribute(opts.allreduceDtype);
    g.meta()["dist.bucket_bytes"] = Attribute(opts.bucketBytes);
    if (opts.syncBatchnorm)
      g.meta()["train.sync_batchnorm"] = Attribute(true);
  }
  if (opts.stage == Stage::Train && opts.resolveEpochs && !g.meta().count("train.steps") &&
      g.meta().count("train.epochs"))
    if (Result<DataInfo> plan = planTraining(); !plan)
      return plan.status();
  if (!pm.run(g, diag)) {
    if (!diag.hasErrors())
      diag.error(Location(), "the pass pipeline failed");
  } else if (!opts.verifyEach && !verifyGraph(g, diag)) {
    // The rewritten graph is checked once even without --verify-each: a
    // pass that left it malformed (a value read before the node that makes
    // it) must stop here, not run on stale buffers. O(nodes), once.
    diag.error(g.loc(), "the graph is invalid after the pass pipeline");
  }
  // Either way the graph has changed: it cannot be rewritten again.
  impl_->rewritten = opts.stage;
  return toStatus(diag);
}

} // namespace ampc::api
