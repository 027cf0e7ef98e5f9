//===- MaxBatchTest.cpp - planProgram and the largest-batch search --------===//
//
// The search on made-up memory curves (straight, with steps, bent, capped)
// finds the largest fitting batch and has planned its neighbour; on a real
// model its answer is what plans at that batch and the next say, and a
// plan-only program's plan is the compiled program's, bit for bit.
//
//===----------------------------------------------------------------------===//
#include "ampc/ampc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace ampc::api;

namespace {

/// A plan of `bytes` in its persistent arena.
PlanReport planOf(uint64_t bytes) {
  PlanReport r;
  r.summary.peakBytes = bytes;
  return r;
}

/// The largest b in [1, limit] with f(b) <= budget, by walking.
int64_t walk(const std::function<uint64_t(int64_t)> &f, uint64_t budget, int64_t limit) {
  int64_t best = 0;
  for (int64_t b = 1; b <= limit && f(b) <= budget; ++b)
    best = b;
  return best;
}

void expectFinds(const std::function<uint64_t(int64_t)> &f, uint64_t budget, int64_t limit,
                 size_t maxProbes, const std::string &what) {
  PlanAtBatch planAt = [&](int64_t b) -> Result<PlanReport> { return planOf(f(b)); };
  Result<MaxBatchReport> r = findMaxBatch(planAt, budget, limit);
  ASSERT_TRUE(r.ok()) << what;
  int64_t expected = walk(f, budget, limit);
  EXPECT_EQ(r->batch, expected) << what;
  EXPECT_LE(r->probes.size(), maxProbes) << what;
  if (expected == 0) {
    EXPECT_EQ(r->nextBytes, f(1)) << what;
    return;
  }
  EXPECT_EQ(r->plan.totalBytes(), f(expected)) << what;
  if (expected < limit) {
    EXPECT_FALSE(r->reachedLimit) << what;
    EXPECT_EQ(r->nextBytes, f(expected + 1)) << what << ": the next batch's plan was made";
    EXPECT_GT(r->nextBytes, budget) << what;
  } else {
    EXPECT_TRUE(r->reachedLimit) << what;
  }
}

} // namespace

TEST(MaxBatch, FindsTheLargestFittingBatchOnManyCurves) {
  const int64_t limit = int64_t(1) << 24;
  // Straight: 10 MB of weights and 3 kB a sample.
  auto straight = [](int64_t b) { return uint64_t(10'000'000 + 3'000 * b); };
  for (uint64_t budget : {10'002'999ull, 10'003'000ull, 10'006'000ull, 1'000'000'000ull})
    expectFinds(straight, budget, limit, 8, "straight, budget " + std::to_string(budget));
  // Steps: buffers padded to 64 KiB pages, so the line is only nearly straight.
  auto steps = [](int64_t b) {
    uint64_t raw = 5'000'000 + 1'234 * uint64_t(b);
    return (raw + 65535) / 65536 * 65536;
  };
  expectFinds(steps, 700'000'000, limit, 16, "padded");
  // Bent: buffer reuse that stops working past a batch (a second slope).
  auto bent = [](int64_t b) {
    return uint64_t(1'000'000 + 1'000 * b + (b > 5000 ? 4'000 * (b - 5000) : 0));
  };
  for (uint64_t budget : {4'000'000ull, 6'000'000ull, 50'000'000ull})
    expectFinds(bent, budget, limit, 12, "bent, budget " + std::to_string(budget));
  // Superlinear (attention's B x T x T grows with it here) and a tiny slope.
  auto quadratic = [](int64_t b) { return uint64_t(100'000 + 17 * b * b); };
  expectFinds(quadratic, 2'000'000'000, limit, 20, "quadratic");
  auto flat = [](int64_t b) { return uint64_t(1'000'000 + b / 1000); };
  expectFinds(flat, 1'000'010, limit, 45, "nearly flat");
  // Not even batch 1 fits, or everything up to the limit does.
  expectFinds(straight, 9'000'000, limit, 1, "none fits");
  expectFinds(straight, 1'000'000'000'000ull, 1000, 4, "the limit fits");
  expectFinds(straight, 1'000'000'000'000ull, 1, 1, "a limit of 1");
}

TEST(MaxBatch, APlanThatCannotBeMadeBoundsTheSearchOrFailsIt) {
  // Past batch 40 a tensor would exceed --max-elements: the answer is the
  // largest batch that both builds and fits, and says why it stopped.
  PlanAtBatch boundedAt40 = [](int64_t b) -> Result<PlanReport> {
    if (b > 40)
      return Status::error("a tensor of the model has more elements than --max-elements");
    return planOf(uint64_t(b) * 1000);
  };
  Result<MaxBatchReport> bounded = findMaxBatch(boundedAt40, 100'000);
  ASSERT_TRUE(bounded.ok()) << bounded.status().message();
  EXPECT_EQ(bounded->batch, 40);
  EXPECT_EQ(bounded->nextBytes, 0u);
  EXPECT_NE(bounded->unbuildable.find("--max-elements"), std::string::npos);
  // Memory runs out first: no word of the bound.
  Result<MaxBatchReport> fits = findMaxBatch(boundedAt40, 20'500);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->batch, 20);
  EXPECT_TRUE(fits->unbuildable.empty());
  EXPECT_EQ(fits->nextBytes, 21'000u);

  // A model that cannot be built at batch 1 (an ONNX export's fixed batch).
  PlanAtBatch fixedAt4 = [](int64_t b) -> Result<PlanReport> {
    if (b != 4)
      return Status::error("the reshape's shape holds batch 4");
    return planOf(4000);
  };
  Result<MaxBatchReport> r = findMaxBatch(fixedAt4, 100'000);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("at batch 1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("holds batch 4"), std::string::npos) << r.status().message();
  EXPECT_FALSE(findMaxBatch(fixedAt4, 100'000, 0).ok()) << "a limit below 1";
}

namespace {
Model rewrittenMlp(int64_t batch, const std::string &level) {
  LoadOptions load;
  load.batch = batch;
  load.optLevel = level;
  Result<Model> m = Model::loadFile(std::string(AMPC_SOURCE_DIR) + "/examples/mlp.yaml", load);
  EXPECT_TRUE(m.ok()) << m.status().message();
  PipelineOptions p;
  p.stage = Stage::Train;
  EXPECT_TRUE(m->rewrite(p).ok());
  return std::move(*m);
}
} // namespace

TEST(MaxBatch, APlanOnlyProgramHasTheCompiledProgramsPlan) {
  for (const char *level : {"O0", "O2"}) {
    Model m = rewrittenMlp(16, level);
    CompileOptions c;
    c.device = "cpu";
    Result<PlanReport> plan = planProgram(m, c);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    Result<Program> program = Program::compile(m, c);
    ASSERT_TRUE(program.ok()) << program.status().message();
    EXPECT_EQ(plan->summary.peakBytes, program->plannedBytes()) << level;
    EXPECT_EQ(plan->table, program->memoryPlan()) << level;
    EXPECT_EQ(plan->kernelHeldBytes, program->kernelHeldBytes()) << level;
    EXPECT_EQ(plan->scheduledOps, program->numScheduledOps()) << level;
    EXPECT_EQ(plan->device, "cpu");
    // A limit of one byte refuses to compile, and does not stop a plan.
    c.maxMemoryBytes = 1;
    EXPECT_FALSE(Program::compile(m, c).ok());
    EXPECT_TRUE(planProgram(m, c).ok());
  }
}

TEST(MaxBatch, TheMlpsLargestBatchFitsAndTheNextDoesNot) {
  CompileOptions c;
  c.device = "cpu-ref";
  // Between the plans at batch 64 and 65 of O2: the answer is 64.
  auto bytesAt = [&](int64_t b) {
    Result<PlanReport> p = planProgram(rewrittenMlp(b, "O2"), c);
    EXPECT_TRUE(p.ok());
    return p.ok() ? p->totalBytes() : 0;
  };
  uint64_t at64 = bytesAt(64), at65 = bytesAt(65);
  ASSERT_LT(at64, at65) << "a larger batch needs more memory";
  PlanAtBatch planAt = [&](int64_t b) { return planProgram(rewrittenMlp(b, "O2"), c); };
  Result<MaxBatchReport> r = findMaxBatch(planAt, at64 + (at65 - at64) / 2);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->batch, 64);
  EXPECT_EQ(r->plan.totalBytes(), at64);
  EXPECT_EQ(r->nextBytes, at65);
  EXPECT_LE(r->probes.size(), 12u);
  // And the program at that batch compiles within the budget.
  c.maxMemoryBytes = at64 + (at65 - at64) / 2;
  EXPECT_TRUE(Program::compile(rewrittenMlp(64, "O2"), c).ok());
  EXPECT_FALSE(Program::compile(rewrittenMlp(65, "O2"), c).ok());
}
