//===- RefNormalizationTest.cpp - Reference batchnorm2d and layernorm -----===//
//
// Hand-computed normalisations (PyTorch's conventions: biased variance to
// normalise, unbiased variance and momentum 0.1 for the running statistics,
// eps 1e-5), f32 per-channel operands under half inputs, random inputs in
// f32/f16/bf16 against f64, and bit-exact f16/bf16 emulation.
//
//===----------------------------------------------------------------------===//
#include "RefCaseUtil.h"

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using namespace ampc::testing::refcases;

// --- batchnorm2d -----------------------------------------------------------------

/// Input [N, C, H, W] and four [C] operands; the per-channel ones in
/// `paramType` when given (keep_batchnorm_fp32), else in the input's dtype.
std::vector<TensorType> batchNormTypes(DType t, std::initializer_list<int64_t> dims,
                                       std::optional<DType> paramType = std::nullopt) {
  TensorType x(t, dims);
  TensorType param(paramType.value_or(t), {x.dim(1)});
  return {x, param, param, param, param};
}

// [N=2, C=2, H=1, W=2]. Channel 0 holds 0, 0, 2, 2 (mean 1, biased variance
// 1, unbiased 4/3); channel 1 holds 10, 14, 10, 14 (mean 12, variance 4,
// unbiased 16/3).
const std::vector<double> kBatchInput = {0, 0, 10, 14, 2, 2, 10, 14};
const std::vector<double> kWeight = {2, 1}, kBias = {0.5, 0}, kRunningMean = {0, 5},
                          kRunningVar = {1, 2};

TEST(RefBatchNorm2d, HandComputedTraining) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    double tol = defaultTolerance(t); // 0.1 and thirds are inexact below f64
    Values inputs = {kBatchInput, kWeight, kBias, kRunningMean, kRunningVar};
    // y = (x - mean) / sqrt(var) * weight + bias with eps 0; running stats
    // (1 - 0.1) * old + 0.1 * batch stat, the variance unbiased.
    expectResults("batchnorm2d", batchNormTypes(t, {2, 2, 1, 2}), inputs, {{"eps", 0.0}},
                  {{-1.5, -1.5, -1, 1, 2.5, 2.5, -1, 1},
                   {0.1, 0.9 * 5 + 1.2},
                   {0.9 + 0.4 / 3, 1.8 + 1.6 / 3}},
                  tol);
    // momentum 1 replaces the running stats by the batch's (unbiased) ones.
    expectResults("batchnorm2d", batchNormTypes(t, {2, 2, 1, 2}), inputs,
                  {{"eps", 0.0}, {"momentum", 1.0}},
                  {{-1.5, -1.5, -1, 1, 2.5, 2.5, -1, 1}, {1, 12}, {4.0 / 3, 16.0 / 3}}, tol);
  }
}

TEST(RefBatchNorm2d, DefaultEpsAndMomentum) {
  Values inputs = {kBatchInput, kWeight, kBias, kRunningMean, kRunningVar};
  double s0 = 1 / std::sqrt(1 + 1e-5), s1 = 1 / std::sqrt(4 + 1e-5);
  std::vector<double> y = {-2 * s0 + 0.5, -2 * s0 + 0.5, -2 * s1, 2 * s1,
                           2 * s0 + 0.5,  2 * s0 + 0.5,  -2 * s1, 2 * s1};
  expectResults("batchnorm2d", batchNormTypes(DType::F64, {2, 2, 1, 2}), inputs, {},
                {y, {0.1, 5.7}, {0.9 + 0.4 / 3, 1.8 + 1.6 / 3}}, 1e-12);
}

TEST(RefBatchNorm2d, HandComputedEval) {
  // Eval normalises with the running statistics and returns y only.
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    expectResults("batchnorm2d", batchNormTypes(t, {2, 2, 1, 2}),
                  {kBatchInput, kWeight, kBias, {1, 12}, {4, 0.25}},
                  {{"eps", 0.0}, {"training", false}}, {{-0.5, -0.5, -4, 4, 1.5, 1.5, -4, 4}});
  }
}

TEST(RefBatchNorm2d, SingleValuePerChannelKeepsStatisticsFinite) {
  // PyTorch refuses to train on one value per channel; the kernel keeps the
  // biased variance (0) for the running update instead of dividing by zero.
  expectResults("batchnorm2d", batchNormTypes(DType::F32, {1, 1, 1, 1}), {{5}, {1}, {0}, {0}, {1}},
                {{"eps", 1.0}}, {{0}, {0.5}, {0.9}}, 1e-7);
}

TEST(RefBatchNorm2d, Fp32ParametersUnderHalfInput) {
  // keep_batchnorm_fp32: f16/bf16 input, f32 weight, bias and statistics; the
  // new statistics stay f32 and carry f32 precision (0.1 + 0.9 * 5 etc.).
  for (DType half : kHalfDTypes) {
    SCOPED_TRACE(dtypeName(half).str());
    KernelRun run =
        runKernel("batchnorm2d", batchNormTypes(half, {2, 2, 1, 2}, DType::F32),
                  {kBatchInput, kWeight, kBias, kRunningMean, kRunningVar}, {{"eps", 0.0}});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_EQ(run.outputTypes[0].dtype(), half);
    EXPECT_EQ(run.outputTypes[1].dtype(), DType::F32);
    EXPECT_EQ(run.outputTypes[2].dtype(), DType::F32);
    EXPECT_TRUE(allClose(run.outputs[0], {-1.5, -1.5, -1, 1, 2.5, 2.5, -1, 1}, 0));
    EXPECT_TRUE(allClose(run.outputs[1], {0.1, 5.7}, 1e-6));
    EXPECT_TRUE(allClose(run.outputs[2], {0.9 + 0.4 / 3, 1.8 + 1.6 / 3}, 1e-6));
  }
}

TEST(RefBatchNorm2d, AConstantChannelGivesItsBiasExactly) {
  // 27 copies of 0.1f: their f32 sum rounds, so a one-pass mean is an ulp
  // off and x - mean is +-1e-8 noise (which a ReLU after it turns into
  // gradient through half the channel). The corrected second pass makes
  // the mean exact: every output is the bias, as in exact arithmetic.
  Values x(1, std::vector<double>(27, 0.1f));
  KernelRun run = runKernel("batchnorm2d", batchNormTypes(DType::F32, {3, 1, 3, 3}, DType::F32),
                            {x[0], {1.5}, {0.0}, {0}, {1}}, {});
  ASSERT_TRUE(run.ok) << run.error;
  for (double y : run.outputs[0])
    EXPECT_EQ(y, 0.0);
  EXPECT_FLOAT_EQ(run.outputs[2][0], 0.9); // the running variance: momentum 0.1 toward 0
}

TEST(RefBatchNorm2d, RandomAgainstF64) {
  Values inputs = {randomValues(108, 1, -2, 3), randomValues(3, 2, 0.5, 1.5), randomValues(3, 3),
                   randomValues(3, 4), randomValues(3, 5, 0.5, 2)};
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    AttrMap attrs = {{"training", training}};
    TypesAt sameType = [](DType t) { return batchNormTypes(t, {4, 3, 3, 3}); };
    expectAllPrecisions("batchnorm2d", sameType, inputs, attrs);
    TypesAt fp32Params = [](DType t) {
      return batchNormTypes(t, {4, 3, 3, 3}, t == DType::F64 ? DType::F64 : DType::F32);
    };
    expectAllPrecisions("batchnorm2d", fp32Params, inputs, attrs);
  }
}

// --- layernorm -------------------------------------------------------------------

TEST(RefLayerNorm, HandComputed) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // Rows [1, 3] (mean 2, variance 1) and [-4, 0] (mean -2, variance 4) both
    // normalise to [-1, 1]; then * [2, 3] + [0, 1].
    expectResults("layernorm", {TensorType(t, {2, 2}), TensorType(t, {2}), TensorType(t, {2})},
                  {{1, 3, -4, 0}, {2, 3}, {0, 1}}, {{"eps", 0.0}}, {{-2, 4, -2, 4}});
    // normalized_dims 2 normalises over the last two dims together.
    expectResults("layernorm",
                  {TensorType(t, {1, 2, 2}), TensorType(t, {2, 2}), TensorType(t, {2, 2})},
                  {{0, 2, 0, 2}, {1, 2, 3, 4}, {0, 0, 0, 1}},
                  {{"eps", 0.0}, {"normalized_dims", int64_t(2)}}, {{-1, 2, -3, 5}});
    // A constant row has variance 0: eps keeps it finite and y = bias.
    expectResults("layernorm", {TensorType(t, {1, 3}), TensorType(t, {3}), TensorType(t, {3})},
                  {{5, 5, 5}, {2, 2, 2}, {1, -1, 0.5}}, {}, {{1, -1, 0.5}});
  }
}

TEST(RefLayerNorm, DefaultEps) {
  double s = 1 / std::sqrt(1 + 1e-5);
  expectResults(
      "layernorm",
      {TensorType(DType::F64, {1, 2}), TensorType(DType::F64, {2}), TensorType(DType::F64, {2})},
      {{1, 3}, {1, 1}, {0, 0}}, {}, {{-s, s}}, 1e-12);
}

TEST(RefLayerNorm, RandomAgainstF64) {
  Values inputs = {randomValues(192, 10, -3, 2), randomValues(16, 11, 0.5, 1.5),
                   randomValues(16, 12)};
  TypesAt lastDim = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {3, 4, 16}), TensorType(t, {16}),
                                   TensorType(t, {16})};
  };
  expectAllPrecisions("layernorm", lastDim, inputs);
  // f32 affine parameters under a half input are allowed by the op row.
  TypesAt fp32Params = [](DType t) {
    DType param = t == DType::F64 ? DType::F64 : DType::F32;
    return std::vector<TensorType>{TensorType(t, {3, 4, 16}), TensorType(param, {16}),
                                   TensorType(param, {16})};
  };
  expectAllPrecisions("layernorm", fp32Params, inputs);
  TypesAt lastTwoDims = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {3, 4, 16}), TensorType(t, {4, 16}),
                                   TensorType(t, {4, 16})};
  };
  expectAllPrecisions("layernorm", lastTwoDims,
                      {inputs[0], randomValues(64, 13, 0.5, 1.5), randomValues(64, 14)},
                      {{"normalized_dims", int64_t(2)}});
}

} // namespace
