//===- NormMath.h - The normalize step of batchnorm and layernorm ---------===//
//
// PyTorch's conventions: normalisation uses the biased variance of the batch
// (or the layer), running statistics are updated with the unbiased variance
// as new = (1 - momentum) * old + momentum * batch_stat.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_NORMMATH_H
#define AMPC_KERNELS_COMMON_NORMMATH_H

#include "ir/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace ampc::kernels {

template <class T> AMPC_HD inline T inverseStdDev(T variance, T eps) {
  using std::sqrt;
  return T(1) / sqrt(variance + eps);
}

/// y = (x - mean) / sqrt(var + eps) * weight + bias, given 1/sqrt(var + eps).
template <class T> AMPC_HD inline T normalizeAffine(T x, T mean, T invStdDev, T weight, T bias) {
  return (x - mean) * invStdDev * weight + bias;
}

/// Bessel's correction of a biased variance over `count` values. With a single
/// value PyTorch refuses to train; the biased variance (0) is kept so the
/// running statistics stay finite.
template <class T> AMPC_HD inline T unbiasedVariance(T biasedVariance, int64_t count) {
  if (count < 2)
    return biasedVariance;
  return biasedVariance * static_cast<T>(count) / static_cast<T>(count - 1);
}

template <class T> AMPC_HD inline T runningStatUpdate(T running, T batchStat, T momentum) {
  return (T(1) - momentum) * running + momentum * batchStat;
}

/// The gradient of a normalized value with respect to the input of its
/// normalization, through the statistics: with g the gradient reaching
/// xhat = (x - mean) * invStdDev over a group of M values,
///   dx = invStdDev * (g - mean(g) - xhat * mean(g * xhat)).
/// meanG and meanGXhat are those two group means.
template <class T>
AMPC_HD inline T normalizeBackward(T g, T xhat, T meanG, T meanGXhat, T invStdDev) {
  return invStdDev * (g - meanG - xhat * meanGXhat);
}

} // namespace ampc::kernels

#endif
