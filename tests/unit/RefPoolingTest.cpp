//===- RefPoolingTest.cpp - Reference maxpool2d, avgpool2d, global_avgpool ===//
//
// Hand-computed windows in PyTorch's floor mode (padding, strides, the two
// average divisors, NaN propagation), random inputs in f32/f16/bf16 against
// f64, and bit-exact f16/bf16 emulation.
//
//===----------------------------------------------------------------------===//
#include "RefCaseUtil.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using namespace ampc::testing::refcases;

using Ints = std::vector<int64_t>;

std::vector<double> iota(int64_t n, double first = 1, double step = 1) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = first + step * static_cast<double>(i);
  return v;
}

// --- maxpool2d -----------------------------------------------------------------

TEST(RefMaxPool2d, HandComputed) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType x44(t, {1, 1, 4, 4});
    // Stride defaults to the kernel.
    expectResults("maxpool2d", {x44}, {iota(16)}, {{"kernel", Ints{2, 2}}}, {{6, 8, 14, 16}});
    // Overlapping windows, stride 1.
    expectResults("maxpool2d", {TensorType(t, {1, 1, 3, 3})}, {iota(9)},
                  {{"kernel", Ints{2, 2}}, {"stride", Ints{1, 1}}}, {{5, 6, 8, 9}});
    // Padding is never the maximum, even of all-negative windows (PyTorch
    // pads max pooling with -inf): windows [-1..1] and [1..3] per axis.
    expectResults("maxpool2d", {x44}, {iota(16, -1, -1)},
                  {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}},
                  {{-1, -2, -5, -6}});
    // Per-axis kernel and stride: [1, 2] windows on a 2x4 input.
    expectResults("maxpool2d", {TensorType(t, {1, 1, 2, 4})}, {{1, 5, 2, 3, 8, 0, 4, 4}},
                  {{"kernel", Ints{1, 2}}}, {{5, 3, 8, 4}});
    // Floor mode: a 5x5 input with 2x2 windows drops the last row and column.
    expectResults("maxpool2d", {TensorType(t, {1, 1, 5, 5})}, {iota(25)}, {{"kernel", Ints{2, 2}}},
                  {{7, 9, 17, 19}});
    // Batch and channels are independent planes.
    expectResults("maxpool2d", {TensorType(t, {2, 2, 2, 2})},
                  {{1, 2, 3, 4, -4, -3, -2, -1, 0, 9, 0, 0, 5, 5, 5, 6}}, {{"kernel", Ints{2, 2}}},
                  {{4, -1, 9, 6}});
  }
}

TEST(RefMaxPool2d, PropagatesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // NaN first (a larger value after it must not replace it), NaN last, none.
    KernelRun run = runKernel("maxpool2d", {TensorType(t, {1, 3, 2, 2})},
                              {{nan, 5, 1, 2, 1, 2, 3, nan, 1, 2, 3, 4}}, {{"kernel", Ints{2, 2}}});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_TRUE(std::isnan(run.outputs[0][0]));
    EXPECT_TRUE(std::isnan(run.outputs[0][1]));
    EXPECT_EQ(run.outputs[0][2], 4);
  }
}

TEST(RefMaxPool2d, RandomAgainstF64) {
  TypesAt types = [](DType t) { return std::vector<TensorType>{TensorType(t, {2, 3, 7, 6})}; };
  std::vector<double> x = randomValues(252, 1);
  expectAllPrecisions("maxpool2d", types, {x},
                      {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}});
  expectAllPrecisions("maxpool2d", types, {x},
                      {{"kernel", Ints{3, 2}}, {"stride", Ints{2, 1}}, {"padding", Ints{1, 0}}});
}

// --- avgpool2d -----------------------------------------------------------------

TEST(RefAvgPool2d, HandComputed) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // Thirds and ninths are not exact in f32 and below: compare within the
    // dtype's tolerance.
    double tol = defaultTolerance(t);
    TensorType x44(t, {1, 1, 4, 4});
    expectResults("avgpool2d", {x44}, {iota(16)}, {{"kernel", Ints{2, 2}}},
                  {{3.5, 5.5, 11.5, 13.5}});
    // 3x3 windows, stride 2, padding 1 over 1..16: the window sums are 14,
    // 30, 57 and 99 over 4, 6, 6 and 9 real elements.
    AttrMap padded = {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}};
    expectResults("avgpool2d", {x44}, {iota(16)}, padded, {{14.0 / 9, 30.0 / 9, 57.0 / 9, 11}},
                  tol);
    padded["count_include_pad"] = false;
    expectResults("avgpool2d", {x44}, {iota(16)}, padded, {{3.5, 5, 9.5, 11}}, tol);
    // Per-axis padding: kernel [1, 3], padding [0, 1], stride [1, 3] on a
    // 1x4 row [1, 2, 3, 4]: windows cols [-1..1] and [2..4].
    AttrMap rowPadded = {{"kernel", Ints{1, 3}}, {"stride", Ints{1, 3}}, {"padding", Ints{0, 1}}};
    expectResults("avgpool2d", {TensorType(t, {1, 1, 1, 4})}, {{1, 2, 3, 4}}, rowPadded,
                  {{1, 7.0 / 3}}, tol);
    rowPadded["count_include_pad"] = false;
    expectResults("avgpool2d", {TensorType(t, {1, 1, 1, 4})}, {{1, 2, 3, 4}}, rowPadded,
                  {{1.5, 3.5}}, tol);
  }
}

TEST(RefAvgPool2d, HalfAccumulatesInF32) {
  // 2048 + 1 + 1 + 1: rounding each partial sum to f16 (spacing 2 there)
  // would stay at 2048 and give 512; f32 accumulation gives 2051 / 4 =
  // 512.75, which rounds (tie, to even) to 513 in f16 (spacing 0.5).
  expectResults("avgpool2d", {TensorType(DType::F16, {1, 1, 2, 2})}, {{2048, 1, 1, 1}},
                {{"kernel", Ints{2, 2}}}, {{513}});
}

TEST(RefAvgPool2d, RandomAgainstF64) {
  TypesAt types = [](DType t) { return std::vector<TensorType>{TensorType(t, {2, 3, 7, 6})}; };
  std::vector<double> x = randomValues(252, 2);
  for (bool countIncludePad : {true, false}) {
    expectAllPrecisions("avgpool2d", types, {x},
                        {{"kernel", Ints{3, 3}},
                         {"stride", Ints{2, 2}},
                         {"padding", Ints{1, 1}},
                         {"count_include_pad", countIncludePad}});
    expectAllPrecisions("avgpool2d", types, {x},
                        {{"kernel", Ints{2, 4}},
                         {"stride", Ints{1, 2}},
                         {"padding", Ints{1, 2}},
                         {"count_include_pad", countIncludePad}});
  }
}

// --- ceil mode, padding per side, dilation ----------------------------------------

TEST(RefPool2d, CeilModeHandComputed) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    double tol = defaultTolerance(t);
    TensorType x55(t, {1, 1, 5, 5});
    AttrMap ceil{{"kernel", Ints{2, 2}}, {"ceil_mode", true}};
    // The last row and column of windows hold one real row / column.
    expectResults("maxpool2d", {x55}, {iota(25)}, ceil, {{7, 9, 10, 17, 19, 20, 22, 24, 25}});
    // PyTorch divides a window clipped by the input's end (no padding
    // there) by its real size, with or without count_include_pad.
    for (bool include : {true, false}) {
      ceil["count_include_pad"] = include;
      expectResults("avgpool2d", {x55}, {iota(25)}, ceil,
                    {{4, 6, 7.5, 14, 16, 17.5, 21.5, 23.5, 25}}, tol);
    }
    // k3 s2 p1 on 4x4: windows rows/cols [-1..1], [1..3], [3..4]; the last
    // reaches one past the end padding, so its padded size is 2, not 3.
    AttrMap padded{{"kernel", Ints{3, 3}},
                   {"stride", Ints{2, 2}},
                   {"padding", Ints{1, 1}},
                   {"ceil_mode", true}};
    TensorType x44(t, {1, 1, 4, 4});
    expectResults("avgpool2d", {x44}, {iota(16)}, padded,
                  {{14.0 / 9, 30.0 / 9, 2, 57.0 / 9, 11, 6, 4.5, 7.5, 4}}, tol);
    padded["count_include_pad"] = false;
    expectResults("avgpool2d", {x44}, {iota(16)}, padded, {{3.5, 5, 6, 9.5, 11, 12, 13.5, 15, 16}},
                  tol);
  }
}

TEST(RefPool2d, PaddingPerSideHandComputed) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // [top, left, bottom, right] = [1, 0, 0, 1] on 4x4, k2 s2: rows {0},
    // {1, 2}; cols {0, 1}, {2, 3} (as F.pad(x, (0, 1, 1, 0)) then pooling).
    TensorType x44(t, {1, 1, 4, 4});
    AttrMap attrs{{"kernel", Ints{2, 2}}, {"padding", Ints{1, 0, 0, 1}}};
    expectResults("avgpool2d", {x44}, {iota(16)}, attrs, {{0.75, 1.75, 7.5, 9.5}});
    attrs["count_include_pad"] = false;
    expectResults("avgpool2d", {x44}, {iota(16)}, attrs, {{1.5, 3.5, 7.5, 9.5}});
    expectResults("maxpool2d", {x44}, {iota(16, -1, -1)},
                  {{"kernel", Ints{2, 2}}, {"padding", Ints{1, 0, 0, 1}}}, {{-1, -3, -5, -7}});
  }
}

TEST(RefMaxPool2d, DilationHandComputed) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // k2 dilation 2 stride 1 on 5x5: window (i, j) reads rows {i, i + 2}
    // and cols {j, j + 2}; the maximum is its bottom right tap.
    expectResults("maxpool2d", {TensorType(t, {1, 1, 5, 5})}, {iota(25)},
                  {{"kernel", Ints{2, 2}}, {"stride", Ints{1, 1}}, {"dilation", Ints{2, 2}}},
                  {{13, 14, 15, 18, 19, 20, 23, 24, 25}});
    // A dilated window can fall between the input's elements into the
    // padding alone: taps -1 and 2 of a 2-row input. PyTorch gives -inf.
    KernelRun empty =
        runKernel("maxpool2d", {TensorType(t, {1, 1, 2, 1})}, {{5, 6}},
                  {{"kernel", Ints{2, 1}}, {"dilation", Ints{3, 1}}, {"padding", Ints{1, 0}}});
    ASSERT_TRUE(empty.ok) << empty.error;
    ASSERT_EQ(empty.outputs[0].size(), 1u);
    EXPECT_EQ(empty.outputs[0][0], -inf);
  }
}

TEST(RefPool2d, CeilModeDilationAndPaddingPerSideRandomAgainstF64) {
  TypesAt types = [](DType t) { return std::vector<TensorType>{TensorType(t, {2, 3, 7, 6})}; };
  std::vector<double> x = randomValues(252, 4);
  expectAllPrecisions("maxpool2d", types, {x},
                      {{"kernel", Ints{3, 2}},
                       {"stride", Ints{2, 2}},
                       {"padding", Ints{1, 0, 0, 1}},
                       {"dilation", Ints{1, 2}},
                       {"ceil_mode", true}});
  for (bool countIncludePad : {true, false})
    expectAllPrecisions("avgpool2d", types, {x},
                        {{"kernel", Ints{3, 3}},
                         {"stride", Ints{2, 2}},
                         {"padding", Ints{0, 1, 2, 1}},
                         {"count_include_pad", countIncludePad},
                         {"ceil_mode", true}});
}

// --- global_avgpool ------------------------------------------------------------

TEST(RefGlobalAvgPool, HandComputed) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    expectResults("global_avgpool", {TensorType(t, {1, 2, 2, 2})}, {{1, 2, 3, 4, 10, 20, 30, 40}},
                  {}, {{2.5, 25}});
    expectResults("global_avgpool", {TensorType(t, {2, 1, 1, 3})}, {{1, 2, 6, -3, 0, 0}}, {},
                  {{3, -1}});
  }
}

TEST(RefGlobalAvgPool, RandomAgainstF64) {
  TypesAt types = [](DType t) { return std::vector<TensorType>{TensorType(t, {3, 4, 8, 8})}; };
  expectAllPrecisions("global_avgpool", types, {randomValues(768, 3)});
}

} // namespace
