//===- ActivationMath.h - Element math of the activation ops --------------===//
//
// One definition per activation, shared by the reference, CPU and CUDA
// kernels (AMPC_HD). T is the compute type: float for f32/f16/bf16 (half
// types are widened, computed in f32 and rounded once on store), double for
// f64. Formulas follow torch.nn.functional.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_ACTIVATIONMATH_H
#define AMPC_KERNELS_COMMON_ACTIVATIONMATH_H

#include "ir/HostDevice.h"
#include "kernels/common/ExpMath.h"
#include "kernels/common/UnaryMath.h"

#include <cmath>

namespace ampc::kernels {

/// max(x, 0); NaN propagates, as torch.relu does.
template <class T> AMPC_HD inline T reluOp(T x) { return x > T(0) || x != x ? x : T(0); }

/// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)): approximate="none".
template <class T> AMPC_HD inline T geluErfOp(T x) {
  using std::erf;
  const T invSqrt2 = T(0.70710678118654752440);
  return T(0.5) * x * (T(1) + erf(x * invSqrt2));
}

/// Phi(x), the standard normal CDF, in f32 from float operations and
/// portableExp alone: a loop of it vectorizes (libm's erff keeps a loop
/// scalar: gelu and its gradient were half the transformer's step) and
/// every backend gets the same bits. Phi(x) = erfc(-x / sqrt 2) / 2, with
/// erfc(z) for z >= 0 from the Chebyshev fit published by Press et al.
/// (Numerical Recipes, `erfcc`; fractional error below 1.2e-7 for every
/// z), so both tails keep their relative accuracy; reflected for x > 0.
AMPC_HD inline float normalCdf(float x) {
  float z = (x < 0.0f ? -x : x) * 0.70710678118654752440f;
  float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  float halfErfc = 0.5f * t * portableExp(-z * z - 1.26551223f + t * p);
  return x > 0.0f ? 1.0f - halfErfc : halfErfc;
}

/// The f32 (and half-type) gelu: x * Phi(x), Phi as above.
AMPC_HD inline float geluErfOp(float x) { return x * normalCdf(x); }

/// gelu(x) ~ 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): approximate="tanh".
template <class T> AMPC_HD inline T geluTanhOp(T x) {
  using std::tanh;
  const T sqrt2OverPi = T(0.79788456080286535588);
  const T cubic = T(0.044715);
  T inner = sqrt2OverPi * (x + cubic * x * x * x);
  return T(0.5) * x * (T(1) + tanh(inner));
}

/// 1 / (1 + e^-x). For very negative x, e^-x overflows to inf and the result
/// is the correct limit 0.
template <class T> AMPC_HD inline T sigmoidOp(T x) {
  using std::exp;
  return T(1) / (T(1) + exp(-x));
}

/// The f32 (and half-type) sigmoid, with portableExp: libm's expf keeps a
/// loop scalar (EfficientNet's sigmoids were a sixth of its O0 step) and
/// every backend gets the same bits. portableExp's infinity above 88.72
/// keeps the limit 0.
AMPC_HD inline float sigmoidOp(float x) { return 1.0f / (1.0f + portableExp(-x)); }

template <class T> AMPC_HD inline T tanhOp(T x) {
  using std::tanh;
  return tanh(x);
}

/// silu(x) = x * sigmoid(x), computed as x / (1 + e^-x) as ATen's kernels do.
/// For very negative x, e^-x overflows to inf and the result is -0.
template <class T> AMPC_HD inline T siluOp(T x) {
  using std::exp;
  return x / (T(1) + exp(-x));
}

/// The f32 (and half-type) silu, with portableExp as sigmoidOp(float).
AMPC_HD inline float siluOp(float x) { return x / (1.0f + portableExp(-x)); }

// Softmax along one dim in three passes over the dim, numerically stable:
// m = max x, s = sum exp(x - m), then exp(x - m) / s or (x - m) - log s.

/// Running maximum; a NaN makes the maximum NaN (so the row becomes NaN, as
/// PyTorch's softmax does).
template <class T> AMPC_HD inline T softmaxMaxStep(T runningMax, T x) {
  return x > runningMax || x != x ? x : runningMax;
}

/// exp(x - max): the term summed for the denominator.
template <class T> AMPC_HD inline T softmaxExpTerm(T x, T rowMax) {
  using std::exp;
  return exp(x - rowMax);
}

/// The f32 (and half-type) term, with portableExp: a row's terms then
/// vectorize (libm's expf kept softmax scalar) and every backend gets the
/// same bits.
AMPC_HD inline float softmaxExpTerm(float x, float rowMax) { return portableExp(x - rowMax); }

template <class T> AMPC_HD inline T softmaxOutput(T x, T rowMax, T sumExp) {
  return softmaxExpTerm(x, rowMax) / sumExp;
}

template <class T> AMPC_HD inline T logSoftmaxOutput(T x, T rowMax, T sumExp) {
  using std::log;
  return (x - rowMax) - log(sumExp);
}

// The same outputs from what a kernel keeps per row, so it need not recompute
// exp or log per element: softmaxFromExpTerm(softmaxExpTerm(x, m), s) ==
// softmaxOutput(x, m, s) and logSoftmaxFromLogSum(x, m, log(s)) ==
// logSoftmaxOutput(x, m, s), bit for bit (exp and log are pure functions).

template <class T> AMPC_HD inline T softmaxFromExpTerm(T expTerm, T sumExp) {
  return expTerm / sumExp;
}

template <class T> AMPC_HD inline T logSoftmaxFromLogSum(T x, T rowMax, T logSumExp) {
  return (x - rowMax) - logSumExp;
}

/// Scale applied to kept elements in training: 1 / (1 - p), computed in the
/// compute type (as PyTorch's fused CUDA dropout does with its f32 scale).
template <class T> AMPC_HD inline T dropoutScale(double p) { return T(1) / (T(1) - T(p)); }

/// A kept element is x * scale, a dropped one 0.
template <class T> AMPC_HD inline T dropoutOp(T x, bool keep, T scale) {
  return keep ? x * scale : T(0);
}

// --- Backward element math ----------------------------------------------
// Each takes the incoming gradient dy and what the forward saved (its input
// or its output) and returns the input's gradient, in the compute type.

/// d relu: dy where x > 0, else 0 (0 at the kink, as torch's threshold_backward).
template <class T> AMPC_HD inline T reluGradOp(T dy, T x) { return x > T(0) ? dy : T(0); }

// gelu's gradient is dy times a function of x alone (its derivative), so
// the half types' cpu loops can read the derivative from a table of every
// input (kernels/cpu/LoopHalfTables.cpp) with the same bits.

/// gelu'(x) (erf form): Phi(x) + x * phi(x), Phi/phi the normal CDF/PDF.
template <class T> AMPC_HD inline T geluErfDerivative(T x) {
  using std::erf;
  using std::exp;
  const T invSqrt2 = T(0.70710678118654752440);
  const T invSqrt2Pi = T(0.39894228040143267794);
  T cdf = T(0.5) * (T(1) + erf(x * invSqrt2));
  T pdf = invSqrt2Pi * exp(T(-0.5) * x * x);
  return cdf + x * pdf;
}

/// The f32 (and half-type) gelu'(x): Phi from normalCdf and phi from
/// portableExp, so the loop vectorizes.
AMPC_HD inline float geluErfDerivative(float x) {
  const float invSqrt2Pi = 0.39894228040143267794f;
  float pdf = invSqrt2Pi * portableExp(-0.5f * x * x);
  return normalCdf(x) + x * pdf;
}

/// d gelu (erf form): dy * gelu'(x).
template <class T> AMPC_HD inline T geluErfGradOp(T dy, T x) { return dy * geluErfDerivative(x); }

/// gelu'(x) (tanh form), the derivative of geluTanhOp written as ATen writes
/// it: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class T> AMPC_HD inline T geluTanhDerivative(T x) {
  using std::tanh;
  const T sqrt2OverPi = T(0.79788456080286535588);
  const T cubic = T(0.044715);
  T xSquared = x * x;
  T t = tanh(sqrt2OverPi * (x + cubic * xSquared * x));
  T left = T(0.5) * (T(1) + t);
  T right = T(0.5) * x * (T(1) - t * t) * sqrt2OverPi * (T(1) + T(3) * cubic * xSquared);
  return left + right;
}

/// d gelu (tanh form): dy * gelu'(x).
template <class T> AMPC_HD inline T geluTanhGradOp(T dy, T x) { return dy * geluTanhDerivative(x); }

/// d sigmoid from the forward output y: dy * y * (1 - y).
template <class T> AMPC_HD inline T sigmoidGradOp(T dy, T y) { return dy * (T(1) - y) * y; }

/// d tanh from the forward output y: dy * (1 - y^2).
template <class T> AMPC_HD inline T tanhGradOp(T dy, T y) { return dy * (T(1) - y * y); }

/// d silu from the forward input x: dy * s * (1 + x (1 - s)) with
/// s = sigmoid(x), as ATen's silu_backward writes it.
template <class T> AMPC_HD inline T siluGradOp(T dy, T x) {
  T s = sigmoidOp(x);
  return dy * s * (T(1) + x * (T(1) - s));
}

// Softmax backward along one dim, from the forward output y, in two passes:
// first a sum over the dim, then one element at a time.

/// softmax: dx_k = y_k (dy_k - sum_j dy_j y_j); the sum is of these terms.
template <class T> AMPC_HD inline T softmaxGradDotTerm(T dy, T y) { return dy * y; }
template <class T> AMPC_HD inline T softmaxGradOp(T dy, T y, T dot) { return y * (dy - dot); }

/// log_softmax: dx_k = dy_k - exp(y_k) sum_j dy_j (sum_j dy_j is the plain sum).
template <class T> AMPC_HD inline T logSoftmaxGradOp(T dy, T y, T sumDy) {
  using std::exp;
  return dy - exp(y) * sumDy;
}

/// The f32 (and half-type) log_softmax gradient, with portableExp.
AMPC_HD inline float logSoftmaxGradOp(float dy, float y, float sumDy) {
  return dy - portableExp(y) * sumDy;
}

// --- Element functors of ir/Pointwise.def's activation rows ------------------
// operator() is the forward, grad(dy, saved) the backward (saved: what the
// row says the backward op reads). The kernels of every backend call these.

struct ReluFn {
  template <class T> AMPC_HD T operator()(T x) const { return reluOp(x); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return reluGradOp(dy, x); }
};

struct GeluFn {
  /// Costly per element (a polynomial and exps, or libm's tanh): the half
  /// types' cpu loops look the forward and derivative up in tables of all
  /// 65536 inputs (kernels/cpu/LoopHalfTables.cpp).
  static constexpr bool kTabulateHalves = true;
  bool tanhForm = false; ///< approximate is tanh (else none, the erf form); kernels/Pointwise.h
  // The test is the same for every element: the cpu loops are unswitched on
  // it (-funswitch-loops) and CUDA threads never diverge on it.
  template <class T> AMPC_HD T operator()(T x) const {
    return tanhForm ? geluTanhOp(x) : geluErfOp(x);
  }
  /// grad(dy, x) == dy * derivative(x), bit for bit.
  template <class T> AMPC_HD T derivative(T x) const {
    return tanhForm ? geluTanhDerivative(x) : geluErfDerivative(x);
  }
  template <class T> AMPC_HD T grad(T dy, T x) const { return dy * derivative(x); }
};

/// GeluFn's erf form alone: the cpu loops use it for a node whose form is
/// erf, so that the loop has no tanh call in it and vectorizes.
struct GeluErfFn {
  static constexpr bool kTabulateHalves = true;
  template <class T> AMPC_HD T operator()(T x) const { return geluErfOp(x); }
  template <class T> AMPC_HD T derivative(T x) const { return geluErfDerivative(x); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return dy * derivative(x); }
};

struct SigmoidFn {
  template <class T> AMPC_HD T operator()(T x) const { return sigmoidOp(x); }
  template <class T> AMPC_HD T grad(T dy, T y) const { return sigmoidGradOp(dy, y); }
};

struct TanhFn {
  template <class T> AMPC_HD T operator()(T x) const { return tanhOp(x); }
  template <class T> AMPC_HD T grad(T dy, T y) const { return tanhGradOp(dy, y); }
};

struct SiluFn {
  template <class T> AMPC_HD T operator()(T x) const { return siluOp(x); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return siluGradOp(dy, x); }
};

// --- ONNX's other activations ---------------------------------------------
// HardSigmoid, HardSwish, LeakyRelu, Elu, Softplus and PRelu, each written as
// ATen's CPU kernel writes it (so results match PyTorch's to the bit where
// the libm functions agree), backward ops as ATen's *_backward kernels.

/// hardsigmoid(x) = max(0, min(1, alpha x + beta)) (ONNX), computed for
/// alpha > 0 as clamp(x + beta/alpha, 0, 1/alpha) / (1/alpha): with
/// PyTorch's alpha = 1/6, beta = 1/2 that is ATen's min(max(x + 3, 0), 6) / 6
/// to the bit (beta/alpha and 1/alpha are exactly 3 and 6 in double), where
/// alpha x + beta would round differently. NaN propagates.
template <class T> AMPC_HD inline T hardsigmoidOp(T x, double alpha, double beta) {
  T range = T(1 / alpha);
  return clampOp(x + T(beta / alpha), T(0), range) / range;
}

/// d hardsigmoid: dy * alpha strictly inside the linear part, 0 outside and
/// at its ends (ATen: (x > -3 && x < 3) ? dy / 6 : 0, with 1/6 rounded to T).
template <class T> AMPC_HD inline T hardsigmoidGradOp(T dy, T x, double alpha, double beta) {
  return x > T(-beta / alpha) && x < T((1 - beta) / alpha) ? dy * T(alpha) : T(0);
}

/// hardswish(x) = x * hardsigmoid(x) with PyTorch's constants, as ATen's CPU
/// kernel: x * min(max(x + 3, 0), 6) / 6 (its CUDA kernel multiplies by
/// 1/6 instead, which rounds differently).
template <class T> AMPC_HD inline T hardswishOp(T x) {
  return x * clampOp(x + T(3), T(0), T(6)) / T(6);
}

/// d hardswish, ATen's definition: 0 below -3, dy (x/3 + 1/2) on [-3, 3]
/// (both ends included: -dy/2 at -3, 3dy/2 at 3), dy above 3; a NaN input
/// passes dy (its comparisons are false). ATen's vectorized CPU path gives
/// dy at exactly 3 and NaN for NaN; its scalar and CUDA kernels are these.
template <class T> AMPC_HD inline T hardswishGradOp(T dy, T x) {
  if (x < T(-3))
    return T(0);
  if (x <= T(3))
    return dy * (x / T(3) + T(0.5));
  return dy;
}

/// leaky_relu(x) = x for x > 0, else x * slope (NaN propagates).
template <class T> AMPC_HD inline T leakyReluOp(T x, T slope) { return x > T(0) ? x : x * slope; }

/// d leaky_relu: dy for x > 0, else dy * slope (slope at 0, as ATen).
template <class T> AMPC_HD inline T leakyReluGradOp(T dy, T x, T slope) {
  return x > T(0) ? dy : dy * slope;
}

/// elu(x) = x for x > 0, else alpha (e^x - 1), with expm1 (ATen's CUDA
/// kernel; its CPU kernel's exp(x) - 1 loses the low bits near 0).
template <class T> AMPC_HD inline T eluOp(T x, T alpha) {
  using std::expm1;
  return x <= T(0) ? expm1(x) * alpha : x;
}

/// d elu from the input: dy for x > 0, else dy * alpha * e^x.
template <class T> AMPC_HD inline T eluGradOp(T dy, T x, T alpha) {
  using std::exp;
  return x <= T(0) ? dy * alpha * exp(x) : dy;
}

/// softplus(x) = ln(1 + e^x) as torch's softplus with beta 1 and threshold
/// 20: x itself above 20 (where ln(1 + e^x) - x < 2.1e-9), else
/// log1p(e^x), which neither overflows (x <= 20) nor loses the small values
/// of very negative x.
template <class T> AMPC_HD inline T softplusOp(T x) {
  using std::exp;
  using std::log1p;
  return x > T(20) ? x : log1p(exp(x));
}

/// d softplus from the input: dy * sigmoid(x) = dy e^x / (e^x + 1), dy above
/// the threshold (ATen's softplus_backward).
template <class T> AMPC_HD inline T softplusGradOp(T dy, T x) {
  using std::exp;
  T z = exp(x);
  return x > T(20) ? dy : dy * z / (z + T(1));
}

/// prelu(x, slope) = x for x > 0, else slope * x (NaN propagates).
template <class T> AMPC_HD inline T preluOp(T x, T slope) { return x > T(0) ? x : slope * x; }

/// d prelu / d x: 1 for x > 0, else the slope; the input's gradient is dy
/// times this (ATen: x > 0 ? dy : slope * dy, the same bits).
template <class T> AMPC_HD inline T preluDerivativeOp(T x, T slope) {
  return x > T(0) ? T(1) : slope;
}

/// The slope's gradient before the sum over broadcast dims: 0 for x > 0,
/// else x * dy (ATen's prelu backward).
template <class T> AMPC_HD inline T preluGradSlopeOp(T dy, T x) { return x > T(0) ? T(0) : x * dy; }

struct HardSigmoidFn {
  double alpha = 1.0 / 6, beta = 0.5; ///< attributes; alpha > 0 (inference checks)
  template <class T> AMPC_HD T operator()(T x) const { return hardsigmoidOp(x, alpha, beta); }
  template <class T> AMPC_HD T grad(T dy, T x) const {
    return hardsigmoidGradOp(dy, x, alpha, beta);
  }
};

struct HardSwishFn {
  template <class T> AMPC_HD T operator()(T x) const { return hardswishOp(x); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return hardswishGradOp(dy, x); }
};

struct LeakyReluFn {
  double slope = 0.01; ///< negative_slope, rounded to T as ATen's scalar
  template <class T> AMPC_HD T operator()(T x) const { return leakyReluOp(x, T(slope)); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return leakyReluGradOp(dy, x, T(slope)); }
};

struct EluFn {
  double alpha = 1;
  template <class T> AMPC_HD T operator()(T x) const { return eluOp(x, T(alpha)); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return eluGradOp(dy, x, T(alpha)); }
};

struct SoftplusFn {
  template <class T> AMPC_HD T operator()(T x) const { return softplusOp(x); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return softplusGradOp(dy, x); }
};

// prelu and its backward ops are binary rows (the slope broadcasts).
struct PReluFn {
  template <class T> AMPC_HD T operator()(T x, T slope) const { return preluOp(x, slope); }
};
struct PReluDerivativeFn {
  template <class T> AMPC_HD T operator()(T x, T slope) const {
    return preluDerivativeOp(x, slope);
  }
};
struct PReluGradSlopeFn {
  template <class T> AMPC_HD T operator()(T dy, T x) const { return preluGradSlopeOp(dy, x); }
};

/// An activation's backward as a binary functor of (dy, saved), for the
/// kernels that map two tensors elementwise.
template <class Fn> struct GradOf {
  Fn fn;
  template <class T> AMPC_HD T operator()(T dy, T saved) const { return fn.grad(dy, saved); }
};

} // namespace ampc::kernels

#endif
