//===- GradPoolingTest.cpp - Gradients of maxpool2d, avgpool2d, global_avgpool
//
// Finite-difference checks (f64) over kernels, strides (overlapping and
// skipping windows), padding and count_include_pad. maxpool2d's inputs are a
// shuffled ramp of distinct values far apart compared with the step, so no
// window has a tie or a near-tie that the perturbation could flip. Then
// hand-computed and f32/f16/bf16 vs f64 checks of the backward kernels,
// also in ceil mode, with padding per side and with max pooling's dilation.
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"
#include "KernelTestUtil.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::allClose;
using ampc::testing::checkGradients;
using ampc::testing::defaultTolerance;
using ampc::testing::GradCheckOperand;
using ampc::testing::KernelRun;
using ampc::testing::matchesF64;
using ampc::testing::randomValues;
using ampc::testing::runKernel;

TensorType f64(std::vector<int64_t> dims) { return TensorType(DType::F64, dims); }

Attribute ints(std::vector<int64_t> v) { return Attribute(std::move(v)); }

constexpr DType kLowDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr DType kAllFloatDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

/// n distinct values -1 + 2 (k + 0.5) / n, k = 0..n-1, in a seeded order.
std::vector<double> distinctValues(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> keys = randomValues(n, seed);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k)
    v[order[k]] = -1 + 2 * (k + 0.5) / n;
  return v;
}

GradCheckOperand distinctInput(std::vector<int64_t> dims, uint64_t seed) {
  TensorType t = f64(std::move(dims));
  return GradCheckOperand(t, distinctValues(t.numElements(), seed));
}

struct PoolCase {
  const char *name;
  std::vector<int64_t> input, kernel, stride, padding;
};

const PoolCase kPoolCases[] = {
    {"kernel 2, stride = kernel", {2, 2, 4, 4}, {2, 2}, {}, {0, 0}},
    {"overlapping windows", {1, 2, 5, 5}, {3, 3}, {1, 1}, {0, 0}},
    {"stride 2 padding 1 (ResNet stem)", {1, 2, 6, 6}, {3, 3}, {2, 2}, {1, 1}},
    {"rectangular, odd size left over", {2, 1, 5, 7}, {2, 3}, {1, 2}, {1, 1}},
    {"stride larger than kernel skips inputs", {1, 1, 7, 7}, {2, 2}, {3, 3}, {0, 0}},
    {"window = whole plane", {1, 3, 3, 3}, {3, 3}, {}, {1, 1}},
};

AttrMap poolAttrs(const PoolCase &c) {
  return {{"kernel", ints(c.kernel)}, {"stride", ints(c.stride)}, {"padding", ints(c.padding)}};
}

/// Windows beyond floor mode and symmetric padding: (input dims, attrs).
struct WindowCase {
  const char *name;
  std::vector<int64_t> input;
  AttrMap attrs;
};

std::vector<WindowCase> windowCases() {
  return {
      {"ceil mode, clipped last windows",
       {1, 2, 5, 5},
       {{"kernel", ints({2, 2})}, {"ceil_mode", Attribute(true)}}},
      {"ceil mode, padded, last window past the end padding",
       {1, 1, 4, 6},
       {{"kernel", ints({3, 3})},
        {"stride", ints({2, 2})},
        {"padding", ints({1, 1})},
        {"ceil_mode", Attribute(true)}}},
      {"padding per side",
       {2, 1, 5, 4},
       {{"kernel", ints({3, 2})}, {"stride", ints({2, 1})}, {"padding", ints({0, 1, 2, 0})}}},
      {"padding per side and ceil mode",
       {1, 2, 6, 7},
       {{"kernel", ints({2, 3})},
        {"stride", ints({2, 2})},
        {"padding", ints({1, 0, 0, 2})},
        {"ceil_mode", Attribute(true)}}},
  };
}

// --- finite differences ---------------------------------------------------------

TEST(GradPooling, MaxPool2d) {
  uint64_t seed = 1;
  for (const PoolCase &c : kPoolCases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(checkGradients("maxpool2d", {distinctInput(c.input, seed++)}, poolAttrs(c)));
  }
}

TEST(GradPooling, AvgPool2dCountIncludePadBothWays) {
  for (const PoolCase &c : kPoolCases)
    for (bool countIncludePad : {true, false}) {
      SCOPED_TRACE(std::string(c.name) + " count_include_pad " + std::to_string(countIncludePad));
      AttrMap attrs = poolAttrs(c);
      attrs["count_include_pad"] = Attribute(countIncludePad);
      EXPECT_TRUE(checkGradients("avgpool2d", {{f64(c.input)}}, attrs));
    }
}

TEST(GradPooling, CeilModeAndPaddingPerSide) {
  uint64_t seed = 20;
  for (const WindowCase &c : windowCases()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(checkGradients("maxpool2d", {distinctInput(c.input, seed++)}, c.attrs));
    for (bool countIncludePad : {true, false}) {
      AttrMap attrs = c.attrs;
      attrs["count_include_pad"] = Attribute(countIncludePad);
      EXPECT_TRUE(checkGradients("avgpool2d", {{f64(c.input)}}, attrs));
    }
  }
}

TEST(GradPooling, DilatedMaxPool2d) {
  EXPECT_TRUE(checkGradients(
      "maxpool2d", {distinctInput({1, 2, 7, 6}, 30)},
      {{"kernel", ints({3, 2})}, {"stride", ints({1, 2})}, {"dilation", ints({2, 3})}}));
  // Padding and ceil mode too; and windows of padding alone (taps -1 and
  // 2 of 2 rows), which pass no gradient.
  EXPECT_TRUE(checkGradients("maxpool2d", {distinctInput({1, 1, 6, 5}, 31)},
                             {{"kernel", ints({2, 2})},
                              {"stride", ints({2, 1})},
                              {"padding", ints({1, 1})},
                              {"dilation", ints({2, 2})},
                              {"ceil_mode", Attribute(true)}}));
  KernelRun empty = runKernel(
      "maxpool2d_grad", {TensorType(DType::F64, {1, 1, 1, 1}), f64({1, 1, 2, 1})}, {{3}, {5, 6}},
      {{"kernel", ints({2, 1})}, {"dilation", ints({3, 1})}, {"padding", ints({1, 0})}});
  ASSERT_TRUE(empty.ok) << empty.error;
  EXPECT_TRUE(allClose(empty.outputs[0], {0, 0}, 0));
}

TEST(GradPooling, GlobalAvgPool) {
  EXPECT_TRUE(checkGradients("global_avgpool", {{f64({2, 3, 4, 5})}}));
  EXPECT_TRUE(checkGradients("global_avgpool", {{f64({1, 2, 1, 1})}}));
}

// --- hand-computed backward kernels ------------------------------------------------

TEST(GradPooling, BackwardKernelsHandComputed) {
  for (DType t : kAllFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // 1x1x3x3 input, kernel 2, stride 1: windows overlap; the maxima are 5
    // (top left window, at [1][1]), 8 (top right, at [1][2]), 7 and 9.
    TensorType x(t, {1, 1, 3, 3}), dy(t, {1, 1, 2, 2});
    AttrMap attrs{{"kernel", ints({2, 2})}, {"stride", ints({1, 1})}};
    KernelRun maxGrad =
        runKernel("maxpool2d_grad", {dy, x}, {{1, 2, 3, 4}, {1, 2, 3, 4, 5, 8, 6, 7, 9}}, attrs);
    ASSERT_TRUE(maxGrad.ok) << maxGrad.error;
    EXPECT_TRUE(allClose(maxGrad.outputs[0], {0, 0, 0, 0, 1, 2, 0, 3, 4}, 0));
    // A tie routes the gradient to the first maximum only.
    KernelRun tie =
        runKernel("maxpool2d_grad", {TensorType(t, {1, 1, 1, 1}), TensorType(t, {1, 1, 2, 2})},
                  {{5}, {3, 3, 3, 1}}, {{"kernel", ints({2, 2})}});
    ASSERT_TRUE(tie.ok) << tie.error;
    EXPECT_TRUE(allClose(tie.outputs[0], {5, 0, 0, 0}, 0));
    // avgpool kernel 2 stride 1 on 3x3: element (i, j) is in as many windows
    // as overlap it; each window gives it dy / 4.
    AttrMap avgAttrs = attrs;
    avgAttrs["input_shape"] = ints({1, 1, 3, 3});
    KernelRun avgGrad = runKernel("avgpool2d_grad", {dy}, {{4, 8, 12, 16}}, avgAttrs);
    ASSERT_TRUE(avgGrad.ok) << avgGrad.error;
    EXPECT_TRUE(allClose(avgGrad.outputs[0], {1, 3, 2, 4, 10, 6, 3, 7, 4}, 0));
    // Padding 1, kernel 2, stride 2 on 2x2: each output's window holds one
    // real element; with count_include_pad it divides by 4, without by 1.
    for (bool include : {true, false}) {
      KernelRun padded =
          runKernel("avgpool2d_grad", {TensorType(t, {1, 1, 2, 2})}, {{4, 8, 12, 16}},
                    {{"kernel", ints({2, 2})},
                     {"padding", ints({1, 1})},
                     {"count_include_pad", Attribute(include)},
                     {"input_shape", ints({1, 1, 2, 2})}});
      ASSERT_TRUE(padded.ok) << padded.error;
      EXPECT_TRUE(allClose(
          padded.outputs[0],
          include ? std::vector<double>{1, 2, 3, 4} : std::vector<double>{4, 8, 12, 16}, 0));
    }
    KernelRun global = runKernel("global_avgpool_grad", {TensorType(t, {1, 2, 1, 1})}, {{4, -8}},
                                 {{"input_shape", ints({1, 2, 2, 2})}});
    ASSERT_TRUE(global.ok) << global.error;
    EXPECT_TRUE(allClose(global.outputs[0], {1, 1, 1, 1, -2, -2, -2, -2}, 0));
  }
}

// --- low precision against f64 ---------------------------------------------------

TEST(GradPooling, BackwardKernelsMatchF64) {
  for (const PoolCase &c : kPoolCases) {
    SCOPED_TRACE(c.name);
    TensorType x = f64(c.input);
    std::vector<double> xv = randomValues(x.numElements(), 1, -2, 2);
    KernelRun forward = runKernel("maxpool2d", {x}, {xv}, poolAttrs(c));
    ASSERT_TRUE(forward.ok) << forward.error;
    TensorType dy = forward.outputTypes[0];
    std::vector<double> dyValues = randomValues(dy.numElements(), 2, -2, 2);
    AttrMap avgAttrs = poolAttrs(c);
    avgAttrs["input_shape"] = ints(c.input);
    for (DType t : kLowDTypes) {
      double tol = defaultTolerance(t);
      EXPECT_TRUE(matchesF64("maxpool2d_grad", {dy, x}, {dyValues, xv}, poolAttrs(c), t, tol));
      for (bool include : {true, false}) {
        avgAttrs["count_include_pad"] = Attribute(include);
        EXPECT_TRUE(matchesF64("avgpool2d_grad", {dy}, {dyValues}, avgAttrs, t, tol));
      }
    }
  }
  for (const WindowCase &c : windowCases()) {
    SCOPED_TRACE(c.name);
    TensorType x = f64(c.input);
    std::vector<double> xv = randomValues(x.numElements(), 5, -2, 2);
    KernelRun forward = runKernel("maxpool2d", {x}, {xv}, c.attrs);
    ASSERT_TRUE(forward.ok) << forward.error;
    TensorType dy = forward.outputTypes[0];
    std::vector<double> dyValues = randomValues(dy.numElements(), 6, -2, 2);
    AttrMap dilated = c.attrs;
    dilated["dilation"] = ints({1, 2});
    KernelRun dilatedForward = runKernel("maxpool2d", {x}, {xv}, dilated);
    ASSERT_TRUE(dilatedForward.ok) << dilatedForward.error;
    TensorType dilatedDy = dilatedForward.outputTypes[0];
    AttrMap avgAttrs = c.attrs;
    avgAttrs["input_shape"] = ints(c.input);
    for (DType t : kLowDTypes) {
      double tol = defaultTolerance(t);
      EXPECT_TRUE(matchesF64("maxpool2d_grad", {dy, x}, {dyValues, xv}, c.attrs, t, tol));
      EXPECT_TRUE(matchesF64("maxpool2d_grad", {dilatedDy, x},
                             {randomValues(dilatedDy.numElements(), 7, -2, 2), xv}, dilated, t,
                             tol));
      for (bool include : {true, false}) {
        avgAttrs["count_include_pad"] = Attribute(include);
        EXPECT_TRUE(matchesF64("avgpool2d_grad", {dy}, {dyValues}, avgAttrs, t, tol));
      }
    }
  }
  TensorType pooled = f64({2, 3, 1, 1});
  for (DType t : kLowDTypes)
    EXPECT_TRUE(matchesF64("global_avgpool_grad", {pooled}, {randomValues(6, 3)},
                           {{"input_shape", ints({2, 3, 5, 7})}}, t, defaultTolerance(t)));
}

} // namespace
