//===- TrainCommand.cpp - `ampc model.yaml`: train per the model file -----===//
#include "Driver.h"

#include <algorithm>
#include <unistd.h>

namespace ampc::cli {

namespace {

int64_t metaInt(const api::Model &m, const char *key, int64_t fallback) {
  return m.graph().metaInt(key).value_or(fallback);
}

api::Progress progressOf(const std::string &s) {
  if (s == "bar")
    return api::Progress::Bar;
  if (s == "lines")
    return api::Progress::Lines;
  if (s == "none")
    return api::Progress::None;
  // Progress goes through our stdout: a bar only on a terminal.
  return ::isatty(STDOUT_FILENO) ? api::Progress::Bar : api::Progress::Lines;
}

} // namespace

int prepareTraining(api::Model &m, const std::string &device, const Options &opts,
                    PreparedTraining &run) {
  if (api::Result<api::DataInfo> data = m.openData(); !data) {
    printDiagnostics(data.status());
    return kBadInput;
  }
  // The held-out split (when evaluating) and the step count: what the
  // data cannot do is a runtime failure, as when training meets it.
  api::Result<api::DataInfo> plan =
      m.planTraining(static_cast<int>(std::max<int64_t>(1, opts.dataParallel)));
  if (!plan) {
    printDiagnostics(plan.status());
    return kRuntimeFailure;
  }
  run.data = *plan;
  if (!runPipeline(m, opts, api::Stage::Train))
    return kBadInput;
  int failureCode = kBadInput;
  run.program = compileProgram(m, device, opts, failureCode);
  return run.program ? kSuccess : failureCode;
}

api::TrainOptions trainOptions(const api::Model &m, const Options &opts) {
  api::TrainOptions t;
  t.logEvery = metaInt(m, "train.log_every", 10);
  t.evalEvery = metaInt(m, "train.eval_every", 0);
  t.metricsPath = opts.metricsOut;
  t.checkpointPath = opts.checkpoint;
  t.checkpointEvery = opts.checkpointEvery;
  t.writeThrough = opts.writeThrough;
  t.progress = progressOf(opts.progress);
  t.prefetch = opts.prefetch;
  t.dataWorkers = opts.dataWorkers;
  // --threads N is a fixed team; without it the team follows the cores
  // this process gets (smaller while another process shares them).
  t.adaptThreads = !opts.threads;
  t.profile = opts.profile || !opts.trace.empty();
  // A few steps make a readable timeline and a small file.
  t.traceSteps = opts.trace.empty() ? 0 : 5;
  // Handed over at each progress update: on a pipe the lines go out as they
  // come, as the bar does on a terminal.
  t.output = [](std::string_view text) { out() << text << std::flush; };
  return t;
}

int runTraining(api::Model &m, const Options &opts) {
  std::optional<api::DeviceChoice> device = selectDevice(opts);
  if (!device)
    return kRuntimeFailure;
  showPolicy(m, device->name);
  PreparedTraining run;
  if (int code = prepareTraining(m, device->name, opts, run); code != kSuccess)
    return code;
  const api::DataInfo &d = run.data;
  out() << "training " << m.name() << " at " << optLevelOf(m) << " on " << run.program->device()
        << ": " << d.steps << " steps of ";
  if (opts.dataParallel > 1)
    out() << opts.dataParallel << " ranks x ";
  out() << d.batchSize << " samples";
  if (d.accumulate > 1)
    out() << " x " << d.accumulate << " micro-batches";
  out() << " (" << d.kind << " data, " << d.trainSamples << " training samples";
  if (d.heldOut)
    out() << ", " << d.heldOut << " held out";
  out() << ")\n";
  if (std::string c = run.program->collectives(); !c.empty())
    out() << c << "\n";
  if (std::optional<std::string> values = m.graph().meta("train.recompute.values")) {
    size_t count = 1 + std::count(values->begin(), values->end(), ',');
    out() << "recompute cheap: " << count << " forward value" << (count == 1 ? "" : "s")
          << " computed again for the backward instead of kept (ampc plan --recompute cheap "
             "shows the memory saved)\n";
  }

  if (!opts.resume.empty())
    if (api::Status s = run.program->loadCheckpoint(opts.resume); !s) {
      printDiagnostics(s);
      return kRuntimeFailure;
    }
  api::Result<api::TrainReport> report = run.program->train(trainOptions(m, opts));
  if (!report) {
    printDiagnostics(report.status());
    return kRuntimeFailure;
  }
  out() << report->summary;
  printPrecisionFooter(m, &*run.program);
  if (report->profile)
    out() << report->profile->str();
  else if (opts.profile || !opts.trace.empty())
    out() << "profile: nothing profiled (the run had no step after the first)\n";
  if (!opts.trace.empty()) {
    if (api::Status s = run.program->writeTrace(opts.trace, opts.writeThrough); !s) {
      printDiagnostics(s);
      return kRuntimeFailure;
    }
    out() << "trace: " << opts.trace << " (open in Perfetto or chrome://tracing)\n";
  }
  if (!opts.checkpoint.empty())
    out() << "checkpoint: " << opts.checkpoint << " (step " << report->steps << ")\n";
  if (!opts.metricsOut.empty())
    out() << "metrics: " << opts.metricsOut << "\n";
  return kSuccess;
}

} // namespace ampc::cli
