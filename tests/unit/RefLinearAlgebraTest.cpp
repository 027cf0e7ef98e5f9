//===- RefLinearAlgebraTest.cpp - Reference linear, matmul, conv, attention ===//
//
// Hand-computed cases (small integers, exact in every float dtype, so they run
// in all four), structural checks that are independent of the kernel's own
// indexing (transposes, broadcasting, groups, batch slices), random inputs in
// f32/f16/bf16 against f64, and bit-exact f16/bf16 emulation.
//
//===----------------------------------------------------------------------===//
#include "RefCaseUtil.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using namespace ampc::testing::refcases;

/// Element (i, j) of the row-major rows x cols matrix transposed.
std::vector<double> transposed(const std::vector<double> &m, int64_t rows, int64_t cols) {
  std::vector<double> t(m.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      t[j * rows + i] = m[i * cols + j];
  return t;
}

// --- linear ------------------------------------------------------------------

TEST(RefLinear, HandComputedWithAndWithoutBias) {
  // weight is [out, in] (PyTorch): y = x W^T + b.
  std::vector<double> x = {1, 2, 3, 4}, w = {1, 0, 0, 1, 1, 1}, b = {0.5, -1, 2};
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    expectResults("linear", {TensorType(t, {2, 2}), TensorType(t, {3, 2}), TensorType(t, {3})},
                  {x, w, b}, {}, {{1.5, 1, 5, 3.5, 3, 9}});
    expectResults("linear", {TensorType(t, {2, 2}), TensorType(t, {3, 2})}, {x, w}, {},
                  {{1, 2, 3, 3, 4, 7}});
    // Leading dims are batch dims.
    expectResults("linear", {TensorType(t, {2, 1, 2}), TensorType(t, {3, 2}), TensorType(t, {3})},
                  {x, w, b}, {}, {{1.5, 1, 5, 3.5, 3, 9}});
  }
}

TEST(RefLinear, RandomAgainstF64) {
  TypesAt types = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {2, 3, 8}), TensorType(t, {5, 8}),
                                   TensorType(t, {5})};
  };
  expectAllPrecisions("linear", types,
                      {randomValues(48, 1), randomValues(40, 2), randomValues(5, 3)});
  TypesAt noBias = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {4, 8}), TensorType(t, {3, 8})};
  };
  expectAllPrecisions("linear", noBias, {randomValues(32, 4), randomValues(24, 5)});
}

TEST(RefLinear, HalfAccumulatesInF32) {
  // 2048 + 1 + 1 + ... : each partial sum rounded to f16 would stay at 2048
  // (spacing 2 there); f32 accumulation gives 2048 + 8 = 2056, exact in f16.
  std::vector<double> x(9, 1.0), w(9, 1.0);
  x[0] = 2048;
  expectResults("linear", {TensorType(DType::F16, {1, 9}), TensorType(DType::F16, {1, 9})}, {x, w},
                {}, {{2056}});
}

// 2^24 + 1 - 2^24 is 1 in double but 0 in f32 (2^24 + 1 rounds to 2^24): the
// dot products of f16/bf16 operands accumulate in exactly f32, like f32's,
// not in anything wider.
const std::vector<double> kCancelLhs = {4096, 1, -4096}, kCancelRhs = {4096, 1, 4096};

double cancellationResult(DType t) { return t == DType::F64 ? 1 : 0; }

TEST(RefLinear, AccumulatesInExactlyF32BelowF64) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    expectResults("linear", {TensorType(t, {1, 3}), TensorType(t, {1, 3})},
                  {kCancelLhs, kCancelRhs}, {}, {{cancellationResult(t)}});
    expectResults("matmul", {TensorType(t, {1, 3}), TensorType(t, {3, 1})},
                  {kCancelLhs, kCancelRhs}, {}, {{cancellationResult(t)}});
    expectResults("batch_matmul", {TensorType(t, {1, 1, 3}), TensorType(t, {1, 3, 1})},
                  {kCancelLhs, kCancelRhs}, {}, {{cancellationResult(t)}});
    expectResults("conv2d", {TensorType(t, {1, 3, 1, 1}), TensorType(t, {1, 3, 1, 1})},
                  {kCancelLhs, kCancelRhs}, {}, {{cancellationResult(t)}});
  }
}

// --- matmul ------------------------------------------------------------------

TEST(RefMatMul, HandComputedAllTransposes) {
  std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12};
  std::vector<double> expected = {58, 64, 139, 154};
  std::vector<double> aT = transposed(a, 2, 3), bT = transposed(b, 3, 2);
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType a23(t, {2, 3}), a32(t, {3, 2});
    expectResults("matmul", {a23, a32}, {a, b}, {}, {expected});
    expectResults("matmul", {a32, a32}, {aT, b}, {{"transpose_a", true}}, {expected});
    expectResults("matmul", {a23, a23}, {a, bT}, {{"transpose_b", true}}, {expected});
    expectResults("matmul", {a32, a23}, {aT, bT}, {{"transpose_a", true}, {"transpose_b", true}},
                  {expected});
  }
}

TEST(RefMatMul, RandomAgainstF64) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      TypesAt types = [&](DType t) {
        return std::vector<TensorType>{
            TensorType(t, ta ? std::vector<int64_t>{6, 3} : std::vector<int64_t>{3, 6}),
            TensorType(t, tb ? std::vector<int64_t>{4, 6} : std::vector<int64_t>{6, 4})};
      };
      expectAllPrecisions("matmul", types, {randomValues(18, 10), randomValues(24, 11)},
                          {{"transpose_a", ta}, {"transpose_b", tb}});
    }
}

// --- batch_matmul ------------------------------------------------------------

TEST(RefBatchMatMul, HandComputedBroadcast) {
  // a: [2, 1, 2, 2] = {identity, row swap}; b: [3, 2, 2]. Batch dims [2, 1]
  // and [3] broadcast to [2, 3]: out[0][j] = b_j, out[1][j] = b_j rows swapped.
  std::vector<double> a = {1, 0, 0, 1, 0, 1, 1, 0};
  std::vector<double> b = {1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 0};
  std::vector<double> expected = {1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 0,
                                  3, 4, 1, 2, 7, 8, 5, 6, 0, 0, 0, 1};
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    expectResults("batch_matmul", {TensorType(t, {2, 1, 2, 2}), TensorType(t, {3, 2, 2})}, {a, b},
                  {}, {expected});
  }
}

TEST(RefBatchMatMul, TransposeFlagsMatchTransposedData) {
  // [2, 3, 4] x [2, 4, 5]: the flags must read the same matrices as
  // transposing each batch's data explicitly.
  std::vector<double> a = randomValues(24, 20), b = randomValues(40, 21);
  std::vector<double> aT, bT;
  for (int64_t i = 0; i < 2; ++i) {
    std::vector<double> sliceA(a.begin() + i * 12, a.begin() + (i + 1) * 12);
    std::vector<double> sliceB(b.begin() + i * 20, b.begin() + (i + 1) * 20);
    for (double v : transposed(sliceA, 3, 4))
      aT.push_back(v);
    for (double v : transposed(sliceB, 4, 5))
      bT.push_back(v);
  }
  DType t = DType::F64;
  KernelRun plain =
      runKernel("batch_matmul", {TensorType(t, {2, 3, 4}), TensorType(t, {2, 4, 5})}, {a, b});
  KernelRun flagged =
      runKernel("batch_matmul", {TensorType(t, {2, 4, 3}), TensorType(t, {2, 5, 4})}, {aT, bT},
                {{"transpose_a", true}, {"transpose_b", true}});
  ASSERT_TRUE(plain.ok) << plain.error;
  ASSERT_TRUE(flagged.ok) << flagged.error;
  EXPECT_TRUE(allClose(flagged.outputs[0], plain.outputs[0], 1e-15));
  // And batch 1 of the plain product is matmul of the batch-1 slices.
  KernelRun single = runKernel(
      "matmul", {TensorType(t, {3, 4}), TensorType(t, {4, 5})},
      {std::vector<double>(a.begin() + 12, a.end()), std::vector<double>(b.begin() + 20, b.end())});
  ASSERT_TRUE(single.ok) << single.error;
  EXPECT_TRUE(allClose(std::vector<double>(plain.outputs[0].begin() + 15, plain.outputs[0].end()),
                       single.outputs[0], 0));
}

TEST(RefBatchMatMul, BroadcastMatchesPerSliceMatMul) {
  // a [3, 1, 2, 4] with b [2, 4, 3]: out[i][j] = a[i] x b[j].
  std::vector<double> a = randomValues(24, 30), b = randomValues(24, 31);
  DType t = DType::F64;
  KernelRun batched =
      runKernel("batch_matmul", {TensorType(t, {3, 1, 2, 4}), TensorType(t, {2, 4, 3})}, {a, b});
  ASSERT_TRUE(batched.ok) << batched.error;
  ASSERT_EQ(batched.outputTypes[0], TensorType(t, {3, 2, 2, 3}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      KernelRun single =
          runKernel("matmul", {TensorType(t, {2, 4}), TensorType(t, {4, 3})},
                    {std::vector<double>(a.begin() + i * 8, a.begin() + i * 8 + 8),
                     std::vector<double>(b.begin() + j * 12, b.begin() + j * 12 + 12)});
      ASSERT_TRUE(single.ok) << single.error;
      int64_t base = (i * 2 + j) * 6;
      EXPECT_TRUE(allClose(std::vector<double>(batched.outputs[0].begin() + base,
                                               batched.outputs[0].begin() + base + 6),
                           single.outputs[0], 0))
          << "batch " << i << ", " << j;
    }
}

TEST(RefBatchMatMul, RandomAgainstF64) {
  TypesAt types = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {2, 1, 5, 3}), TensorType(t, {3, 4, 5})};
  };
  expectAllPrecisions("batch_matmul", types, {randomValues(30, 40), randomValues(60, 41)},
                      {{"transpose_a", true}, {"transpose_b", true}});
  TypesAt plain = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {4, 3, 6}), TensorType(t, {1, 6, 2})};
  };
  expectAllPrecisions("batch_matmul", plain, {randomValues(72, 42), randomValues(12, 43)});
}

// --- conv2d ------------------------------------------------------------------

const std::vector<double> kImage3x3 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
const std::vector<double> kDiagonal2x2 = {1, 0, 0, 1};

TEST(RefConv2d, HandComputedPlain) {
  // Cross-correlation (no kernel flip): y[i][j] = x[i][j] + x[i+1][j+1].
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType x(t, {1, 1, 3, 3}), w(t, {1, 1, 2, 2}), b(t, {1});
    expectResults("conv2d", {x, w}, {kImage3x3, kDiagonal2x2}, {}, {{6, 8, 12, 14}});
    expectResults("conv2d", {x, w, b}, {kImage3x3, kDiagonal2x2, {-1}}, {}, {{5, 7, 11, 13}});
    // An asymmetric weight tells cross-correlation from convolution (a
    // flipped kernel would give 13 first).
    expectResults("conv2d", {x, w}, {kImage3x3, {1, 2, 0, 0}}, {}, {{5, 8, 14, 17}});
  }
}

TEST(RefConv2d, HandComputedStridePaddingDilation) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType x(t, {1, 1, 3, 3}), w(t, {1, 1, 2, 2});
    // Padding 1, stride 2: taps at rows/cols {-1, 0} and {1, 2}; padding reads 0.
    expectResults("conv2d", {x, w}, {kImage3x3, kDiagonal2x2},
                  {{"padding", std::vector<int64_t>{1, 1}}, {"stride", std::vector<int64_t>{2, 2}}},
                  {{1, 3, 7, 14}});
    // Dilation 2 spreads the 2x2 taps over the 3x3 corners: x00 + x22.
    expectResults("conv2d", {x, w}, {kImage3x3, kDiagonal2x2},
                  {{"dilation", std::vector<int64_t>{2, 2}}}, {{10}});
    // Different per-axis values: stride [1, 2], padding [0, 1] -> [2, 2]
    // outputs; columns read {-1, 0} and {1, 2}.
    expectResults("conv2d", {x, w}, {kImage3x3, kDiagonal2x2},
                  {{"stride", std::vector<int64_t>{1, 2}}, {"padding", std::vector<int64_t>{0, 1}}},
                  {{4, 8, 7, 14}});
  }
}

TEST(RefConv2d, HandComputedGroupsAndChannels) {
  std::vector<double> x = {1, 2, 3, 4, 10, 20, 30, 40}; // [1, 2, 2, 2]
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // groups 2 (depthwise): each output channel sees only its input channel.
    expectResults("conv2d", {TensorType(t, {1, 2, 2, 2}), TensorType(t, {2, 1, 1, 1})}, {x, {2, 3}},
                  {{"groups", int64_t(2)}}, {{2, 4, 6, 8, 30, 60, 90, 120}});
    // groups 1: weight [out, in, 1, 1] mixes channels.
    expectResults("conv2d", {TensorType(t, {1, 2, 2, 2}), TensorType(t, {2, 2, 1, 1})},
                  {x, {1, 1, 1, -1}}, {}, {{11, 22, 33, 44, -9, -18, -27, -36}});
  }
}

TEST(RefConv2d, GroupsMatchSeparateConvolutions) {
  // groups 2 over [2, 4, 5, 5] with weight [6, 2, 3, 3] equals two groups-1
  // convolutions on channel halves, output channels concatenated.
  DType t = DType::F64;
  std::vector<double> x = randomValues(200, 50), w = randomValues(108, 51), b = randomValues(6, 52);
  AttrMap attrs = {{"padding", std::vector<int64_t>{1, 0}}, {"stride", std::vector<int64_t>{2, 1}}};
  AttrMap grouped = attrs;
  grouped["groups"] = int64_t(2);
  KernelRun whole = runKernel(
      "conv2d", {TensorType(t, {2, 4, 5, 5}), TensorType(t, {6, 2, 3, 3}), TensorType(t, {6})},
      {x, w, b}, grouped);
  ASSERT_TRUE(whole.ok) << whole.error;
  ASSERT_EQ(whole.outputTypes[0], TensorType(t, {2, 6, 3, 3}));
  for (int64_t g = 0; g < 2; ++g) {
    std::vector<double> xg, wg(w.begin() + g * 54, w.begin() + (g + 1) * 54),
        bg(b.begin() + g * 3, b.begin() + (g + 1) * 3);
    for (int64_t n = 0; n < 2; ++n)
      xg.insert(xg.end(), x.begin() + n * 100 + g * 50, x.begin() + n * 100 + (g + 1) * 50);
    KernelRun part = runKernel(
        "conv2d", {TensorType(t, {2, 2, 5, 5}), TensorType(t, {3, 2, 3, 3}), TensorType(t, {3})},
        {xg, wg, bg}, attrs);
    ASSERT_TRUE(part.ok) << part.error;
    for (int64_t n = 0; n < 2; ++n) {
      std::vector<double> expected(part.outputs[0].begin() + n * 27,
                                   part.outputs[0].begin() + (n + 1) * 27);
      std::vector<double> actual(whole.outputs[0].begin() + n * 54 + g * 27,
                                 whole.outputs[0].begin() + n * 54 + (g + 1) * 27);
      EXPECT_TRUE(allClose(actual, expected, 0)) << "group " << g << " batch " << n;
    }
  }
}

TEST(RefConv2d, RandomAgainstF64) {
  TypesAt types = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {2, 4, 6, 7}), TensorType(t, {4, 2, 3, 2}),
                                   TensorType(t, {4})};
  };
  expectAllPrecisions("conv2d", types,
                      {randomValues(336, 60), randomValues(48, 61), randomValues(4, 62)},
                      {{"stride", std::vector<int64_t>{2, 1}},
                       {"padding", std::vector<int64_t>{1, 2}},
                       {"dilation", std::vector<int64_t>{1, 2}},
                       {"groups", int64_t(2)}});
  TypesAt noBias = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {1, 3, 5, 5}), TensorType(t, {2, 3, 3, 3})};
  };
  expectAllPrecisions("conv2d", noBias, {randomValues(75, 63), randomValues(54, 64)},
                      {{"padding", std::vector<int64_t>{1, 1}}});
}

// --- scaled_dot_product_attention -------------------------------------------

TEST(RefAttention, HandComputed) {
  const double ln2 = std::log(2.0);
  for (DType t : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtypeName(t).str());
    double tol = t == DType::F64 ? 1e-12 : 1e-6;
    TensorType x21(t, {2, 1});
    // Head size 1, default scale 1: row 0 scores [0, ln2] -> weights [1/3, 2/3];
    // row 1 scores [0, 2 ln2] -> [1/5, 4/5]. v = [3, 6].
    Values qkv = {{1, 2}, {0, ln2}, {3, 6}};
    expectResults("scaled_dot_product_attention", {x21, x21, x21}, qkv, {}, {{5, 5.4}}, tol);
    // Causal: row 0 sees key 0 only.
    expectResults("scaled_dot_product_attention", {x21, x21, x21}, qkv, {{"causal", true}},
                  {{3, 5.4}}, tol);
    // scale 2 doubles the scores: [0, 2 ln2] -> 5.4 and [0, 4 ln2] -> 99/17.
    expectResults("scaled_dot_product_attention", {x21, x21, x21}, qkv, {{"scale", 2.0}},
                  {{5.4, 99.0 / 17}}, tol);
    // Head size 4, default scale 1/2: q.k1 = 4a with a = ln2/2 -> score ln2.
    double a = ln2 / 2;
    expectResults("scaled_dot_product_attention",
                  {TensorType(t, {2, 4}), TensorType(t, {2, 4}), TensorType(t, {2, 2})},
                  {{1, 1, 1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, a, a, a, a}, {3, 0, 6, 3}},
                  {{"causal", true}}, {{3, 0, 5, 2}}, tol);
  }
}

TEST(RefAttention, StableForLargeScores) {
  // Scores of 1000 overflow exp() unless the maximum is subtracted first.
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType x21(t, {2, 1});
    expectResults("scaled_dot_product_attention", {x21, x21, x21}, {{1, 1}, {1000, 1000}, {2, 4}},
                  {}, {{3, 3}});
  }
}

TEST(RefAttention, BatchesMatchSeparateRuns) {
  // q/k/v [2, 3, S, D]: each of the 6 batch slices is its own attention.
  DType t = DType::F64;
  const int64_t seq = 4, head = 3, valueSize = 2;
  std::vector<double> q = randomValues(6 * seq * head, 70), k = randomValues(6 * seq * head, 71),
                      v = randomValues(6 * seq * valueSize, 72);
  AttrMap attrs = {{"causal", true}};
  KernelRun batched = runKernel("scaled_dot_product_attention",
                                {TensorType(t, {2, 3, seq, head}), TensorType(t, {2, 3, seq, head}),
                                 TensorType(t, {2, 3, seq, valueSize})},
                                {q, k, v}, attrs);
  ASSERT_TRUE(batched.ok) << batched.error;
  auto slice = [](const std::vector<double> &s, int64_t b, int64_t size) {
    return std::vector<double>(s.begin() + b * size, s.begin() + (b + 1) * size);
  };
  for (int64_t b = 0; b < 6; ++b) {
    KernelRun single = runKernel(
        "scaled_dot_product_attention",
        {TensorType(t, {seq, head}), TensorType(t, {seq, head}), TensorType(t, {seq, valueSize})},
        {slice(q, b, seq * head), slice(k, b, seq * head), slice(v, b, seq * valueSize)}, attrs);
    ASSERT_TRUE(single.ok) << single.error;
    EXPECT_TRUE(allClose(slice(batched.outputs[0], b, seq * valueSize), single.outputs[0], 0))
        << "batch " << b;
  }
}

TEST(RefAttention, RandomAgainstF64) {
  TypesAt types = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {2, 5, 4}), TensorType(t, {2, 6, 4}),
                                   TensorType(t, {2, 6, 3})};
  };
  expectAllPrecisions(
      "scaled_dot_product_attention", types,
      {randomValues(40, 80, -2, 2), randomValues(48, 81, -2, 2), randomValues(36, 82)});
  TypesAt square = [](DType t) {
    return std::vector<TensorType>{TensorType(t, {1, 2, 5, 4}), TensorType(t, {1, 2, 5, 4}),
                                   TensorType(t, {1, 2, 5, 4})};
  };
  expectAllPrecisions("scaled_dot_product_attention", square,
                      {randomValues(40, 83), randomValues(40, 84), randomValues(40, 85)},
                      {{"causal", true}, {"scale", 0.75}});
}

} // namespace
