//===- RefShapeTest.cpp - Reference flatten, reshape, transpose, permute, ... ===//
#include "KernelTestUtil.h"

#include <cmath>
#include <cstdint>
#include <limits>

using namespace ampc;
using namespace ampc::testing;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
const DType kFloatDTypes[] = {DType::F32, DType::F16, DType::BF16};

std::vector<double> iota(size_t n, double start = 0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = start + static_cast<double>(i);
  return v;
}

/// Data movement is exact: every dtype must match f64 with tolerance 0, and
/// the half results trivially equal the rounded f32 results.
void checkMoveIsExact(const std::string &op, std::vector<int64_t> dims, const AttrMap &attrs) {
  std::vector<TensorType> types = {TensorType(DType::F32, dims)};
  std::vector<std::vector<double>> values = {randomValues(types[0].numElements(), 41, -3, 3)};
  for (DType t : kFloatDTypes)
    EXPECT_TRUE(matchesF64(op, types, values, attrs, t, 0)) << op;
  EXPECT_TRUE(halfEmulationExact(op, types, values, attrs, DType::F16)) << op;
  EXPECT_TRUE(halfEmulationExact(op, types, values, attrs, DType::BF16)) << op;
}

KernelRun runCast(DType from, DType to, const std::vector<double> &values) {
  return runKernel("cast", {TensorType(from, {static_cast<int64_t>(values.size())})}, {values},
                   {{"to", to}});
}

/// f32 values that probe half rounding: ties, the overflow threshold,
/// subnormals, signed zeros, inf, plus 2000 random bit patterns.
std::vector<double> castProbeValues() {
  std::vector<double> v = {0.0,
                           -0.0,
                           1.0,
                           -1.0,
                           1.0 + std::ldexp(1, -11),     // f16 tie -> 1
                           1.0 + 3 * std::ldexp(1, -11), // f16 tie -> 1 + 2^-9
                           1.0 + std::ldexp(1, -8),      // bf16 tie -> 1
                           1.0 + 3 * std::ldexp(1, -8),  // bf16 tie -> 1 + 2^-6
                           65504,
                           65519.99609375, // largest f32 below 65520: rounds to 65504
                           65520,          // rounds to f16 inf
                           std::ldexp(1, -14),
                           std::ldexp(1, -24),
                           std::ldexp(1, -25),       // f16 tie between 0 and 2^-24 -> 0
                           1.5 * std::ldexp(1, -25), // -> 2^-24
                           3 * std::ldexp(1, -25),   // tie between 2^-24 and 2^-23 -> 2^-23
                           std::ldexp(1, -130),      // f32 subnormal
                           3.0e38,
                           kInf,
                           -kInf};
  for (uint64_t i = 0; i < 2000; ++i) {
    float f = bitsToFloat(static_cast<uint32_t>(kernels::randomBits(77, 1, i)));
    if (!std::isnan(f))
      v.push_back(f);
  }
  return v;
}

} // namespace

TEST(RefShapeTest, FlattenAndReshapeKeepElementOrder) {
  std::vector<double> x = iota(24);
  KernelRun flat = runKernel("flatten", {TensorType(DType::F32, {2, 3, 4})}, {x});
  ASSERT_TRUE(flat.ok) << flat.error;
  EXPECT_EQ(flat.outputTypes[0], TensorType(DType::F32, {2, 12}));
  EXPECT_EQ(flat.outputs[0], x);

  KernelRun middle = runKernel("flatten", {TensorType(DType::I64, {2, 3, 4})}, {x},
                               {{"start_dim", 0}, {"end_dim", 1}});
  ASSERT_TRUE(middle.ok) << middle.error;
  EXPECT_EQ(middle.outputTypes[0], TensorType(DType::I64, {6, 4}));
  EXPECT_EQ(middle.outputs[0], x);

  KernelRun reshaped = runKernel("reshape", {TensorType(DType::F16, {2, 3, 4})}, {x},
                                 {{"shape", std::vector<int64_t>{4, -1}}});
  ASSERT_TRUE(reshaped.ok) << reshaped.error;
  EXPECT_EQ(reshaped.outputTypes[0], TensorType(DType::F16, {4, 6}));
  EXPECT_EQ(reshaped.outputs[0], x);
}

TEST(RefShapeTest, TransposeHandComputed) {
  // [[0, 1, 2], [3, 4, 5]] -> [[0, 3], [1, 4], [2, 5]]
  KernelRun run = runKernel("transpose", {TensorType(DType::F64, {2, 3})}, {iota(6)},
                            {{"dim0", 0}, {"dim1", 1}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0], (std::vector<double>{0, 3, 1, 4, 2, 5}));

  // Negative dims on [2, 3, 4]: swap the last two -> out[i, k, j] = in[i, j, k].
  KernelRun last = runKernel("transpose", {TensorType(DType::I32, {2, 3, 4})}, {iota(24)},
                             {{"dim0", -1}, {"dim1", -2}});
  ASSERT_TRUE(last.ok) << last.error;
  EXPECT_EQ(last.outputTypes[0], TensorType(DType::I32, {2, 4, 3}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(last.outputs[0][(i * 4 + k) * 3 + j], (i * 3 + j) * 4 + k);
}

TEST(RefShapeTest, PermuteHandComputed) {
  // dims [2, 0, 1] on [2, 3, 4]: out[k, i, j] = in[i, j, k], shape [4, 2, 3].
  KernelRun run = runKernel("permute", {TensorType(DType::BF16, {2, 3, 4})}, {iota(24)},
                            {{"dims", std::vector<int64_t>{2, 0, 1}}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputTypes[0], TensorType(DType::BF16, {4, 2, 3}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(run.outputs[0][(k * 2 + i) * 3 + j], (i * 3 + j) * 4 + k);
  EXPECT_EQ(run.outputs[0][1], 4); // out[0, 0, 1] = in[0, 1, 0]

  KernelRun negative = runKernel("permute", {TensorType(DType::BF16, {2, 3, 4})}, {iota(24)},
                                 {{"dims", std::vector<int64_t>{-1, 0, -2}}});
  ASSERT_TRUE(negative.ok) << negative.error;
  EXPECT_EQ(negative.outputs[0], run.outputs[0]);
}

TEST(RefShapeTest, ConcatHandComputed) {
  // Axis 1: [[1], [2]] ++ [[3, 4], [5, 6]] ++ [[7], [8]] -> [[1, 3, 4, 7], [2, 5, 6, 8]].
  KernelRun run = runKernel("concat",
                            {TensorType(DType::F32, {2, 1}), TensorType(DType::F32, {2, 2}),
                             TensorType(DType::F32, {2, 1})},
                            {{1, 2}, {3, 4, 5, 6}, {7, 8}}, {{"axis", -1}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputTypes[0], TensorType(DType::F32, {2, 4}));
  EXPECT_EQ(run.outputs[0], (std::vector<double>{1, 3, 4, 7, 2, 5, 6, 8}));

  // Axis 0 of i64 tensors appends rows.
  KernelRun rows =
      runKernel("concat", {TensorType(DType::I64, {1, 2}), TensorType(DType::I64, {2, 2})},
                {{1, 2}, {3, 4, 5, 6}});
  ASSERT_TRUE(rows.ok) << rows.error;
  EXPECT_EQ(rows.outputs[0], (std::vector<double>{1, 2, 3, 4, 5, 6}));

  // The middle axis of [2, 1, 2] ++ [2, 2, 2].
  KernelRun middle =
      runKernel("concat", {TensorType(DType::F16, {2, 1, 2}), TensorType(DType::F16, {2, 2, 2})},
                {{1, 2, 3, 4}, {10, 11, 12, 13, 14, 15, 16, 17}}, {{"axis", 1}});
  ASSERT_TRUE(middle.ok) << middle.error;
  EXPECT_EQ(middle.outputs[0], (std::vector<double>{1, 2, 10, 11, 12, 13, 3, 4, 14, 15, 16, 17}));
}

TEST(RefShapeTest, EmbeddingHandComputed) {
  // weight [4, 2] rows: [0, 0.5], [10, 10.5], [20, 20.5], [30, 30.5]
  std::vector<double> weight = {0, 0.5, 10, 10.5, 20, 20.5, 30, 30.5};
  for (DType indexType : {DType::I64, DType::I32}) {
    KernelRun run =
        runKernel("embedding", {TensorType(indexType, {2, 2}), TensorType(DType::F32, {4, 2})},
                  {{2, 0, 3, 3}, weight});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_EQ(run.outputTypes[0], TensorType(DType::F32, {2, 2, 2}));
    EXPECT_EQ(run.outputs[0], (std::vector<double>{20, 20.5, 0, 0.5, 30, 30.5, 30, 30.5}));
  }
}

TEST(RefShapeTest, EmbeddingPaddingRowIsReturnedAsStored) {
  // As torch.nn.functional.embedding: padding_idx only stops gradients; the
  // forward pass returns the row's stored values (zero when initialised by
  // nn.Embedding, anything else if the user set it).
  std::vector<double> weight = {1, 2, 3, 4, 5, 6};
  KernelRun run =
      runKernel("embedding", {TensorType(DType::I64, {3}), TensorType(DType::F16, {3, 2})},
                {{1, 0, 1}, weight}, {{"padding_idx", 1}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0], (std::vector<double>{3, 4, 1, 2, 3, 4}));
}

TEST(RefShapeTest, EmbeddingOutOfRangeIndexGivesNaNRow) {
  std::vector<double> weight = {1, 2, 3, 4};
  KernelRun run =
      runKernel("embedding", {TensorType(DType::I64, {4}), TensorType(DType::F32, {2, 2})},
                {{1, 2, -3, 5}, weight});
  ASSERT_TRUE(run.ok) << run.error; // and no read or write out of bounds
  EXPECT_EQ(run.outputs[0][0], 3);
  EXPECT_EQ(run.outputs[0][1], 4);
  for (int i = 2; i < 8; ++i)
    EXPECT_TRUE(std::isnan(run.outputs[0][i])) << i;
}

TEST(RefShapeTest, EmbeddingNegativeIndexCountsFromTheEnd) {
  // ONNX Gather's rule: -1 is the last row, -num_embeddings the first.
  KernelRun run =
      runKernel("embedding", {TensorType(DType::I64, {3}), TensorType(DType::F32, {3, 2})},
                {{-1, -3, 1}, {1, 2, 3, 4, 5, 6}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0], (std::vector<double>{5, 6, 1, 2, 3, 4}));
}

TEST(RefShapeTest, MovesAreExactInEveryDType) {
  checkMoveIsExact("flatten", {3, 4, 5}, {});
  checkMoveIsExact("reshape", {3, 4, 5}, {{"shape", std::vector<int64_t>{5, -1, 2}}});
  checkMoveIsExact("transpose", {3, 4, 5}, {{"dim0", 0}, {"dim1", 2}});
  checkMoveIsExact("permute", {3, 4, 5}, {{"dims", std::vector<int64_t>{1, 2, 0}}});
  checkMoveIsExact("cast", {3, 4, 5}, {{"to", DType::F64}});

  std::vector<TensorType> concatTypes = {TensorType(DType::F32, {3, 2, 5}),
                                         TensorType(DType::F32, {3, 4, 5})};
  std::vector<std::vector<double>> concatValues = {randomValues(30, 1), randomValues(60, 2)};
  for (DType t : kFloatDTypes)
    EXPECT_TRUE(matchesF64("concat", concatTypes, concatValues, {{"axis", 1}}, t, 0));

  std::vector<TensorType> embeddingTypes = {TensorType(DType::I64, {6}),
                                            TensorType(DType::F32, {5, 3})};
  std::vector<std::vector<double>> embeddingValues = {{4, 0, 2, 2, 1, 3}, randomValues(15, 3)};
  for (DType t : kFloatDTypes) {
    EXPECT_TRUE(matchesF64("embedding", embeddingTypes, embeddingValues, {}, t, 0));
    EXPECT_TRUE(halfEmulationExact("embedding", embeddingTypes, embeddingValues, {},
                                   t == DType::F32 ? DType::F16 : t));
  }
}

TEST(RefShapeTest, CastToHalfIsBitExact) {
  std::vector<double> values = castProbeValues();
  KernelRun f16 = runCast(DType::F32, DType::F16, values);
  KernelRun bf16 = runCast(DType::F32, DType::BF16, values);
  ASSERT_TRUE(f16.ok && bf16.ok) << f16.error << bf16.error;
  for (size_t i = 0; i < values.size(); ++i) {
    float x = static_cast<float>(values[i]);
    // Half values widen to f32 exactly, so the bits are recovered from the double.
    EXPECT_EQ(floatToHalfBits(static_cast<float>(f16.outputs[0][i])), floatToHalfBits(x)) << x;
    EXPECT_EQ(floatToBf16Bits(static_cast<float>(bf16.outputs[0][i])), floatToBf16Bits(x)) << x;
  }
  // Spot checks of the rounding rules themselves.
  EXPECT_EQ(f16.outputs[0][4], 1.0);
  EXPECT_EQ(f16.outputs[0][5], 1.0 + std::ldexp(1, -9));
  EXPECT_EQ(bf16.outputs[0][6], 1.0);
  EXPECT_EQ(bf16.outputs[0][7], 1.0 + std::ldexp(1, -6));
  EXPECT_EQ(f16.outputs[0][9], 65504);
  EXPECT_EQ(f16.outputs[0][10], kInf);
  EXPECT_EQ(f16.outputs[0][13], 0);
  EXPECT_EQ(f16.outputs[0][14], std::ldexp(1, -24));
  EXPECT_EQ(f16.outputs[0][15], std::ldexp(1, -23));
  EXPECT_TRUE(std::signbit(f16.outputs[0][1]));

  KernelRun nan = runCast(DType::F32, DType::F16, {kNaN});
  ASSERT_TRUE(nan.ok) << nan.error;
  EXPECT_TRUE(std::isnan(nan.outputs[0][0]));
}

TEST(RefShapeTest, CastFromHalfIsExact) {
  // Every f16 and bf16 value widens exactly to f32 and f64.
  std::vector<double> halves, bf16s;
  for (uint32_t bits = 0; bits < 0x10000; bits += 7) {
    float h = halfBitsToFloat(static_cast<uint16_t>(bits));
    float b = bf16BitsToFloat(static_cast<uint16_t>(bits));
    if (!std::isnan(h))
      halves.push_back(h);
    if (!std::isnan(b))
      bf16s.push_back(b);
  }
  for (DType to : {DType::F32, DType::F64}) {
    KernelRun fromF16 = runCast(DType::F16, to, halves);
    KernelRun fromBf16 = runCast(DType::BF16, to, bf16s);
    ASSERT_TRUE(fromF16.ok && fromBf16.ok) << fromF16.error << fromBf16.error;
    EXPECT_EQ(fromF16.outputs[0], halves);
    EXPECT_EQ(fromBf16.outputs[0], bf16s);
  }
  // f16 -> bf16 rounds the exact f32 value once: bf16 spacing is 2^-7 at 1 and
  // 256 at 65504, so 1 + 2^-10 -> 1 and 65504 -> 65536.
  KernelRun cross = runCast(DType::F16, DType::BF16, {1 + std::ldexp(1, -10), 65504});
  ASSERT_TRUE(cross.ok) << cross.error;
  EXPECT_EQ(cross.outputs[0], (std::vector<double>{1.0, 65536}));
}

TEST(RefShapeTest, CastF64ToHalfGoesThroughF32) {
  // 1 + 2^-11 + 2^-40 is just above an f16 tie, so rounding it directly would
  // give 1 + 2^-10. We round f64 -> f32 -> f16 (as c10::Half(double) and
  // storeFromDouble do): f32 drops 2^-40, leaving the tie 1 + 2^-11, which
  // rounds to the even 1.
  double v = 1 + std::ldexp(1, -11) + std::ldexp(1, -40);
  KernelRun f16 = runCast(DType::F64, DType::F16, {v});
  // Same for bf16 with its tie at 1 + 2^-8.
  KernelRun bf16 = runCast(DType::F64, DType::BF16, {1 + std::ldexp(1, -8) + std::ldexp(1, -40)});
  KernelRun f32 = runCast(DType::F64, DType::F32, {v, 0.1});
  ASSERT_TRUE(f16.ok && bf16.ok && f32.ok) << f16.error << bf16.error << f32.error;
  EXPECT_EQ(f16.outputs[0][0], 1.0);
  EXPECT_EQ(bf16.outputs[0][0], 1.0);
  EXPECT_EQ(f32.outputs[0][0], 1 + std::ldexp(1, -11));
  EXPECT_EQ(f32.outputs[0][1], static_cast<double>(0.1f));
}

TEST(RefShapeTest, CastFloatToIntTruncatesTowardZero) {
  std::vector<double> values = {-2.7, -0.5, 0.5, 2.7, 7, -7, 1e20, -1e20, kInf, -kInf, kNaN};
  for (DType from : {DType::F32, DType::F64, DType::BF16}) {
    KernelRun i64 = runCast(from, DType::I64, values);
    KernelRun i32 = runCast(from, DType::I32, values);
    ASSERT_TRUE(i64.ok && i32.ok) << i64.error << i32.error;
    // Out of range saturates and NaN gives 0 (CastMath.h: CUDA's behaviour;
    // C++ and PyTorch leave it undefined).
    double maxI64 = static_cast<double>(INT64_MAX), minI64 = static_cast<double>(INT64_MIN);
    EXPECT_EQ(i64.outputs[0],
              (std::vector<double>{-2, 0, 0, 2, 7, -7, maxI64, minI64, maxI64, minI64, 0}))
        << dtypeName(from).str();
    EXPECT_EQ(i32.outputs[0], (std::vector<double>{-2, 0, 0, 2, 7, -7, INT32_MAX, INT32_MIN,
                                                   INT32_MAX, INT32_MIN, 0}))
        << dtypeName(from).str();
  }
  // The exact boundaries: 2^31 saturates, -2^31 fits, 2^31 - 1 fits.
  KernelRun edge =
      runCast(DType::F64, DType::I32, {2147483648.0, -2147483648.0, 2147483647.0, -2147483648.9});
  ASSERT_TRUE(edge.ok) << edge.error;
  EXPECT_EQ(edge.outputs[0], (std::vector<double>{INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN}));
}

TEST(RefShapeTest, CastIntegersAndBool) {
  // i64 -> f32 rounds to nearest: 2^24 + 1 -> 2^24; i64 -> bf16: 257 -> 256.
  KernelRun toF32 = runCast(DType::I64, DType::F32, {3, -5, 16777217});
  KernelRun toBf16 = runCast(DType::I64, DType::BF16, {257, 259, -3});
  // i64 -> i32 wraps modulo 2^32.
  KernelRun narrow = runCast(DType::I64, DType::I32, {4294967301.0, -1, 2147483648.0});
  KernelRun floatToBool = runCast(DType::F32, DType::Bool, {0, -0.0, 2.5, kNaN, -kInf});
  KernelRun intToBool = runCast(DType::I32, DType::Bool, {0, 7, -1});
  KernelRun boolToFloat = runCast(DType::Bool, DType::F16, {0, 1, 1});
  for (const KernelRun *r : {&toF32, &toBf16, &narrow, &floatToBool, &intToBool, &boolToFloat})
    ASSERT_TRUE(r->ok) << r->error;
  EXPECT_EQ(toF32.outputs[0], (std::vector<double>{3, -5, 16777216}));
  EXPECT_EQ(toBf16.outputs[0], (std::vector<double>{256, 260, -3}));
  EXPECT_EQ(narrow.outputs[0], (std::vector<double>{5, -1, -2147483648.0}));
  EXPECT_EQ(floatToBool.outputs[0], (std::vector<double>{0, 0, 1, 1, 1}));
  EXPECT_EQ(intToBool.outputs[0], (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(boolToFloat.outputs[0], (std::vector<double>{0, 1, 1}));
}

TEST(RefShapeTest, CastEveryPairOfDTypes) {
  // Small integers are exact in every dtype, so every one of the 49 casts
  // must give them back (bool: nonzero -> 1).
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      std::vector<double> values = from == DType::Bool ? std::vector<double>{0, 1, 1, 0}
                                                       : std::vector<double>{0, 1, -2, 100};
      KernelRun run = runCast(from, to, values);
      ASSERT_TRUE(run.ok) << run.error;
      std::vector<double> expected = values;
      if (to == DType::Bool)
        for (double &v : expected)
          v = v != 0;
      EXPECT_EQ(run.outputTypes[0].dtype(), to);
      EXPECT_EQ(run.outputs[0], expected) << dtypeName(from).str() << " -> " << dtypeName(to).str();
    }
}

TEST(RefShapeTest, CastRandomAgainstF64) {
  // f64 values rounded to dtype t, cast to f64 and back to t: a cast from a
  // narrower float to a wider one and back is exact.
  std::vector<double> values = randomValues(200, 51, -100, 100);
  for (DType t : kFloatDTypes) {
    std::vector<double> rounded = roundedTo(t, values);
    KernelRun widened = runCast(t, DType::F64, rounded);
    ASSERT_TRUE(widened.ok) << widened.error;
    EXPECT_EQ(widened.outputs[0], rounded);
    KernelRun narrowed = runCast(DType::F64, t, values);
    ASSERT_TRUE(narrowed.ok) << narrowed.error;
    EXPECT_TRUE(allClose(narrowed.outputs[0], values, defaultTolerance(t)));
    EXPECT_EQ(narrowed.outputs[0], rounded) << "storeFromDouble rounds the same way";
  }
}
