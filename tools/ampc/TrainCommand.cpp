//===- TrainCommand.cpp - `ampc model.yaml`: train per the model file -----===//
#include "tools/ampc/Driver.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/Verifier.h"
#include "passes/EvalMode.h"
#include "passes/PassManager.h"
#include "passes/StandardPipeline.h"
#include "runtime/data/DataSource.h"
#include "runtime/train/Trainer.h"

#include "llvm/Support/raw_ostream.h"

namespace ampc::cli {

namespace {

int64_t metaInt(const Graph &g, llvm::StringRef key, int64_t fallback) {
  auto it = g.meta().find(key.str());
  return it != g.meta().end() && it->second.is(AttrType::Int) ? it->second.getInt() : fallback;
}

ProgressStyle progressStyleOf(llvm::StringRef s) {
  if (s == "bar")
    return ProgressStyle::Bar;
  if (s == "lines")
    return ProgressStyle::Lines;
  if (s == "none")
    return ProgressStyle::None;
  return ProgressStyle::Auto;
}

/// The evaluation graph: the same model imported again with the evaluation
/// batch size, switched to inference, its logits kept as an output.
std::unique_ptr<Graph> buildEvalGraph(const Graph &train, const Options &opts, int64_t batch,
                                      DiagnosticEngine &diag) {
  LoadOptions load;
  load.maxElements = opts.maxElements;
  load.batchOverride = batch;
  std::unique_ptr<Graph> g = loadModelFile(opts.model, diag, load);
  if (!g)
    return nullptr;
  // The same precision policy as training, so the parameters it shares
  // with the training program by name have the same dtypes.
  for (const auto &[key, value] : train.meta())
    if (llvm::StringRef(key).startswith("amp."))
      g->meta()[key] = value;
  PassManager pm;
  std::string unavailable;
  std::unique_ptr<Backend> target = createBackend(opts.device, unavailable);
  pm.setTarget(target.get());
  pm.add(std::make_unique<EvalModePass>());
  if (!addStandardPipeline(pm, PipelineStage::Forward, diag) || !pm.run(*g, diag) ||
      !verifyGraph(*g, diag))
    return nullptr;
  for (Node &n : g->nodes())
    if (n.role() == NodeRole::Loss && n.numOperands() > 0)
      g->addOutput(n.operand(0));
  return g;
}

} // namespace

int prepareTraining(Graph &g, Backend &backend, const Options &opts, PreparedTraining &run,
                    DiagnosticEngine &diag) {
  auto fail = [&](const std::string &err) {
    llvm::errs() << "error: " << err << "\n";
    return kRuntimeFailure;
  };
  run.all = createDataSource(g, modelDirOf(opts.model), diag);
  if (!run.all) {
    diag.print(llvm::errs());
    return kBadInput;
  }
  run.batching = batchOptionsFromMeta(g);
  TrainOptions &t = run.options;
  t.accumulate = std::max<int64_t>(1, metaInt(g, "train.accumulate", 1));
  t.evalEvery = metaInt(g, "train.eval_every", 0);
  t.logEvery = metaInt(g, "train.log_every", 10);
  t.metricsPath = opts.metricsOut;
  t.checkpointPath = opts.checkpoint;
  t.checkpointEvery = opts.checkpointEvery;
  t.resumePath = opts.resume;
  t.optLevel = optLevelOf(g);
  t.progress = progressStyleOf(opts.progress);

  // Hold out the last tenth of the samples for evaluation (when asked for).
  run.trainData = run.all.get();
  if (t.evalEvery > 0) {
    int64_t n = run.all->numSamples();
    int64_t heldOut = std::max<int64_t>(1, n / 10);
    if (n - heldOut < run.batching.batchSize)
      return fail("the data has " + std::to_string(n) +
                  " samples: too few to hold out a tenth for evaluation and still fill a "
                  "training batch of " +
                  std::to_string(run.batching.batchSize));
    run.trainPart = makeSubset(*run.all, 0, n - heldOut);
    run.evalPart = makeSubset(*run.all, n - heldOut, heldOut);
    run.trainData = run.trainPart.get();
    run.evalGraph = buildEvalGraph(g, opts, std::min(run.batching.batchSize, heldOut), diag);
    run.evalProgram = run.evalGraph ? compileProgram(*run.evalGraph, backend, opts, diag) : nullptr;
    if (!run.evalProgram) {
      diag.print(llvm::errs());
      return kBadInput;
    }
  }

  // Steps: the model's (or --steps), or epochs over the training samples.
  Batcher probe(*run.trainData, run.batching);
  int64_t perEpoch = probe.batchesPerEpoch();
  if (perEpoch == 0)
    return fail("the data has " + std::to_string(run.trainData->numSamples()) +
                " training samples, fewer than one batch of " +
                std::to_string(run.batching.batchSize));
  if (g.meta().count("train.steps"))
    t.steps = metaInt(g, "train.steps", 1);
  else if (g.meta().count("train.epochs"))
    t.steps = std::max<int64_t>(1, metaInt(g, "train.epochs", 1) * perEpoch / t.accumulate);
  // The schedule (cosine) needs the total before the optimizer is lowered.
  g.meta()["train.steps"] = Attribute(t.steps);
  if (!runPipeline(g, opts, GraphStage::Train, diag)) {
    diag.print(llvm::errs());
    return kBadInput;
  }

  run.program = compileProgram(g, backend, opts, diag);
  if (!run.program) {
    diag.print(llvm::errs());
    return kBadInput;
  }
  return kSuccess;
}

int runTraining(Graph &g, const Options &opts, DiagnosticEngine &diag) {
  auto fail = [&](const std::string &err) {
    llvm::errs() << "error: " << err << "\n";
    return kRuntimeFailure;
  };
  std::unique_ptr<Backend> backend = selectBackend(opts);
  if (!backend)
    return kRuntimeFailure;
  showPolicy(g, backend.get());
  PreparedTraining run;
  if (int code = prepareTraining(g, *backend, opts, run, diag); code != kSuccess)
    return code;
  const TrainOptions &t = run.options;
  llvm::outs() << "training " << g.name() << " at " << optLevelOf(g) << " on " << backend->name()
               << ": " << t.steps << " steps of " << run.batching.batchSize << " samples";
  if (t.accumulate > 1)
    llvm::outs() << " x " << t.accumulate << " micro-batches";
  llvm::outs() << " (" << run.trainData->kind() << " data, " << run.trainData->numSamples()
               << " training samples";
  if (run.evalPart)
    llvm::outs() << ", " << run.evalPart->numSamples() << " held out";
  llvm::outs() << ")\n";

  Trainer trainer(*run.program, *run.trainData, run.batching, t,
                  {run.evalProgram.get(), run.evalPart.get()});
  TrainResult result;
  std::string err;
  if (!trainer.run(llvm::outs(), result, err))
    return fail(err);
  printTrainSummary(result, llvm::outs());
  printPrecisionFooter(g, run.program.get(), llvm::outs());
  if (!opts.checkpoint.empty())
    llvm::outs() << "checkpoint: " << opts.checkpoint << " (step " << result.steps << ")\n";
  if (!opts.metricsOut.empty())
    llvm::outs() << "metrics: " << opts.metricsOut << "\n";
  return kSuccess;
}

} // namespace ampc::cli
