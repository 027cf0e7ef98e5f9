//===- BenchCommand.cpp - `ampc bench`: the opt levels side by side -------===//
//
// Trains the user's model for a few steps at each opt level in one process
// and prints one row per level: the median step time, the speedup over the
// first level, peak memory, the final loss and the steps the loss scaler
// skipped -- the comparison the seed tutorials make by hand.
//
// Each level imports the model afresh: the passes rewrite the graph they are
// given, so a level must start from the model as written, not from the
// previous level's result. Levels run one after the other, never at once,
// so they do not compete for the cores or the caches.
//
//===----------------------------------------------------------------------===//
#include "tools/ampc/Driver.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <vector>

namespace ampc::cli {

namespace {

constexpr int64_t kDefaultBenchSteps = 20;

/// The median step time. The first step is left out when there are others:
/// it pays for first touches of the arenas and oneDNN's JIT, not for
/// training.
double medianStepMs(std::vector<double> ms) {
  if (ms.size() > 1)
    ms.erase(ms.begin());
  if (ms.empty())
    return 0;
  std::sort(ms.begin(), ms.end());
  size_t mid = ms.size() / 2;
  return ms.size() % 2 ? ms[mid] : (ms[mid - 1] + ms[mid]) / 2;
}

/// Bytes in the largest binary unit that keeps the figure at least 1.
std::string formatBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  if (unit == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.1f ", v) << units[unit];
  return os.str();
}

/// Splits --levels; false after printing what is wrong with it.
bool parseLevels(llvm::StringRef list, llvm::SmallVectorImpl<std::string> &levels) {
  llvm::SmallVector<llvm::StringRef, 4> parts;
  list.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef p : parts) {
    p = p.trim();
    if (p != "O0" && p != "O1" && p != "O2" && p != "O3") {
      llvm::errs() << "error: --levels: unknown opt level '" << p << "' (known: O0, O1, O2, O3)\n";
      return false;
    }
    levels.push_back(p.str());
  }
  if (levels.empty()) {
    llvm::errs() << "error: --levels names no opt level\n";
    return false;
  }
  return true;
}

} // namespace

int runBench(const Options &cmdline, DiagnosticEngine &diag) {
  llvm::SmallVector<std::string, 4> levels;
  if (!parseLevels(cmdline.levels, levels))
    return kBadInput;
  Options opts = cmdline;
  if (!opts.steps && !opts.epochs)
    opts.steps = kDefaultBenchSteps;
  opts.progress = "none";
  std::unique_ptr<Backend> backend = selectBackend(opts);
  if (!backend)
    return kRuntimeFailure;

  bool headerShown = false, anyFailed = false;
  double baselineMs = 0;
  for (const std::string &level : levels) {
    opts.optLevel = level;
    std::unique_ptr<Graph> graph = loadModel(opts, diag);
    if (!graph)
      return kBadInput; // the model itself is wrong: every level would say so
    if (!graph->meta().count("optimizer") || !graph->meta().count("loss")) {
      llvm::errs() << "error: ampc bench trains the model: it needs a loss and an 'optimizer' "
                      "section\n";
      return kBadInput;
    }
    // Evaluation would compile a second program and run between steps; the
    // benchmark measures training alone.
    graph->meta().erase("train.eval_every");
    opts.evalEvery.reset();

    PreparedTraining run;
    std::string err;
    TrainResult result;
    bool ok = prepareTraining(*graph, *backend, opts, run, diag) == kSuccess;
    if (ok && !headerShown) {
      llvm::outs() << "benchmarking " << graph->name() << " on " << backend->name() << ": "
                   << run.options.steps << " steps of " << run.batching.batchSize
                   << " samples at each level (" << run.trainData->kind() << " data)\n";
      llvm::outs() << "level   ms/step  speedup  peak memory   final loss  skipped\n";
      headerShown = true;
    }
    if (ok) {
      Trainer trainer(*run.program, *run.trainData, run.batching, run.options);
      llvm::raw_null_ostream quiet; // progress is off; nothing else is worth showing per level
      ok = trainer.run(quiet, result, err);
    }
    if (!ok) {
      anyFailed = true;
      // prepareTraining has printed its diagnostics already.
      llvm::outs() << llvm::format("%-5s", level.c_str()) << "  failed"
                   << (err.empty() ? "" : ": " + err) << "\n";
      continue;
    }
    double ms = medianStepMs(result.stepMs);
    if (baselineMs == 0)
      baselineMs = ms;
    std::string memory = formatBytes(result.plannedBytes);
    llvm::outs() << llvm::format("%-5s %9.2f %7.2fx %12s %12.6f", level.c_str(), ms,
                                 ms > 0 ? baselineMs / ms : 0.0, memory.c_str(), result.finalLoss);
    if (result.finalLossScale)
      llvm::outs() << llvm::format(" %8lld", static_cast<long long>(result.skippedSteps));
    else
      llvm::outs() << "        -";
    // The plan is meant to be exact; say so when the backend disagrees.
    if (result.allocatedBytes != result.plannedBytes)
      llvm::outs() << "  (allocated " << formatBytes(result.allocatedBytes) << ")";
    llvm::outs() << "\n";
  }
  if (headerShown)
    llvm::outs() << "ms/step: median, first step excluded; speedup: over " << levels.front()
                 << "; peak memory: planned (= allocated unless shown); skipped: steps the loss "
                    "scaler skipped for overflow (- without loss scaling)\n";
  return anyFailed ? kRuntimeFailure : kSuccess;
}

} // namespace ampc::cli
