//===- CastMath.h - Element conversion between any two dtypes -------------===//
//
// castValue<To>(v) converts a value in its source compute type (see Storage.h:
// float for f32/f16/bf16, double for f64, the integer itself for ints, uint8_t
// for bool) to the compute type of `To`; store<To> then rounds half types.
// Shared by every backend (AMPC_HD). The choices, where C++ or PyTorch leave
// room:
//  - float -> float rounds to nearest even. f64 -> f16/bf16 goes through f32
//    (two roundings), as Storage.h's storeFromDouble documents and as
//    c10::Half(double) / c10::BFloat16(double) do (they take a float). The
//    same holds for i64/i32 -> f16/bf16 (exact up to 2^24, so it only matters
//    for bf16 of huge integers).
//  - float -> integer truncates toward zero (as PyTorch). NaN gives 0 and
//    out-of-range values saturate to the integer's min/max: C++ leaves these
//    undefined, PyTorch calls them undefined, and saturation is what CUDA's
//    cvt.rzi does, so every backend can agree on it.
//  - integer -> narrower integer wraps modulo 2^bits (C++20, PyTorch).
//  - anything -> bool is `v != 0` (NaN is true, as bool(float('nan')));
//    bool -> anything is 0 or 1.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_CASTMATH_H
#define AMPC_KERNELS_COMMON_CASTMATH_H

#include "kernels/common/Storage.h"

#include <cstdint>
#include <type_traits>

namespace ampc::kernels {

/// Truncates a floating value toward zero into the signed integer type I,
/// NaN to 0, saturating outside I's range.
template <class I, class F> AMPC_HD inline I truncateSaturating(F v) {
  static_assert(std::is_signed_v<I> && std::is_floating_point_v<F>);
  using U = std::make_unsigned_t<I>;
  const I maxValue = static_cast<I>(U(~U(0)) >> 1);
  const I minValue = -maxValue - 1;
  // limit = 2^(bits-1) = maxValue + 1, exact in float and double; every v in
  // [-limit, limit) truncates to a value I holds.
  const F limit = F(maxValue / 2 + 1) * F(2);
  if (v != v)
    return I(0);
  if (v >= limit)
    return maxValue;
  if (v < -limit)
    return minValue;
  return static_cast<I>(v);
}

template <DType To, class From> AMPC_HD inline ComputeT<To> castValue(From v) {
  using ToT = ComputeT<To>;
  if constexpr (To == DType::Bool) {
    return static_cast<ToT>(v != From(0));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<ToT>) {
    return truncateSaturating<ToT>(v);
  } else {
    // float <-> float rounds to nearest even; int -> float rounds to nearest;
    // int -> int wraps; f32 compute covers f16/bf16, store<To> rounds again.
    return static_cast<ToT>(v);
  }
}

/// Element i of `src` (dtype From) converted and stored as element i of `dst`.
template <DType From, DType To>
AMPC_HD inline void castElement(const void *src, void *dst, int64_t i) {
  ComputeT<From> v = load<From>(src, i);
  if constexpr (From == DType::Bool)
    v = v != 0; // a bool byte other than 0/1 still means true
  store<To>(dst, i, castValue<To>(v));
}

} // namespace ampc::kernels

#endif
