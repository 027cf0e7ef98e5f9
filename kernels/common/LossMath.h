//===- LossMath.h - Element math of the loss ops --------------------------===//
//
// Per-element and per-row pieces of the losses, shared by every backend
// (AMPC_HD). T is the compute type; sums are accumulated in T too (f32 for
// half inputs). The log-probabilities of cross-entropy come from the softmax
// pieces in ActivationMath.h. Formulas follow PyTorch's ATen kernels.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_LOSSMATH_H
#define AMPC_KERNELS_COMMON_LOSSMATH_H

#include "ir/HostDevice.h"

#include <cmath>

namespace ampc::kernels {

/// (input - target)^2: one term of mse_loss's mean.
template <class T> AMPC_HD inline T squaredErrorTerm(T input, T target) {
  T d = input - target;
  return d * d;
}

/// PyTorch clamps each log of binary_cross_entropy at -100 so that a
/// probability of exactly 0 or 1 gives a large finite loss, not inf.
template <class T> AMPC_HD inline T clampedLog(T x) {
  using std::log;
  T l = log(x);
  return l > T(-100) || l != l ? l : T(-100);
}

/// log(1 - x) clamped like clampedLog; log1p keeps accuracy for small x.
template <class T> AMPC_HD inline T clampedLog1mx(T x) {
  using std::log1p;
  T l = log1p(-x);
  return l > T(-100) || l != l ? l : T(-100);
}

/// -(y log x + (1 - y) log(1 - x)), written as ATen writes it:
/// (y - 1) * max(log(1 - x), -100) - y * max(log x, -100).
template <class T> AMPC_HD inline T binaryCrossEntropyTerm(T input, T target) {
  return (target - T(1)) * clampedLog1mx(input) - target * clampedLog(input);
}

/// Cross-entropy with label smoothing eps over C classes, from the mean of
/// -log p[label] (nllMean) and the mean over rows of -sum_c log p[c]
/// (smoothMean), both over the rows whose label is not ignore_index:
/// (1 - eps) * nll + eps / C * smooth (PyTorch's
/// cross_entropy_loss_label_smoothing, no class weights).
template <class T>
AMPC_HD inline T crossEntropyCombine(T nllMean, T smoothMean, double labelSmoothing,
                                     long long numClasses) {
  if (labelSmoothing == 0)
    return nllMean;
  T eps = T(labelSmoothing);
  return (T(1) - eps) * nllMean + eps / T(numClasses) * smoothMean;
}

// --- Backward element math ----------------------------------------------
// `scale` is the incoming gradient of the (scalar) loss divided by the number
// of terms in its mean.

/// d mse_loss / d input: 2 (input - target) * scale (the target's is minus this).
template <class T> AMPC_HD inline T squaredErrorGradTerm(T input, T target, T scale) {
  return T(2) * (input - target) * scale;
}

/// Keeps binary_cross_entropy's input gradient finite at input 0 or 1 (ATen's
/// EPSILON in binary_cross_entropy_backward).
template <class T> AMPC_HD inline T bceGradEpsilon() { return T(1e-12); }

/// d bce / d input = (input - target) / (input (1 - input)) * scale, the
/// denominator clamped below at 1e-12 as ATen does.
template <class T> AMPC_HD inline T binaryCrossEntropyGradInputTerm(T input, T target, T scale) {
  T denominator = (T(1) - input) * input;
  if (denominator < bceGradEpsilon<T>())
    denominator = bceGradEpsilon<T>();
  return (input - target) / denominator * scale;
}

/// d bce / d target = (clamped log(1 - input) - clamped log input) * scale,
/// the derivative of binaryCrossEntropyTerm with its clamps.
template <class T> AMPC_HD inline T binaryCrossEntropyGradTargetTerm(T input, T scale) {
  return (clampedLog1mx(input) - clampedLog(input)) * scale;
}

/// d cross_entropy / d logit c of a counted row, from the row's softmax
/// probability p of class c: (p - (1 - eps) [c == label] - eps / C) * scale,
/// scale = dy / (number of counted rows).
template <class T>
AMPC_HD inline T crossEntropyGradTerm(T probability, bool isLabel, double labelSmoothing,
                                      long long numClasses, T scale) {
  T eps = T(labelSmoothing);
  T target = (isLabel ? T(1) - eps : T(0)) + eps / T(numClasses);
  return (probability - target) * scale;
}

} // namespace ampc::kernels

#endif
