//===- ampc/Plan.h - Memory plans without running, the largest batch -*- C++ -*-===//
//
// A program's memory plan is exact (what the arenas allocate) and known
// before anything runs, so the largest batch that fits a budget can be
// found from plans alone: `ampc plan --max-batch`.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_PLAN_H
#define AMPC_PUBLIC_PLAN_H

#include "ampc/Export.h"
#include "ampc/Model.h"
#include "ampc/Program.h"
#include "ampc/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ampc::api {

/// A rewritten model's program planned on a device: its kernels prepared,
/// nothing allocated.
struct PlanReport {
  MemoryPlanSummary summary;
  std::string table;            ///< the table `ampc plan` prints
  uint64_t kernelHeldBytes = 0; ///< outside the arenas (oneDNN's weights, workspaces)
  size_t scheduledOps = 0;
  std::string device;
  /// What a run of the program holds: its arenas and its kernels' memory.
  uint64_t totalBytes() const { return summary.peakBytes + kernelHeldBytes; }
};

/// Plans `model` (rewritten) as Program::compile would compile it with
/// `opts`, without allocating its arenas; opts.maxMemoryBytes is not
/// checked.
AMPC_API Result<PlanReport> planProgram(const Model &model, const CompileOptions &opts);

/// Bytes a program could still get on `device` ("cpu", "cpu-ref", "cuda",
/// "auto"): the host's available memory (MemAvailable, within a cgroup's
/// limit), or the GPU's free memory. An error when the device cannot be
/// used or the system does not say.
AMPC_API Result<uint64_t> availableMemory(const std::string &device);

/// One plan the search made.
struct MaxBatchProbe {
  int64_t batch = 0;
  uint64_t bytes = 0; ///< PlanReport::totalBytes
};

struct MaxBatchReport {
  /// The largest batch whose plan fits; 0 when not even batch 1 does.
  int64_t batch = 0;
  PlanReport plan; ///< at `batch` (at batch 1 when none fits)
  /// At batch + 1: over the budget (0 when reachedLimit or unbuildable).
  uint64_t nextBytes = 0;
  /// The search stopped at its limit with the plan still fitting.
  bool reachedLimit = false;
  /// When batch + 1 could not be planned at all (a tensor past
  /// --max-elements, a shape the model fixes): why; the answer is then the
  /// largest batch that could be planned and fit.
  std::string unbuildable;
  std::vector<MaxBatchProbe> probes; ///< in the order made
};

/// The plan of the model built at `batch`; an error when it cannot be
/// built at that batch. An error at batch 1 fails the search; at a larger
/// batch it bounds it (MaxBatchReport::unbuildable).
using PlanAtBatch = std::function<Result<PlanReport>(int64_t batch)>;

/// The largest batch in [1, limit] whose plan's totalBytes() is at most
/// `budgetBytes`. Memory grows with the batch, about linearly: the search
/// extrapolates from the plans it has, bisects where the line misleads
/// (buffer reuse and layouts make it only nearly straight), and ends with
/// the plans on both sides of the answer, a dozen plans or fewer for the
/// models in examples/. It assumes a larger batch never needs less memory.
AMPC_API Result<MaxBatchReport> findMaxBatch(const PlanAtBatch &planAt, uint64_t budgetBytes,
                                             int64_t limit = int64_t(1) << 24);

} // namespace ampc::api

#endif
