//===- GradActivationTest.cpp - Gradients of relu, gelu, sigmoid, tanh, silu, ... ===//
//
// Finite-difference checks (f64) of every activation's gradient rule (ONNX's
// hardsigmoid, hardswish, leaky_relu, elu, softplus and prelu too), and of
// the unary math ops' (clamp, sqrt, erf, pow, exp, neg, abs, log,
// reciprocal), on several shapes and attributes (both gelu forms, softmax
// dims, dropout in training and eval, clamp bounds, pow exponents, prelu's
// slope shapes); hand-computed backward kernel values; and f32/f16/bf16 vs
// f64 comparisons of each backward kernel.
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"
#include "KernelTestUtil.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::allClose;
using ampc::testing::checkGradients;
using ampc::testing::defaultTolerance;
using ampc::testing::GradCheckOperand;
using ampc::testing::GradCheckOptions;
using ampc::testing::KernelRun;
using ampc::testing::matchesF64;
using ampc::testing::randomValues;
using ampc::testing::runKernel;

TensorType f64(std::vector<int64_t> dims) { return TensorType(DType::F64, dims); }

constexpr DType kLowDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr DType kAllFloatDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

// --- finite differences ---------------------------------------------------------

TEST(GradActivation, Relu) {
  // Random values in [-1, 1): none lands within the step of the kink at 0.
  EXPECT_TRUE(checkGradients("relu", {{f64({3, 4})}}));
  EXPECT_TRUE(checkGradients("relu", {{f64({2, 3, 5})}}, {}, {.seed = 2}));
  EXPECT_TRUE(checkGradients("relu", {{f64({})}}, {}, {.lo = 0.5, .hi = 1}));
}

TEST(GradActivation, GeluBothForms) {
  for (const char *form : {"none", "tanh"}) {
    SCOPED_TRACE(form);
    EXPECT_TRUE(checkGradients("gelu", {{f64({3, 5})}}, {{"approximate", Attribute(form)}},
                               {.lo = -4, .hi = 4}));
    EXPECT_TRUE(checkGradients("gelu", {{f64({2, 2, 3})}}, {{"approximate", Attribute(form)}},
                               {.seed = 3, .lo = -0.5, .hi = 0.5}));
  }
}

TEST(GradActivation, SigmoidAndTanh) {
  for (const char *op : {"sigmoid", "tanh"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(checkGradients(op, {{f64({4, 3})}}, {}, {.lo = -4, .hi = 4}));
    EXPECT_TRUE(checkGradients(op, {{f64({7})}}, {}, {.seed = 5}));
  }
}

TEST(GradActivation, Silu) {
  EXPECT_TRUE(checkGradients("silu", {{f64({4, 3})}}, {}, {.lo = -6, .hi = 6}));
  EXPECT_TRUE(checkGradients("silu", {{f64({2, 5})}}, {}, {.seed = 7}));
}

TEST(GradActivation, ClampBothBoundsOneBoundAndRelu6) {
  // Random values in [-1, 1) against bounds +-0.5: some clipped on each
  // side, none within the step of a bound (the kinks).
  EXPECT_TRUE(checkGradients("clamp", {{f64({4, 5})}},
                             {{"min", Attribute(-0.5)}, {"max", Attribute(0.5)}}));
  // ReLU6 = clamp(0, 6), over [-8, 8).
  EXPECT_TRUE(checkGradients("clamp", {{f64({3, 4})}},
                             {{"min", Attribute(0.0)}, {"max", Attribute(6.0)}},
                             {.seed = 2, .lo = -8, .hi = 8}));
  // One bound (the other infinite, torch.clamp's None).
  EXPECT_TRUE(checkGradients("clamp", {{f64({7})}}, {{"max", Attribute(0.25)}}, {.seed = 3}));
  EXPECT_TRUE(checkGradients("clamp", {{f64({7})}}, {{"min", Attribute(-0.25)}}, {.seed = 4}));
  // Every value clipped: the gradient is exactly zero.
  EXPECT_TRUE(checkGradients("clamp", {{f64({2, 3})}},
                             {{"min", Attribute(2.0)}, {"max", Attribute(3.0)}},
                             {.allowZeroGradient = true}));
}

TEST(GradActivation, SqrtErfExp) {
  EXPECT_TRUE(checkGradients("sqrt", {{f64({4, 3})}}, {}, {.lo = 0.25, .hi = 9}));
  EXPECT_TRUE(checkGradients("sqrt", {{f64({})}}, {}, {.lo = 1e-3, .hi = 2e-3}));
  EXPECT_TRUE(checkGradients("erf", {{f64({4, 3})}}, {}, {.lo = -3, .hi = 3}));
  EXPECT_TRUE(checkGradients("erf", {{f64({2, 5})}}, {}, {.seed = 5}));
  EXPECT_TRUE(checkGradients("exp", {{f64({4, 3})}}, {}, {.lo = -4, .hi = 3}));
  EXPECT_TRUE(checkGradients("exp", {{f64({2, 2, 2})}}, {}, {.seed = 6}));
}

TEST(GradActivation, PowEveryShortcutAndTheGeneralExponent) {
  // ATen's shortcuts (2, 3, 0.5, -0.5, -1, -2), the identity and general
  // exponents; negative bases only where the exponent is an integer.
  for (double e : {2.0, 3.0, -1.0, -2.0, 1.0, 4.0}) {
    SCOPED_TRACE("exponent " + std::to_string(e));
    EXPECT_TRUE(
        checkGradients("pow", {{f64({3, 4})}}, {{"exponent", Attribute(e)}}, {.lo = 0.5, .hi = 2}));
    EXPECT_TRUE(checkGradients("pow", {{f64({5})}}, {{"exponent", Attribute(e)}},
                               {.seed = 7, .lo = -2, .hi = -0.5}));
  }
  for (double e : {0.5, -0.5, 1.7, -2.5, 0.3}) {
    SCOPED_TRACE("exponent " + std::to_string(e));
    EXPECT_TRUE(checkGradients("pow", {{f64({3, 4})}}, {{"exponent", Attribute(e)}},
                               {.lo = 0.25, .hi = 3}));
  }
  // x^0 = 1: the gradient is zero.
  EXPECT_TRUE(checkGradients("pow", {{f64({4})}}, {{"exponent", Attribute(0.0)}},
                             {.allowZeroGradient = true}));
}

TEST(GradActivation, OnnxActivations) {
  // Random values land nowhere within the step of a kink (hardsigmoid's and
  // hardswish's ends at -3 and 3, leaky_relu's and elu's 0, softplus's
  // threshold at 20).
  EXPECT_TRUE(checkGradients("hardsigmoid", {{f64({4, 5})}}, {}, {.lo = -5, .hi = 5}));
  EXPECT_TRUE(checkGradients("hardsigmoid", {{f64({4, 5})}},
                             {{"alpha", Attribute(0.2)}, {"beta", Attribute(0.4)}},
                             {.seed = 2, .lo = -5, .hi = 5}));
  EXPECT_TRUE(checkGradients("hardswish", {{f64({4, 5})}}, {}, {.lo = -5, .hi = 5}));
  EXPECT_TRUE(checkGradients("hardswish", {{f64({7})}}, {}, {.seed = 3, .lo = -2.5, .hi = 2.5}));
  for (double slope : {0.01, 0.2, -0.5}) {
    SCOPED_TRACE("negative_slope " + std::to_string(slope));
    EXPECT_TRUE(
        checkGradients("leaky_relu", {{f64({3, 4})}}, {{"negative_slope", Attribute(slope)}}));
  }
  for (double alpha : {1.0, 0.5}) {
    SCOPED_TRACE("alpha " + std::to_string(alpha));
    EXPECT_TRUE(
        checkGradients("elu", {{f64({3, 4})}}, {{"alpha", Attribute(alpha)}}, {.lo = -4, .hi = 2}));
  }
  EXPECT_TRUE(checkGradients("softplus", {{f64({4, 5})}}, {}, {.lo = -25, .hi = 25}));
  EXPECT_TRUE(checkGradients("softplus", {{f64({6})}}, {}, {.seed = 4}));
}

TEST(GradActivation, NegAbsLogReciprocal) {
  EXPECT_TRUE(checkGradients("neg", {{f64({3, 4})}}));
  EXPECT_TRUE(checkGradients("abs", {{f64({3, 4})}}));
  EXPECT_TRUE(checkGradients("log", {{f64({3, 4})}}, {}, {.lo = 0.25, .hi = 4}));
  EXPECT_TRUE(checkGradients("reciprocal", {{f64({3, 4})}}, {}, {.lo = 0.25, .hi = 4}));
  EXPECT_TRUE(checkGradients("reciprocal", {{f64({5})}}, {}, {.seed = 2, .lo = -4, .hi = -0.25}));
}

TEST(GradActivation, PowerBaseAndExponent) {
  // power(a, b) = a^b: both operands' gradients, the exponents broadcast
  // (per column, a scalar) and summed back, on positive bases.
  EXPECT_TRUE(checkGradients("power", {{f64({3, 4})}, {f64({3, 4})}}, {}, {.lo = 0.25, .hi = 3}));
  EXPECT_TRUE(
      checkGradients("power", {{f64({2, 3, 4})}, {f64({4})}}, {}, {.seed = 2, .lo = 0.5, .hi = 2}));
  EXPECT_TRUE(
      checkGradients("power", {{f64({2, 3})}, {f64({})}}, {}, {.seed = 3, .lo = 0.5, .hi = 2}));
}

TEST(GradActivation, ModAndFmodDividendAndDivisor) {
  // Away from the jumps (a / b not near an integer) both are smooth: the
  // operands in [0.3, 0.45] give quotients in (0.66, 1.5), none integer.
  for (const char *op : {"mod", "fmod"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(checkGradients(op, {{f64({3, 4})}, {f64({4})}}, {}, {.lo = 0.3, .hi = 0.45}));
  }
}

TEST(GradActivation, PReluInputAndSlope) {
  // The slope's gradient is summed over the dims it was broadcast along:
  // per channel ([C, 1, 1] against [N, C, H, W]), per feature, a single
  // slope, a scalar; and each operand alone.
  struct Case {
    const char *name;
    std::vector<int64_t> x, slope;
  };
  const Case cases[] = {
      {"per channel", {2, 3, 4, 4}, {3, 1, 1}},
      {"per feature", {4, 3}, {3}},
      {"one slope", {2, 3, 5}, {1}},
      {"scalar slope", {2, 3}, {}},
      {"same shape", {2, 3}, {2, 3}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(checkGradients("prelu", {{f64(c.x)}, {f64(c.slope)}}));
  }
  GradCheckOperand frozenX{f64({2, 3, 4})}, frozenSlope{f64({3, 1})};
  frozenX.differentiate = false;
  frozenSlope.differentiate = false;
  EXPECT_TRUE(checkGradients("prelu", {frozenX, {f64({3, 1})}}));
  EXPECT_TRUE(checkGradients("prelu", {{f64({2, 3, 4})}, frozenSlope}));
}

TEST(GradActivation, SoftmaxAndLogSoftmaxEveryDim) {
  for (const char *op : {"softmax", "log_softmax"})
    for (int64_t dim : {0, 1, 2, -1, -2}) {
      SCOPED_TRACE(std::string(op) + " dim " + std::to_string(dim));
      EXPECT_TRUE(
          checkGradients(op, {{f64({2, 3, 4})}}, {{"dim", Attribute(dim)}}, {.lo = -3, .hi = 3}));
    }
}

TEST(GradActivation, SoftmaxSingleElementRows) {
  // A row of one element has softmax 1 and log_softmax 0 whatever the input:
  // the gradient is exactly zero.
  GradCheckOptions zeroExpected{.allowZeroGradient = true};
  EXPECT_TRUE(checkGradients("softmax", {{f64({3, 1})}}, {{"dim", Attribute(1)}}, zeroExpected));
  EXPECT_TRUE(
      checkGradients("log_softmax", {{f64({3, 1})}}, {{"dim", Attribute(1)}}, zeroExpected));
}

TEST(GradActivation, DropoutTrainingUsesTheForwardMask) {
  // The backward regenerates the mask from (seed, step, index); the finite
  // differences see the forward's mask, so a different mask would fail.
  for (double p : {0.3, 0.5, 0.0}) {
    SCOPED_TRACE("p " + std::to_string(p));
    EXPECT_TRUE(checkGradients(
        "dropout", {{f64({4, 8})}},
        {{"p", Attribute(p)}, {"seed", Attribute(7)}, {"training", Attribute(true)}}));
  }
}

TEST(GradActivation, DropoutEvalIsIdentity) {
  EXPECT_TRUE(checkGradients("dropout", {{f64({3, 5})}},
                             {{"p", Attribute(0.5)}, {"training", Attribute(false)}}));
}

TEST(GradActivation, DropoutCheckIsNotVacuous) {
  // The training checks above mean something only if their masks drop some
  // elements: with seed 7 on 32 elements, both p drop some and keep some, and
  // kept elements are scaled by 1 / (1 - p).
  for (double p : {0.3, 0.5}) {
    AttrMap attrs{{"p", Attribute(p)}, {"seed", Attribute(7)}, {"training", Attribute(true)}};
    KernelRun forward = runKernel("dropout", {f64({4, 8})}, {std::vector<double>(32, 1.0)}, attrs);
    ASSERT_TRUE(forward.ok) << forward.error;
    unsigned dropped = 0;
    for (double v : forward.outputs[0]) {
      EXPECT_TRUE(v == 0 || std::abs(v - 1 / (1 - p)) < 1e-12) << v;
      dropped += v == 0;
    }
    EXPECT_GT(dropped, 0u) << "p " << p;
    EXPECT_LT(dropped, 32u) << "p " << p;
  }
}

// --- hand-computed backward kernels ------------------------------------------------

TEST(GradActivation, BackwardKernelsHandComputed) {
  for (DType t : kAllFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType four(t, {4}), two(t, {1, 2});
    // relu: dy where x > 0 (0 at the kink).
    KernelRun relu = runKernel("relu_grad", {four, four}, {{1, 2, 3, 4}, {-1, 0, 0.5, 2}});
    ASSERT_TRUE(relu.ok) << relu.error;
    EXPECT_TRUE(allClose(relu.outputs[0], {0, 0, 3, 4}, 0));
    // gelu'(0) = Phi(0) = 0.5 in both forms; gelu'(x) for large |x| -> 1 / 0.
    for (const char *form : {"none", "tanh"}) {
      KernelRun gelu = runKernel("gelu_grad", {four, four}, {{2, 2, 2, 2}, {0, 0, 10, -10}},
                                 {{"approximate", Attribute(form)}});
      ASSERT_TRUE(gelu.ok) << gelu.error;
      EXPECT_TRUE(allClose(gelu.outputs[0], {1, 1, 2, 0}, 1e-6)) << form;
    }
    // sigmoid from y: dy y (1 - y); tanh from y: dy (1 - y^2).
    KernelRun sigmoid = runKernel("sigmoid_grad", {four, four}, {{2, 1, 4, 1}, {0.25, 0.5, 0, 1}});
    ASSERT_TRUE(sigmoid.ok) << sigmoid.error;
    EXPECT_TRUE(allClose(sigmoid.outputs[0], {0.375, 0.25, 0, 0}, 0));
    KernelRun tanh = runKernel("tanh_grad", {four, four}, {{2, 1, 4, 1}, {0.5, 0, -1, -0.75}});
    ASSERT_TRUE(tanh.ok) << tanh.error;
    EXPECT_TRUE(allClose(tanh.outputs[0], {1.5, 1, 0, 0.4375}, 0));
    // silu from x: dy s (1 + x (1 - s)), s = sigmoid(x): 1/2 at 0, and
    // s = 1 at 800 (slope 1), s = 0 at -800 (slope 0).
    KernelRun silu = runKernel("silu_grad", {four, four}, {{2, 3, 2, 2}, {0, 0, 800, -800}});
    ASSERT_TRUE(silu.ok) << silu.error;
    EXPECT_TRUE(allClose(silu.outputs[0], {1, 1.5, 2, 0}, 0));
    // softmax from y = [0.25, 0.75], dy = [1, 3]: sum dy y = 2.5,
    // dx = y (dy - 2.5) = [-0.375, 0.375].
    KernelRun softmax = runKernel("softmax_grad", {two, two}, {{1, 3}, {0.25, 0.75}});
    ASSERT_TRUE(softmax.ok) << softmax.error;
    EXPECT_TRUE(allClose(softmax.outputs[0], {-0.375, 0.375}, 0));
    // log_softmax from y = log [0.25, 0.75], dy = [1, 1]: dx = dy - p * 2.
    KernelRun logSoftmax =
        runKernel("log_softmax_grad", {two, two}, {{1, 1}, {std::log(0.25), std::log(0.75)}});
    ASSERT_TRUE(logSoftmax.ok) << logSoftmax.error;
    // log(0.25) and log(0.75) are rounded to t first.
    double tol = t == DType::BF16 ? 1e-2 : t == DType::F16 ? 2e-3 : 1e-6;
    EXPECT_TRUE(allClose(logSoftmax.outputs[0], {0.5, -0.5}, tol));
  }
}

TEST(GradActivation, UnaryMathBackwardKernelsHandComputed) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType t : kAllFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // Constants such as 2/sqrt(pi) round in bf16 and f16.
    double tol = t == DType::BF16 ? 1e-2 : t == DType::F16 ? 2e-3 : 1e-6;
    TensorType four(t, {4}), six(t, {6});
    // clamp to [-1, 1]: dy where -1 <= x <= 1, the bounds included (torch.clamp's
    // backward; hardtanh's would be 0 there); 0 outside and for NaN.
    AttrMap unit{{"min", Attribute(-1.0)}, {"max", Attribute(1.0)}};
    KernelRun clamp = runKernel("clamp_grad", {six, six},
                                {{1, 2, 3, 4, 5, 6}, {-2, -1, 0.5, 1, 2, std::nan("")}}, unit);
    ASSERT_TRUE(clamp.ok) << clamp.error;
    EXPECT_TRUE(allClose(clamp.outputs[0], {0, 2, 3, 4, 0, 0}, 0));
    // min > max clips everything: no gradient anywhere.
    KernelRun crossed = runKernel("clamp_grad", {four, four}, {{1, 1, 1, 1}, {-1, 0, 1, 2}},
                                  {{"min", Attribute(1.5)}, {"max", Attribute(0.5)}});
    ASSERT_TRUE(crossed.ok) << crossed.error;
    EXPECT_TRUE(allClose(crossed.outputs[0], {0, 0, 0, 0}, 0));
    // sqrt from y: dy / (2 y); inf at y = 0, as PyTorch.
    KernelRun sqrt = runKernel("sqrt_grad", {four, four}, {{1, 2, 3, 1}, {0.5, 1, 4, 0}});
    ASSERT_TRUE(sqrt.ok) << sqrt.error;
    EXPECT_TRUE(allClose({sqrt.outputs[0].begin(), sqrt.outputs[0].end() - 1}, {1, 1, 0.375}, 0));
    EXPECT_EQ(sqrt.outputs[0][3], inf);
    // erf from x: dy 2/sqrt(pi) exp(-x^2).
    KernelRun erf = runKernel("erf_grad", {four, four}, {{1, 2, 1, 1}, {0, 0, 10, -1}});
    ASSERT_TRUE(erf.ok) << erf.error;
    EXPECT_TRUE(allClose(erf.outputs[0],
                         {1.1283791670955126, 2.2567583341910252, 0, 0.41510749742059472}, tol));
    // pow 2 from x: 2 x dy.
    KernelRun square = runKernel("pow_grad", {four, four}, {{1, 2, 3, 1}, {3, -1, 0, 0.5}},
                                 {{"exponent", Attribute(2.0)}});
    ASSERT_TRUE(square.ok) << square.error;
    EXPECT_TRUE(allClose(square.outputs[0], {6, -4, 0, 1}, 0));
    // At x = 0 as torch.pow's backward: exponent 0 gives 0 (not 0 * inf),
    // 1 gives dy (0^0 = 1), 0.5 gives inf, 3 gives 0.
    const std::pair<double, double> atZero[] = {{0.0, 0}, {1.0, 3}, {0.5, inf}, {3.0, 0}};
    for (auto [e, want] : atZero) {
      KernelRun pow = runKernel("pow_grad", {four, four}, {{3, 3, 3, 3}, {0, 0, 0, 0}},
                                {{"exponent", Attribute(e)}});
      ASSERT_TRUE(pow.ok) << pow.error;
      EXPECT_EQ(pow.outputs[0], std::vector<double>(4, want)) << "exponent " << e;
    }
    // exp from y: dy y.
    KernelRun exp = runKernel("exp_grad", {four, four}, {{2, 3, 1, 0.5}, {0.5, 2, 0, 4}});
    ASSERT_TRUE(exp.ok) << exp.error;
    EXPECT_TRUE(allClose(exp.outputs[0], {1, 6, 0, 2}, 0));
  }
}

TEST(GradActivation, OnnxActivationBackwardKernelsHandComputed) {
  const double nan = std::nan("");
  for (DType t : kAllFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType six(t, {6}), four(t, {4});
    // hardsigmoid: dy / 6 strictly inside (-3, 3), 0 at the ends and outside
    // (1/6 rounded to t, as ATen's one_sixth).
    double sixth = t == DType::F64 ? 1.0 / 6 : double(float(1.0 / 6));
    KernelRun hardsigmoid =
        runKernel("hardsigmoid_grad", {six, six}, {{6, 6, 6, 6, 6, 6}, {-4, -3, 0, 2.9, 3, nan}});
    ASSERT_TRUE(hardsigmoid.ok) << hardsigmoid.error;
    double tol = t == DType::BF16 ? 1e-2 : t == DType::F16 ? 1e-3 : 1e-6;
    EXPECT_TRUE(allClose(hardsigmoid.outputs[0], {0, 0, 6 * sixth, 6 * sixth, 0, 0}, tol));
    // hardswish: ATen's ends: 0 below -3, dy (x/3 + 1/2) on [-3, 3] (so -dy/2
    // at -3 and 3dy/2 at 3), dy above 3; NaN passes dy.
    KernelRun hardswish =
        runKernel("hardswish_grad", {six, six}, {{2, 2, 2, 2, 2, 2}, {-3.5, -3, 0, 3, 3.5, nan}});
    ASSERT_TRUE(hardswish.ok) << hardswish.error;
    EXPECT_TRUE(allClose(hardswish.outputs[0], {0, -1, 1, 3, 2, 2}, 0));
    // leaky_relu: dy for x > 0, else dy * slope (also at 0).
    KernelRun leaky = runKernel("leaky_relu_grad", {four, four}, {{2, 2, 2, 2}, {-1, 0, 1, nan}},
                                {{"negative_slope", Attribute(0.25)}});
    ASSERT_TRUE(leaky.ok) << leaky.error;
    EXPECT_TRUE(allClose(leaky.outputs[0], {0.5, 0.5, 2, 0.5}, 0));
    // elu: dy for x > 0, else dy * alpha * e^x (alpha at 0).
    KernelRun elu = runKernel("elu_grad", {four, four}, {{2, 2, 2, 2}, {-1, 0, 1, -800}},
                              {{"alpha", Attribute(0.5)}});
    ASSERT_TRUE(elu.ok) << elu.error;
    EXPECT_TRUE(allClose(elu.outputs[0], {0.36787944117144233, 1, 2, 0}, tol));
    // softplus: dy sigmoid(x); dy above the threshold 20.
    KernelRun softplus =
        runKernel("softplus_grad", {four, four}, {{2, 2, 2, 2}, {0, 30, -800, 19}});
    ASSERT_TRUE(softplus.ok) << softplus.error;
    EXPECT_TRUE(allClose(softplus.outputs[0], {1, 2, 0, 2}, tol));
    // abs: dy sign(x), 0 at +-0 and for NaN (torch.sgn).
    KernelRun abs =
        runKernel("abs_grad", {six, six}, {{3, 3, 3, 3, 3, 3}, {-2, 2, 0, -0.0, nan, 1}});
    ASSERT_TRUE(abs.ok) << abs.error;
    EXPECT_TRUE(allClose(abs.outputs[0], {-3, 3, 0, 0, 0, 3}, 0));
    // log: dy / x; reciprocal from y = 1/x: -dy y^2.
    KernelRun log = runKernel("log_grad", {four, four}, {{1, 3, 2, 1}, {2, 0.5, -4, 0}});
    ASSERT_TRUE(log.ok) << log.error;
    EXPECT_TRUE(allClose({log.outputs[0].begin(), log.outputs[0].end() - 1}, {0.5, 6, -0.5}, 0));
    EXPECT_EQ(log.outputs[0][3], std::numeric_limits<double>::infinity());
    KernelRun reciprocal =
        runKernel("reciprocal_grad", {four, four}, {{1, 2, 3, 1}, {0.5, -2, 0, 4}});
    ASSERT_TRUE(reciprocal.ok) << reciprocal.error;
    EXPECT_TRUE(allClose(reciprocal.outputs[0], {-0.25, -8, 0, -16}, 0));
  }
}

// --- low precision against f64 ---------------------------------------------------

TEST(GradActivation, ElementwiseBackwardKernelsMatchF64) {
  TensorType type = f64({5, 7});
  std::vector<double> dy = randomValues(35, 1, -2, 2);
  std::vector<double> x = randomValues(35, 2, -4, 4);
  std::vector<double> sigmoidY = randomValues(35, 3, 0, 1);
  std::vector<double> tanhY = randomValues(35, 4, -1, 1);
  for (DType t : kLowDTypes) {
    double tol = defaultTolerance(t);
    EXPECT_TRUE(matchesF64("relu_grad", {type, type}, {dy, x}, {}, t, tol));
    EXPECT_TRUE(matchesF64("gelu_grad", {type, type}, {dy, x}, {}, t, tol));
    EXPECT_TRUE(matchesF64("gelu_grad", {type, type}, {dy, x}, {{"approximate", Attribute("tanh")}},
                           t, tol));
    EXPECT_TRUE(matchesF64("sigmoid_grad", {type, type}, {dy, sigmoidY}, {}, t, tol));
    EXPECT_TRUE(matchesF64("tanh_grad", {type, type}, {dy, tanhY}, {}, t, tol));
    EXPECT_TRUE(matchesF64("silu_grad", {type, type}, {dy, x}, {}, t, tol));
  }
}

TEST(GradActivation, UnaryMathBackwardKernelsMatchF64) {
  TensorType type = f64({5, 7});
  std::vector<double> dy = randomValues(35, 1, -2, 2);
  std::vector<double> x = randomValues(35, 2, -3, 3);
  std::vector<double> positive = randomValues(35, 3, 0.25, 4);
  std::vector<double> expY = randomValues(35, 4, 0, 20);
  for (DType t : kLowDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    double tol = defaultTolerance(t);
    EXPECT_TRUE(matchesF64("clamp_grad", {type, type}, {dy, x},
                           {{"min", Attribute(-1.0)}, {"max", Attribute(1.5)}}, t, tol));
    EXPECT_TRUE(matchesF64("sqrt_grad", {type, type}, {dy, positive}, {}, t, tol));
    EXPECT_TRUE(matchesF64("erf_grad", {type, type}, {dy, x}, {}, t, tol));
    EXPECT_TRUE(matchesF64("exp_grad", {type, type}, {dy, expY}, {}, t, tol));
    for (double e : {2.0, 3.0})
      EXPECT_TRUE(
          matchesF64("pow_grad", {type, type}, {dy, x}, {{"exponent", Attribute(e)}}, t, tol));
    // Negative and fractional exponents on bases away from 0 (x^-2 of a base
    // near 0 would overflow f16).
    for (double e : {-1.0, 0.5, 1.7, -0.5})
      EXPECT_TRUE(matchesF64("pow_grad", {type, type}, {dy, positive}, {{"exponent", Attribute(e)}},
                             t, tol));
  }
}

TEST(GradActivation, OnnxActivationBackwardKernelsMatchF64) {
  TensorType type = f64({5, 7});
  std::vector<double> dy = randomValues(35, 1, -2, 2);
  std::vector<double> x = randomValues(35, 2, -5, 5);
  std::vector<double> wide = randomValues(35, 3, -25, 25);
  std::vector<double> positive = randomValues(35, 4, 0.25, 4);
  for (DType t : kLowDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    double tol = defaultTolerance(t);
    EXPECT_TRUE(matchesF64("hardsigmoid_grad", {type, type}, {dy, x}, {}, t, tol));
    EXPECT_TRUE(matchesF64("hardsigmoid_grad", {type, type}, {dy, x},
                           {{"alpha", Attribute(0.2)}, {"beta", Attribute(0.5)}}, t, tol));
    EXPECT_TRUE(matchesF64("hardswish_grad", {type, type}, {dy, x}, {}, t, tol));
    EXPECT_TRUE(matchesF64("leaky_relu_grad", {type, type}, {dy, x},
                           {{"negative_slope", Attribute(0.2)}}, t, tol));
    EXPECT_TRUE(matchesF64("elu_grad", {type, type}, {dy, x}, {{"alpha", Attribute(0.7)}}, t, tol));
    EXPECT_TRUE(matchesF64("softplus_grad", {type, type}, {dy, wide}, {}, t, tol));
    EXPECT_TRUE(matchesF64("abs_grad", {type, type}, {dy, x}, {}, t, tol));
    EXPECT_TRUE(matchesF64("log_grad", {type, type}, {dy, positive}, {}, t, tol));
    EXPECT_TRUE(matchesF64("reciprocal_grad", {type, type}, {dy, positive}, {}, t, tol));
  }
}

TEST(GradActivation, SoftmaxBackwardKernelsMatchF64) {
  TensorType type = f64({3, 4, 5});
  std::vector<double> dy = randomValues(60, 5, -2, 2);
  // Real forward outputs, so the rows are probabilities / log-probabilities.
  std::vector<double> logits = randomValues(60, 6, -3, 3);
  for (int64_t dim : {0, 1, -1}) {
    AttrMap attrs{{"dim", Attribute(dim)}};
    KernelRun softmax = runKernel("softmax", {type}, {logits}, attrs);
    KernelRun logSoftmax = runKernel("log_softmax", {type}, {logits}, attrs);
    ASSERT_TRUE(softmax.ok && logSoftmax.ok);
    for (DType t : kLowDTypes) {
      SCOPED_TRACE("dim " + std::to_string(dim));
      double tol = defaultTolerance(t);
      EXPECT_TRUE(
          matchesF64("softmax_grad", {type, type}, {dy, softmax.outputs[0]}, attrs, t, tol));
      EXPECT_TRUE(
          matchesF64("log_softmax_grad", {type, type}, {dy, logSoftmax.outputs[0]}, attrs, t, tol));
    }
  }
}

} // namespace
