//===- OptimizerMath.h - Element math of the optimizer ops ----------------===//
//
// The per-element updates of SGD and Adam/AdamW, the learning-rate schedules,
// gradient clipping and gradient accumulation, shared by every backend
// (AMPC_HD). T is the compute type (float for f32 and half tensors, double for
// f64). Scalars that PyTorch computes in Python (bias corrections, step sizes)
// are computed here in double and then narrowed to T, as ATen narrows a Python
// scalar to the tensor's type; the tensor arithmetic follows the order of the
// ops in torch.optim 1.13's _single_tensor_sgd / _single_tensor_adam(w).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_OPTIMIZERMATH_H
#define AMPC_KERNELS_COMMON_OPTIMIZERMATH_H

#include "ir/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace ampc::kernels {

//===----------------------------------------------------------------------===//
// When an update applies
//===----------------------------------------------------------------------===//

/// With gradient accumulation over k micro-batches, micro-step `step`
/// (0-based, global) belongs to optimizer step floor(step / k).
AMPC_HD inline uint64_t optimizerStepOf(uint64_t step, int64_t accumulate) {
  return step / static_cast<uint64_t>(accumulate);
}

/// The first micro-step of a group of k: the accumulator restarts.
AMPC_HD inline bool startsAccumulation(uint64_t step, int64_t accumulate) {
  return step % static_cast<uint64_t>(accumulate) == 0;
}

/// The last micro-step of a group of k: the optimizer updates (unless the
/// step is skipped for non-finite gradients).
AMPC_HD inline bool endsAccumulation(uint64_t step, int64_t accumulate) {
  uint64_t k = static_cast<uint64_t>(accumulate);
  return step % k == k - 1;
}

/// Several optimizers on a schedule (train.schedule): of every `period`
/// optimizer steps, an optimizer steps on the slots set in `turnMask` (bit
/// i: slot i, period <= 64) and skips the others, as its update ops and
/// step count skip a non-finite step.
AMPC_HD inline bool offTurn(uint64_t optimizerStep, int64_t period, uint64_t turnMask) {
  uint64_t slot = optimizerStep % static_cast<uint64_t>(period);
  return ((turnMask >> slot) & 1u) == 0;
}

//===----------------------------------------------------------------------===//
// Learning-rate schedules (closed forms of the optimizer step s, 0-based)
//===----------------------------------------------------------------------===//

enum class LrSchedule : uint8_t { Constant, Step, Cosine };

struct LrScheduleParams {
  LrSchedule kind = LrSchedule::Constant;
  double lr = 0;           ///< the base (peak) learning rate
  int64_t warmupSteps = 0; ///< linear warm-up: lr * (s + 1) / warmupSteps
  int64_t stepSize = 1;    ///< step: multiply by gamma every stepSize steps
  double gamma = 0.1;      ///< step: the factor
  int64_t totalSteps = 0;  ///< cosine: the step at which min_lr is reached
  double minLr = 0;        ///< cosine: the floor
};

/// The learning rate of optimizer step s. During warm-up (s < W) it rises
/// linearly, lr * (s + 1) / W, reaching lr at step W - 1. After it, with
/// t = s - W:
///   constant: lr
///   step:     lr * gamma^floor(t / step_size)          (torch StepLR)
///   cosine:   min_lr + (lr - min_lr) (1 + cos(pi t / (T - W))) / 2, and
///             min_lr from t >= T - W on                (CosineAnnealingLR
///             with T_max = T - W, eta_min = min_lr)
AMPC_HD inline double scheduledLearningRate(const LrScheduleParams &p, uint64_t s) {
  int64_t step = static_cast<int64_t>(s);
  if (step < p.warmupSteps)
    return p.lr * static_cast<double>(step + 1) / static_cast<double>(p.warmupSteps);
  int64_t t = step - p.warmupSteps;
  switch (p.kind) {
  case LrSchedule::Constant:
    return p.lr;
  case LrSchedule::Step:
    return p.lr * std::pow(p.gamma, static_cast<double>(t / p.stepSize));
  case LrSchedule::Cosine: {
    int64_t span = p.totalSteps - p.warmupSteps;
    if (span <= 0 || t >= span)
      return p.minLr;
    const double pi = 3.14159265358979323846;
    double cosine = std::cos(pi * static_cast<double>(t) / static_cast<double>(span));
    return p.minLr + (p.lr - p.minLr) * (1 + cosine) / 2;
  }
  }
  return p.lr;
}

//===----------------------------------------------------------------------===//
// Gradient clipping (torch.nn.utils.clip_grad_norm_)
//===----------------------------------------------------------------------===//

/// min(1, max_norm / (norm + 1e-6)); a NaN norm gives NaN (torch.clamp
/// propagates it), so the update turns the parameters into NaN as PyTorch's
/// clip_grad_norm_(error_if_nonfinite=False) does.
AMPC_HD inline float clipCoefficient(float totalNorm, double maxNorm) {
  float coef = static_cast<float>(maxNorm) / (totalNorm + 1e-6f);
  if (coef != coef)
    return coef;
  return coef < 1.0f ? coef : 1.0f;
}

//===----------------------------------------------------------------------===//
// Gradient accumulation
//===----------------------------------------------------------------------===//

/// The accumulator after adding `grad` at micro-step `index` (step % k) of a
/// group of k: the sum restarts at index 0, and on the last micro-step the
/// result is the mean (sum / k), the gradient the update uses.
template <class T> AMPC_HD inline T accumulateGradient(T acc, T grad, uint64_t index, int64_t k) {
  T sum = index == 0 ? grad : acc + grad;
  if (index + 1 == static_cast<uint64_t>(k) && k != 1)
    return sum / T(k);
  return sum;
}

//===----------------------------------------------------------------------===//
// Exponential moving average of the weights (train.ema)
//===----------------------------------------------------------------------===//

/// The average after the parameter's `count`-th optimizer step (count
/// includes this one): the parameter itself on the first, as
/// torch.optim.swa_utils.AveragedModel copies it on its first
/// update_parameters, then decay * average + (1 - decay) * param, the
/// EMA avg_fn of its documentation. `decay` and `rest` (1 - decay, computed in
/// double as Python does) are narrowed to T.
template <class T> struct EmaScalars {
  T decay;
  T rest;
  bool first;
};

template <class T> AMPC_HD inline EmaScalars<T> emaScalars(double decay, double count) {
  return {static_cast<T>(decay), static_cast<T>(1.0 - decay), count <= 1};
}

template <class T> AMPC_HD inline T emaAverage(T average, T param, const EmaScalars<T> &s) {
  if (s.first)
    return param;
  T kept = s.decay * average;
  T added = s.rest * param;
  return kept + added;
}

//===----------------------------------------------------------------------===//
// SGD (torch.optim.SGD)
//===----------------------------------------------------------------------===//

template <class T> struct SgdScalars {
  T negLr;       ///< -lr (param.add_(d_p, alpha=-lr))
  T weightDecay; ///< 0: none
  T momentum;    ///< 0: no momentum buffer
  T oneMinusDampening;
  bool nesterov;
};

template <class T>
AMPC_HD inline SgdScalars<T> makeSgdScalars(double lr, double weightDecay, double momentum,
                                            double dampening, bool nesterov) {
  return {static_cast<T>(-lr), static_cast<T>(weightDecay), static_cast<T>(momentum),
          static_cast<T>(1 - dampening), nesterov};
}

/// d_p = grad + weight_decay * param (grad.add(param, alpha=weight_decay)).
template <class T> AMPC_HD inline T sgdDirection(T grad, T param, T weightDecay) {
  return weightDecay != T(0) ? grad + weightDecay * param : grad;
}

/// One SGD step of an element without momentum; returns the new parameter.
template <class T> AMPC_HD inline T sgdStep(T param, T grad, const SgdScalars<T> &s) {
  T dp = sgdDirection(grad, param, s.weightDecay);
  return param + s.negLr * dp;
}

/// One SGD step with momentum. `firstStep`: the buffer does not exist yet in
/// PyTorch's terms, so it becomes a copy of d_p. Updates `buf` and returns the
/// new parameter.
template <class T>
AMPC_HD inline T sgdMomentumStep(T param, T grad, T &buf, bool firstStep, const SgdScalars<T> &s) {
  T dp = sgdDirection(grad, param, s.weightDecay);
  buf = firstStep ? dp : buf * s.momentum + s.oneMinusDampening * dp;
  T direction = s.nesterov ? dp + s.momentum * buf : buf;
  return param + s.negLr * direction;
}

//===----------------------------------------------------------------------===//
// Adam and AdamW (torch.optim.Adam / AdamW, amsgrad off)
//===----------------------------------------------------------------------===//

template <class T> struct AdamScalars {
  T beta1, oneMinusBeta1;
  T beta2, oneMinusBeta2;
  T eps;
  T weightDecay;         ///< Adam: L2 added to the gradient; 0: none
  T decayFactor;         ///< AdamW: param *= 1 - lr * weight_decay; 1: none
  T negStepSize;         ///< -lr / (1 - beta1^t)
  T biasCorrection2Sqrt; ///< sqrt(1 - beta2^t)
};

/// Scalars of step t (1-based: the step count after its increment).
template <class T>
AMPC_HD inline AdamScalars<T> makeAdamScalars(double lr, double beta1, double beta2, double eps,
                                              double weightDecay, bool decoupled, double t) {
  using std::pow;
  using std::sqrt;
  double biasCorrection1 = 1 - pow(beta1, t);
  double biasCorrection2 = 1 - pow(beta2, t);
  AdamScalars<T> s;
  s.beta1 = static_cast<T>(beta1);
  s.oneMinusBeta1 = static_cast<T>(1 - beta1);
  s.beta2 = static_cast<T>(beta2);
  s.oneMinusBeta2 = static_cast<T>(1 - beta2);
  s.eps = static_cast<T>(eps);
  s.weightDecay = decoupled ? T(0) : static_cast<T>(weightDecay);
  s.decayFactor = decoupled ? static_cast<T>(1 - lr * weightDecay) : T(1);
  s.negStepSize = static_cast<T>(-(lr / biasCorrection1));
  s.biasCorrection2Sqrt = static_cast<T>(sqrt(biasCorrection2));
  return s;
}

/// One Adam(W) step of an element: updates the moments and returns the new
/// parameter.
template <class T>
AMPC_HD inline T adamStep(T param, T grad, T &expAvg, T &expAvgSq, const AdamScalars<T> &s) {
  using std::sqrt;
  if (s.weightDecay != T(0))
    grad = grad + s.weightDecay * param;
  param = param * s.decayFactor;
  expAvg = expAvg * s.beta1 + s.oneMinusBeta1 * grad;
  expAvgSq = expAvgSq * s.beta2 + s.oneMinusBeta2 * grad * grad;
  T denom = sqrt(expAvgSq) / s.biasCorrection2Sqrt + s.eps;
  return param + s.negStepSize * expAvg / denom;
}

//===----------------------------------------------------------------------===//
// LAMB (Apex FusedLAMB, csrc/multi_tensor_lamb.cu)
//===----------------------------------------------------------------------===//

template <class T> struct LambScalars {
  T gradDivisor;  ///< the global clip: norm / max_grad_norm when above it, else 1
  T beta1, beta3; ///< beta3: 1 - beta1 with grad_averaging, else 1
  T beta2, oneMinusBeta2;
  T biasCorrection1, biasCorrection2; ///< 1 - beta^t, or 1 without bias correction
  T eps;
  T weightDecay;
  bool decoupled; ///< adam_w_mode: the decay joins the update, not the gradient
};

/// Scalars of step t (1-based) with the global gradient norm `gradNorm`.
template <class T>
AMPC_HD inline LambScalars<T> makeLambScalars(double beta1, double beta2, double eps,
                                              double weightDecay, bool decoupled,
                                              bool gradAveraging, bool biasCorrection,
                                              double maxGradNorm, double gradNorm, double t) {
  using std::pow;
  LambScalars<T> s;
  s.gradDivisor = static_cast<T>(gradNorm > maxGradNorm ? gradNorm / maxGradNorm : 1.0);
  s.beta1 = static_cast<T>(beta1);
  s.beta3 = static_cast<T>(gradAveraging ? 1 - beta1 : 1.0);
  s.beta2 = static_cast<T>(beta2);
  s.oneMinusBeta2 = static_cast<T>(1 - beta2);
  s.biasCorrection1 = static_cast<T>(biasCorrection ? 1 - pow(beta1, t) : 1.0);
  s.biasCorrection2 = static_cast<T>(biasCorrection ? 1 - pow(beta2, t) : 1.0);
  s.eps = static_cast<T>(eps);
  s.weightDecay = static_cast<T>(weightDecay);
  s.decoupled = decoupled;
  return s;
}

/// LAMB's first stage for an element: updates the moments and returns the
/// update direction u (before the trust ratio).
template <class T>
AMPC_HD inline T lambDirection(T param, T grad, T &expAvg, T &expAvgSq, const LambScalars<T> &s) {
  using std::sqrt;
  T g = grad / s.gradDivisor;
  if (!s.decoupled)
    g = g + s.weightDecay * param;
  expAvg = expAvg * s.beta1 + s.beta3 * g;
  expAvgSq = expAvgSq * s.beta2 + s.oneMinusBeta2 * g * g;
  T u = (expAvg / s.biasCorrection1) / (sqrt(expAvgSq / s.biasCorrection2) + s.eps);
  if (s.decoupled)
    u = u + s.weightDecay * param;
  return u;
}

/// LAMB's per-tensor norms are sums of squares in double over blocks of this
/// many elements (each block in order, then the blocks in order), so the
/// cpu backend's blocks on several threads give the reference's bits.
inline constexpr int64_t kLambNormBlock = 4096;

/// The step size of a tensor from the norms of its parameter and its update:
/// lr x |p| / |u| (both non-zero; else lr), only where the tensor decays
/// (weight_decay != 0) unless use_nvlamb.
AMPC_HD inline double lambStepSize(double lr, double paramNorm, double updateNorm,
                                   double weightDecay, bool useNvlamb) {
  if (!useNvlamb && weightDecay == 0)
    return lr;
  return paramNorm != 0 && updateNorm != 0 ? lr * (paramNorm / updateNorm) : lr;
}

} // namespace ampc::kernels

#endif
