//===- OptimizerTest.cpp - Optimizer ops, kernels and the optimizer pass ---===//
//
// Updates against hand-computed values (worked out with exact decimal
// arithmetic; the derivations are in the comments), schedules at their
// boundary steps, clipping, accumulation, the pass end to end on the
// reference backend, and torch.optim itself where python3-torch is installed.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"
#include "passes/Optimizer.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include "llvm/Support/JSON.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace ampc;
using namespace ampc::testing;

namespace {

TensorType vec(DType t, int64_t n) { return TensorType(t, {n}); }
TensorType scalarF32() { return TensorType(DType::F32, {}); }

/// Runs an update op for one gradient per step, wired as the pass wires it
/// (param, grad, state..., [step_count], lr): the state and the parameter
/// carry over, step_count is the step number (1-based). Returns the parameter
/// after each step; `state` holds the final state.
struct UpdateSequence {
  std::string op;
  DType dtype = DType::F64;
  AttrMap attrs;
  unsigned numState = 0;
  bool takesStepCount = false;
  double lr = 0.1;

  std::vector<std::vector<double>> run(std::vector<double> param,
                                       const std::vector<std::vector<double>> &grads,
                                       std::vector<std::vector<double>> *finalState = nullptr) {
    int64_t n = param.size();
    std::vector<std::vector<double>> state(numState, std::vector<double>(n, 0.0));
    std::vector<std::vector<double>> history;
    for (size_t t = 0; t < grads.size(); ++t) {
      std::vector<TensorType> types = {vec(dtype, n), vec(dtype, n)};
      std::vector<std::vector<double>> values = {param, grads[t]};
      for (unsigned s = 0; s < numState; ++s) {
        types.push_back(vec(dtype, n));
        values.push_back(state[s]);
      }
      if (takesStepCount) {
        types.push_back(scalarF32());
        values.push_back({double(t + 1)});
      }
      // f64 runs take an f64 lr so that 0.1 is not rounded to f32 first.
      types.push_back(TensorType(dtype == DType::F64 ? DType::F64 : DType::F32, {}));
      values.push_back({lr});
      KernelRun r = runKernel(op, types, values, attrs);
      EXPECT_TRUE(r.ok) << r.error;
      if (!r.ok)
        return history;
      param = r.outputs[0];
      for (unsigned s = 0; s < numState; ++s)
        state[s] = r.outputs[1 + s];
      history.push_back(param);
    }
    if (finalState)
      *finalState = state;
    return history;
  }
};

std::vector<double> column(const std::vector<std::vector<double>> &rows, size_t i) {
  std::vector<double> c;
  for (const auto &r : rows)
    c.push_back(r[i]);
  return c;
}

//===----------------------------------------------------------------------===//
// SGD
//===----------------------------------------------------------------------===//

TEST(OptimizerKernels, SgdPlainAndWeightDecay) {
  for (DType t : {DType::F64, DType::F32}) {
    UpdateSequence sgd{"sgd_update", t, {}, 0, false, 0.1};
    // p - 0.1 g: [1 - 0.05, -2 - 0.025, 0.5 + 0.1]
    EXPECT_TRUE(allClose(sgd.run({1, -2, 0.5}, {{0.5, 0.25, -1}})[0], {0.95, -2.025, 0.6},
                         defaultTolerance(t) / 10));
    // d_p = g + 0.1 p = [0.6, 0.05, -0.95]; p - 0.1 d_p
    sgd.attrs = {{"weight_decay", Attribute(0.1)}};
    EXPECT_TRUE(allClose(sgd.run({1, -2, 0.5}, {{0.5, 0.25, -1}})[0], {0.94, -2.005, 0.595},
                         defaultTolerance(t) / 10));
  }
}

// One element p = 1 with gradients 0.5, 0.25, 1 (the second element is the
// first times 2: without weight decay SGD is linear in (p, g)), lr 0.1.
TEST(OptimizerKernels, SgdMomentumThreeSteps) {
  std::vector<std::vector<double>> grads = {{0.5, 1.0}, {0.25, 0.5}, {1.0, 2.0}};
  struct Case {
    const char *name;
    AttrMap attrs;
    std::vector<double> expected;
  } cases[] = {
      // buf: 0.5 (a copy on the first step), 0.9*0.5 + 0.25 = 0.7,
      // 0.9*0.7 + 1 = 1.63; p: 0.95, 0.88, 0.717
      {"momentum", {{"momentum", Attribute(0.9)}}, {0.95, 0.88, 0.717}},
      // d = g + 0.9 buf: 0.95, 0.88, 2.467; p: 0.905, 0.817, 0.5703
      {"nesterov",
       {{"momentum", Attribute(0.9)}, {"nesterov", Attribute(true)}},
       {0.905, 0.817, 0.5703}},
      // The first buffer is not dampened: 0.5; then 0.45 + 0.5*0.25 = 0.575,
      // 0.5175 + 0.5 = 1.0175; p: 0.95, 0.8925, 0.79075
      {"dampening",
       {{"momentum", Attribute(0.9)}, {"dampening", Attribute(0.5)}},
       {0.95, 0.8925, 0.79075}},
  };
  for (const Case &c : cases)
    for (DType t : {DType::F64, DType::F32}) {
      SCOPED_TRACE(std::string(c.name) + " " + dtypeName(t).str());
      UpdateSequence sgd{"sgd_momentum_update", t, c.attrs, 1, true, 0.1};
      std::vector<std::vector<double>> state;
      auto history = sgd.run({1.0, 2.0}, grads, &state);
      ASSERT_EQ(history.size(), 3u);
      double tol = t == DType::F64 ? 1e-14 : 1e-6;
      EXPECT_TRUE(allClose(column(history, 0), c.expected, tol));
      std::vector<double> doubled;
      for (double v : c.expected)
        doubled.push_back(2 * v);
      EXPECT_TRUE(allClose(column(history, 1), doubled, tol));
    }
}

TEST(OptimizerKernels, SgdMomentumWeightDecay) {
  // d = g + 0.1 p: 0.5 + 0.1 = 0.6 -> buf 0.6, p 0.94;
  // d = 0.25 + 0.094 = 0.344 -> buf 0.54 + 0.344 = 0.884, p 0.94 - 0.0884 = 0.8516
  UpdateSequence sgd{"sgd_momentum_update",
                     DType::F64,
                     {{"momentum", Attribute(0.9)}, {"weight_decay", Attribute(0.1)}},
                     1,
                     true,
                     0.1};
  std::vector<std::vector<double>> state;
  auto history = sgd.run({1.0}, {{0.5}, {0.25}}, &state);
  EXPECT_TRUE(allClose(column(history, 0), {0.94, 0.8516}, 1e-14));
  EXPECT_TRUE(allClose(state[0], {0.884}, 1e-14));
}

//===----------------------------------------------------------------------===//
// Adam / AdamW: p = 1, gradients 0.5, 0.25, -1, lr 0.1, betas (0.9, 0.999),
// eps 1e-8. Step 1: m = 0.05, v = 0.00025, bias corrections 0.1 and 0.001,
// so the step is 1 * 0.05 / (sqrt(0.25) + 1e-8) = 0.099999998.
//===----------------------------------------------------------------------===//

TEST(OptimizerKernels, AdamAndAdamWThreeSteps) {
  std::vector<std::vector<double>> grads = {{0.5}, {0.25}, {-1.0}};
  struct Case {
    const char *name;
    AttrMap attrs;
    std::vector<double> params;
    std::vector<double> finalMoments; // exp_avg, exp_avg_sq after step 3
  } cases[] = {
      {"adam",
       {},
       {0.900000002, 0.80678204047746167, 0.82741774288541076},
       {-0.037, 0.00131193775}},
      // L2: the gradient becomes g + 0.1 p.
      {"adam_weight_decay",
       {{"weight_decay", Attribute(0.1)}},
       {0.90000000166666664, 0.80500976586131928, 0.81209826077867662},
       {-0.012749902326386807, 0.0013202432141722771}},
      // Decoupled: p *= 1 - 0.1 * 0.1 before the Adam step; moments as Adam's.
      {"adamw",
       {{"weight_decay", Attribute(0.1)}, {"decoupled_weight_decay", Attribute(true)}},
       {0.890000002, 0.78788204045746167, 0.80063892246083614},
       {-0.037, 0.00131193775}},
  };
  for (const Case &c : cases)
    for (DType t : {DType::F64, DType::F32}) {
      SCOPED_TRACE(std::string(c.name) + " " + dtypeName(t).str());
      UpdateSequence adam{"adam_update", t, c.attrs, 2, true, 0.1};
      std::vector<std::vector<double>> state;
      auto history = adam.run({1.0}, grads, &state);
      ASSERT_EQ(history.size(), 3u);
      double tol = t == DType::F64 ? 1e-13 : 1e-6;
      EXPECT_TRUE(allClose(column(history, 0), c.params, tol));
      EXPECT_TRUE(allClose({state[0][0], state[1][0]}, c.finalMoments, tol));
    }
}

TEST(OptimizerKernels, AdamBiasCorrectionFollowsTheStepCount) {
  // At step count 1 the first update has size lr (m / sqrt(v) = sign(g)),
  // whatever the gradient's magnitude; without bias correction (a large
  // count) it would be (1 - beta1) / sqrt(1 - beta2) = 3.16 times as large.
  for (double count : {1.0, 1e6}) {
    KernelRun r = runKernel("adam_update",
                            {vec(DType::F64, 2), vec(DType::F64, 2), vec(DType::F64, 2),
                             vec(DType::F64, 2), scalarF32(), scalarF32()},
                            {{0, 0}, {3.0, -1e-3}, {0, 0}, {0, 0}, {count}, {0.5}},
                            {{"eps", Attribute(1e-12)}});
    ASSERT_TRUE(r.ok) << r.error;
    double expected = count == 1 ? 0.5 : 0.5 * 0.1 / std::sqrt(0.001);
    EXPECT_NEAR(r.outputs[0][0], -expected, 1e-9) << "count " << count;
    EXPECT_NEAR(r.outputs[0][1], expected, 1e-6) << "count " << count;
  }
}

// FusedLAMB at step 1, by hand: p = [3, 4] (|p| 5), g = [6, 8] with the
// global norm 10 above max_grad_norm 5, so g / 2 = [3, 4]; bias-corrected
// moments give m / sqrt(v) = [1, 1]; adam_w_mode adds 0.5 p: u = [2.5, 3];
// the trust ratio makes the step lr |p| / |u| = lr x 5 / sqrt(15.25). Without
// weight decay (and no nvlamb) the step is lr.
TEST(OptimizerKernels, LambClipsByTheGlobalNormAndScalesByTheTrustRatio) {
  for (double decay : {0.5, 0.0}) {
    KernelRun r = runKernel("lamb_update",
                            {vec(DType::F64, 2), vec(DType::F64, 2), vec(DType::F64, 2),
                             vec(DType::F64, 2), scalarF32(), scalarF32(), scalarF32()},
                            {{3, 4}, {6, 8}, {0, 0}, {0, 0}, {1}, {10}, {0.125}},
                            {{"eps", Attribute(1e-12)},
                             {"weight_decay", Attribute(decay)},
                             {"max_grad_norm", Attribute(5.0)}});
    ASSERT_TRUE(r.ok) << r.error;
    std::vector<double> u = {1 + decay * 3, 1 + decay * 4};
    double step = decay ? 0.125 * 5 / std::sqrt(u[0] * u[0] + u[1] * u[1]) : 0.125;
    EXPECT_NEAR(r.outputs[0][0], 3 - step * u[0], 1e-9) << "decay " << decay;
    EXPECT_NEAR(r.outputs[0][1], 4 - step * u[1], 1e-9) << "decay " << decay;
    EXPECT_NEAR(r.outputs[1][0], 0.3, 1e-12);   // (1 - beta1) x 3
    EXPECT_NEAR(r.outputs[2][1], 0.016, 1e-12); // (1 - beta2) x 4^2
  }
}

// AveragedModel's EMA by hand: the first averaged step copies the
// parameter (whatever the average held), later ones take decay 0.75 of the
// average and 0.25 of the parameter; a skipped step, or a micro-step that
// only accumulates (accumulate 2, step 0), leaves the average as it was.
TEST(OptimizerKernels, EmaCopiesFirstThenAverages) {
  auto run = [](double count, double skip, uint64_t step, int64_t accumulate = 1) {
    return runKernel("ema_update",
                     {vec(DType::F64, 2), vec(DType::F64, 2), scalarF32(), scalarF32()},
                     {{4, -8}, {2, 8}, {count}, {skip}},
                     {{"decay", Attribute(0.75)}, {"accumulate", Attribute(accumulate)}}, step);
  };
  KernelRun first = run(1, 0, 0), later = run(3, 0, 0), skipped = run(3, 1, 0),
            accumulating = run(3, 0, 0, 2), applying = run(3, 0, 1, 2);
  for (const KernelRun *r : {&first, &later, &skipped, &accumulating, &applying})
    ASSERT_TRUE(r->ok) << r->error;
  EXPECT_EQ(first.outputs[0], (std::vector<double>{2, 8}));
  EXPECT_EQ(later.outputs[0], (std::vector<double>{3.5, -4}));
  EXPECT_EQ(skipped.outputs[0], (std::vector<double>{4, -8}));
  EXPECT_EQ(accumulating.outputs[0], (std::vector<double>{4, -8}));
  EXPECT_EQ(applying.outputs[0], (std::vector<double>{3.5, -4}));
  EXPECT_EQ(runKernel("ema_update", {vec(DType::F32, 1), vec(DType::F32, 1), scalarF32()},
                      {{0}, {0}, {1}}, {{"decay", Attribute(1.0)}})
                    .error.find("decay must be in [0, 1), got 1.0") != std::string::npos,
            true);
}

TEST(OptimizerKernels, HalfParameterWithF32Moments) {
  // bf16 parameter, f32 state: the math runs in f32 and the parameter is
  // rounded once. 1 - 0.099999998 = 0.900000002 rounds to bf16 0.8984375.
  KernelRun r = runKernel("adam_update",
                          {vec(DType::BF16, 1), vec(DType::BF16, 1), vec(DType::F32, 1),
                           vec(DType::F32, 1), scalarF32(), scalarF32()},
                          {{1.0}, {0.5}, {0}, {0}, {1}, {0.1}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.outputTypes[0].dtype(), DType::BF16);
  EXPECT_EQ(r.outputTypes[1].dtype(), DType::F32);
  EXPECT_DOUBLE_EQ(r.outputs[0][0], 0.8984375);
  EXPECT_FLOAT_EQ(r.outputs[1][0], 0.05f);
  EXPECT_FLOAT_EQ(r.outputs[2][0], 0.00025f);
}

//===----------------------------------------------------------------------===//
// grad_scale and skip (clipping now, loss scaling later)
//===----------------------------------------------------------------------===//

TEST(OptimizerKernels, GradScaleMultipliesTheGradient) {
  // grad_scale 0.5 on g = [1, -4]: p - 0.1 * 0.5 g
  KernelRun r =
      runKernel("sgd_update",
                {vec(DType::F64, 2), vec(DType::F64, 2), TensorType(DType::F64, {}), scalarF32()},
                {{1, 1}, {1, -4}, {0.1}, {0.5}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(allClose(r.outputs[0], {0.95, 1.2}, 1e-15));
}

TEST(OptimizerKernels, SkipLeavesEverythingUnchanged) {
  std::vector<TensorType> types = {vec(DType::F32, 2), vec(DType::F32, 2), vec(DType::F32, 2),
                                   vec(DType::F32, 2), scalarF32(),        scalarF32(),
                                   scalarF32(),        scalarF32()};
  std::vector<std::vector<double>> values = {{1, 2}, {INFINITY, 0.5}, {0.25, 0.5}, {0.125, 1},
                                             {3},    {0.1},           {1},         {1}};
  KernelRun skipped = runKernel("adam_update", types, values);
  ASSERT_TRUE(skipped.ok) << skipped.error;
  EXPECT_EQ(skipped.outputs[0], (std::vector<double>{1, 2}));
  EXPECT_EQ(skipped.outputs[1], (std::vector<double>{0.25, 0.5}));
  EXPECT_EQ(skipped.outputs[2], (std::vector<double>{0.125, 1}));
  // skip = 0: the update runs (and the inf gradient shows).
  values[7] = {0};
  KernelRun applied = runKernel("adam_update", types, values);
  ASSERT_TRUE(applied.ok) << applied.error;
  EXPECT_TRUE(std::isnan(applied.outputs[0][0]) || std::isinf(applied.outputs[0][0]));

  // The step count does not advance on a skipped step.
  KernelRun counter = runKernel("step_counter", {scalarF32(), scalarF32()}, {{4}, {1}});
  ASSERT_TRUE(counter.ok);
  EXPECT_EQ(counter.outputs[0][0], 4);
  counter = runKernel("step_counter", {scalarF32(), TensorType(DType::Bool, {})}, {{4}, {0}});
  ASSERT_TRUE(counter.ok) << counter.error;
  EXPECT_EQ(counter.outputs[0][0], 5);
}

//===----------------------------------------------------------------------===//
// Learning-rate schedules
//===----------------------------------------------------------------------===//

double lrAt(AttrMap attrs, uint64_t step) {
  KernelRun r = runKernel("learning_rate", {}, {}, std::move(attrs), step);
  EXPECT_TRUE(r.ok) << r.error;
  return r.ok ? r.outputs[0][0] : NAN;
}

TEST(OptimizerKernels, ConstantScheduleWithWarmup) {
  AttrMap constant = {{"lr", Attribute(0.1)}};
  EXPECT_FLOAT_EQ(lrAt(constant, 0), 0.1f);
  EXPECT_FLOAT_EQ(lrAt(constant, 1000000), 0.1f);
  AttrMap warm = {{"lr", Attribute(0.1)}, {"warmup_steps", Attribute(4)}};
  // (s + 1) / 4 of lr during warm-up, then lr.
  EXPECT_FLOAT_EQ(lrAt(warm, 0), 0.025f);
  EXPECT_FLOAT_EQ(lrAt(warm, 1), 0.05f);
  EXPECT_FLOAT_EQ(lrAt(warm, 3), 0.1f);
  EXPECT_FLOAT_EQ(lrAt(warm, 4), 0.1f);
}

TEST(OptimizerKernels, StepSchedule) {
  AttrMap step = {{"schedule", Attribute("step")},
                  {"lr", Attribute(1.0)},
                  {"step_size", Attribute(3)},
                  {"gamma", Attribute(0.5)}};
  EXPECT_EQ(lrAt(step, 0), 1.0);
  EXPECT_EQ(lrAt(step, 2), 1.0);
  EXPECT_EQ(lrAt(step, 3), 0.5);
  EXPECT_EQ(lrAt(step, 5), 0.5);
  EXPECT_EQ(lrAt(step, 6), 0.25);
  // With accumulation over 2 micro-batches, micro-step 5 is optimizer step 2
  // and micro-step 6 is optimizer step 3.
  step["accumulate"] = Attribute(2);
  EXPECT_EQ(lrAt(step, 5), 1.0);
  EXPECT_EQ(lrAt(step, 6), 0.5);
}

TEST(OptimizerKernels, CosineScheduleWithWarmup) {
  AttrMap cosine = {{"schedule", Attribute("cosine")},
                    {"lr", Attribute(1.0)},
                    {"min_lr", Attribute(0.1)},
                    {"warmup_steps", Attribute(2)},
                    {"total_steps", Attribute(6)}};
  EXPECT_FLOAT_EQ(lrAt(cosine, 0), 0.5f);
  EXPECT_FLOAT_EQ(lrAt(cosine, 1), 1.0f);
  EXPECT_FLOAT_EQ(lrAt(cosine, 2), 1.0f);         // t = 0 of a span of 4
  EXPECT_FLOAT_EQ(lrAt(cosine, 4), 0.55f);        // cos(pi/2) = 0: halfway
  EXPECT_FLOAT_EQ(lrAt(cosine, 5), 0.231801948f); // 0.1 + 0.45 (1 - sqrt(2)/2)
  EXPECT_FLOAT_EQ(lrAt(cosine, 6), 0.1f);
  EXPECT_FLOAT_EQ(lrAt(cosine, 100), 0.1f);
}

TEST(OptimizerKernels, ScheduleAttributesAreChecked) {
  KernelRun r = runKernel("learning_rate", {}, {},
                          {{"lr", Attribute(0.1)}, {"schedule", Attribute("linear")}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("unknown schedule 'linear'"), std::string::npos) << r.error;
  r = runKernel("learning_rate", {}, {},
                {{"lr", Attribute(0.1)},
                 {"schedule", Attribute("cosine")},
                 {"warmup_steps", Attribute(10)},
                 {"total_steps", Attribute(10)}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("must be greater than warmup_steps"), std::string::npos) << r.error;
}

// turn_skip: several optimizers on train.schedule; 1 where a step is not
// one of the optimizer's turns.
double offTurnAt(AttrMap attrs, uint64_t step) {
  KernelRun r = runKernel("turn_skip", {}, {}, std::move(attrs), step);
  EXPECT_TRUE(r.ok) << r.error;
  return r.ok ? r.outputs[0][0] : NAN;
}

TEST(OptimizerKernels, TurnSkipFollowsTheSchedule) {
  // A WGAN-like round of four: the critic on slots 0-2, the generator on 3.
  AttrMap critic = {{"period", Attribute(4)}, {"turns", Attribute(std::vector<int64_t>{0, 1, 2})}};
  AttrMap generator = {{"period", Attribute(4)}, {"turns", Attribute(std::vector<int64_t>{3})}};
  for (uint64_t step = 0; step < 12; ++step) {
    bool generatorsTurn = step % 4 == 3;
    EXPECT_EQ(offTurnAt(critic, step), generatorsTurn ? 1.0 : 0.0) << step;
    EXPECT_EQ(offTurnAt(generator, step), generatorsTurn ? 0.0 : 1.0) << step;
  }
  // With accumulation the turns count optimizer steps (groups of micro-steps).
  AttrMap first = {{"period", Attribute(2)},
                   {"turns", Attribute(std::vector<int64_t>{0})},
                   {"accumulate", Attribute(3)}};
  for (uint64_t step = 0; step < 12; ++step)
    EXPECT_EQ(offTurnAt(first, step), (step / 3) % 2 == 0 ? 0.0 : 1.0) << step;
  // A step far into a run (the step index is 64-bit).
  EXPECT_EQ(offTurnAt(generator, (uint64_t(1) << 40) + 3), 0.0);
}

TEST(OptimizerKernels, TurnSkipAttributesAreChecked) {
  KernelRun r =
      runKernel("turn_skip", {}, {},
                {{"period", Attribute(2)}, {"turns", Attribute(std::vector<int64_t>{2})}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("turn 2 is outside the period [0, 2)"), std::string::npos) << r.error;
  r = runKernel("turn_skip", {}, {},
                {{"period", Attribute(65)}, {"turns", Attribute(std::vector<int64_t>{0})}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("period must be in [1, 64]"), std::string::npos) << r.error;
  r = runKernel("turn_skip", {}, {},
                {{"period", Attribute(2)}, {"turns", Attribute(std::vector<int64_t>{})}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("turns must name at least one step"), std::string::npos) << r.error;
}

//===----------------------------------------------------------------------===//
// Clipping
//===----------------------------------------------------------------------===//

TEST(OptimizerKernels, GlobalNormAndClipCoefficient) {
  KernelRun norm = runKernel("global_norm", {vec(DType::F32, 2), TensorType(DType::F64, {1, 1})},
                             {{3, 4}, {12}});
  ASSERT_TRUE(norm.ok) << norm.error;
  EXPECT_EQ(norm.outputTypes[0], scalarF32());
  EXPECT_EQ(norm.outputs[0][0], 13);

  auto coef = [](double norm, double maxNorm, std::optional<double> scale = std::nullopt) {
    std::vector<TensorType> types = {scalarF32()};
    std::vector<std::vector<double>> values = {{norm}};
    if (scale) {
      types.push_back(scalarF32());
      values.push_back({*scale});
    }
    KernelRun r = runKernel("clip_coefficient", types, values, {{"max_norm", Attribute(maxNorm)}});
    EXPECT_TRUE(r.ok) << r.error;
    return r.ok ? r.outputs[0][0] : -1;
  };
  EXPECT_FLOAT_EQ(coef(13, 6.5), 0.5f); // 6.5 / (13 + 1e-6)
  EXPECT_NEAR(coef(13, 6.5), 6.5 / (13 + 1e-6), 1e-7);
  EXPECT_EQ(coef(13, 26), 1.0);          // never scales up
  EXPECT_TRUE(std::isnan(coef(NAN, 1))); // as torch.clamp: NaN stays NaN
  // With a grad_scale s the norm of the unscaled gradients is norm * s, and
  // the result includes s: 0.5 * min(1, 3.25 / 6.5).
  EXPECT_FLOAT_EQ(coef(13, 3.25, 0.5), 0.25f);
  EXPECT_FLOAT_EQ(coef(13, 13, 0.5), 0.5f);
}

//===----------------------------------------------------------------------===//
// Accumulation
//===----------------------------------------------------------------------===//

TEST(OptimizerKernels, AccumulateGradRestartsAndAveragesPerGroup) {
  AttrMap k3 = {{"accumulate", Attribute(3)}};
  std::vector<TensorType> types = {vec(DType::F32, 2), vec(DType::F32, 2)};
  std::vector<double> acc = {99, 99}; // stale: must be ignored at the start of a group
  std::vector<std::vector<double>> grads = {{1, 2}, {3, 4}, {5, 6}, {7, 8}};
  std::vector<std::vector<double>> expected = {{1, 2}, {4, 6}, {3, 4}, {7, 8}};
  for (uint64_t step = 0; step < grads.size(); ++step) {
    KernelRun r = runKernel("accumulate_grad", types, {acc, grads[step]}, k3, step);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.outputs[0], expected[step]) << "micro-step " << step;
    acc = r.outputs[0];
  }
}

TEST(OptimizerKernels, UpdatesApplyOnTheLastMicroStepOnly) {
  AttrMap k3 = {{"accumulate", Attribute(3)}, {"momentum", Attribute(0.9)}};
  std::vector<TensorType> types = {vec(DType::F32, 2), vec(DType::F32, 2), vec(DType::F32, 2),
                                   scalarF32(), scalarF32()};
  for (uint64_t step = 0; step < 6; ++step) {
    KernelRun r =
        runKernel("sgd_momentum_update", types, {{1, 2}, {1, 1}, {7, 7}, {1}, {0.5}}, k3, step);
    ASSERT_TRUE(r.ok) << r.error;
    bool last = step % 3 == 2;
    std::vector<double> param = {1, 2}, buffer = {7, 7};
    if (last)
      param = {0.5, 1.5}, buffer = {1, 1};
    EXPECT_EQ(r.outputs[0], param) << "micro-step " << step;
    EXPECT_EQ(r.outputs[1], buffer);
    KernelRun counter =
        runKernel("step_counter", {scalarF32()}, {{2}}, {{"accumulate", Attribute(3)}}, step);
    ASSERT_TRUE(counter.ok);
    EXPECT_EQ(counter.outputs[0][0], last ? 3 : 2);
  }
}

TEST(OptimizerOps, UpdateOperandsAreChecked) {
  KernelRun r = runKernel("adam_update",
                          {vec(DType::F32, 2), vec(DType::F32, 2), vec(DType::F32, 3),
                           vec(DType::F32, 2), scalarF32(), scalarF32()},
                          {{1, 1}, {1, 1}, {0, 0, 0}, {0, 0}, {1}, {0.1}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("exp_avg and param must have the same shape"), std::string::npos)
      << r.error;
  r = runKernel("sgd_update", {vec(DType::F32, 2), vec(DType::F32, 2), vec(DType::F32, 2)},
                {{1, 1}, {1, 1}, {0.1, 0.1}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("lr must have 0 dims"), std::string::npos) << r.error;
  r = runKernel(
      "sgd_momentum_update",
      {vec(DType::F32, 1), vec(DType::F32, 1), vec(DType::F32, 1), scalarF32(), scalarF32()},
      {{1}, {1}, {0}, {1}, {0.1}},
      {{"momentum", Attribute(0.9)}, {"nesterov", Attribute(true)}, {"dampening", Attribute(0.1)}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("nesterov momentum needs dampening 0"), std::string::npos) << r.error;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// A linear layer with an mse loss on a batch of `batch`, with `meta`.
std::string tinyModel(int batch, const std::string &meta) {
  std::string b = std::to_string(batch);
  return "graph @tiny {\n  meta {" + meta +
         "}\n"
         "  input %x : f32[" +
         b +
         ",3]\n"
         "  input %y : f32[" +
         b +
         ",2]\n"
         "  param %fc.weight : f32[2,3] init uniform(-0.5, 0.5)\n"
         "  param %fc.bias : f32[2] init uniform(-0.5, 0.5)\n"
         "  %fc = linear(%x, %fc.weight, %fc.bias) : (f32[" +
         b + ",3], f32[2,3], f32[2]) -> f32[" + b +
         ",2]\n"
         "  %loss = mse_loss(%fc, %y) : (f32[" +
         b + ",2], f32[" + b +
         ",2]) -> f32[] role(loss)\n"
         "  output %loss\n}\n";
}

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const auto &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

/// Parses, runs the passes (names joined by ','), verifies. nullptr on failure
/// with the diagnostics in `error`.
std::unique_ptr<Graph> lower(const std::string &text, bool withOptimizer, std::string &error) {
  DiagnosticEngine diag;
  auto g = parseGraph(text, "tiny.ir", diag);
  if (!g) {
    error = diagText(diag);
    return nullptr;
  }
  PassContext ctx{diag};
  AutodiffPass autodiff;
  OptimizerPass optimizer;
  if (autodiff.run(*g, ctx) == PassResult::Failed ||
      (withOptimizer && optimizer.run(*g, ctx) == PassResult::Failed) || !verifyGraph(*g, diag)) {
    error = diagText(diag);
    return nullptr;
  }
  return g;
}

std::string passError(const std::string &text, bool runAutodiff = true) {
  DiagnosticEngine diag;
  auto g = parseGraph(text, "tiny.ir", diag);
  if (!g)
    return "parse failed: " + diagText(diag);
  PassContext ctx{diag};
  if (runAutodiff && AutodiffPass().run(*g, ctx) == PassResult::Failed)
    return "autodiff failed: " + diagText(diag);
  if (OptimizerPass().run(*g, ctx) != PassResult::Failed)
    return "<the pass succeeded>";
  return diagText(diag);
}

std::vector<double> read(const Program &p, const Value *v) {
  const void *data = p.data(v);
  std::vector<double> out(v->type().numElements());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = kernels::loadAsDouble(v->dtype(), data, i);
  return out;
}

void write(const Program &p, const Value *v, const std::vector<double> &values) {
  ASSERT_EQ(values.size(), static_cast<size_t>(v->type().numElements()));
  for (size_t i = 0; i < values.size(); ++i)
    kernels::storeFromDouble(v->dtype(), p.data(v), i, values[i]);
}

/// Rows [first, first + count) of the deterministic data set, `width` wide.
std::vector<double> rows(int first, int count, int width, uint64_t stream) {
  std::vector<double> v;
  for (int r = first; r < first + count; ++r)
    for (int c = 0; c < width; ++c)
      v.push_back(-1 + 2 * kernels::uniform01Double(42, stream, r * width + c));
  return v;
}

TEST(OptimizerPass, CreatesStateUpdatesAndOutputs) {
  std::string error;
  auto g = lower(tinyModel(2, "optimizer = \"adamw\", optimizer.lr = 0.01, "
                              "train.accumulate = 2, train.clip_grad_norm = 1.0"),
                 true, error);
  ASSERT_TRUE(g) << error;
  std::vector<std::string> optState;
  for (const Value *v : g->state(StateKind::OptimizerState)) {
    optState.push_back(v->name().str());
    EXPECT_EQ(v->init().kind, InitSpec::Kind::Zeros);
  }
  EXPECT_EQ(optState, (std::vector<std::string>{"optimizer.step", "fc.weight.grad_accum",
                                                "fc.bias.grad_accum", "fc.weight.exp_avg",
                                                "fc.weight.exp_avg_sq", "fc.bias.exp_avg",
                                                "fc.bias.exp_avg_sq"}));
  std::vector<std::string> outputs;
  for (const Value *v : g->outputs())
    outputs.push_back(v->name().str());
  EXPECT_EQ(outputs, (std::vector<std::string>{"loss", "lr", "grad_norm"}));
  // Both parameters, their moments and accumulators, and the step count.
  EXPECT_EQ(g->stateUpdates().size(), 9u);
  const Node *update = g->lookup("fc.weight.next")->definingNode();
  EXPECT_EQ(update->kind(), OpKind::AdamUpdate);
  EXPECT_EQ(update->role(), NodeRole::Optimizer);
  EXPECT_TRUE(update->attr("decoupled_weight_decay").getBool());
  EXPECT_EQ(update->attr("weight_decay").getFloat(), 0.01); // AdamW's default
  EXPECT_EQ(update->operand(1)->name(), "fc.weight.grad_accum.next");
  EXPECT_EQ(update->operand(6)->name(), "grad_clip_coef");
}

TEST(OptimizerPass, FrozenParametersGetNoState) {
  std::string text =
      tinyModel(2, "optimizer = \"sgd\", optimizer.lr = 0.1, optimizer.momentum = 0.9");
  text.replace(text.find("%fc.bias : f32[2]"), 17, "%fc.bias : f32[2] frozen");
  std::string error;
  auto g = lower(text, true, error);
  ASSERT_TRUE(g) << error;
  EXPECT_TRUE(g->lookup("fc.weight.momentum_buffer"));
  EXPECT_FALSE(g->lookup("fc.bias.momentum_buffer"));
  EXPECT_FALSE(g->lookup("fc.bias.next"));
}

TEST(OptimizerPass, ReportsMissingConfigurationAndGradients) {
  EXPECT_NE(passError(tinyModel(2, "model = \"tiny\""))
                .find("optimizer: the graph's meta has no 'optimizer'"),
            std::string::npos);
  EXPECT_NE(passError(tinyModel(2, "optimizer = \"sgd\"")).find("no 'optimizer.lr'"),
            std::string::npos);
  EXPECT_NE(passError(tinyModel(2, "optimizer = \"rmsprop\"")).find("unknown optimizer 'rmsprop'"),
            std::string::npos);
  EXPECT_NE(passError(tinyModel(2, "optimizer = \"adam\""), /*runAutodiff=*/false)
                .find("no parameter gradients (run autodiff first)"),
            std::string::npos);
  EXPECT_NE(passError(tinyModel(2, "optimizer = \"adam\", train.lr_schedule = \"cosine\""))
                .find("cosine schedule needs the number of steps"),
            std::string::npos);
}

TEST(OptimizerPass, OneSgdStepSubtractsLrTimesTheGradient) {
  std::string meta = "optimizer = \"sgd\", optimizer.lr = 0.1";
  std::string error;
  auto gradsOnly = lower(tinyModel(4, meta), false, error);
  ASSERT_TRUE(gradsOnly) << error;
  auto trained = lower(tinyModel(4, meta), true, error);
  ASSERT_TRUE(trained) << error;
  auto backend = createCpuRefBackend();
  DiagnosticEngine diag;
  auto p0 = Program::compile(*gradsOnly, *backend, diag);
  auto p1 = Program::compile(*trained, *backend, diag);
  ASSERT_TRUE(p0 && p1) << diagText(diag);
  for (const char *param : {"fc.weight", "fc.bias"})
    write(*p1, trained->lookup(param), read(*p0, gradsOnly->lookup(param)));
  for (auto [p, g] : {std::pair{p0.get(), gradsOnly.get()}, std::pair{p1.get(), trained.get()}}) {
    write(*p, g->lookup("x"), rows(0, 4, 3, 1));
    write(*p, g->lookup("y"), rows(0, 4, 2, 2));
    p->run(0);
  }
  EXPECT_FLOAT_EQ(read(*p1, trained->lookup("lr"))[0], 0.1f);
  for (const char *param : {"fc.weight", "fc.bias"}) {
    std::vector<double> before = read(*p0, gradsOnly->lookup(param));
    std::vector<double> grad = read(*p0, gradsOnly->lookup(gradientName(param)));
    std::vector<double> expected;
    for (size_t i = 0; i < before.size(); ++i)
      expected.push_back(before[i] - 0.1 * grad[i]);
    EXPECT_TRUE(allClose(read(*p1, trained->lookup(param)), expected, 1e-6)) << param;
  }
}

// Accumulating 3 micro-batches of 2 rows is one step on their mean gradient:
// the same as one step on the batch of 6 rows (mse_loss is a mean).
TEST(OptimizerPass, AccumulationEqualsOneStepOnTheMeanGradient) {
  for (const char *optimizer :
       {"optimizer = \"sgd\", optimizer.lr = 0.1, optimizer.momentum = 0.9",
        "optimizer = \"adam\", optimizer.lr = 0.01, train.clip_grad_norm = 0.05"}) {
    SCOPED_TRACE(optimizer);
    std::string error;
    auto micro =
        lower(tinyModel(2, std::string(optimizer) + ", train.accumulate = 3"), true, error);
    ASSERT_TRUE(micro) << error;
    auto big = lower(tinyModel(6, optimizer), true, error);
    ASSERT_TRUE(big) << error;
    auto backend = createCpuRefBackend();
    DiagnosticEngine diag;
    auto pm = Program::compile(*micro, *backend, diag);
    auto pb = Program::compile(*big, *backend, diag);
    ASSERT_TRUE(pm && pb) << diagText(diag);
    const char *params[] = {"fc.weight", "fc.bias"};
    for (const char *param : params)
      write(*pb, big->lookup(param), read(*pm, micro->lookup(param)));

    for (int step = 0; step < 2; ++step) {
      std::vector<std::vector<double>> before;
      for (const char *param : params)
        before.push_back(read(*pm, micro->lookup(param)));
      for (int k = 0; k < 3; ++k) {
        int micro_step = step * 3 + k;
        write(*pm, micro->lookup("x"), rows(micro_step * 2, 2, 3, 1));
        write(*pm, micro->lookup("y"), rows(micro_step * 2, 2, 2, 2));
        pm->run(micro_step);
        if (k == 2)
          continue;
        for (size_t i = 0; i < 2; ++i)
          EXPECT_EQ(read(*pm, micro->lookup(params[i])), before[i])
              << params[i] << " changed on micro-step " << micro_step;
      }
      write(*pb, big->lookup("x"), rows(step * 6, 6, 3, 1));
      write(*pb, big->lookup("y"), rows(step * 6, 6, 2, 2));
      pb->run(step);
      for (size_t i = 0; i < 2; ++i) {
        std::vector<double> after = read(*pm, micro->lookup(params[i]));
        EXPECT_NE(after, before[i]) << params[i] << " did not change on step " << step;
        EXPECT_TRUE(allClose(after, read(*pb, big->lookup(params[i])), 1e-6))
            << params[i] << " after optimizer step " << step;
      }
      if (big->lookup("grad_norm")) {
        EXPECT_NEAR(read(*pm, micro->lookup("grad_norm"))[0],
                    read(*pb, big->lookup("grad_norm"))[0], 1e-6);
      }
    }
    if (micro->lookup("optimizer.step")) {
      EXPECT_EQ(read(*pm, micro->lookup("optimizer.step"))[0], 2);
    }
  }
}

//===----------------------------------------------------------------------===//
// Against torch.optim (tests/pytorch/optimizer_reference.py)
//===----------------------------------------------------------------------===//

const char *kTorchPython = "/usr/bin/python3";

/// The script's JSON, or nullopt (with `why`) when torch is not available.
std::optional<llvm::json::Value> torchReference(std::string &why) {
  std::string probe = std::string(kTorchPython) + " -c 'import torch' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    why = "python3-torch is not installed for /usr/bin/python3";
    return std::nullopt;
  }
  std::string cmd =
      std::string(kTorchPython) + " " + AMPC_SOURCE_DIR + "/tests/pytorch/optimizer_reference.py";
  FILE *pipe = popen(cmd.c_str(), "r");
  if (!pipe) {
    why = "cannot run " + cmd;
    return std::nullopt;
  }
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe))
    text.append(buf, n);
  int status = pclose(pipe);
  if (status != 0) {
    why = "the reference script failed: " + text;
    return std::nullopt;
  }
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed) {
    why = "bad JSON: " + llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  return std::move(*parsed);
}

std::vector<double> numbers(const llvm::json::Value *v) {
  std::vector<double> out;
  if (const llvm::json::Array *a = v ? v->getAsArray() : nullptr)
    for (const llvm::json::Value &e : *a)
      out.push_back(e.getAsNumber().getValueOr(NAN));
  return out;
}

std::vector<std::vector<double>> numberRows(const llvm::json::Value *v) {
  std::vector<std::vector<double>> out;
  if (const llvm::json::Array *a = v ? v->getAsArray() : nullptr)
    for (const llvm::json::Value &e : *a)
      out.push_back(numbers(&e));
  return out;
}

class PyTorchReference : public ::testing::Test {
protected:
  // The script runs once for the suite (starting torch takes seconds).
  static void SetUpTestSuite() { reference_ = torchReference(why_); }
  static void TearDownTestSuite() { reference_.reset(); }
  void SetUp() override {
    if (!reference_) {
      if (why_.rfind("python3-torch", 0) == 0)
        GTEST_SKIP() << why_;
      FAIL() << why_;
    }
    root_ = reference_->getAsObject();
    ASSERT_TRUE(root_);
  }
  static std::optional<llvm::json::Value> reference_;
  static std::string why_;
  const llvm::json::Object *root_ = nullptr;
};
std::optional<llvm::json::Value> PyTorchReference::reference_;
std::string PyTorchReference::why_;

TEST_F(PyTorchReference, OptimizersMatchTorchOptim) {
  std::vector<double> params = numbers(root_->get("params"));
  std::vector<std::vector<double>> grads = numberRows(root_->get("grads"));
  const llvm::json::Object *cases = root_->getObject("cases");
  ASSERT_TRUE(cases && !params.empty() && grads.size() == 3);
  int checked = 0;
  for (const auto &[name, value] : *cases) {
    SCOPED_TRACE(name.str());
    const llvm::json::Object *c = value.getAsObject();
    const llvm::json::Object *s = c->getObject("settings");
    std::string kind = c->getString("kind").getValueOr("").str();
    auto setting = [&](llvm::StringRef key, double def) {
      return s->getNumber(key).getValueOr(def);
    };
    UpdateSequence seq;
    seq.dtype = DType::F32;
    seq.lr = setting("lr", 0);
    if (kind == "sgd") {
      seq.attrs["weight_decay"] = Attribute(setting("weight_decay", 0));
      if (setting("momentum", 0) != 0) {
        seq.op = "sgd_momentum_update";
        seq.numState = 1;
        seq.takesStepCount = true;
        seq.attrs["momentum"] = Attribute(setting("momentum", 0));
        seq.attrs["dampening"] = Attribute(setting("dampening", 0));
        seq.attrs["nesterov"] = Attribute(s->getBoolean("nesterov").getValueOr(false));
      } else {
        seq.op = "sgd_update";
      }
    } else {
      seq.op = "adam_update";
      seq.numState = 2;
      seq.takesStepCount = true;
      for (const char *key : {"beta1", "beta2", "eps", "weight_decay"})
        seq.attrs[key] = Attribute(setting(key, 0));
      seq.attrs["decoupled_weight_decay"] = Attribute(kind == "adamw");
    }
    std::vector<std::vector<double>> expected = numberRows(c->get("params"));
    std::vector<std::vector<double>> ours = seq.run(params, grads);
    ASSERT_EQ(ours.size(), expected.size());
    for (size_t t = 0; t < ours.size(); ++t)
      EXPECT_TRUE(allClose(ours[t], expected[t], 1e-6)) << "after step " << t + 1;
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

TEST_F(PyTorchReference, ClippingMatchesClipGradNorm) {
  const llvm::json::Object *clip = root_->getObject("clip");
  ASSERT_TRUE(clip);
  std::vector<std::vector<double>> grads = numberRows(clip->get("grads"));
  std::vector<std::vector<double>> clipped = numberRows(clip->get("clipped"));
  ASSERT_EQ(grads.size(), 2u);
  KernelRun norm = runKernel(
      "global_norm", {vec(DType::F32, grads[0].size()), vec(DType::F32, grads[1].size())}, grads);
  ASSERT_TRUE(norm.ok) << norm.error;
  double total = clip->getNumber("total_norm").getValueOr(NAN);
  EXPECT_NEAR(norm.outputs[0][0], total, 1e-6 * total);
  KernelRun coef =
      runKernel("clip_coefficient", {scalarF32()}, {norm.outputs[0]},
                {{"max_norm", Attribute(clip->getNumber("max_norm").getValueOr(NAN))}});
  ASSERT_TRUE(coef.ok) << coef.error;
  // The update multiplies each gradient by the coefficient (grad_scale).
  for (size_t t = 0; t < 2; ++t)
    for (size_t i = 0; i < grads[t].size(); ++i)
      EXPECT_NEAR(float(grads[t][i]) * float(coef.outputs[0][0]), clipped[t][i], 1e-7);
}

TEST_F(PyTorchReference, SchedulesMatchTorchSchedulers) {
  const llvm::json::Object *schedules = root_->getObject("schedules");
  ASSERT_TRUE(schedules);
  int checked = 0;
  for (const auto &[name, value] : *schedules) {
    SCOPED_TRACE(name.str());
    const llvm::json::Object *s = value.getAsObject()->getObject("settings");
    AttrMap attrs;
    for (const auto &[key, v] : *s) {
      if (auto str = v.getAsString())
        attrs[key.str()] = Attribute(str->str());
      else if (auto i = v.getAsInteger(); i && key != "lr" && key != "gamma" && key != "min_lr")
        attrs[key.str()] = Attribute(*i);
      else
        attrs[key.str()] = Attribute(v.getAsNumber().getValueOr(NAN));
    }
    std::vector<double> expected = numbers(value.getAsObject()->get("lr"));
    for (size_t step = 0; step < expected.size(); ++step)
      EXPECT_NEAR(lrAt(attrs, step), expected[step], 1e-6 * std::abs(expected[step]) + 1e-9)
          << "step " << step;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

} // namespace
