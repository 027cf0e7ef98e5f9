//===- CompareCommand.cpp - `ampc compare`: where two levels' numbers part -===//
//
// What a user needs when O2 diverges and O0 does not: both levels start
// from the same weights (the model's seeded init, or a checkpoint) and run
// one training step on the same batch with every node's results kept; the
// values that compute the same quantity are compared, forward first, then
// the gradients (unscaled). The first one past the tolerance is where the
// lower precision first hurts; its inputs' errors show whether it made the
// error or inherited it. With --reference f64 a third run, the model
// retyped to f64 on cpu-ref, says how far each level is from exact.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

namespace ampc::cli {

namespace {

/// One level's step (recorded, or measured against the records given),
/// and what the header says of it.
struct LevelRun {
  api::StepRecord record;
  std::optional<api::ComparisonReport> report;
  std::string modelName, policy;
};

/// What the candidate level's step is measured against.
struct Against {
  const api::StepRecord *reference = nullptr, *f64 = nullptr;
  api::CompareOptions options;
};

/// Imports, rewrites (Train) and compiles the model at `level` (or, for
/// "f64", at O0 retyped to f64 for cpu-ref), loads the checkpoint and
/// records one step; nullopt after printing why not.
std::optional<LevelRun> recordLevel(const Options &cmdline, const std::string &level,
                                    const std::string &device, WeightsReport weightsReport,
                                    const Against &against, int &code) {
  const bool f64 = level == "f64";
  Options opts = cmdline;
  opts.optLevel = f64 ? "O0" : level;
  std::optional<api::Model> m = loadModel(opts);
  code = kBadInput;
  if (!m)
    return std::nullopt;
  if (!m->trainable()) {
    err() << "error: ampc compare runs a training step; the model needs a loss and an "
             "'optimizer' section\n";
    return std::nullopt;
  }
  if (f64) {
    if (api::Status s = m->widenToF64(); !s) {
      printDiagnostics(s);
      return std::nullopt;
    }
  }
  api::PipelineOptions p;
  p.stage = api::Stage::Train;
  p.device = f64 ? "cpu-ref" : device;
  if (api::Status s = m->rewrite(p); !s) {
    printDiagnostics(s);
    return std::nullopt;
  }
  api::CompileOptions copts;
  copts.device = f64 ? "cpu-ref" : device;
  copts.castCache = opts.castCache;
  copts.maxMemoryBytes = static_cast<uint64_t>(opts.maxMemory);
  copts.fuseElementwise = false; // every node's results are written
  api::Result<api::Program> program = api::Program::compile(*m, copts);
  if (!program) {
    printDiagnostics(program.status());
    code = program.status().outOfMemory() ? kRuntimeFailure : kBadInput;
    return std::nullopt;
  }
  code = kRuntimeFailure;
  if (!opts.checkpoint.empty() && !loadWeights(*program, opts.checkpoint, weightsReport))
    return std::nullopt;
  api::DataSpec data;
  data.spec = opts.data; // relative paths against the current directory
  LevelRun run;
  api::Status status;
  if (against.reference) {
    api::Result<api::ComparisonReport> report =
        program->compareStep(*against.reference, against.f64, data, against.options);
    status = report.status();
    if (report)
      run.report = std::move(*report);
  } else {
    api::Result<api::StepRecord> record = program->recordStep(data);
    status = record.status();
    if (record)
      run.record = std::move(*record);
  }
  if (!status) {
    printDiagnostics(status);
    code = opts.data.empty() ? kRuntimeFailure : kBadInput;
    return std::nullopt;
  }
  code = kSuccess;
  run.modelName = m->name();
  if (api::Result<api::Policy> policy = m->policy())
    run.policy = policy->summary();
  return run;
}

} // namespace

int runCompare(Options opts) {
  std::vector<std::string> levels;
  if (!parseLevels(opts.levels, levels))
    return kBadInput;
  if (levels.size() != 2) {
    err() << "error: --levels: ampc compare measures one level against another, got "
          << levels.size() << " (e.g. --levels O0,O2)\n";
    return kBadInput;
  }
  std::optional<api::DeviceChoice> device = selectDevice(opts);
  if (!device)
    return kRuntimeFailure;
  if (device->name == "cuda") {
    err() << "error: ampc compare reads every node's results in host memory; run it with "
             "--device cpu (or cpu-ref)\n";
    return kBadInput;
  }
  // The f64 step and the reference level's are kept; the candidate's
  // values are measured as they are made.
  int code = kSuccess;
  std::optional<LevelRun> exact;
  if (opts.reference == "f64") {
    exact = recordLevel(opts, "f64", device->name, WeightsReport::Quiet, {}, code);
    if (!exact)
      return code;
  }
  std::optional<LevelRun> reference =
      recordLevel(opts, levels[0], device->name, WeightsReport::Line, {}, code);
  if (!reference)
    return code;
  Against against{&reference->record, exact ? &exact->record : nullptr, {}};
  against.options.tolerance = opts.tolerance;
  std::optional<LevelRun> candidate =
      recordLevel(opts, levels[1], device->name, WeightsReport::Quiet, against, code);
  if (!candidate)
    return code;

  out() << "ampc compare " << reference->modelName << ": " << levels[1] << " against " << levels[0]
        << ", one training step on " << device->name << " from "
        << (opts.checkpoint.empty() ? "the model's initial weights"
                                    : "the weights of " + opts.checkpoint)
        << ", the first batch of " << (opts.data.empty() ? "the model's data" : opts.data)
        << (exact ? "; and in f64 on cpu-ref" : "") << "\n";
  for (const LevelRun *run : {&*reference, &*candidate})
    out() << "  " << run->policy << "\n";
  out() << candidate->report->str(static_cast<size_t>(opts.worst));
  return kSuccess;
}

} // namespace ampc::cli
