//===- CpuLoopsTest.cpp - The cpu backend's own loop kernels vs cpu-ref ---===//
//
// Every op the loop dispatcher (kernels/cpu/Loops.cpp) takes, per dtype, on
// odd shapes: the kernel the cpu backend prepares must be a loop kernel (so
// a case cannot pass by falling back to the reference), and its results
// must be
//  - bit-identical to the reference kernel's for elementwise ops, casts and
//    the optimizer updates (including the skip / accumulation pass-through,
//    the master-weights epilogue and the stateUnchanged report), once with
//    the loops' AVX-512 copies (where the CPU has them) and once with the
//    baseline copies;
//  - within a summation-order tolerance for reductions (reduce_sum,
//    mse_loss, batchnorm statistics), and bit-identical between one thread
//    and several.
// Inputs include NaN, infinities, signed zeros, subnormals and rounding ties
// where the op passes them through. Buffers carry guard bytes.
//
//===----------------------------------------------------------------------===//
#include "CpuLoopTestUtil.h"

#include "frontends/yaml/ModelLoader.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Families.h"
#include "kernels/cpu/LoopKernels.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using namespace ampc::testing;

/// Random storage bits: every exponent, NaNs with payloads, infinities,
/// subnormals, both zeros -- plus a run of chosen special values at the front.
Operand randomBits(const TensorType &t, uint64_t seed) {
  Bytes b(t.sizeInBytes());
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<unsigned char>(kernels::uniform01Double(seed, 11, i) * 256);
  const double specials[] = {0.0,
                             -0.0,
                             1.0,
                             -1.5,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(),
                             1e-40,      // an f32 subnormal
                             1.00390625, // 1 + 2^-8: a bf16 tie, rounds to even (1)
                             1.01171875, // 1 + 3 * 2^-8: a tie that rounds up
                             65520.0,    // rounds to f16 infinity
                             3.0e-8};    // an f16 subnormal
  for (size_t i = 0; i < std::size(specials) && int64_t(i) < t.numElements(); ++i)
    kernels::storeFromDouble(t.dtype(), b.data(), i, specials[i]);
  return {t, b};
}

Operand scalar(double v, DType t = DType::F32) {
  TensorType type(t, {});
  return {type, fromDoubles(type, {v})};
}

/// 2^(e - p) for the binade of |v| in dtype t: one unit in the last place.
double ulp(DType t, double v) {
  int mantissa = t == DType::BF16 ? 7 : t == DType::F16 ? 10 : 23;
  if (v == 0)
    return std::ldexp(1.0, -140);
  return std::ldexp(1.0, std::ilogb(v) - mantissa);
}

/// Reductions: close to the reference (f32 sums in another order): each
/// element within tol * magnitude[i] (+ 2 ulps of a half result), and the
/// same bits on one thread as on all of them, and with the baseline vector
/// copies as with the AVX-512 ones.
void expectClose(const std::string &op, const std::vector<Operand> &operands, AttrMap attrs,
                 double tol, const std::vector<std::vector<double>> &magnitudes) {
  SCOPED_TRACE(describe(op, operands));
  OneLoopNode one(op, operands, std::move(attrs));
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> fast = loopKernelFor(*one.node);
  ASSERT_TRUE(fast);
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  LoopResults expected = runLoopKernel(ref, *one.node, operands, 0);
  LoopResults got = runLoopKernel(*fast, *one.node, operands, 0);
  EXPECT_TRUE(got.guardsIntact) << "a kernel wrote outside its buffers";
  for (unsigned r = 0; r < one.node->numResults(); ++r) {
    const TensorType &t = one.node->result(r)->type();
    for (int64_t i = 0; i < t.numElements(); ++i) {
      double a = kernels::loadAsDouble(t.dtype(), got.outputs[r].data(), i);
      double b = kernels::loadAsDouble(t.dtype(), expected.outputs[r].data(), i);
      double m = r < magnitudes.size() ? magnitudes[r][i % magnitudes[r].size()] : 1.0;
      double allowed = tol * m + (t.dtype() == DType::F32 ? 0 : 2 * ulp(t.dtype(), b));
      ASSERT_LE(std::abs(a - b), allowed) << "result " << r << " element " << i;
    }
  }
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  LoopResults single = runLoopKernel(*fast, *one.node, operands, 0);
  omp_set_num_threads(threads);
  kernels::cpu::setLoopWideVectorsAllowed(false);
  LoopResults narrow = runLoopKernel(*fast, *one.node, operands, 0);
  kernels::cpu::setLoopWideVectorsAllowed(true);
  for (unsigned r = 0; r < one.node->numResults(); ++r) {
    EXPECT_EQ(single.outputs[r], got.outputs[r]) << "result " << r << " depends on the threads";
    EXPECT_EQ(narrow.outputs[r], got.outputs[r]) << "result " << r << " depends on the vectors";
  }
}

/// The dispatcher must decline the node (the reference kernel runs it).
void expectDeclined(const std::string &op, const std::vector<Operand> &operands,
                    AttrMap attrs = {}) {
  SCOPED_TRACE(describe(op, operands));
  OneLoopNode one(op, operands, std::move(attrs));
  ASSERT_TRUE(one.node) << one.error;
  EXPECT_FALSE(kernels::cpu::prepareLoopKernel(*one.node));
}

TensorType f32(std::vector<int64_t> dims) { return TensorType(DType::F32, dims); }
TensorType of(DType t, std::vector<int64_t> dims) { return TensorType(t, dims); }

const DType kDTypes[] = {DType::F32, DType::BF16, DType::F16};
const DType kTrainDTypes[] = {DType::F32, DType::BF16};

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(CpuLoopsTest, CastBetweenFloatTypesIsBitExact) {
  for (DType from : kDTypes)
    for (DType to : kDTypes) {
      AttrMap attrs;
      attrs["to"] = Attribute(to);
      // 70001 elements: split over the threads.
      for (int64_t n : {1, 37, 70001})
        expectBitIdentical("cast", {randomBits(of(from, {n}), 3 + n)}, attrs);
    }
}

TEST(CpuLoopsTest, ReluAndScaleAreBitExact) {
  for (DType t : kDTypes) {
    expectBitIdentical("relu", {randomBits(of(t, {3, 1, 67}), 5)});
    expectBitIdentical("relu", {randomBits(of(t, {70001}), 6)});
    AttrMap attrs;
    attrs["factor"] = Attribute(0.1);
    expectBitIdentical("scale", {randomBits(of(t, {5, 33}), 7)}, attrs);
  }
}

TEST(CpuLoopsTest, GeluSigmoidTanhAndTheirGradientsAreBitExact) {
  for (DType t : kDTypes) {
    for (const char *approximate : {"none", "tanh"}) {
      AttrMap attrs;
      attrs["approximate"] = Attribute(approximate);
      expectBitIdentical("gelu", {uniform(of(t, {3, 41}), 1, -6, 6)}, attrs);
      expectBitIdentical("gelu_grad",
                         {uniform(of(t, {3, 41}), 2), uniform(of(t, {3, 41}), 3, -6, 6)}, attrs);
    }
    expectBitIdentical("sigmoid", {uniform(of(t, {70001}), 4, -20, 20)});
    expectBitIdentical("tanh", {randomBits(of(t, {99}), 5)});
    expectBitIdentical("sigmoid_grad", {uniform(of(t, {99}), 6), uniform(of(t, {99}), 7, 0, 1)});
    expectBitIdentical("tanh_grad", {uniform(of(t, {99}), 8), uniform(of(t, {99}), 9, -1, 1)});
    expectBitIdentical("silu", {uniform(of(t, {70001}), 10, -20, 20)});
    expectBitIdentical("silu_grad", {uniform(of(t, {99}), 11), uniform(of(t, {99}), 12, -8, 8)});
  }
}

TEST(CpuLoopsTest, UnaryMathAndTheirGradientsAreBitExact) {
  // clamp, sqrt, erf, pow, exp: the loops call the reference's element
  // functors (libm's sqrt, erf, pow, exp per element), so the same bits; on
  // random bits (NaNs, infinities, negatives for sqrt and pow, subnormals).
  AttrMap clamp, oneSided;
  clamp["min"] = Attribute(-0.1);
  clamp["max"] = Attribute(6.0);
  oneSided["max"] = Attribute(0.5);
  for (DType t : kDTypes) {
    for (const AttrMap &bounds : {clamp, oneSided}) {
      expectBitIdentical("clamp", {randomBits(of(t, {3, 1, 67}), 1)}, bounds);
      expectBitIdentical("clamp", {uniform(of(t, {70001}), 2, -8, 8)}, bounds);
      expectBitIdentical("clamp_grad", {uniform(of(t, {99}), 3), randomBits(of(t, {99}), 4)},
                         bounds);
    }
    for (const char *op : {"sqrt", "erf", "exp"}) {
      expectBitIdentical(op, {randomBits(of(t, {5, 33}), 5)});
      expectBitIdentical(op, {uniform(of(t, {70001}), 6, -10, 10)});
    }
    for (const char *op : {"sqrt_grad", "erf_grad", "exp_grad"})
      expectBitIdentical(op, {uniform(of(t, {99}), 7), randomBits(of(t, {99}), 8)});
    for (double exponent : {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.7, 0.0}) {
      AttrMap pow;
      pow["exponent"] = Attribute(exponent);
      expectBitIdentical("pow", {randomBits(of(t, {5, 33}), 9)}, pow);
      expectBitIdentical("pow_grad", {uniform(of(t, {99}), 10), randomBits(of(t, {99}), 11)}, pow);
    }
  }
}

TEST(CpuLoopsTest, OnnxActivationsAndTheirGradientsAreBitExact) {
  // hardsigmoid, hardswish, leaky_relu, elu, softplus, neg, abs, log,
  // reciprocal: the reference's functors (libm's expm1, exp, log1p, log per
  // element), on random bits and on the ranges where their pieces meet.
  AttrMap onnxSigmoid, slope, alpha;
  onnxSigmoid["alpha"] = Attribute(0.2);
  onnxSigmoid["beta"] = Attribute(0.5);
  slope["negative_slope"] = Attribute(0.1);
  alpha["alpha"] = Attribute(0.7);
  const std::pair<const char *, AttrMap> ops[] = {{"hardsigmoid", {}}, {"hardsigmoid", onnxSigmoid},
                                                  {"hardswish", {}},   {"leaky_relu", slope},
                                                  {"elu", alpha},      {"softplus", {}},
                                                  {"abs", {}},         {"log", {}},
                                                  {"reciprocal", {}}};
  for (DType t : kDTypes) {
    for (const auto &[op, attrs] : ops) {
      SCOPED_TRACE(op);
      std::string grad = std::string(op) + "_grad";
      expectBitIdentical(op, {randomBits(of(t, {5, 33}), 1)}, attrs);
      expectBitIdentical(op, {uniform(of(t, {70001}), 2, -25, 25)}, attrs);
      expectBitIdentical(grad, {uniform(of(t, {99}), 3), randomBits(of(t, {99}), 4)}, attrs);
      expectBitIdentical(grad, {uniform(of(t, {3, 67}), 5), uniform(of(t, {3, 67}), 6, -25, 25)},
                         attrs);
    }
    expectBitIdentical("neg", {randomBits(of(t, {5, 33}), 7)});
    expectBitIdentical("neg", {uniform(of(t, {70001}), 8)});
  }
}

TEST(CpuLoopsTest, MaxMinPReluAndTheirBackwardOpsAreBitExact) {
  struct Shapes {
    std::vector<int64_t> lhs, rhs;
  };
  // The slope broadcasts to x only (prelu's inference).
  const Shapes slopes[] = {
      {{4, 5, 7, 3}, {5, 1, 1}}, // per channel
      {{37, 53}, {53}},          // per feature
      {{300, 257}, {1, 257}},    // threads
      {{4, 5, 7, 3}, {}},        // one slope
      {{37, 53}, {37, 53}},      // same shape
  };
  const Shapes both[] = {
      {{37, 53}, {37, 53}}, {{300, 257}, {300, 257}},  {{37, 53}, {53}},
      {{53}, {37, 53}},     {{4, 5, 7, 3}, {5, 1, 1}}, {{}, {4, 5, 7, 3}},
  };
  for (DType t : kDTypes) {
    for (const Shapes &s : slopes)
      for (const char *op : {"prelu", "prelu_derivative"})
        expectBitIdentical(op, {uniform(of(t, s.lhs), 1), uniform(of(t, s.rhs), 2)});
    expectBitIdentical("prelu_grad_slope",
                       {uniform(of(t, {70001}), 3), uniform(of(t, {70001}), 4)});
    for (const Shapes &s : both)
      for (const char *op : {"max", "min", "greater_share"})
        expectBitIdentical(op, {uniform(of(t, s.lhs), 5), uniform(of(t, s.rhs), 6)});
    // NaNs, infinities, signed zeros and ties (the same random bits twice);
    // a product of two NaNs may pass on either.
    for (const char *op :
         {"max", "min", "greater_share", "prelu", "prelu_derivative", "prelu_grad_slope"}) {
      expectBitIdentical(op, {randomBits(of(t, {64}), 7), randomBits(of(t, {64}), 8)}, {}, 0, 0,
                         /*anyNaN=*/true);
      expectBitIdentical(op, {randomBits(of(t, {64}), 9), randomBits(of(t, {64}), 9)}, {}, 0, 0,
                         /*anyNaN=*/true);
    }
  }
}

TEST(CpuLoopsTest, ReluGradIsBitExact) {
  for (DType t : kDTypes) {
    expectBitIdentical("relu_grad", {uniform(of(t, {17, 19}), 1), randomBits(of(t, {17, 19}), 2)});
    expectBitIdentical("relu_grad", {uniform(of(t, {70001}), 3), uniform(of(t, {70001}), 4)});
  }
}

TEST(CpuLoopsTest, ArithmeticSameShapeAndBroadcastIsBitExact) {
  struct Shapes {
    std::vector<int64_t> lhs, rhs;
  };
  const Shapes cases[] = {
      {{37, 53}, {37, 53}},      // same shape
      {{300, 257}, {300, 257}},  // same shape, threads
      {{37, 53}, {53}},          // a bias row
      {{53}, {37, 53}},          // the row on the left (sub, div: order)
      {{300, 257}, {1, 257}},    // a bias row, threads
      {{4, 5, 7, 3}, {5, 1, 1}}, // per channel
      {{5, 1, 1}, {4, 5, 7, 3}}, // per channel on the left
      {{4, 5, 7, 3}, {}},        // a scalar
      {{}, {4, 5, 7, 3}},        // a scalar on the left
      {{2, 3, 1, 5}, {3, 1, 1}}, // size-1 dims in the result
      {{6, 1}, {6, 1}},          // a column
  };
  for (const char *op : {"add", "sub", "mul", "div"})
    for (DType t : kDTypes)
      for (const Shapes &s : cases)
        expectBitIdentical(op, {uniform(of(t, s.lhs), 1), uniform(of(t, s.rhs), 2, 0.5, 3)});
  // div by zero and NaN inputs.
  expectBitIdentical("div", {randomBits(f32({64}), 8), randomBits(f32({64}), 9)});
}

TEST(CpuLoopsTest, DeclinesWhatItDoesNotTake) {
  // Both operands broadcast, or a broadcast that is not one block of dims.
  expectDeclined("add", {uniform(f32({6, 1}), 1), uniform(f32({1, 7}), 2)});
  expectDeclined("mul", {uniform(f32({4, 5, 6}), 1), uniform(f32({4, 1, 6}), 2)});
  // f64 stays with the reference.
  expectDeclined("relu", {uniform(of(DType::F64, {8}), 1)});
  // reduce_sum over a middle dim only.
  AttrMap middle;
  middle["dims"] = Attribute(std::vector<int64_t>{1});
  expectDeclined("reduce_sum", {uniform(f32({2, 3, 4}), 1)}, middle);
  expectDeclined("reduce_mean", {uniform(f32({2, 3, 4}), 1)}, middle);
  // An empty mean is NaN: the reference writes it.
  expectDeclined("reduce_mean", {uniform(f32({0, 3}), 1)});
}

TEST(CpuLoopsTest, MseLossGradAndGlobalAvgPoolGradAreBitExact) {
  for (DType t : kDTypes) {
    expectBitIdentical("mse_loss_grad", {uniform(of(t, {}), 1), uniform(of(t, {9, 31}), 2),
                                         uniform(of(t, {9, 31}), 3)});
    AttrMap attrs;
    attrs["input_shape"] = Attribute(std::vector<int64_t>{3, 5, 7, 9});
    expectBitIdentical("global_avgpool_grad", {uniform(of(t, {3, 5, 1, 1}), 4)}, attrs);
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Magnitude of a sum of `terms` values of size at most `bound`: what f32
/// rounding errors of any summation order scale with.
std::vector<double> sumMagnitude(double terms, double bound) { return {terms * bound}; }

TEST(CpuLoopsTest, ReduceSumOverRowsIsTheReferencesSum) {
  // Summing the rows of [rows, columns] adds each column in the reference's
  // order: bit-identical.
  AttrMap rows;
  rows["dims"] = Attribute(std::vector<int64_t>{0});
  for (DType t : kDTypes) {
    expectBitIdentical("reduce_sum", {uniform(of(t, {37, 53}), 1)}, rows);
    expectBitIdentical("reduce_sum", {uniform(of(t, {300, 1031}), 2)}, rows);
    expectBitIdentical("reduce_sum", {uniform(of(t, {1, 5}), 3)}, rows);
  }
}

TEST(CpuLoopsTest, ReduceSumOverOtherDimsIsClose) {
  AttrMap channelBias, all, trailing;
  channelBias["dims"] = Attribute(std::vector<int64_t>{0, 2, 3});
  trailing["dims"] = Attribute(std::vector<int64_t>{-1});
  for (DType t : kDTypes) {
    expectClose("reduce_sum", {uniform(of(t, {6, 5, 7, 3}), 1)}, channelBias, 1e-6,
                {sumMagnitude(6 * 21, 2)});
    expectClose("reduce_sum", {uniform(of(t, {32, 4, 28, 28}), 2)}, channelBias, 1e-6,
                {sumMagnitude(32 * 784, 2)});
    expectClose("reduce_sum", {uniform(of(t, {5, 300}), 3)}, trailing, 1e-6,
                {sumMagnitude(300, 2)});
    expectClose("reduce_sum", {uniform(of(t, {70001}), 4)}, all, 1e-6, {sumMagnitude(70001, 2)});
  }
}

TEST(CpuLoopsTest, ReduceMeanIsReduceSumDividedByTheCount) {
  // reduce_sum's loops, each sum divided as the reference divides it: over
  // rows the reference's bits; over other dims within the sums' order error
  // (a mean of values in [-2, 2): errors scale with 2).
  AttrMap rows, channels, all, trailing, keepRows;
  rows["dims"] = Attribute(std::vector<int64_t>{0});
  channels["dims"] = Attribute(std::vector<int64_t>{0, 2, 3});
  trailing["dims"] = Attribute(std::vector<int64_t>{-1});
  keepRows = rows;
  keepRows["keepdim"] = Attribute(true);
  for (DType t : kDTypes) {
    expectBitIdentical("reduce_mean", {uniform(of(t, {37, 53}), 1)}, rows);
    expectBitIdentical("reduce_mean", {uniform(of(t, {300, 1031}), 2)}, keepRows);
    // Size-1 dims add nothing to the count.
    expectBitIdentical("reduce_mean", {uniform(of(t, {1, 7, 1, 5}), 3)}, channels);
    expectClose("reduce_mean", {uniform(of(t, {6, 5, 7, 3}), 4)}, channels, 1e-6, {{2.0}});
    expectClose("reduce_mean", {uniform(of(t, {5, 300}), 5)}, trailing, 1e-6, {{2.0}});
    expectClose("reduce_mean", {uniform(of(t, {70001}), 6)}, all, 1e-6, {{2.0}});
  }
}

TEST(CpuLoopsTest, MseLossAndGlobalAvgPoolAreClose) {
  for (DType t : kDTypes) {
    // The mean of n terms in [0, 16): errors scale with 16 (the mean's bound).
    expectClose("mse_loss", {uniform(of(t, {7, 13}), 1), uniform(of(t, {7, 13}), 2)}, {}, 1e-5,
                {{16.0}});
    expectClose("mse_loss", {uniform(of(t, {256, 1024}), 3), uniform(of(t, {256, 1024}), 4)}, {},
                1e-4, {{16.0}});
    expectBitIdentical("global_avgpool", {uniform(of(t, {3, 5, 7, 9}), 5)});
  }
}

TEST(CpuLoopsTest, MseLossIsAtLeastAsAccurateAsTheSequentialSum) {
  // 2^18 squared errors of about 1: the reference's running f32 sum loses
  // digits; the loops' lanes and pieces must not be worse than it.
  TensorType t = f32({512, 512});
  Operand input = uniform(t, 11), target = uniform(t, 12);
  OneLoopNode one("mse_loss", {input, target}, {});
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> fast = loopKernelFor(*one.node);
  ASSERT_TRUE(fast);
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  auto value = [&](kernels::NodeKernel &k) {
    LoopResults r = runLoopKernel(k, *one.node, {input, target}, 0);
    return double(kernels::load<DType::F32>(r.outputs[0].data(), 0));
  };
  double exact = 0;
  const float *x = reinterpret_cast<const float *>(input.bytes.data());
  const float *y = reinterpret_cast<const float *>(target.bytes.data());
  for (int64_t i = 0; i < t.numElements(); ++i)
    exact += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  exact /= double(t.numElements());
  EXPECT_LE(std::abs(value(*fast) - exact), std::max(std::abs(value(ref) - exact), 1e-7 * exact));
}

//===----------------------------------------------------------------------===//
// batchnorm2d
//===----------------------------------------------------------------------===//

AttrMap batchNormAttrs(bool training) {
  AttrMap attrs;
  attrs["training"] = Attribute(training);
  return attrs;
}

/// x, weight, bias, running mean, running var (parameters in `paramType`).
std::vector<Operand> batchNormOperands(DType t, DType paramType, std::vector<int64_t> dims,
                                       uint64_t seed) {
  int64_t c = dims[1];
  return {uniform(of(t, dims), seed, -1, 3), uniform(of(paramType, {c}), seed + 1, 0.5, 2),
          uniform(of(paramType, {c}), seed + 2), uniform(of(paramType, {c}), seed + 3),
          uniform(of(paramType, {c}), seed + 4, 0.5, 2)};
}

TEST(CpuLoopsTest, BatchNorm2dMatchesTheReference) {
  for (DType t : kDTypes)
    for (DType param : {DType::F32, t})
      for (std::vector<int64_t> dims :
           {std::vector<int64_t>{5, 3, 7, 9}, {2, 4, 1, 1}, {32, 4, 28, 28}}) {
        // Eval uses the running statistics: elementwise, bit-exact.
        expectBitIdentical("batchnorm2d", batchNormOperands(t, param, dims, 1),
                           batchNormAttrs(false));
        // Training: the statistics are sums (values and running stats O(1)).
        expectClose("batchnorm2d", batchNormOperands(t, param, dims, 1), batchNormAttrs(true), 2e-5,
                    {{8.0}, {4.0}, {4.0}});
      }
}

TEST(CpuLoopsTest, BatchNorm2dOfAConstantChannelIsTheReferencesBitForBit) {
  // A channel of one value: the corrected two-pass mean is that value
  // exactly in both, so each gives the bias (RefBatchNorm2d's test).
  for (DType t : kDTypes) {
    std::vector<Operand> operands = batchNormOperands(t, DType::F32, {4, 3, 5, 7}, 2);
    TensorType xType = of(t, {4, 3, 5, 7});
    operands[0] = {xType, fromDoubles(xType, {0.1})};
    expectBitIdentical("batchnorm2d", operands, batchNormAttrs(true));
  }
}

TEST(CpuLoopsTest, BatchNorm2dGradMatchesTheReference) {
  for (DType t : kDTypes)
    for (DType param : {DType::F32, t})
      for (std::vector<int64_t> dims :
           {std::vector<int64_t>{5, 3, 7, 9}, {2, 4, 1, 1}, {32, 4, 28, 28}}) {
        std::vector<Operand> fwd = batchNormOperands(t, param, dims, 3);
        // (dy, x, weight, running mean, running var)
        std::vector<Operand> operands = {uniform(fwd[0].type, 9), fwd[0], fwd[1], fwd[3], fwd[4]};
        int64_t count = dims[0] * dims[2] * dims[3];
        // dx is O(1); the parameter gradients are sums of `count` terms of
        // size up to ~6.
        expectClose("batchnorm2d_grad", operands, batchNormAttrs(true), 2e-5,
                    {{8.0}, {6.0 * count}, {2.0 * count}});
        expectClose("batchnorm2d_grad", operands, batchNormAttrs(false), 2e-5,
                    {{8.0}, {6.0 * count}, {2.0 * count}});
      }
}

TEST(CpuLoopsTest, LayerNormAndItsGradientMatchTheReference) {
  for (DType t : kDTypes)
    for (DType param : {DType::F32, t})
      for (std::vector<int64_t> dims : {std::vector<int64_t>{3, 5, 37}, {70, 64}, {4, 1}}) {
        int64_t size = dims.back();
        std::vector<Operand> operands = {uniform(of(t, dims), 1, -1, 3),
                                         uniform(of(param, {size}), 2, 0.5, 2),
                                         uniform(of(param, {size}), 3)};
        expectClose("layernorm", operands, {}, 2e-5, {{8.0}});
        int64_t rows = 1;
        for (size_t d = 0; d + 1 < dims.size(); ++d)
          rows *= dims[d];
        // (dy, x, weight): dx is O(1), the parameter gradients sums of
        // `rows` terms up to ~6.
        std::vector<Operand> grad = {uniform(of(t, dims), 4), operands[0], operands[1]};
        expectClose("layernorm_grad", grad, {}, 2e-5, {{8.0}, {6.0 * rows}, {2.0 * rows}});
      }
}

//===----------------------------------------------------------------------===//
// Optimizer and loss scaling
//===----------------------------------------------------------------------===//

/// The trailing operands of an update op: lr, then grad_scale, skip and
/// model_param as far as given.
struct Trailing {
  double lr = 0.05;
  std::optional<double> gradScale;
  std::optional<double> skip;
  std::optional<DType> model;
};

void addTrailing(std::vector<Operand> &operands, const Trailing &t, const TensorType &param,
                 uint64_t seed) {
  operands.push_back(scalar(t.lr));
  if (t.gradScale)
    operands.push_back(scalar(*t.gradScale));
  if (t.skip)
    operands.push_back(scalar(*t.skip));
  if (t.model) {
    // The half model weight: the master rounded (its value does not matter
    // to an update that applies; a skipped one copies it).
    operands.push_back(uniform(of(*t.model, param.dims()), seed));
  }
}

/// Trailing operand sets worth covering: plain, scaled, skipped, not
/// skipped, master weights in bf16 and f16.
std::vector<Trailing> trailingCases() {
  return {{0.05, {}, {}, {}},           {0.05, 0.25, {}, {}},
          {0.05, 0.5, 0.0, {}},         {0.05, 0.5, 1.0, {}},
          {4.0, 1.0, 0.0, DType::BF16}, {0.01, 0.125, 0.0, DType::F16},
          {0.01, 1.0, 1.0, DType::BF16}};
}

TEST(CpuLoopsTest, SgdUpdateIsBitExact) {
  for (DType pt : kTrainDTypes)
    for (DType gt : kTrainDTypes)
      for (const Trailing &tr : trailingCases()) {
        if (tr.model && pt != DType::F32)
          continue; // the master is f32
        for (double weightDecay : {0.0, 0.01}) {
          // One size large enough to be split over the threads.
          int64_t n = weightDecay == 0 ? 70001 : 1001;
          TensorType param = of(pt, {n});
          std::vector<Operand> operands = {uniform(param, 1), uniform(of(gt, {n}), 2)};
          addTrailing(operands, tr, param, 3);
          AttrMap attrs;
          attrs["weight_decay"] = Attribute(weightDecay);
          expectBitIdentical("sgd_update", operands, attrs);
        }
      }
}

TEST(CpuLoopsTest, SgdMomentumUpdateIsBitExact) {
  for (DType pt : kTrainDTypes)
    for (const Trailing &tr : trailingCases()) {
      if (tr.model && pt != DType::F32)
        continue;
      for (double stepCount : {1.0, 3.0})
        for (bool nesterov : {false, true}) {
          TensorType param = of(pt, {3, 37});
          std::vector<Operand> operands = {uniform(param, 1), uniform(of(DType::BF16, {3, 37}), 2),
                                           uniform(f32({3, 37}), 3), scalar(stepCount)};
          addTrailing(operands, tr, param, 4);
          AttrMap attrs;
          attrs["momentum"] = Attribute(0.9);
          attrs["nesterov"] = Attribute(nesterov);
          attrs["dampening"] = Attribute(nesterov ? 0.0 : 0.1);
          attrs["weight_decay"] = Attribute(0.001);
          expectBitIdentical("sgd_momentum_update", operands, attrs);
        }
    }
}

TEST(CpuLoopsTest, AdamUpdateIsBitExact) {
  for (DType pt : kTrainDTypes)
    for (const Trailing &tr : trailingCases()) {
      if (tr.model && pt != DType::F32)
        continue;
      for (bool decoupled : {false, true}) {
        int64_t n = decoupled ? 1001 : 70001;
        TensorType param = of(pt, {n});
        std::vector<Operand> operands = {uniform(param, 1), uniform(of(pt, {n}), 2),
                                         uniform(f32({n}), 3, -0.1, 0.1),
                                         uniform(f32({n}), 4, 0, 0.01), scalar(7)};
        addTrailing(operands, tr, param, 5);
        AttrMap attrs;
        attrs["weight_decay"] = Attribute(0.01);
        attrs["decoupled_weight_decay"] = Attribute(decoupled);
        expectBitIdentical("adam_update", operands, attrs);
      }
    }
}

// LAMB's norms are summed per block of kLambNormBlock on the threads and
// the blocks in order, as the reference sums them: the same bits, with the
// global clip acting (grad_norm 3 > max_grad_norm 1) or not.
TEST(CpuLoopsTest, LambUpdateIsBitExact) {
  for (DType pt : kTrainDTypes)
    for (const Trailing &tr : trailingCases()) {
      if (tr.model && pt != DType::F32)
        continue;
      for (bool decoupled : {false, true}) {
        int64_t n = decoupled ? 1001 : 70001;
        TensorType param = of(pt, {n});
        std::vector<Operand> operands = {uniform(param, 1),
                                         uniform(of(pt, {n}), 2),
                                         uniform(f32({n}), 3, -0.1, 0.1),
                                         uniform(f32({n}), 4, 0, 0.01),
                                         scalar(7),
                                         scalar(decoupled ? 3.0 : 0.5)};
        addTrailing(operands, tr, param, 5);
        AttrMap attrs;
        attrs["decoupled_weight_decay"] = Attribute(decoupled);
        attrs["use_nvlamb"] = Attribute(!decoupled);
        attrs["grad_averaging"] = Attribute(decoupled);
        expectBitIdentical("lamb_update", operands, attrs);
      }
    }
}

TEST(CpuLoopsTest, UpdatesFollowGradientAccumulation) {
  // accumulate = 3: steps 0 and 1 pass the state through (and report it
  // unchanged), step 2 applies, step 5 applies again; with skip = 1 none do.
  AttrMap attrs;
  attrs["accumulate"] = Attribute(int64_t(3));
  attrs["momentum"] = Attribute(0.9);
  for (uint64_t step : {0, 1, 2, 5})
    for (double skip : {0.0, 1.0}) {
      TensorType param = f32({41});
      std::vector<Operand> operands = {uniform(param, 1), uniform(param, 2), uniform(param, 3),
                                       scalar(2)};
      addTrailing(operands, {0.1, 1.0, skip, DType::BF16}, param, 4);
      expectBitIdentical("sgd_momentum_update", operands, attrs, step);
    }
}

TEST(CpuLoopsTest, AccumulateGradIsBitExact) {
  AttrMap attrs;
  attrs["accumulate"] = Attribute(int64_t(3));
  for (DType acc : kTrainDTypes)
    for (DType grad : kDTypes)
      for (uint64_t step : {0, 1, 2}) {
        int64_t n = step == 2 ? 70001 : 1001;
        expectBitIdentical("accumulate_grad", {uniform(of(acc, {n}), 1), uniform(of(grad, {n}), 2)},
                           attrs, step);
      }
}

// The average of f32 and bf16 parameters (an O2 master or an O3 weight):
// the first step copies, later ones average, a skipped or accumulating
// micro-step passes the average through.
TEST(CpuLoopsTest, EmaUpdateIsBitExact) {
  AttrMap attrs;
  attrs["decay"] = Attribute(0.999);
  attrs["accumulate"] = Attribute(int64_t(2));
  for (DType pt : kTrainDTypes)
    for (double count : {1.0, 7.0})
      for (uint64_t step : {0, 1})
        for (double skip : {0.0, 1.0}) {
          int64_t n = step == 1 ? 70001 : 1001;
          expectBitIdentical(
              "ema_update",
              {uniform(f32({n}), 1), uniform(of(pt, {n}), 2), scalar(count), scalar(skip)}, attrs,
              step);
        }
}

TEST(CpuLoopsTest, UnscaleCheckIsBitExact) {
  AttrMap attrs;
  attrs["accumulate"] = Attribute(int64_t(2));
  for (double scale : {65536.0, 1.0, 3.0})
    for (uint64_t step : {0, 1})
      for (bool withInf : {false, true}) {
        // Many gradients, large and small, of several dtypes; enough
        // elements to split over the threads.
        std::vector<Operand> operands = {scalar(scale), uniform(of(DType::BF16, {300, 257}), 1),
                                         uniform(f32({7}), 2), uniform(of(DType::F16, {5, 3}), 3),
                                         uniform(f32({1000}), 4)};
        if (withInf)
          kernels::storeFromDouble(DType::BF16, operands[1].bytes.data(), 12345,
                                   std::numeric_limits<double>::infinity());
        expectBitIdentical("unscale_check", operands, attrs, step);
      }
  // A NaN in a small gradient, all small (one thread).
  std::vector<Operand> operands = {scalar(1024), uniform(f32({9}), 1), uniform(f32({4}), 2)};
  kernels::storeFromDouble(DType::F32, operands[2].bytes.data(), 3,
                           std::numeric_limits<double>::quiet_NaN());
  expectBitIdentical("unscale_check", operands, {}, 0);
}

//===----------------------------------------------------------------------===//
// Training graphs
//===----------------------------------------------------------------------===//

// Small versions of examples/mlp.yaml and examples/convnet-cpu.yaml: after the
// standard pipeline at every level, each node of these ops must get a loop
// kernel (the dtype combinations real graphs produce: bf16 activations, f32
// masters with bf16 model weights, f32 batchnorm parameters under bf16 input,
// bf16 gradients unscaled into f32).
const char *kMlp = R"(
model: loops_mlp
batch: 6
inputs:
  x: {shape: [B, 12]}
  target: {shape: [B, 5]}
layers:
  - linear: {out_features: 16, name: fc1}
  - relu: {}
  - linear: {out_features: 5, name: out}
loss: {mse_loss: {input: out, target: target}}
optimizer: {sgd: {lr: 0.05, momentum: 0.9}}
)";

const char *kConvNet = R"(
model: loops_convnet
batch: 2
inputs:
  image: {shape: [B, 1, 8, 8]}
  label: {shape: [B], dtype: i64}
layers:
  - conv2d: {out_channels: 4, kernel: 3, stride: 1, padding: 1}
  - batchnorm2d: {}
  - relu: {}
  - conv2d: {out_channels: 8, kernel: 2, stride: 2, padding: 0}
  - relu: {}
  - global_avgpool: {}
  - flatten: {}
  - linear: {out_features: 5, name: fc}
loss: {cross_entropy: {input: fc, target: label}}
optimizer: {adam: {lr: 0.005}}
)";

TEST(CpuLoopsTest, EveryClaimedNodeOfTheTrainingGraphsGetsALoopKernel) {
  const std::set<OpKind> claimed = {OpKind::Cast,
                                    OpKind::Relu,
                                    OpKind::ReluGrad,
                                    OpKind::ReduceSum,
                                    OpKind::BatchNorm2d,
                                    OpKind::BatchNorm2dGrad,
                                    OpKind::GlobalAvgPool,
                                    OpKind::GlobalAvgPoolGrad,
                                    OpKind::SgdMomentumUpdate,
                                    OpKind::AdamUpdate,
                                    OpKind::UnscaleCheck,
                                    OpKind::MseLoss,
                                    OpKind::MseLossGrad};
  std::set<OpKind> seen;
  for (const char *model : {kMlp, kConvNet})
    for (const char *level : {"O0", "O1", "O2"}) {
      SCOPED_TRACE(level);
      DiagnosticEngine diag;
      std::unique_ptr<Graph> graph = loadModelString(model, "m.yaml", diag);
      ASSERT_TRUE(graph);
      ASSERT_TRUE(setPolicyOverride(graph->meta(), "opt_level", level, diag));
      PassManager pm;
      ASSERT_TRUE(addStandardPipeline(pm, PipelineStage::Train, diag));
      ASSERT_TRUE(pm.run(*graph, diag));
      for (const Node &node : graph->nodes()) {
        if (!claimed.count(node.kind()))
          continue;
        seen.insert(node.kind());
        std::unique_ptr<kernels::NodeKernel> k = kernels::cpu::prepareCpuKernel(node);
        ASSERT_TRUE(k);
        std::string operands;
        for (const Value *v : node.operands())
          operands += " " + v->type().str();
        EXPECT_TRUE(kernels::cpu::isLoopKernel(*k)) << node.opName().str() << operands;
      }
    }
  // Every op of the list was there (O1 and O2 add the casts and the
  // unscale check).
  EXPECT_EQ(seen, claimed);
}

} // namespace
