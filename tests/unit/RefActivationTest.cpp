//===- RefActivationTest.cpp - Reference activations, softmax, dropout ----===//
//
// And the unary math ops of the activation family: clamp, sqrt, erf, pow, exp,
// and ONNX's other activations and math: hardsigmoid, hardswish, leaky_relu,
// elu, softplus, neg, abs, log, reciprocal.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include "kernels/common/ActivationMath.h"
#include "kernels/common/UnaryMath.h"

#include <cmath>
#include <limits>

using namespace ampc;
using namespace ampc::testing;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
const DType kComputeDTypes[] = {DType::F32, DType::F16, DType::BF16};

KernelRun runF64(const std::string &op, llvm::ArrayRef<int64_t> dims,
                 const std::vector<double> &values, AttrMap attrs = {}, uint64_t step = 0) {
  return runKernel(op, {TensorType(DType::F64, dims)}, {values}, std::move(attrs), step);
}

/// Random values vs f64 at every compute dtype, and exact half emulation.
void checkAgainstF64AndHalf(const std::string &op, AttrMap attrs = {}, double lo = -4,
                            double hi = 4) {
  std::vector<TensorType> types = {TensorType(DType::F32, {3, 4, 5})};
  std::vector<std::vector<double>> values = {randomValues(60, 11, lo, hi)};
  for (DType t : kComputeDTypes)
    EXPECT_TRUE(matchesF64(op, types, values, attrs, t, defaultTolerance(t))) << op;
  EXPECT_TRUE(halfEmulationExact(op, types, values, attrs, DType::F16)) << op;
  EXPECT_TRUE(halfEmulationExact(op, types, values, attrs, DType::BF16)) << op;
}

} // namespace

TEST(RefActivationTest, ReluHandComputed) {
  KernelRun run = runF64("relu", {6}, {-2, -0.5, 0, 1.5, 3, kNaN});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0], {0, 0, 0, 1.5, 3, kNaN}, 0));
  EXPECT_TRUE(std::isnan(run.outputs[0][5])) << "relu must propagate NaN";
}

TEST(RefActivationTest, ReluRandom) { checkAgainstF64AndHalf("relu"); }

TEST(RefActivationTest, GeluErfHandComputed) {
  KernelRun run = runF64("gelu", {4}, {-1, 0, 1, 2});
  ASSERT_TRUE(run.ok) << run.error;
  // x * Phi(x) with the normal CDF Phi.
  EXPECT_TRUE(allClose(run.outputs[0],
                       {-0.15865525393145707, 0.0, 0.8413447460685429, 1.9544997361036416}, 1e-15));
}

TEST(RefActivationTest, GeluTanhHandComputed) {
  KernelRun run = runF64("gelu", {4}, {-1, 0, 1, 2}, {{"approximate", "tanh"}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0],
                       {-0.15880800939172324, 0.0, 0.8411919906082768, 1.954597694087775}, 1e-15));
}

TEST(RefActivationTest, GeluRandom) {
  checkAgainstF64AndHalf("gelu");
  checkAgainstF64AndHalf("gelu", {{"approximate", "tanh"}});
}

TEST(RefActivationTest, SigmoidHandComputed) {
  KernelRun run = runF64("sigmoid", {5}, {0, std::log(3.0), -std::log(3.0), 1, -800});
  ASSERT_TRUE(run.ok) << run.error;
  // e^800 overflows to inf; the result is the limit 0, not NaN.
  EXPECT_TRUE(allClose(run.outputs[0], {0.5, 0.75, 0.25, 0.7310585786300049, 0}, 1e-15));
}

TEST(RefActivationTest, SigmoidRandom) { checkAgainstF64AndHalf("sigmoid", {}, -10, 10); }

TEST(RefActivationTest, TanhHandComputed) {
  KernelRun run = runF64("tanh", {3}, {0, 0.5, -2});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0], {0, 0.46211715726000974, -0.9640275800758169}, 1e-15));
}

TEST(RefActivationTest, TanhRandom) { checkAgainstF64AndHalf("tanh"); }

TEST(RefActivationTest, SiluHandComputed) {
  KernelRun run = runF64("silu", {6}, {0, 1, -1, 2, -800, 800});
  ASSERT_TRUE(run.ok) << run.error;
  // x sigmoid(x); e^800 overflows to inf and silu(-800) is the limit -0.
  EXPECT_TRUE(allClose(run.outputs[0],
                       {0, 0.7310585786300049, -0.2689414213699951, 1.7615941559557646, 0, 800},
                       1e-15));
  EXPECT_TRUE(std::signbit(run.outputs[0][4]));
}

TEST(RefActivationTest, SiluRandom) { checkAgainstF64AndHalf("silu", {}, -10, 10); }

TEST(RefActivationTest, ClampHandComputed) {
  // Bounds inclusive, NaN propagates (as torch.clamp).
  AttrMap relu6{{"min", 0.0}, {"max", 6.0}};
  KernelRun run = runF64("clamp", {6}, {-7, -0.5, 0.5, 6, 7, kNaN}, relu6);
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0], {0, 0, 0.5, 6, 6, kNaN}, 0));
  EXPECT_TRUE(std::isnan(run.outputs[0][5])) << "clamp must propagate NaN";
  // One bound: the other defaults to infinity.
  KernelRun upper = runF64("clamp", {4}, {-kInf, -3, 1, kInf}, {{"max", 0.5}});
  ASSERT_TRUE(upper.ok) << upper.error;
  EXPECT_EQ(upper.outputs[0], (std::vector<double>{-kInf, -3, 0.5, 0.5}));
  // min > max gives max everywhere, as torch.clamp.
  KernelRun crossed = runF64("clamp", {3}, {-1, 1.5, 9}, {{"min", 2.0}, {"max", 1.0}});
  ASSERT_TRUE(crossed.ok) << crossed.error;
  EXPECT_EQ(crossed.outputs[0], (std::vector<double>{1, 1, 1}));
}

TEST(RefActivationTest, ClampRandom) {
  checkAgainstF64AndHalf("clamp", {{"min", -1.5}, {"max", 2.0}});
  checkAgainstF64AndHalf("clamp", {{"min", 0.1}});
}

TEST(RefActivationTest, SqrtHandComputed) {
  KernelRun run = runF64("sqrt", {7}, {0, 1, 4, 2, -1, kInf, -0.0});
  ASSERT_TRUE(run.ok) << run.error;
  const std::vector<double> &y = run.outputs[0];
  EXPECT_TRUE(allClose({y.begin(), y.begin() + 5}, {0, 1, 2, 1.4142135623730951, kNaN}, 0));
  EXPECT_EQ(y[5], kInf);
  EXPECT_TRUE(y[6] == 0 && std::signbit(y[6])) << "sqrt(-0) is -0";
}

TEST(RefActivationTest, SqrtRandom) { checkAgainstF64AndHalf("sqrt", {}, 0, 10); }

TEST(RefActivationTest, ErfHandComputed) {
  KernelRun run = runF64("erf", {6}, {0, 1, -1, 0.5, 10, -kInf});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0],
                       {0, 0.8427007929497149, -0.8427007929497149, 0.5204998778130465, 1, -1},
                       1e-15));
}

TEST(RefActivationTest, ErfRandom) { checkAgainstF64AndHalf("erf", {}, -3, 3); }

TEST(RefActivationTest, PowHandComputed) {
  struct Case {
    double exponent;
    std::vector<double> x, y;
  };
  // ATen's shortcuts give its answers at the edges: x^0.5 is sqrt (so
  // (-0)^0.5 = -0 and (-inf)^0.5 = NaN, where pow() says +0 and inf).
  const Case cases[] = {
      {2, {-3, 0.5, 0, 10}, {9, 0.25, 0, 100}},
      {3, {-2, 0.5, 1, 0}, {-8, 0.125, 1, 0}},
      {0.5, {4, 2, 0, 0.25}, {2, 1.4142135623730951, 0, 0.5}},
      {-0.5, {4, 0.25, 1, 16}, {0.5, 2, 1, 0.25}},
      {-1, {2, -0.5, 4, 1}, {0.5, -2, 0.25, 1}},
      {-2, {2, -0.5, 4, 1}, {0.25, 4, 0.0625, 1}},
      {0, {kNaN, 0, kInf, -3}, {1, 1, 1, 1}},
      {1.5, {4, 0.25, 1, -1}, {8, 0.125, 1, kNaN}},
  };
  for (const Case &c : cases) {
    KernelRun run = runF64("pow", {4}, c.x, {{"exponent", c.exponent}});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_TRUE(allClose(run.outputs[0], c.y, 1e-15)) << "exponent " << c.exponent;
  }
  KernelRun edges = runF64("pow", {2}, {-0.0, -kInf}, {{"exponent", 0.5}});
  ASSERT_TRUE(edges.ok) << edges.error;
  EXPECT_TRUE(edges.outputs[0][0] == 0 && std::signbit(edges.outputs[0][0]));
  EXPECT_TRUE(std::isnan(edges.outputs[0][1]));
  KernelRun zero = runF64("pow", {1}, {0}, {{"exponent", -1.0}});
  ASSERT_TRUE(zero.ok) << zero.error;
  EXPECT_EQ(zero.outputs[0][0], kInf);
}

TEST(RefActivationTest, PowRandom) {
  for (double e : {2.0, 3.0, -1.0})
    checkAgainstF64AndHalf("pow", {{"exponent", e}}, 0.5, 3);
  checkAgainstF64AndHalf("pow", {{"exponent", 2.0}}, -4, 4);
  for (double e : {0.5, -0.5, 1.7, 0.3})
    checkAgainstF64AndHalf("pow", {{"exponent", e}}, 0.1, 4);
}

TEST(RefActivationTest, ExpHandComputed) {
  KernelRun run = runF64("exp", {6}, {0, 1, -1, 2, -800, -kInf});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0],
                       {1, 2.718281828459045, 0.36787944117144233, 7.38905609893065, 0, 0}, 1e-15));
  KernelRun overflow = runF64("exp", {1}, {800});
  ASSERT_TRUE(overflow.ok) << overflow.error;
  EXPECT_EQ(overflow.outputs[0][0], kInf);
}

TEST(RefActivationTest, ExpRandom) { checkAgainstF64AndHalf("exp", {}, -8, 8); }

// --- ONNX's other activations and unary math --------------------------------

TEST(RefActivationTest, HardSigmoidHandComputed) {
  // PyTorch's constants by default: (x + 3) / 6 clamped to [0, 1].
  KernelRun run = runF64("hardsigmoid", {8}, {-4, -3, -1.5, 0, 1.5, 3, 4, kNaN});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0], {0, 0, 0.25, 0.5, 0.75, 1, 1, kNaN}, 0));
  EXPECT_TRUE(std::isnan(run.outputs[0][7])) << "hardsigmoid must propagate NaN";
  // ONNX's default alpha 0.2: 0.2 x + 0.5, saturating at -2.5 and 2.5.
  KernelRun onnx =
      runF64("hardsigmoid", {6}, {-3, -2.5, 0, 1, 2.5, kInf}, {{"alpha", 0.2}, {"beta", 0.5}});
  ASSERT_TRUE(onnx.ok) << onnx.error;
  EXPECT_TRUE(allClose(onnx.outputs[0], {0, 0, 0.5, 0.7, 1, 1}, 1e-15));
}

TEST(RefActivationTest, HardSigmoidIsAtensFormToTheBit) {
  // (min(max(x + 3, 0), 6)) / 6 in f32, as ATen's CPU kernel, not 1/6 x + 1/2.
  std::vector<double> x = randomValues(400, 41, -4, 4);
  KernelRun run =
      runKernel("hardsigmoid", {TensorType(DType::F32, {400})}, {roundedTo(DType::F32, x)});
  ASSERT_TRUE(run.ok) << run.error;
  for (size_t i = 0; i < x.size(); ++i) {
    float xf = static_cast<float>(x[i]);
    float want = std::min(std::max(xf + 3.0f, 0.0f), 6.0f) / 6.0f;
    EXPECT_EQ(static_cast<float>(run.outputs[0][i]), want) << xf;
  }
}

TEST(RefActivationTest, HardSwishHandComputed) {
  KernelRun run = runF64("hardswish", {8}, {-4, -3, -1.5, 0, 1.5, 3, 4, kNaN});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0], {0, 0, -0.375, 0, 1.125, 3, 4, kNaN}, 0));
  EXPECT_TRUE(std::isnan(run.outputs[0][7])) << "hardswish must propagate NaN";
  // x * (x + 3) / 6 in f32 in ATen's order: the product first, then / 6.
  KernelRun f32 = runKernel("hardswish", {TensorType(DType::F32, {1})}, {{0.1}});
  ASSERT_TRUE(f32.ok) << f32.error;
  float x = 0.1f;
  EXPECT_EQ(static_cast<float>(f32.outputs[0][0]), x * (x + 3.0f) / 6.0f);
}

TEST(RefActivationTest, LeakyReluHandComputed) {
  KernelRun run = runF64("leaky_relu", {5}, {-2, -0.5, 0, 3, kNaN}, {{"negative_slope", 0.1}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0], {-0.2, -0.05, 0, 3, kNaN}, 1e-16));
  KernelRun byDefault = runF64("leaky_relu", {2}, {-2, 2});
  ASSERT_TRUE(byDefault.ok) << byDefault.error;
  EXPECT_TRUE(allClose(byDefault.outputs[0], {-0.02, 2}, 1e-16));
}

TEST(RefActivationTest, EluHandComputed) {
  KernelRun run = runF64("elu", {5}, {-1, 0, 2, -800, 1e-20});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0], {-0.6321205588285577, 0, 2, -1, 1e-20}, 1e-15));
  // alpha scales the negative side; near 0, expm1 keeps the small values.
  KernelRun half = runF64("elu", {2}, {-1, -1e-20}, {{"alpha", 0.5}});
  ASSERT_TRUE(half.ok) << half.error;
  EXPECT_TRUE(allClose(half.outputs[0], {-0.31606027941427883, -0.5e-20}, 1e-15));
  EXPECT_EQ(half.outputs[0][1], -0.5e-20);
}

TEST(RefActivationTest, SoftplusHandComputed) {
  // ln(1 + e^x); above 20 x itself (torch's threshold), and no overflow for
  // large x nor loss of the tiny values of very negative x.
  KernelRun run = runF64("softplus", {8}, {0, 1, -1, 20, 21, -800, 800, -50});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(run.outputs[0],
                       {0.6931471805599453, 1.3132616875182228, 0.31326168751822286,
                        20.000000002061153, 21, 0, 800, 1.928749847963918e-22},
                       1e-15));
  EXPECT_NEAR(run.outputs[0][7], 1.928749847963918e-22, 1e-36);
  KernelRun f32 = runKernel("softplus", {TensorType(DType::F32, {2})}, {{100, -100}});
  ASSERT_TRUE(f32.ok) << f32.error;
  EXPECT_EQ(f32.outputs[0][0], 100);
  EXPECT_GT(f32.outputs[0][1], 0) << "e^-100 is a subnormal f32, not 0";
}

TEST(RefActivationTest, NegAbsLogReciprocalHandComputed) {
  KernelRun neg = runF64("neg", {3}, {1, -2, 0});
  ASSERT_TRUE(neg.ok) << neg.error;
  EXPECT_EQ(neg.outputs[0], (std::vector<double>{-1, 2, -0.0}));
  EXPECT_TRUE(std::signbit(neg.outputs[0][2]));
  KernelRun abs = runF64("abs", {5}, {-2, 3, -0.0, kNaN, -kInf});
  ASSERT_TRUE(abs.ok) << abs.error;
  EXPECT_TRUE(allClose({abs.outputs[0].begin(), abs.outputs[0].end() - 1}, {2, 3, 0, kNaN}, 0));
  EXPECT_EQ(abs.outputs[0][4], kInf);
  EXPECT_FALSE(std::signbit(abs.outputs[0][2])) << "|-0| is +0";
  KernelRun log = runF64("log", {5}, {1, std::exp(1.0), 0, -1, 0.5});
  ASSERT_TRUE(log.ok) << log.error;
  EXPECT_TRUE(allClose({log.outputs[0][0], log.outputs[0][1], log.outputs[0][3], log.outputs[0][4]},
                       {0, 1, kNaN, -0.6931471805599453}, 1e-15));
  EXPECT_EQ(log.outputs[0][2], -kInf);
  KernelRun reciprocal = runF64("reciprocal", {5}, {2, -4, 0, -0.0, kInf});
  ASSERT_TRUE(reciprocal.ok) << reciprocal.error;
  EXPECT_EQ(reciprocal.outputs[0], (std::vector<double>{0.5, -0.25, kInf, -kInf, 0}));
}

TEST(RefActivationTest, OnnxActivationsRandom) {
  checkAgainstF64AndHalf("hardsigmoid", {}, -5, 5);
  checkAgainstF64AndHalf("hardsigmoid", {{"alpha", 0.2}, {"beta", 0.5}}, -5, 5);
  checkAgainstF64AndHalf("hardswish", {}, -5, 5);
  checkAgainstF64AndHalf("leaky_relu");
  checkAgainstF64AndHalf("leaky_relu", {{"negative_slope", 0.2}});
  checkAgainstF64AndHalf("elu", {}, -5, 3);
  checkAgainstF64AndHalf("elu", {{"alpha", 0.7}}, -5, 3);
  // Across the threshold at 20.
  checkAgainstF64AndHalf("softplus", {}, -25, 25);
  checkAgainstF64AndHalf("neg");
  checkAgainstF64AndHalf("abs");
  checkAgainstF64AndHalf("log", {}, 0.05, 20);
  checkAgainstF64AndHalf("reciprocal", {}, 0.25, 4);
  checkAgainstF64AndHalf("reciprocal", {}, -4, -0.25);
}

TEST(RefActivationTest, SoftmaxHandComputed) {
  // Rows [1, 2, 3] and [1000, 1000, 1000]: the second would overflow exp
  // without subtracting the maximum.
  KernelRun run = runF64("softmax", {2, 3}, {1, 2, 3, 1000, 1000, 1000});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(allClose(
      run.outputs[0],
      {0.09003057317038046, 0.24472847105479767, 0.6652409557748219, 1.0 / 3, 1.0 / 3, 1.0 / 3},
      1e-15));
}

TEST(RefActivationTest, SoftmaxAlongDimZeroAndNegativeDims) {
  // [3, 2] with columns [1, 2, 3] and [0, 0, 0], softmax over dim 0 (= -2).
  for (int64_t dim : {0, -2}) {
    KernelRun run = runF64("softmax", {3, 2}, {1, 0, 2, 0, 3, 0}, {{"dim", dim}});
    ASSERT_TRUE(run.ok) << run.error;
    double third = 1.0 / 3;
    EXPECT_TRUE(allClose(
        run.outputs[0],
        {0.09003057317038046, third, 0.24472847105479767, third, 0.6652409557748219, third}, 1e-15))
        << "dim " << dim;
  }
  // The middle dim of [2, 3, 2]: every (outer, inner) pair is its own row.
  std::vector<double> x = randomValues(12, 3);
  KernelRun run = runF64("softmax", {2, 3, 2}, x, {{"dim", 1}});
  ASSERT_TRUE(run.ok) << run.error;
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 2; ++i) {
      double sum = 0;
      for (int k = 0; k < 3; ++k)
        sum += std::exp(x[(o * 3 + k) * 2 + i]);
      for (int k = 0; k < 3; ++k) {
        int idx = (o * 3 + k) * 2 + i;
        EXPECT_NEAR(run.outputs[0][idx], std::exp(x[idx]) / sum, 1e-15);
      }
    }
}

TEST(RefActivationTest, SoftmaxRandom) {
  checkAgainstF64AndHalf("softmax");
  checkAgainstF64AndHalf("softmax", {{"dim", 0}});
  checkAgainstF64AndHalf("softmax", {{"dim", 1}});
}

TEST(RefActivationTest, LogSoftmaxHandComputed) {
  KernelRun run = runF64("log_softmax", {2, 3}, {1, 2, 3, 1000, 1000, 1000});
  ASSERT_TRUE(run.ok) << run.error;
  double logThird = -std::log(3.0);
  EXPECT_TRUE(allClose(
      run.outputs[0],
      {-2.40760596444438, -1.4076059644443801, -0.40760596444438013, logThird, logThird, logThird},
      1e-15));
}

TEST(RefActivationTest, LogSoftmaxRandom) {
  checkAgainstF64AndHalf("log_softmax");
  checkAgainstF64AndHalf("log_softmax", {{"dim", -2}});
}

TEST(RefActivationTest, HalfResultsAreRoundedOnce) {
  // sigmoid(0) = 0.5 and relu are exact in every dtype; gelu(1) rounds to the
  // nearest f16 of 0.8413447..., which is 0.84130859375 (0x3abb).
  KernelRun run = runKernel("gelu", {TensorType(DType::F16, {1})}, {{1.0}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0][0], 0.84130859375);
  EXPECT_EQ(floatToHalfBits(static_cast<float>(run.outputs[0][0])), 0x3abb);
}

TEST(RefActivationTest, HalfEmulationIsExactForEveryHalfValue) {
  // Every finite f16 and bf16 value as input: each output must be the f32
  // result rounded once. Computing in f64 and rounding, or rounding twice,
  // differs from this on some of the 2^16 inputs.
  for (DType half : {DType::F16, DType::BF16}) {
    std::vector<double> values;
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      uint16_t b = static_cast<uint16_t>(bits);
      float v = half == DType::F16 ? halfBitsToFloat(b) : bf16BitsToFloat(b);
      if (std::isfinite(v))
        values.push_back(v);
    }
    std::vector<TensorType> types = {TensorType(DType::F32, {int64_t(values.size())})};
    const std::pair<const char *, AttrMap> ops[] = {
        {"relu", {}},
        {"gelu", {}},
        {"gelu", {{"approximate", "tanh"}}},
        {"sigmoid", {}},
        {"tanh", {}},
        {"silu", {}},
        {"clamp", {{"min", -1.5}, {"max", 0.1}}},
        {"sqrt", {}},
        {"erf", {}},
        {"pow", {{"exponent", 2.0}}},
        {"pow", {{"exponent", 1.7}}},
        {"exp", {}},
        {"hardsigmoid", {}},
        {"hardsigmoid", {{"alpha", 0.2}, {"beta", 0.5}}},
        {"hardswish", {}},
        {"leaky_relu", {}},
        {"elu", {{"alpha", 0.5}}},
        {"softplus", {}},
        {"neg", {}},
        {"abs", {}},
        {"log", {}},
        {"reciprocal", {}},
        {"dropout", {{"p", 0.1}, {"seed", int64_t(9)}}}};
    for (const auto &[op, attrs] : ops)
      EXPECT_TRUE(halfEmulationExact(op, types, {values}, attrs, half)) << op;

    // And directly: the shared element math evaluated in float, rounded once.
    // (The check above would not notice if every dtype computed in f64.)
    auto roundToDType = [&](float v) {
      return half == DType::F16 ? floatToHalfBits(v) : floatToBf16Bits(v);
    };
    const std::pair<const char *, float (*)(float)> mathOps[] = {
        {"gelu", [](float x) { return kernels::geluErfOp(x); }},
        {"sigmoid", [](float x) { return kernels::sigmoidOp(x); }},
        {"tanh", [](float x) { return kernels::tanhOp(x); }},
        {"silu", [](float x) { return kernels::siluOp(x); }},
        {"sqrt", [](float x) { return kernels::sqrtOp(x); }},
        {"erf", [](float x) { return kernels::erfOp(x); }},
        {"exp", [](float x) { return kernels::expOp(x); }},
        {"hardswish", [](float x) { return kernels::hardswishOp(x); }},
        {"softplus", [](float x) { return kernels::softplusOp(x); }},
        {"log", [](float x) { return kernels::logOp(x); }},
        {"reciprocal", [](float x) { return kernels::reciprocalOp(x); }}};
    for (const auto &[op, math] : mathOps) {
      KernelRun run = runKernel(op, {TensorType(half, {int64_t(values.size())})}, {values});
      ASSERT_TRUE(run.ok) << run.error;
      int64_t mismatches = 0;
      for (size_t i = 0; i < values.size(); ++i) {
        // sqrt of a negative value: any NaN.
        float got = static_cast<float>(run.outputs[0][i]);
        float want = math(static_cast<float>(values[i]));
        mismatches +=
            !(std::isnan(got) && std::isnan(want)) && roundToDType(got) != roundToDType(want);
      }
      EXPECT_EQ(mismatches, 0) << op << " in " << dtypeName(half).str();
    }
  }
}

TEST(RefActivationTest, DropoutEvalIsIdentity) {
  std::vector<double> x = randomValues(100, 5);
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    std::vector<double> rounded = roundedTo(t, x);
    KernelRun run = runKernel("dropout", {TensorType(t, {100})}, {rounded},
                              {{"p", 0.5}, {"training", false}}, 3);
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_EQ(run.outputs[0], rounded) << dtypeName(t).str();
  }
}

TEST(RefActivationTest, DropoutZeroProbabilityIsIdentity) {
  std::vector<double> x = randomValues(100, 5);
  KernelRun run = runKernel("dropout", {TensorType(DType::F32, {100})}, {roundedTo(DType::F32, x)},
                            {{"p", 0.0}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0], roundedTo(DType::F32, x));
}

TEST(RefActivationTest, DropoutMaskIsSeededAndScaled) {
  const int64_t n = 100000;
  const double p = 0.3;
  // Values away from 0 so that "dropped" (0) and "kept" are told apart.
  std::vector<double> x = roundedTo(DType::F32, randomValues(n, 9, 0.5, 1.5));
  AttrMap attrs = {{"p", p}, {"seed", int64_t(1234)}};
  auto run = [&](uint64_t step, AttrMap a) {
    KernelRun r = runKernel("dropout", {TensorType(DType::F32, {n})}, {x}, a, step);
    EXPECT_TRUE(r.ok) << r.error;
    return r.outputs.empty() ? std::vector<double>() : r.outputs[0];
  };
  std::vector<double> first = run(7, attrs), again = run(7, attrs), nextStep = run(8, attrs);
  AttrMap otherSeed = attrs;
  otherSeed["seed"] = int64_t(1235);
  std::vector<double> reseeded = run(7, otherSeed);
  ASSERT_EQ(first.size(), static_cast<size_t>(n));
  EXPECT_EQ(first, again) << "same seed and step must give the same mask";

  int64_t kept = 0, differentFromNextStep = 0, differentFromOtherSeed = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (first[i] != 0) {
      ++kept;
      // Kept values are x / (1 - p), computed in f32.
      EXPECT_NEAR(first[i], x[i] / (1 - p), 1e-6 * std::abs(x[i] / (1 - p))) << i;
    }
    differentFromNextStep += (first[i] != 0) != (nextStep[i] != 0);
    differentFromOtherSeed += (first[i] != 0) != (reseeded[i] != 0);
  }
  // Binomial(n, 0.7): the standard deviation of the kept fraction is 0.0015.
  EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.01);
  // Independent masks disagree on 2 p (1 - p) = 42% of the elements.
  EXPECT_NEAR(static_cast<double>(differentFromNextStep) / n, 2 * p * (1 - p), 0.02);
  EXPECT_NEAR(static_cast<double>(differentFromOtherSeed) / n, 2 * p * (1 - p), 0.02);
}

TEST(RefActivationTest, DropoutMaskMatchesTheSharedGenerator) {
  std::vector<double> x(64, 1.0);
  KernelRun run = runKernel("dropout", {TensorType(DType::F64, {64})}, {x},
                            {{"p", 0.5}, {"seed", int64_t(42)}}, 5);
  ASSERT_TRUE(run.ok) << run.error;
  for (uint64_t i = 0; i < 64; ++i)
    EXPECT_EQ(run.outputs[0][i], kernels::dropoutKeep(42, 5, i, 0.5f) ? 2.0 : 0.0) << i;
}

TEST(RefActivationTest, DropoutRandom) {
  // The mask does not depend on the dtype, so every dtype drops the same
  // elements and the f64 comparison holds element by element.
  checkAgainstF64AndHalf("dropout", {{"p", 0.25}, {"seed", int64_t(3)}});
}
