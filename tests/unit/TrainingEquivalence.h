//===- TrainingEquivalence.h - One training step on a backend vs cpu-ref -*- C++ -*-===//
//
// The harness of the whole-step equivalence tests (CudaEquivalenceTest.cpp,
// CpuTrainingEquivalenceTest.cpp): an example model built at a level for a
// backend, trained one optimizer step at a time from the reference's state,
// each step's parameter update compared with the reference backend's.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TESTS_UNIT_TRAININGEQUIVALENCE_H
#define AMPC_TESTS_UNIT_TRAININGEQUIVALENCE_H

#include "frontends/yaml/ModelLoader.h"
#include "kernels/common/Storage.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"
#include "runtime/train/Trainer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ampc::testing::training {

/// |a - b| <= tol * max(1, |b|), NaN matching NaN.
inline bool closeWithin(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b));
}

struct Training {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Program> program;
  std::unique_ptr<DataSource> data;
  TrainResult result;
  int64_t microSteps = 1; ///< micro-batches per optimizer step

  std::string firstError() const {
    return diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str();
  }
  /// `policy`: further precision-policy overrides (half_type,
  /// loss_scale.init, ...); `accumulate`: micro-steps per optimizer step.
  bool build(const std::string &model, int64_t batch, const char *level, Backend &backend,
             const std::vector<std::pair<std::string, std::string>> &policy = {},
             int64_t accumulate = 1) {
    LoadOptions load;
    load.batchOverride = batch;
    graph = loadModelFile(std::string(AMPC_SOURCE_DIR) + "/examples/" + model, diag, load);
    if (!graph || !setPolicyOverride(graph->meta(), "opt_level", level, diag))
      return false;
    for (const auto &[property, value] : policy)
      if (!setPolicyOverride(graph->meta(), property, value, diag))
        return false;
    if (accumulate > 1)
      graph->meta()["train.accumulate"] = Attribute(accumulate);
    microSteps = accumulate;
    PassManager pm;
    if (!addStandardPipeline(pm, PipelineStage::Train, diag) || !pm.run(*graph, diag))
      return false;
    program = Program::compile(*graph, backend, diag);
    data = createDataSource(*graph, std::string(AMPC_SOURCE_DIR) + "/examples", diag);
    return program && data;
  }
  bool train(int64_t steps, std::string &err) {
    TrainOptions t;
    t.steps = steps;
    t.accumulate = microSteps;
    t.progress = ProgressStyle::None;
    t.logEvery = 0;
    Trainer trainer(*program, *data, batchOptionsFromMeta(*graph), std::move(t));
    std::string log;
    llvm::raw_string_ostream os(log);
    return trainer.run(os, result, err);
  }
  std::vector<double> values(const Value *v) const {
    const Program &p = *program;
    // One host view for the whole tensor: on a device, each data() call
    // copies the tensor to the host, and one per element made this test
    // quadratic (ten minutes for the MLP's weights).
    const void *data = p.data(v);
    std::vector<double> out(v->type().numElements());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = kernels::loadAsDouble(v->dtype(), data, static_cast<int64_t>(i));
    return out;
  }
};

/// Every parameter, flattened; its f32 master copy where it has one (O2),
/// whose updates the half parameter only rounds.
inline std::vector<double> parameters(const Training &t) {
  std::vector<double> all;
  for (const Value *v : t.graph->state(StateKind::Parameter)) {
    if (const Value *master = t.graph->lookup(v->name().str() + ".master"))
      v = master;
    std::vector<double> values = t.values(v);
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

inline double norm(const std::vector<double> &v) {
  double sum = 0;
  for (double x : v)
    sum += x * x;
  return std::sqrt(sum);
}

/// ||got - want|| / ||want||; want the reference's.
inline double relativeError(const std::vector<double> &got, const std::vector<double> &want) {
  std::vector<double> diff(want.size());
  for (size_t i = 0; i < want.size(); ++i)
    diff[i] = got[i] - want[i];
  double scale = norm(want);
  return scale > 0 ? norm(diff) / scale : norm(diff);
}

inline std::vector<double> minus(const std::vector<double> &a, const std::vector<double> &b) {
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    d[i] = a[i] - b[i];
  return d;
}

/// Overwrites every state tensor of `to` with `from`'s (same graph).
inline void copyState(const Training &from, Training &to) {
  const Program &source = *from.program;
  for (const Value *v : from.graph->state()) {
    const Value *w = to.graph->lookup(v->name());
    ASSERT_TRUE(w && w->type() == v->type()) << v->name().str();
    std::memcpy(to.program->dataToOverwrite(w), source.data(v),
                static_cast<size_t>(v->type().sizeInBytes()));
  }
}

/// Per parameter element, how much its update matters: |Adam's first
/// moment| (a running mean of the gradient) where the parameter has one,
/// else 1 (SGD, whose update is proportional to the gradient already).
/// Adam divides each gradient element by its own RMS, so an element whose
/// gradient is rounding noise moves by about the learning rate in a random
/// direction: a convolution's bias followed by batchnorm, whose gradient is
/// zero in exact arithmetic, moves by +-lr on the device and the reference
/// alike but with unrelated signs. Weighting by the gradient's size keeps
/// such elements from deciding the comparison.
inline std::vector<double> updateWeights(const Training &t) {
  std::vector<double> weights;
  for (const Value *v : t.graph->state(StateKind::Parameter)) {
    const Value *moment = t.graph->lookup(v->name().str() + ".exp_avg");
    int64_t n = v->type().numElements();
    if (!moment || moment->type().numElements() != n) {
      weights.insert(weights.end(), static_cast<size_t>(n), 1.0);
      continue;
    }
    for (double m : t.values(moment))
      weights.push_back(std::fabs(m));
  }
  return weights;
}

/// sum w |got - want| / sum w |want|: 0 for the reference's update, 1 for
/// no update at all.
inline double weightedRelativeError(const std::vector<double> &got, const std::vector<double> &want,
                                    const std::vector<double> &weights) {
  double error = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    error += weights[i] * std::fabs(got[i] - want[i]);
    scale += weights[i] * std::fabs(want[i]);
  }
  return scale > 0 ? error / scale : error;
}

/// How far one optimizer step's parameter update on the device may be from
/// the reference's, relative to the update's size: far under 1, so a step
/// that does not move the weights (a broken optimizer, master refresh or
/// skip) fails. f32 differs by summation order; half levels by the rounding
/// of half activations and gradients (bf16 keeps 8 bits, f16 11).
inline double updateTolerance(const char *level, const std::string &halfType) {
  if (std::string(level) == "O0")
    return 1e-3;
  return halfType == "f16" ? 0.05 : 0.15;
}

/// Trains `steps` optimizer steps one at a time on the reference and the
/// backend under test (`device`, named `deviceName` in the printed margins)
/// from the same initial state, and compares each step's update.
/// `expectAllOnDevice`: no host fallback nodes, and replayed CUDA graphs.
inline void expectUpdatesTrack(Backend &device, const char *deviceName, const char *model,
                               const char *level, const std::string &halfType, int64_t accumulate,
                               int steps, bool expectAllOnDevice) {
  std::unique_ptr<Backend> ref = createCpuRefBackend();
  std::vector<std::pair<std::string, std::string>> policy = {{"half_type", halfType}};
  // f16's default initial scale (2^16) overflows the MLP's first steps: a
  // smaller one makes every step an update to compare (skips have their
  // own test below).
  if (halfType == "f16" && std::string(level) != "O0")
    policy.push_back({"loss_scale.init", "128"});
  Training want, got;
  ASSERT_TRUE(want.build(model, 4, level, *ref, policy, accumulate)) << want.firstError();
  ASSERT_TRUE(got.build(model, 4, level, device, policy, accumulate)) << got.firstError();
  ASSERT_EQ(parameters(want), parameters(got)) << "the initial states differ";
  double tol = updateTolerance(level, halfType);
  bool mixed = std::string(level) != "O0";
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    // Every step from the reference's state (weights, masters, optimizer
    // moments, loss scale, running statistics): one step's arithmetic is
    // compared, not trajectories that drift apart.
    copyState(want, got);
    std::vector<double> wantBefore = parameters(want), gotBefore = parameters(got);
    std::string err;
    ASSERT_TRUE(want.train(1, err)) << err;
    ASSERT_TRUE(got.train(1, err)) << err;
    EXPECT_EQ(got.result.skippedSteps, want.result.skippedSteps);
    EXPECT_TRUE(closeWithin(got.result.finalLoss, want.result.finalLoss, mixed ? 2e-2 : 1e-4))
        << got.result.finalLoss << " vs " << want.result.finalLoss;
    std::vector<double> wantUpdate = minus(parameters(want), wantBefore);
    std::vector<double> gotUpdate = minus(parameters(got), gotBefore);
    if (want.result.skippedSteps > 0) {
      EXPECT_EQ(norm(gotUpdate), 0) << "the reference skipped the step, the device did not";
      continue;
    }
    ASSERT_GT(norm(wantUpdate), 0) << "the reference's step did not move the weights";
    double error = weightedRelativeError(gotUpdate, wantUpdate, updateWeights(want));
    // Printed so that a run on a GPU shows the margins.
    std::printf("[ update   ] %s %s %s accumulate %lld step %d: sum w|d_%s - d_ref| / "
                "sum w|d_ref| = %.3g (tolerance %.3g)\n",
                model, level, halfType.c_str(), static_cast<long long>(accumulate), step,
                deviceName, error, tol);
    EXPECT_LT(error, tol);
  }
  if (!expectAllOnDevice)
    return;
  const DeviceActivity &activity = got.program->deviceActivity();
  std::printf("[ device   ] %u host fallback nodes; %llu eager, %llu captured, %llu replayed\n",
              activity.hostFallbackNodes, static_cast<unsigned long long>(activity.eagerSteps),
              static_cast<unsigned long long>(activity.capturedSteps),
              static_cast<unsigned long long>(activity.replayedSteps));
  EXPECT_EQ(activity.hostFallbackNodes, 0u)
      << "on the host: " << llvm::join(activity.hostFallbackOps, ", ");
  if (steps * accumulate > 2)
    EXPECT_GT(activity.replayedSteps, 0u) << "the step was never replayed from a CUDA graph";
}

} // namespace ampc::testing::training

#endif
