//===- LossScaleMath.h - Element math of the loss-scaling ops -------------===//
//
// Dynamic loss scaling as PyTorch's GradScaler does it
// (_amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_), with
// Apex's clamp of the scale to [min, max], shared by every backend (AMPC_HD).
// The op-level description is in ir/ops/LossScale.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_LOSSSCALEMATH_H
#define AMPC_KERNELS_COMMON_LOSSSCALEMATH_H

#include "ir/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace ampc::kernels {

/// 1 / scale as GradScaler computes it: the reciprocal in double, then
/// rounded to f32 (exact for the powers of two the default policy produces).
AMPC_HD inline float inverseLossScale(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

/// One unscaled gradient element (T: float, or double for f64 gradients).
/// An inverse scale of exactly 1 leaves the value untouched, as PyTorch does.
template <class T> AMPC_HD inline T unscaleGradient(T grad, T invScale) {
  return invScale == T(1) ? grad : grad * invScale;
}

/// inf and NaN are what a skipped step looks for. (x - x is 0 for every
/// finite x and NaN otherwise; it avoids depending on std::isfinite in
/// device code.)
template <class T> AMPC_HD inline bool isNonFinite(T x) { return !(x - x == T(0)); }

struct LossScaleParams {
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  double minScale = 1.0;
  double maxScale = 16777216.0;
};

/// The scaler's state after one optimizer step. `tracker` counts consecutive
/// steps with finite gradients since the last change of the scale:
///  - non-finite gradients (the step was skipped): scale *= backoff_factor,
///    at least min_scale; tracker = 0;
///  - finite: tracker + 1; when that reaches growth_interval, scale *=
///    growth_factor (unless the product is inf, as PyTorch guards), at most
///    max_scale, and tracker = 0.
/// Products are formed in double and rounded to f32, as the f32 scale tensor
/// times a Python float is in PyTorch.
AMPC_HD inline void updateLossScale(float &scale, float &tracker, bool foundInf,
                                    const LossScaleParams &p) {
  if (foundInf) {
    double backedOff = static_cast<double>(scale) * p.backoffFactor;
    scale = static_cast<float>(backedOff < p.minScale ? p.minScale : backedOff);
    tracker = 0.0f;
    return;
  }
  float successful = tracker + 1.0f;
  if (successful < static_cast<float>(p.growthInterval)) {
    tracker = successful;
    return;
  }
  float grown = static_cast<float>(static_cast<double>(scale) * p.growthFactor);
  if (!isNonFinite(grown))
    scale = static_cast<float>(static_cast<double>(grown) > p.maxScale ? p.maxScale : grown);
  tracker = 0.0f;
}

} // namespace ampc::kernels

#endif
