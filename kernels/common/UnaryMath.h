//===- UnaryMath.h - Element math of clamp, sqrt, erf, pow, exp, ... ------===//
//
// The unary math ops the ONNX importer needs (Clip, Sqrt, Erf, Pow with a
// constant exponent, Exp, Neg, Abs, Log, Reciprocal), shared by the
// reference, CPU and CUDA kernels (AMPC_HD). T is the compute type: float for f32/f16/bf16, double
// for f64. Forwards and derivatives follow ATen (its kernels and derivatives.yaml), so results
// match PyTorch's to rounding.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_UNARYMATH_H
#define AMPC_KERNELS_COMMON_UNARYMATH_H

#include "ir/HostDevice.h"

#include <cmath>

namespace ampc::kernels {

/// min(max(x, lo), hi), NaN propagating, as ATen's clamp kernel; lo > hi
/// gives hi everywhere (torch.clamp does the same).
template <class T> AMPC_HD inline T clampOp(T x, T lo, T hi) {
  if (x != x)
    return x;
  T y = x < lo ? lo : x;
  return y > hi ? hi : y;
}

/// d clamp: dy where lo <= x <= hi, else 0 -- torch.clamp's backward
/// (clamp_backward), which passes the gradient at the bounds themselves
/// (unlike hardtanh's, which is 0 there). A NaN input gets 0.
template <class T> AMPC_HD inline T clampGradOp(T dy, T x, T lo, T hi) {
  return x >= lo && x <= hi ? dy : T(0);
}

template <class T> AMPC_HD inline T sqrtOp(T x) {
  using std::sqrt;
  return sqrt(x);
}

/// d sqrt from the forward output y: dy / (2 y) (inf at x = 0, as PyTorch).
template <class T> AMPC_HD inline T sqrtGradOp(T dy, T y) { return dy / (T(2) * y); }

template <class T> AMPC_HD inline T erfOp(T x) {
  using std::erf;
  return erf(x);
}

/// d erf: dy * 2/sqrt(pi) * exp(-x^2).
template <class T> AMPC_HD inline T erfGradOp(T dy, T x) {
  using std::exp;
  const T twoOverSqrtPi = T(1.12837916709551257390);
  return twoOverSqrtPi * exp(-(x * x)) * dy;
}

/// x^e with ATen's special cases for a scalar exponent (x*x for 2, sqrt for
/// 0.5, ...): those are what torch.pow computes, and they differ from pow()
/// in rounding and at -0 and -inf.
template <class T> AMPC_HD inline T powOp(T x, T e) {
  using std::pow;
  using std::sqrt;
  if (e == T(2))
    return x * x;
  if (e == T(3))
    return x * x * x;
  if (e == T(0.5))
    return sqrt(x);
  if (e == T(-0.5))
    return T(1) / sqrt(x);
  if (e == T(-1))
    return T(1) / x;
  if (e == T(-2))
    return T(1) / (x * x);
  return pow(x, e);
}

/// d pow, as torch's pow_backward: 0 when e == 0 (even where x^-1 is inf),
/// else dy * (e * x^(e-1)), with e - 1 taken before rounding to T. At x = 0
/// that is 0 for e > 1, dy for e == 1 and inf for e < 1, as PyTorch gives.
template <class T> AMPC_HD inline T powGradOp(T dy, T x, double e) {
  if (e == 0)
    return T(0);
  return dy * (T(e) * powOp(x, T(e - 1)));
}

template <class T> AMPC_HD inline T expOp(T x) {
  using std::exp;
  return exp(x);
}

/// d exp from the forward output y: dy * y.
template <class T> AMPC_HD inline T expGradOp(T dy, T y) { return dy * y; }

// Neg, Abs, Log and Reciprocal (ONNX), with their derivatives as ATen's
// derivatives.yaml writes them.

template <class T> AMPC_HD inline T negOp(T x) { return -x; }

/// |x|: +0 for -0; NaN stays NaN.
template <class T> AMPC_HD inline T absOp(T x) {
  using std::fabs;
  return fabs(x);
}

/// d abs: dy * sign(x), sign(x) = (0 < x) - (x < 0), which is 0 at +-0 and
/// for NaN (torch.sgn's values, so the gradient at 0 is 0).
template <class T> AMPC_HD inline T absGradOp(T dy, T x) {
  return dy * (T(T(0) < x) - T(x < T(0)));
}

/// ln x: -inf at 0, NaN below.
template <class T> AMPC_HD inline T logOp(T x) {
  using std::log;
  return log(x);
}

/// d log from the input: dy / x.
template <class T> AMPC_HD inline T logGradOp(T dy, T x) { return dy / x; }

/// 1 / x: +-inf at +-0.
template <class T> AMPC_HD inline T reciprocalOp(T x) { return T(1) / x; }

/// d reciprocal from the output y = 1/x: -dy * y^2, as ATen (-grad * (y * y)).
template <class T> AMPC_HD inline T reciprocalGradOp(T dy, T y) { return -dy * (y * y); }

// --- Element functors of ir/Pointwise.def's rows ------------------------------

struct ClampFn {
  double lo = 0, hi = 0; ///< the min and max attributes (-inf / inf: no bound)
  // The bounds are rounded to T, as ATen converts its scalars to the opmath type.
  template <class T> AMPC_HD T operator()(T x) const { return clampOp(x, T(lo), T(hi)); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return clampGradOp(dy, x, T(lo), T(hi)); }
};

struct SqrtFn {
  template <class T> AMPC_HD T operator()(T x) const { return sqrtOp(x); }
  template <class T> AMPC_HD T grad(T dy, T y) const { return sqrtGradOp(dy, y); }
};

struct ErfFn {
  template <class T> AMPC_HD T operator()(T x) const { return erfOp(x); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return erfGradOp(dy, x); }
};

// power(a, b) = a^b elementwise (ONNX Pow with a tensor of exponents,
// torch.pow(a, b)), and its derivatives as ATen's derivatives.yaml writes
// them: by a, b a^(b-1), 0 where b is 0; by b, a^b log(a), 0 where a is 0
// and b >= 0 (0^b is constant there).
template <class T> AMPC_HD inline T powerGradBaseOp(T a, T b) {
  return b == T(0) ? T(0) : b * powOp(a, b - T(1));
}
template <class T> AMPC_HD inline T powerGradExponentOp(T a, T b) {
  using std::log;
  return a == T(0) && b >= T(0) ? T(0) : powOp(a, b) * log(a);
}

// Remainders (ONNX Mod, torch.remainder and torch.fmod): mod takes the
// divisor's sign (Python's %, ONNX's fmod=0), fmod the dividend's (C's
// fmod, ONNX's fmod=1). Both are 1 by the dividend; by the divisor,
// -floor(a / b) and -trunc(a / b) (ATen's derivatives).
template <class T> AMPC_HD inline T fmodOp(T a, T b) {
  using std::fmod;
  return fmod(a, b);
}
template <class T> AMPC_HD inline T modOp(T a, T b) {
  T r = fmodOp(a, b);
  return r != T(0) && ((r < T(0)) != (b < T(0))) ? r + b : r;
}
template <class T> AMPC_HD inline T modGradDivisorOp(T a, T b) {
  using std::floor;
  return -floor(a / b);
}
template <class T> AMPC_HD inline T fmodGradDivisorOp(T a, T b) {
  using std::trunc;
  return -trunc(a / b);
}

struct ModFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return modOp(a, b); }
};
struct FmodFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return fmodOp(a, b); }
};
struct ModGradDivisorFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return modGradDivisorOp(a, b); }
};
struct FmodGradDivisorFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return fmodGradDivisorOp(a, b); }
};

struct PowerFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return powOp(a, b); }
};
struct PowerGradBaseFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return powerGradBaseOp(a, b); }
};
struct PowerGradExponentFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return powerGradExponentOp(a, b); }
};

struct PowFn {
  double exponent = 1;
  template <class T> AMPC_HD T operator()(T x) const { return powOp(x, T(exponent)); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return powGradOp(dy, x, exponent); }
};

struct ExpFn {
  template <class T> AMPC_HD T operator()(T x) const { return expOp(x); }
  template <class T> AMPC_HD T grad(T dy, T y) const { return expGradOp(dy, y); }
};

// Rounding to an integer (ONNX Floor and Ceil; torch.floor, torch.ceil and
// the Floor of torch.remainder's and floor_divide's exports). Their
// gradient is 0 (the rule scales the incoming one by 0).
template <class T> AMPC_HD inline T floorOp(T x) {
  using std::floor;
  return floor(x);
}
template <class T> AMPC_HD inline T ceilOp(T x) {
  using std::ceil;
  return ceil(x);
}
struct FloorFn {
  template <class T> AMPC_HD T operator()(T x) const { return floorOp(x); }
};
struct CeilFn {
  template <class T> AMPC_HD T operator()(T x) const { return ceilOp(x); }
};

struct NegFn {
  template <class T> AMPC_HD T operator()(T x) const { return negOp(x); }
};

struct AbsFn {
  template <class T> AMPC_HD T operator()(T x) const { return absOp(x); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return absGradOp(dy, x); }
};

struct LogFn {
  template <class T> AMPC_HD T operator()(T x) const { return logOp(x); }
  template <class T> AMPC_HD T grad(T dy, T x) const { return logGradOp(dy, x); }
};

struct ReciprocalFn {
  template <class T> AMPC_HD T operator()(T x) const { return reciprocalOp(x); }
  template <class T> AMPC_HD T grad(T dy, T y) const { return reciprocalGradOp(dy, y); }
};

} // namespace ampc::kernels

#endif
