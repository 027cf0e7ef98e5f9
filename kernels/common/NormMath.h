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

/// The corrected two-pass moments (Chan, Golub and LeVeque): with m0 the
/// first pass's mean and sumDev, sumSqDev the sums of d = x - m0 and d * d
/// over the same `count` values, the mean m0 + sumDev / count and the
/// biased variance (sumSqDev - sumDev^2 / count) / count. The correction
/// takes out the first pass's rounding: a channel whose values are all c
/// (a dead ReLU's zeros through a convolution) gets mean c exactly, so
/// x - mean is 0 and batchnorm gives its bias, as exact arithmetic and
/// PyTorch do; a mean off by an ulp made those outputs +-1e-8 noise, and a
/// ReLU after them passed gradient through half the channel.
template <class T>
AMPC_HD inline void correctedMoments(T m0, T sumDev, T sumSqDev, int64_t count, T &mean,
                                     T &variance) {
  T n = static_cast<T>(count);
  mean = m0 + sumDev / n;
  variance = (sumSqDev - sumDev * sumDev / n) / n;
  if (!(variance > T(0)))
    variance = T(0);
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
