//===- Plan.cpp - Memory plans without running, the largest batch ---------===//
#include "Internal.h"

#include "ampc/Plan.h"

#include "runtime/Backend.h"
#include "runtime/Program.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <optional>

namespace ampc::api {

Result<PlanReport> planProgram(const Model &model, const CompileOptions &opts) {
  const Model::Impl &m = Access::impl(model);
  std::string err;
  // Declared before the program, which refers to it: destroyed after it.
  std::unique_ptr<Backend> backend = createBackend(opts.device, err);
  if (!backend)
    return Status::error(err);
  ampc::CompileOptions c = runtimeCompileOptions(m, opts, *backend);
  c.planOnly = true;
  DiagnosticEngine diag;
  std::unique_ptr<ampc::Program> program = ampc::Program::compile(*m.graph, *backend, diag, c);
  if (!program)
    return toStatus(diag);
  PlanReport r;
  r.summary = summarizePlan(program->plan());
  llvm::raw_string_ostream table(r.table);
  program->plan().print(table);
  table.flush();
  r.kernelHeldBytes = program->kernelHeldBytes();
  r.scheduledOps = program->schedule().size();
  r.device = backend->name().str();
  return r;
}

Result<uint64_t> availableMemory(const std::string &device) {
  std::string err;
  std::unique_ptr<Backend> backend = createBackend(device, err);
  if (!backend)
    return Status::error(err);
  uint64_t bytes = backend->availableMemoryBytes();
  if (!bytes)
    return Status::error("the system does not say how much memory is free on '" +
                         backend->name().str() + "'; give the budget in bytes");
  return bytes;
}

namespace {

/// The search's state: every plan made, and the bracket around the answer.
class BatchSearch {
public:
  BatchSearch(const PlanAtBatch &planAt, uint64_t budget, int64_t limit)
      : planAt_(planAt), budget_(budget), limit_(limit) {}

  Result<MaxBatchReport> run() {
    if (Status s = probe(1); !s)
      return s;
    if (!fits(1)) {
      report_.batch = 0;
      report_.plan = std::move(firstPlan_);
      report_.nextBytes = bytes_[1];
      return std::move(report_);
    }
    // Two probes in a row that did not halve the bracket: bisect once,
    // which keeps the search logarithmic wherever the estimate misleads it.
    int stalls = 0;
    while (hi_ - lo_ > 1) {
      int64_t next = stalls >= 2 ? midpoint() : estimate();
      stalls = stalls >= 2 ? 0 : stalls;
      next = std::clamp(next, lo_ + 1, hi_ - 1);
      int64_t widthBefore = hi_ - lo_;
      if (Status s = probe(next); !s)
        return s;
      stalls = (hi_ - lo_) * 2 > widthBefore ? stalls + 1 : 0;
    }
    report_.batch = lo_;
    report_.reachedLimit = lo_ == limit_;
    if (auto it = unbuildable_.find(hi_); it != unbuildable_.end())
      report_.unbuildable = it->second;
    else if (!report_.reachedLimit)
      report_.nextBytes = bytes_.at(hi_);
    report_.plan = std::move(bestPlan_);
    return std::move(report_);
  }

private:
  bool fits(int64_t batch) const { return bytes_.at(batch) <= budget_; }

  Status probe(int64_t batch) {
    Result<PlanReport> plan = planAt_(batch);
    if (!plan && batch == 1) {
      Status s = Status::error("at batch 1:");
      s.append(plan.status());
      return s;
    }
    if (!plan) { // an upper bound: no larger batch is tried
      unbuildable_[batch] = plan.status().message();
      report_.probes.push_back({batch, 0});
      hi_ = std::min(hi_, batch);
      return {};
    }
    uint64_t bytes = plan->totalBytes();
    bytes_[batch] = bytes;
    report_.probes.push_back({batch, bytes});
    if (batch == 1)
      firstPlan_ = *plan;
    bool low = bytes <= budget_;
    if (low && batch > lo_) {
      lo_ = batch;
      bestPlan_ = std::move(*plan);
    } else if (!low) {
      hi_ = std::min(hi_, batch);
    }
    // The end that moved keeps its weight; the other halves when it stays
    // put a second time.
    (low ? loWeight_ : hiWeight_) = 1;
    if (lastMovedLow_ && *lastMovedLow_ == low)
      (low ? hiWeight_ : loWeight_) *= 0.5;
    lastMovedLow_ = low;
    return {};
  }

  /// The next batch to plan.
  int64_t estimate() const {
    auto at = bytes_.find(lo_);
    if (hi_ <= limit_ && bytes_.count(hi_)) {
      // Inside the bracket: where the chord between its ends meets the
      // budget, an end that stayed put twice weighted down (the Illinois
      // rule: on a curve bent to one side, the chord would otherwise only
      // ever move the other end).
      double below = (double(budget_) - double(at->second)) * loWeight_;
      double above = (double(bytes_.at(hi_)) - double(budget_)) * hiWeight_;
      return lo_ + static_cast<int64_t>(double(hi_ - lo_) * below / (below + above));
    }
    if (hi_ <= limit_) // the high end could not be planned: nothing to aim by
      return midpoint();
    // Above every plan: along the line through the two largest fitting
    // plans, but at most 1024 times the batch, since the first plans (at
    // batch 1 and 2) are the least like large ones.
    if (at == bytes_.begin())
      return grown(2);
    auto previous = std::prev(at);
    double slope =
        (double(at->second) - double(previous->second)) / double(at->first - previous->first);
    if (slope <= 0)
      return grown(1024);
    double batch = double(lo_) + (double(budget_) - double(at->second)) / slope;
    return std::min(grown(1024), batch >= double(limit_) ? limit_ : static_cast<int64_t>(batch));
  }

  /// lo_ times `factor`, within the limit.
  int64_t grown(int64_t factor) const { return lo_ > limit_ / factor ? limit_ : lo_ * factor; }

  int64_t midpoint() const { return hi_ > limit_ ? grown(2) : lo_ + (hi_ - lo_) / 2; }

  const PlanAtBatch &planAt_;
  uint64_t budget_;
  int64_t limit_;
  int64_t lo_ = 0;          ///< the largest batch known to fit
  int64_t hi_ = limit_ + 1; ///< the smallest batch known not to (limit + 1: none yet)
  std::map<int64_t, uint64_t> bytes_;
  std::map<int64_t, std::string> unbuildable_; ///< why each such batch's plan failed
  double loWeight_ = 1, hiWeight_ = 1;         ///< the Illinois rule's (estimate())
  std::optional<bool> lastMovedLow_;
  PlanReport firstPlan_, bestPlan_;
  MaxBatchReport report_;
};

} // namespace

Result<MaxBatchReport> findMaxBatch(const PlanAtBatch &planAt, uint64_t budgetBytes,
                                    int64_t limit) {
  if (limit < 1)
    return Status::error("the largest batch to try must be at least 1");
  return BatchSearch(planAt, budgetBytes, limit).run();
}

} // namespace ampc::api
