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
#include "Driver.h"

#include <algorithm>
#include <cstdio>
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
  if (unit == 0)
    return std::to_string(bytes) + " B";
  return format("%.1f ", v) + units[unit];
}

} // namespace

int runBench(const Options &cmdline) {
  std::vector<std::string> levels;
  if (!parseLevels(cmdline.levels, levels))
    return kBadInput;
  Options opts = cmdline;
  if (!opts.steps && !opts.epochs)
    opts.steps = kDefaultBenchSteps;
  opts.progress = "none";
  // Evaluation would compile a second program and run between steps; the
  // benchmark measures training alone.
  opts.evalEvery = 0;
  std::optional<api::DeviceChoice> device = selectDevice(opts);
  if (!device)
    return kRuntimeFailure;

  bool headerShown = false, anyFailed = false;
  double baselineMs = 0;
  // --profile: each level's tables, after the comparison.
  std::vector<std::pair<std::string, std::string>> profiles;
  for (const std::string &level : levels) {
    opts.optLevel = level;
    std::optional<api::Model> model = loadModel(opts);
    if (!model)
      return kBadInput; // the model itself is wrong: every level would say so
    if (!model->trainable()) {
      err() << "error: ampc bench trains the model: it needs a loss and an 'optimizer' "
               "section\n";
      return kBadInput;
    }

    PreparedTraining run;
    api::Result<api::TrainReport> result = api::Status::error("");
    bool ok = prepareTraining(*model, device->name, opts, run) == kSuccess;
    if (ok && !headerShown) {
      out() << "benchmarking " << model->name() << " on " << run.program->device() << ": "
            << run.data.steps << " steps of " << run.data.batchSize << " samples at each level ("
            << run.data.kind << " data)\n";
      out() << "level   ms/step  speedup  peak memory   final loss  skipped\n";
      headerShown = true;
    }
    std::string failure;
    if (ok) {
      api::TrainOptions t = trainOptions(*model, opts);
      // Progress is off; nothing else is worth showing per level.
      t.output = [](std::string_view) {};
      result = run.program->train(t);
      ok = result.ok();
      if (!ok)
        for (const api::Diagnostic &d : result.status().diagnostics())
          failure += d.message;
    }
    if (!ok) {
      anyFailed = true;
      // prepareTraining has printed its diagnostics already.
      out() << format("%-5s", level.c_str()) << "  failed"
            << (failure.empty() ? "" : ": " + failure) << "\n";
      continue;
    }
    double ms = medianStepMs(result->stepMs);
    if (baselineMs == 0)
      baselineMs = ms;
    std::string memory = formatBytes(result->plannedBytes);
    out() << format("%-5s %9.2f %7.2fx %12s %12.6f", level.c_str(), ms,
                    ms > 0 ? baselineMs / ms : 0.0, memory.c_str(), result->finalLoss);
    if (result->finalLossScale)
      out() << format(" %8lld", static_cast<long long>(result->skippedSteps));
    else
      out() << "        -";
    // The plan is meant to be exact; say so when the backend disagrees.
    if (result->allocatedBytes != result->plannedBytes)
      out() << "  (allocated " << formatBytes(result->allocatedBytes) << ")";
    out() << "\n";
    if (result->profile)
      profiles.emplace_back(level, result->profile->str());
  }
  if (headerShown)
    out() << "ms/step: median, first step excluded; speedup: over " << levels.front()
          << "; peak memory: planned (= allocated unless shown); skipped: steps the loss "
             "scaler skipped for overflow (- without loss scaling)\n";
  for (const auto &[level, table] : profiles)
    out() << "\n" << level << " " << table;
  return anyFailed ? kRuntimeFailure : kSuccess;
}

} // namespace ampc::cli
