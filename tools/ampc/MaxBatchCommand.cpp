//===- MaxBatchCommand.cpp - ampc plan --max-batch ------------------------===//
//
// The largest batch whose memory plan fits a budget, at each opt level.
// The plan is what the arenas allocate, so the search plans the model at
// a few batches (load, rewrite, prepare the kernels; nothing allocated and
// nothing run) instead of trying steps until one runs out of memory.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "ampc/Plan.h"

#include <cstdio>

namespace ampc::cli {

namespace {

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / 1048576.0);
  return buf;
}

/// The training graph when the model has an optimizer (as `ampc plan`),
/// else the forward one; --graph picks.
std::optional<api::Stage> stageOf(const api::Model &m, const Options &opts) {
  if (opts.graph == "train" && !m.trainable()) {
    err() << "error: --graph train needs a model with a loss and an 'optimizer' section\n";
    return std::nullopt;
  }
  return opts.graph == "forward" || !m.trainable() ? api::Stage::Forward : api::Stage::Train;
}

/// The budget: --memory, else what the device has free now.
bool budgetOf(const Options &opts, const std::string &device, uint64_t &bytes,
              std::string &source) {
  if (opts.memoryBudget > 0) {
    bytes = static_cast<uint64_t>(opts.memoryBudget);
    source = "--memory";
    return true;
  }
  api::Result<uint64_t> free = api::availableMemory(device);
  if (!free) {
    printDiagnostics(free.status());
    err() << "note: --memory BYTES gives the budget\n";
    return false;
  }
  bytes = *free;
  source = device == "cuda" ? "the GPU's free memory now" : "this machine's available memory now";
  return true;
}

} // namespace

int runMaxBatch(const Options &opts) {
  std::vector<std::string> levels;
  if (!opts.optLevel.empty())
    levels.push_back(opts.optLevel);
  else if (!parseLevels(opts.levels, levels))
    return kBadInput;

  // The model once as given, so that its errors and warnings print once
  // and a graph file is refused before any search.
  std::optional<api::Model> first = loadModel(opts);
  if (!first)
    return kBadInput;
  if (first->asWritten()) {
    err() << "error: --max-batch builds the model at other batches; a graph file (" << opts.model
          << ") holds one batch: give the model file\n";
    return kBadInput;
  }
  std::optional<api::Stage> stage = stageOf(*first, opts);
  if (!stage)
    return kBadInput;
  std::optional<api::DeviceChoice> device = selectDevice(opts);
  if (!device)
    return kRuntimeFailure;
  uint64_t budget = 0;
  std::string budgetSource;
  if (!budgetOf(opts, device->name, budget, budgetSource))
    return kRuntimeFailure;

  api::CompileOptions copts;
  copts.device = device->name;
  copts.castCache = opts.castCache;
  // A job's rank planned without its launcher (--data-parallel N).
  if (opts.dataParallel > 1)
    copts.world = api::World::planning(static_cast<int>(opts.dataParallel));

  out() << "model " << first->name() << ", "
        << (*stage == api::Stage::Train ? "training step" : "forward graph") << " on "
        << device->name << "\n"
        << "memory budget: " << budget << " B (" << mib(budget) << "), " << budgetSource << "\n";
  struct Row {
    std::string level;
    api::MaxBatchReport report;
  };
  std::vector<Row> rows;
  for (const std::string &level : levels) {
    Options at = opts;
    at.optLevel = level;
    api::PlanAtBatch planAt = [&](int64_t batch) -> api::Result<api::PlanReport> {
      at.batch = batch;
      api::Result<api::Model> m = loadModelQuietly(at);
      if (!m)
        return m.status();
      if (api::Status s = rewriteQuietly(*m, at, *stage); !s)
        return s;
      return api::planProgram(*m, copts);
    };
    api::Result<api::MaxBatchReport> r = api::findMaxBatch(planAt, budget);
    if (!r) {
      err() << "error: --max-batch at " << level << ": the model cannot be planned\n";
      printDiagnostics(r.status());
      return kBadInput;
    }
    rows.push_back({level, std::move(*r)});
  }

  out() << "level  max batch  needs (B)       next batch needs (B)  plans\n";
  for (const Row &row : rows) {
    const api::MaxBatchReport &r = row.report;
    char line[160];
    std::string needs = r.batch ? std::to_string(r.plan.totalBytes()) : "-";
    std::string next = r.reachedLimit           ? "(search limit)"
                       : !r.unbuildable.empty() ? "(cannot be built)"
                                                : std::to_string(r.nextBytes);
    std::snprintf(line, sizeof line, "%-5s  %9lld  %-14s  %-20s  %5zu\n", row.level.c_str(),
                  static_cast<long long>(r.batch), needs.c_str(), next.c_str(), r.probes.size());
    out() << line;
  }
  // No batch fits at some level: the machine lacks the memory, which
  // exits 1 as running out of memory does.
  int code = kSuccess;
  for (const Row &row : rows) {
    const api::MaxBatchReport &r = row.report;
    out() << "\n";
    if (r.batch == 0) {
      code = kRuntimeFailure;
      out() << row.level << ": no batch fits: batch 1 needs " << r.nextBytes << " B ("
            << mib(r.nextBytes) << ")\n";
      continue;
    }
    out() << row.level << " at batch " << r.batch
          << (r.reachedLimit ? " (the search's limit; larger batches may fit too)" : "") << ", "
          << r.plan.scheduledOps << " scheduled ops:\n";
    if (!r.unbuildable.empty())
      out() << "  batch " << r.batch + 1 << " cannot be built: " << r.unbuildable << "\n";
    out() << r.plan.table << heldByKernelsRow(r.plan.kernelHeldBytes);
  }
  return code;
}

} // namespace ampc::cli
