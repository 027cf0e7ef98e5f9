//===- LossScale.cpp - Reference loss-scaling kernels ----------------------===//
//
// unscale_check and update_loss_scale (ir/ops/LossScale.cpp describes them);
// the element math is in kernels/common/LossScaleMath.h.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/LossScaleMath.h"
#include "kernels/common/OptimizerMath.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

namespace ampc::kernels::ref {

namespace {

double readScalar(const TensorArg &t) { return loadAsDouble(t.dtype(), t.data, 0); }

void writeScalar(const TensorArg &t, double v) { storeFromDouble(t.dtype(), t.data, 0, v); }

/// Whether any element of `grad`, unscaled in T, is inf or NaN.
template <class T> bool anyNonFinite(const TensorArg &grad, T invScale) {
  bool nonFinite = false;
  for (int64_t i = 0, n = grad.numElements(); i < n; ++i)
    nonFinite |= isNonFinite(
        unscaleGradient<T>(static_cast<T>(loadAsDouble(grad.dtype(), grad.data, i)), invScale));
  return nonFinite;
}

} // namespace

void unscaleCheck(const KernelArgs &a) {
  // Only the last micro-step of a group, whose gradients the optimizer
  // applies, reports them.
  bool checks = endsAccumulation(a.step, attrs::StepCounter(*a.node).accumulate());
  float scale = static_cast<float>(readScalar(a.in(0)));
  float invScale = inverseLossScale(scale);
  bool foundInf = false;
  for (unsigned g = 1; checks && g < a.inputs.size(); ++g)
    foundInf |= a.in(g).dtype() == DType::F64
                    ? anyNonFinite<double>(a.in(g), static_cast<double>(invScale))
                    : anyNonFinite<float>(a.in(g), invScale);
  writeScalar(a.out(0), foundInf ? 1.0 : 0.0);
  writeScalar(a.out(1), scale);
  writeScalar(a.out(2), invScale);
}

void updateLossScale(const KernelArgs &a) {
  float scale = static_cast<float>(readScalar(a.in(0)));
  float tracker = static_cast<float>(readScalar(a.in(1)));
  if (endsAccumulation(a.step, attrs::StepCounter(*a.node).accumulate())) {
    LossScaleParams p;
    p.growthFactor = attrs::UpdateLossScale(*a.node).growth_factor();
    p.backoffFactor = attrs::UpdateLossScale(*a.node).backoff_factor();
    p.growthInterval = attrs::UpdateLossScale(*a.node).growth_interval();
    p.minScale = attrs::UpdateLossScale(*a.node).min_scale();
    p.maxScale = attrs::UpdateLossScale(*a.node).max_scale();
    kernels::updateLossScale(scale, tracker, readScalar(a.in(2)) != 0, p);
  } else {
    a.reportStateUnchanged();
  }
  writeScalar(a.out(0), scale);
  writeScalar(a.out(1), tracker);
}

} // namespace ampc::kernels::ref
