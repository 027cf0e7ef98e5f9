//===- Pipeline.cpp - Loading, the passes an opt level runs, the policy ---===//
#include "Driver.h"

namespace ampc::cli {

void printDiagnostics(const api::Status &s) {
  for (const api::Diagnostic &d : s.diagnostics())
    err() << d.str() << "\n";
}

api::Result<api::Model> loadModelQuietly(const Options &opts) {
  api::LoadOptions load;
  load.maxElements = opts.maxElements;
  load.maxNesting = opts.maxNesting;
  load.maxYamlNodes = opts.maxYamlNodes;
  load.maxNodes = opts.maxNodes;
  if (opts.batch > 0)
    load.batch = opts.batch;
  for (const std::string &f : opts.fixInputs) {
    size_t eq = f.find('=');
    load.fixedInputs.emplace_back(f.substr(0, eq), f.substr(eq + 1));
  }
  load.optLevel = opts.optLevel;
  load.policyOverrides = opts.ampOverrides;
  api::Result<api::Model> model = api::Model::loadFile(opts.model, load);
  if (!model)
    return model;
  api::TrainSettings settings;
  settings.steps = opts.steps;
  settings.epochs = opts.epochs;
  settings.learningRate = opts.lr;
  settings.seed = opts.seed;
  settings.evalEvery = opts.evalEvery;
  settings.logEvery = opts.logEvery;
  settings.recompute = opts.recompute;
  if (api::Status s = model->setTrainSettings(settings); !s) {
    s.append(model.status()); // the load's warnings after the error
    return s;
  }
  return model;
}

std::optional<api::Model> loadModel(const Options &opts) {
  api::Result<api::Model> model = loadModelQuietly(opts);
  printDiagnostics(model.status()); // the errors, or the warnings
  if (!model)
    return std::nullopt;
  return std::move(*model);
}

api::Status rewriteQuietly(api::Model &m, const Options &opts, api::Stage stage) {
  // A graph file is rewritten already and runs as written (the options
  // that ask for the stage it does not hold were refused: GraphFileOptions.cpp).
  if (m.asWritten()) {
    if (m.rewrittenStage() == stage)
      return {};
    return api::Status::error(m.name() + " is loaded as written, " +
                              (stage == api::Stage::Train ? "a forward graph: the training graph"
                                                          : "a training graph: the forward graph") +
                              " needs the model file");
  }
  api::PipelineOptions p;
  p.stage = stage;
  // The precision passes ask the target which ops it runs in half.
  p.device = opts.device;
  p.verifyEach = opts.verifyEach;
  p.timePasses = opts.timePasses;
  if (!opts.printAfter.empty())
    p.printAfter = {opts.printAfter};
  // Training plans its steps (epochs need the data) before the pipeline;
  // inspecting the graph does not open the data.
  p.resolveEpochs = false;
  p.ranks = static_cast<int>(std::max<int64_t>(1, opts.dataParallel));
  p.allreduceDtype = opts.allreduceDtype;
  p.syncBatchnorm = opts.syncBatchnorm;
  p.bucketBytes = std::max<int64_t>(1, static_cast<int64_t>(opts.bucketMb * 1024 * 1024));
  return m.rewrite(p);
}

bool runPipeline(api::Model &m, const Options &opts, api::Stage stage) {
  api::Status s = rewriteQuietly(m, opts, stage);
  printDiagnostics(s);
  return s.ok();
}

std::string optLevelOf(const api::Model &m) {
  return m.graph().meta("amp.opt_level").value_or("O0");
}

namespace {

/// `s` without the blanks at either end.
std::string trim(const std::string &s) {
  const char *blanks = " \t\n\v\f\r";
  size_t first = s.find_first_not_of(blanks);
  if (first == std::string::npos)
    return "";
  return s.substr(first, s.find_last_not_of(blanks) - first + 1);
}

} // namespace

bool parseLevels(const std::string &list, std::vector<std::string> &levels) {
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string part =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (part.empty()) // empty parts are skipped, blank ones are not
      continue;
    std::string p = trim(part);
    if (p != "O0" && p != "O1" && p != "O2" && p != "O3") {
      err() << "error: --levels: unknown opt level '" << p << "' (known: O0, O1, O2, O3)\n";
      return false;
    }
    levels.push_back(p);
  }
  if (levels.empty()) {
    err() << "error: --levels names no opt level\n";
    return false;
  }
  return true;
}

bool loadWeights(api::Program &program, const std::string &checkpoint, WeightsReport report,
                 api::Program::Weights weights) {
  api::Status s = program.loadCheckpoint(checkpoint, weights);
  if (!s) {
    printDiagnostics(s);
    return false;
  }
  if (report == WeightsReport::Quiet)
    return true;
  bool averaged = weights == api::Program::Weights::Average;
  out() << (averaged ? "averaged weights (train.ema) from " : "weights from ") << checkpoint
        << " (step " << program.stepsDone() << ")\n";
  if (report == WeightsReport::LineNotes)
    for (const api::Diagnostic &d : s.diagnostics())
      out() << d.str() << "\n";
  return true;
}

void applyThreads(int64_t threads) {
  if (threads <= 0)
    return;
  // Far past any machine's cores; a bigger number is a typo, and OpenMP
  // would try to start that many threads.
  api::setThreads(static_cast<int>(std::min<int64_t>(threads, 4096)));
  if (std::string warning = api::threadsWarning(api::threads()); !warning.empty())
    err() << "warning: " << warning << "\n";
}

bool &verboseFlag() {
  static bool verbose = false;
  return verbose;
}

void showPolicy(const api::Model &m, const std::string &device) {
  api::Result<api::Policy> policy = m.policy();
  if (!policy) { // loadModel resolved it: cannot happen
    printDiagnostics(policy.status());
    return;
  }
  // One line by default; the whole table with -v.
  if (verbose())
    out() << "precision policy:\n" << policy->str();
  else
    out() << "precision " << policy->summary() << "\n";
  for (const api::Diagnostic &w : policy->warnings())
    err() << w.str() << "\n";
  // Said once, where the policy is shown.
  if (!device.empty())
    if (std::string note = policy->deviceNote(device); !note.empty())
      out() << note << "\n";
}

void printPrecisionFooter(const api::Model &m, const api::Program *program) {
  out() << m.graph().precisionStats().str << "\n";
  // Only when the cache served something: plain training changes the
  // weights every step, so every cast of them runs and there is nothing to
  // report (accumulation and evaluation reuse them).
  if (program) {
    api::CastCacheStats cache = program->castCacheStats();
    if (cache.hits > 0)
      out() << cache.str << "\n";
    // Tests and users check "0 nodes on the host fallback, graph replayed".
    if (program->device() != "cpu" && program->device() != "cpu-ref")
      out() << program->deviceActivity().str << "\n";
  }
}

} // namespace ampc::cli
