//===- RefElementwiseTest.cpp - Reference add, sub, mul, div, scale ---------===//
//
// And max, min, prelu and their backward ops (greater_share,
// prelu_derivative, prelu_grad_slope).
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include <cmath>
#include <limits>

using namespace ampc;
using namespace ampc::testing;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const DType kComputeDTypes[] = {DType::F32, DType::F16, DType::BF16};

KernelRun runBinary(const std::string &op, DType t, llvm::ArrayRef<int64_t> aDims,
                    const std::vector<double> &a, llvm::ArrayRef<int64_t> bDims,
                    const std::vector<double> &b) {
  return runKernel(op, {TensorType(t, aDims), TensorType(t, bDims)}, {a, b});
}

/// Random operands of the given shapes vs f64, and exact half emulation.
void checkBinaryRandom(const std::string &op, std::vector<int64_t> aDims,
                       std::vector<int64_t> bDims, double lo = -4, double hi = 4) {
  std::vector<TensorType> types = {TensorType(DType::F32, aDims), TensorType(DType::F32, bDims)};
  std::vector<std::vector<double>> values = {randomValues(types[0].numElements(), 21, lo, hi),
                                             randomValues(types[1].numElements(), 22, lo, hi)};
  for (DType t : kComputeDTypes)
    EXPECT_TRUE(matchesF64(op, types, values, {}, t, defaultTolerance(t))) << op;
  EXPECT_TRUE(halfEmulationExact(op, types, values, {}, DType::F16)) << op;
  EXPECT_TRUE(halfEmulationExact(op, types, values, {}, DType::BF16)) << op;
}

} // namespace

TEST(RefElementwiseTest, AddSameShape) {
  KernelRun run = runBinary("add", DType::F64, {2, 2}, {1, 2, 3, 4}, {2, 2}, {10, 20, 30, 40});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0], (std::vector<double>{11, 22, 33, 44}));
}

TEST(RefElementwiseTest, AddBroadcastsRowsColumnsAndScalars) {
  std::vector<double> a = {1, 2, 3, 4, 5, 6}; // [[1, 2, 3], [4, 5, 6]]
  KernelRun row = runBinary("add", DType::F64, {2, 3}, a, {3}, {10, 20, 30});
  ASSERT_TRUE(row.ok) << row.error;
  EXPECT_EQ(row.outputs[0], (std::vector<double>{11, 22, 33, 14, 25, 36}));

  KernelRun column = runBinary("add", DType::F64, {2, 3}, a, {2, 1}, {100, 200});
  ASSERT_TRUE(column.ok) << column.error;
  EXPECT_EQ(column.outputs[0], (std::vector<double>{101, 102, 103, 204, 205, 206}));

  // The broadcast operand on the left.
  KernelRun left = runBinary("add", DType::F64, {2, 1}, {100, 200}, {2, 3}, a);
  ASSERT_TRUE(left.ok) << left.error;
  EXPECT_EQ(left.outputs[0], column.outputs[0]);

  KernelRun scalar = runBinary("add", DType::F64, {2, 3}, a, {}, {0.5});
  ASSERT_TRUE(scalar.ok) << scalar.error;
  EXPECT_EQ(scalar.outputs[0], (std::vector<double>{1.5, 2.5, 3.5, 4.5, 5.5, 6.5}));
}

TEST(RefElementwiseTest, BothOperandsBroadcast) {
  // [2, 1, 3] + [4, 1] -> [2, 4, 3]: out[i, j, k] = a[i, 0, k] + b[j, 0].
  std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {10, 20, 30, 40};
  KernelRun run = runBinary("add", DType::F64, {2, 1, 3}, a, {4, 1}, b);
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_EQ(run.outputTypes[0].dims(), llvm::ArrayRef<int64_t>({2, 4, 3}));
  ASSERT_EQ(run.outputs[0].size(), 24u);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(run.outputs[0][(i * 4 + j) * 3 + k], a[i * 3 + k] + b[j]) << i << j << k;
  EXPECT_EQ(run.outputs[0][0], 11);
  EXPECT_EQ(run.outputs[0][23], 46);
}

TEST(RefElementwiseTest, SubMulDivHandComputed) {
  std::vector<double> a = {6, -3, 1.5, 0}, b = {2, 4, -0.5, 0};
  KernelRun sub = runBinary("sub", DType::F64, {4}, a, {4}, b);
  KernelRun mul = runBinary("mul", DType::F64, {4}, a, {4}, b);
  KernelRun div = runBinary("div", DType::F64, {4}, a, {4}, b);
  ASSERT_TRUE(sub.ok && mul.ok && div.ok) << sub.error << mul.error << div.error;
  EXPECT_EQ(sub.outputs[0], (std::vector<double>{4, -7, 2, 0}));
  EXPECT_EQ(mul.outputs[0], (std::vector<double>{12, -12, -0.75, 0}));
  EXPECT_EQ(div.outputs[0][0], 3);
  EXPECT_EQ(div.outputs[0][1], -0.75);
  EXPECT_EQ(div.outputs[0][2], -3);
  EXPECT_TRUE(std::isnan(div.outputs[0][3])) << "0 / 0 is NaN";

  // Broadcasting is not commutative for sub and div: [2, 1] - [3].
  KernelRun subBroadcast = runBinary("sub", DType::F64, {2, 1}, {10, 20}, {3}, {1, 2, 3});
  ASSERT_TRUE(subBroadcast.ok) << subBroadcast.error;
  EXPECT_EQ(subBroadcast.outputs[0], (std::vector<double>{9, 8, 7, 19, 18, 17}));
  KernelRun divBroadcast = runBinary("div", DType::F64, {3}, {1, 2, 3}, {2, 1}, {2, 0});
  ASSERT_TRUE(divBroadcast.ok) << divBroadcast.error;
  EXPECT_EQ(divBroadcast.outputs[0], (std::vector<double>{0.5, 1, 1.5, kInf, kInf, kInf}));
}

TEST(RefElementwiseTest, HalfSumsRoundOnceToNearestEven) {
  // f16 has 11 significant bits: near 2048 the spacing is 2. 2048 + 1 is a
  // tie and rounds to the even 2048; 2048 + 3 = 2051 is a tie and rounds to
  // 2052.
  KernelRun f16 = runBinary("add", DType::F16, {2}, {2048, 2048}, {2}, {1, 3});
  ASSERT_TRUE(f16.ok) << f16.error;
  EXPECT_EQ(f16.outputs[0], (std::vector<double>{2048, 2052}));
  // bf16 has 8 significant bits: near 256 the spacing is 2, so the same holds.
  KernelRun bf16 = runBinary("add", DType::BF16, {2}, {256, 256}, {2}, {1, 3});
  ASSERT_TRUE(bf16.ok) << bf16.error;
  EXPECT_EQ(bf16.outputs[0], (std::vector<double>{256, 260}));
  // f16 overflow: 60000 + 10000 is inf, while f32 math holds 70000.
  KernelRun overflow = runBinary("add", DType::F16, {1}, {60000}, {1}, {10000});
  ASSERT_TRUE(overflow.ok) << overflow.error;
  EXPECT_EQ(overflow.outputs[0][0], kInf);
  // 300 * 300 = 90000 is held by the f32 math but overflows when stored.
  KernelRun product = runBinary("mul", DType::F16, {1}, {300}, {1}, {300});
  ASSERT_TRUE(product.ok) << product.error;
  EXPECT_EQ(product.outputs[0][0], kInf);
}

TEST(RefElementwiseTest, ScaleHandComputed) {
  KernelRun run =
      runKernel("scale", {TensorType(DType::F64, {3})}, {{1, -2, 0.25}}, {{"factor", 0.5}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0], (std::vector<double>{0.5, -1, 0.125}));
  // The factor is rounded to the compute type: in f32 0.1 is 0.100000001490116.
  KernelRun f32 = runKernel("scale", {TensorType(DType::F32, {1})}, {{1}}, {{"factor", 0.1}});
  ASSERT_TRUE(f32.ok) << f32.error;
  EXPECT_EQ(f32.outputs[0][0], static_cast<double>(0.1f));
}

TEST(RefElementwiseTest, AddRandom) {
  checkBinaryRandom("add", {3, 4, 5}, {3, 4, 5});
  checkBinaryRandom("add", {3, 1, 5}, {4, 1});
}

TEST(RefElementwiseTest, SubRandom) {
  checkBinaryRandom("sub", {3, 4, 5}, {3, 4, 5});
  checkBinaryRandom("sub", {5}, {2, 3, 1});
}

TEST(RefElementwiseTest, MulRandom) {
  checkBinaryRandom("mul", {3, 4, 5}, {3, 4, 5});
  checkBinaryRandom("mul", {2, 1, 4, 1}, {3, 1, 5});
}

TEST(RefElementwiseTest, DivRandom) {
  // Divisors in [0.5, 4] keep quotients bounded, so the relative tolerance
  // means the same for every element.
  checkBinaryRandom("div", {3, 4, 5}, {3, 4, 5}, 0.5, 4);
  checkBinaryRandom("div", {4, 5}, {1, 5}, 0.5, 4);
}

TEST(RefElementwiseTest, ScaleRandom) {
  std::vector<TensorType> types = {TensorType(DType::F32, {7, 9})};
  std::vector<std::vector<double>> values = {randomValues(63, 31, -8, 8)};
  AttrMap attrs = {{"factor", 0.37}};
  for (DType t : kComputeDTypes)
    EXPECT_TRUE(matchesF64("scale", types, values, attrs, t, defaultTolerance(t)));
  EXPECT_TRUE(halfEmulationExact("scale", types, values, attrs, DType::F16));
  EXPECT_TRUE(halfEmulationExact("scale", types, values, attrs, DType::BF16));
}

// --- max, min and their gradients' shares; prelu and its backward ops ----------

TEST(RefElementwiseTest, MaxMinHandComputed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // NaN in either operand gives NaN (torch.maximum); a tie gives the first
  // operand, so max(-0, +0) is -0 as ATen's std::max gives.
  std::vector<double> a = {1, 5, 2, nan, 1, -0.0}, b = {3, 5, 1, 1, nan, 0};
  KernelRun max = runBinary("max", DType::F64, {6}, a, {6}, b);
  KernelRun min = runBinary("min", DType::F64, {6}, a, {6}, b);
  ASSERT_TRUE(max.ok && min.ok) << max.error << min.error;
  EXPECT_EQ(std::vector<double>(max.outputs[0].begin(), max.outputs[0].begin() + 3),
            (std::vector<double>{3, 5, 2}));
  EXPECT_EQ(std::vector<double>(min.outputs[0].begin(), min.outputs[0].begin() + 3),
            (std::vector<double>{1, 5, 1}));
  for (const KernelRun *run : {&max, &min}) {
    EXPECT_TRUE(std::isnan(run->outputs[0][3]) && std::isnan(run->outputs[0][4]));
    EXPECT_TRUE(run->outputs[0][5] == 0 && std::signbit(run->outputs[0][5]));
  }
  // Broadcast: [2, 1] against [3].
  KernelRun broadcast = runBinary("max", DType::F64, {2, 1}, {0, 10}, {3}, {-1, 5, 20});
  ASSERT_TRUE(broadcast.ok) << broadcast.error;
  EXPECT_EQ(broadcast.outputs[0], (std::vector<double>{0, 5, 20, 10, 10, 20}));
}

TEST(RefElementwiseTest, GreaterShareHandComputed) {
  // 1 where a is the larger, 1/2 on ties (-0 ties +0), 0 where smaller, 1
  // where either is NaN: torch.maximum's backward.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    KernelRun run =
        runBinary("greater_share", t, {6}, {3, 2, 1, -0.0, nan, 1}, {6}, {1, 2, 3, 0, 1, nan});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_EQ(run.outputs[0], (std::vector<double>{1, 0.5, 0, 0.5, 1, 1})) << dtypeName(t).str();
  }
}

TEST(RefElementwiseTest, PReluHandComputed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // A [3] slope against [2, 3]: x where x > 0, else slope * x.
  KernelRun run =
      runBinary("prelu", DType::F64, {2, 3}, {-2, -1, 0, 1, 2, nan}, {3}, {0.25, 0.5, 2});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0], {-0.5, -0.5, 0, 1, 2, nan}, 0));
  EXPECT_TRUE(std::isnan(run.outputs[0][5]));
  // Per channel: a [2, 1, 1] slope against [1, 2, 2, 2].
  KernelRun channels = runBinary("prelu", DType::F64, {1, 2, 2, 2}, {-1, 2, -3, 4, -1, 2, -3, 4},
                                 {2, 1, 1}, {0.5, 0.25});
  ASSERT_TRUE(channels.ok) << channels.error;
  EXPECT_EQ(channels.outputs[0], (std::vector<double>{-0.5, 2, -1.5, 4, -0.25, 2, -0.75, 4}));
  // Its backward ops: d/dx is 1 or the slope; the slope's gradient x * dy
  // where x <= 0 (before the sum over broadcast dims).
  KernelRun derivative = runBinary("prelu_derivative", DType::F64, {2, 3}, {-1, 0, 3, 2, -2, nan},
                                   {3}, {0.5, 0.25, 2});
  ASSERT_TRUE(derivative.ok) << derivative.error;
  EXPECT_EQ(derivative.outputs[0], (std::vector<double>{0.5, 0.25, 1, 1, 0.25, 2}));
  KernelRun slope =
      runBinary("prelu_grad_slope", DType::F64, {4}, {2, 3, 4, 5}, {4}, {-1, 0, 5, -0.5});
  ASSERT_TRUE(slope.ok) << slope.error;
  EXPECT_EQ(slope.outputs[0], (std::vector<double>{-2, 0, 0, -2.5}));
}

TEST(RefElementwiseTest, PowerHandComputed) {
  // a^b elementwise with a broadcast exponent, and the derivatives as ATen
  // writes them: by a, b a^(b-1) (0 where b is 0); by b, a^b log a (0 where
  // a is 0 and b >= 0).
  KernelRun run = runBinary("power", DType::F64, {2, 3}, {2, 3, 4, 0, 9, -2}, {3}, {3, 0.5, -1});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0], {8, std::sqrt(3.0), 0.25, 0, 3, -0.5}, 1e-15));
  KernelRun base = runBinary("power_grad_base", DType::F64, {4}, {2, 4, 5, 0}, {4}, {3, 0.5, 0, 2});
  ASSERT_TRUE(base.ok) << base.error;
  EXPECT_TRUE(allClose(base.outputs[0], {12, 0.25, 0, 0}, 1e-15));
  KernelRun exponent =
      runBinary("power_grad_exponent", DType::F64, {4}, {2, 0, 0, 1}, {4}, {3, 2, 0, 5});
  ASSERT_TRUE(exponent.ok) << exponent.error;
  EXPECT_TRUE(allClose(exponent.outputs[0], {8 * std::log(2.0), 0, 0, 0}, 1e-15));
}

TEST(RefElementwiseTest, FloorAndCeilHandComputed) {
  std::vector<double> x = {-1.5, -0.5, 0, 0.5, 2, 2.7};
  KernelRun floor = runKernel("floor", {TensorType(DType::F64, {6})}, {x});
  KernelRun ceil = runKernel("ceil", {TensorType(DType::F64, {6})}, {x});
  ASSERT_TRUE(floor.ok && ceil.ok) << floor.error << ceil.error;
  EXPECT_EQ(floor.outputs[0], (std::vector<double>{-2, -1, 0, 0, 2, 2}));
  EXPECT_EQ(ceil.outputs[0], (std::vector<double>{-1, -0.0, 0, 1, 2, 3}));
}

TEST(RefElementwiseTest, ModAndFmodHandComputed) {
  // mod takes the divisor's sign (Python's %), fmod the dividend's (C's).
  std::vector<double> a = {5, -5, 5, -5, 4.5, 6}, b = {3, 3, -3, -3, 2, 3};
  KernelRun mod = runBinary("mod", DType::F64, {6}, a, {6}, b);
  KernelRun fmod = runBinary("fmod", DType::F64, {6}, a, {6}, b);
  ASSERT_TRUE(mod.ok && fmod.ok) << mod.error << fmod.error;
  EXPECT_EQ(mod.outputs[0], (std::vector<double>{2, 1, -1, -2, 0.5, 0}));
  EXPECT_EQ(fmod.outputs[0], (std::vector<double>{2, -2, 2, -2, 0.5, 0}));
  // By the divisor: -floor(a / b) and -trunc(a / b).
  KernelRun modGrad =
      runBinary("mod_grad_divisor", DType::F64, {4}, {5, -5, 7, -7}, {4}, {3, 3, -2, 2});
  KernelRun fmodGrad =
      runBinary("fmod_grad_divisor", DType::F64, {4}, {5, -5, 7, -7}, {4}, {3, 3, -2, 2});
  ASSERT_TRUE(modGrad.ok && fmodGrad.ok) << modGrad.error << fmodGrad.error;
  EXPECT_EQ(modGrad.outputs[0], (std::vector<double>{-1, 2, 4, 4}));
  EXPECT_EQ(fmodGrad.outputs[0], (std::vector<double>{-1, 1, 3, 3}));
}

TEST(RefElementwiseTest, PowerRandom) {
  for (const char *op : {"power", "power_grad_base", "power_grad_exponent"}) {
    checkBinaryRandom(op, {3, 4, 5}, {3, 4, 5}, 0.25, 3);
    checkBinaryRandom(op, {3, 1, 5}, {4, 1}, 0.25, 3);
  }
}

TEST(RefElementwiseTest, MaxMinPReluRandom) {
  for (const char *op : {"max", "min", "greater_share"}) {
    checkBinaryRandom(op, {3, 4, 5}, {3, 4, 5});
    checkBinaryRandom(op, {3, 1, 5}, {4, 1});
  }
  checkBinaryRandom("prelu", {3, 4, 5}, {4, 1});
  checkBinaryRandom("prelu", {3, 4, 5}, {3, 4, 5});
  checkBinaryRandom("prelu_derivative", {2, 3, 4, 5}, {3, 1, 1});
  checkBinaryRandom("prelu_grad_slope", {3, 4, 5}, {3, 4, 5});
}
