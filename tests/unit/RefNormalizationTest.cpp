//===- RefNormalizationTest.cpp - Reference batchnorm2d and layernorm -----===//
//
// Hand-computed normalisations (PyTorch's conventions: biased variance to
// normalise, unbiased variance and momentum 0.1 for the running statistics,
// eps 1e-5), f32 per-channel operands under half inputs, random inputs in
// f32/f16/bf16 against f64, and bit-exact f16/bf16 emulation.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::allClose;
using ampc::testing::defaultTolerance;
using ampc::testing::KernelRun;
using ampc::testing::randomValues;
using ampc::testing::roundedTo;
using ampc::testing::runKernel;

using Values = std::vector<std::vector<double>>;
/// The operand types of one case when it computes in a given dtype.
using TypesAt = std::function<std::vector<TensorType>(DType)>;

constexpr DType kFloatDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16};
constexpr DType kHalfDTypes[] = {DType::F16, DType::BF16};

/// `values` as operands of `types` hold them after storage rounding.
Values roundedInputs(const std::vector<TensorType> &types, const Values &values) {
  Values out;
  for (size_t i = 0; i < values.size(); ++i)
    out.push_back(roundedTo(types[i].dtype(), values[i]));
  return out;
}

/// Runs `op` with hand-written inputs and checks every result exactly (or
/// within `tol`) against the hand-computed `expected`.
void expectResults(const std::string &op, const std::vector<TensorType> &types,
                   const Values &values, const AttrMap &attrs, const Values &expected,
                   double tol = 0) {
  KernelRun run = runKernel(op, types, values, attrs);
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_EQ(run.outputs.size(), expected.size());
  for (size_t r = 0; r < expected.size(); ++r)
    EXPECT_TRUE(allClose(run.outputs[r], expected[r], tol)) << op << " result " << r;
}

/// Runs `op` computing in `dtype` and in f64 on exactly the values the
/// `dtype` run sees; every result must agree within `tol` (relative to
/// max(1, |f64 result|)).
void expectMatchesF64(const std::string &op, const TypesAt &typesAt, const Values &values,
                      const AttrMap &attrs, DType dtype, double tol) {
  SCOPED_TRACE(op + " in " + dtypeName(dtype).str() + " vs f64");
  std::vector<TensorType> types = typesAt(dtype);
  KernelRun run = runKernel(op, types, values, attrs);
  KernelRun reference = runKernel(op, typesAt(DType::F64), roundedInputs(types, values), attrs);
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_TRUE(reference.ok) << reference.error;
  ASSERT_EQ(run.outputs.size(), reference.outputs.size());
  for (size_t r = 0; r < run.outputs.size(); ++r)
    EXPECT_TRUE(allClose(run.outputs[r], reference.outputs[r], tol)) << "result " << r;
}

/// The f16/bf16 emulation is exact: every half result is, bit for bit, the f32
/// run's result on the same inputs rounded once to nearest even with the IR's
/// conversion functions; f32 results (batchnorm's statistics) are identical.
void expectExactHalfEmulation(const std::string &op, const TypesAt &typesAt, const Values &values,
                              const AttrMap &attrs, DType half) {
  SCOPED_TRACE(op + " in " + dtypeName(half).str() + " vs f32 rounded");
  std::vector<TensorType> halfTypes = typesAt(half);
  Values inputs = roundedInputs(halfTypes, values);
  KernelRun run = runKernel(op, halfTypes, inputs, attrs);
  KernelRun wide = runKernel(op, typesAt(DType::F32), inputs, attrs);
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_TRUE(wide.ok) << wide.error;
  ASSERT_EQ(run.outputs.size(), wide.outputs.size());
  for (size_t r = 0; r < run.outputs.size(); ++r) {
    DType resultType = run.outputTypes[r].dtype();
    for (size_t e = 0; e < run.outputs[r].size(); ++e) {
      float expected = static_cast<float>(wide.outputs[r][e]);
      float actual = static_cast<float>(run.outputs[r][e]);
      if (resultType == DType::F16)
        ASSERT_EQ(floatToHalfBits(actual), floatToHalfBits(expected))
            << "result " << r << " element " << e;
      else if (resultType == DType::BF16)
        ASSERT_EQ(floatToBf16Bits(actual), floatToBf16Bits(expected))
            << "result " << r << " element " << e;
      else
        ASSERT_EQ(floatBits(actual), floatBits(expected)) << "result " << r << " element " << e;
    }
  }
}

/// The random-input checks every op gets: f32, f16 and bf16 against f64 with
/// the per-dtype tolerance (scaled by `tolFactor` where an op says why), and
/// exact half emulation.
void expectAllPrecisions(const std::string &op, const TypesAt &typesAt, const Values &values,
                         const AttrMap &attrs = {}, double tolFactor = 1) {
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    expectMatchesF64(op, typesAt, values, attrs, t, tolFactor * defaultTolerance(t));
  for (DType t : kHalfDTypes)
    expectExactHalfEmulation(op, typesAt, values, attrs, t);
}

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
