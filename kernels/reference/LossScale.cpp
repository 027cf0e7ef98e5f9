//===- LossScale.cpp - Reference loss-scaling kernels ----------------------===//
//
// unscale_check and update_loss_scale (ir/ops/LossScale.cpp describes them);
// the element math is in kernels/common/LossScaleMath.h.
//
//===----------------------------------------------------------------------===//
#include "kernels/common/LossScaleMath.h"
#include "kernels/common/OptimizerMath.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

namespace ampc::kernels::ref {

namespace {

double readScalar(const TensorArg &t) { return loadAsDouble(t.dtype(), t.data, 0); }

void writeScalar(const TensorArg &t, double v) { storeFromDouble(t.dtype(), t.data, 0, v); }

/// Unscales `grad` into `out` in T; returns whether any result is inf or NaN.
template <class T> bool unscaleInto(const TensorArg &grad, const TensorArg &out, T invScale) {
  bool nonFinite = false;
  for (int64_t i = 0, n = grad.numElements(); i < n; ++i) {
    T v = unscaleGradient<T>(static_cast<T>(loadAsDouble(grad.dtype(), grad.data, i)), invScale);
    nonFinite |= isNonFinite(v);
    storeFromDouble(out.dtype(), out.data, i, static_cast<double>(v));
  }
  return nonFinite;
}

} // namespace

void unscaleCheck(const KernelArgs &a) {
  // The gradients are unscaled on every micro-step (the values stay
  // deterministic for the global norm), but only the last micro-step of a
  // group, whose gradients the optimizer applies, reports them.
  bool checks = endsAccumulation(a.step, a.attr("accumulate").getInt());
  float scale = static_cast<float>(readScalar(a.in(0)));
  float invScale = inverseLossScale(scale);
  bool foundInf = false;
  for (unsigned g = 1; g < a.inputs.size(); ++g) {
    const TensorArg &out = a.out(g + 1);
    if (out.dtype() == DType::F64)
      foundInf |= unscaleInto<double>(a.in(g), out, static_cast<double>(invScale));
    else
      foundInf |= unscaleInto<float>(a.in(g), out, invScale);
  }
  writeScalar(a.out(0), checks && foundInf ? 1.0 : 0.0);
  writeScalar(a.out(1), scale);
}

void updateLossScale(const KernelArgs &a) {
  float scale = static_cast<float>(readScalar(a.in(0)));
  float tracker = static_cast<float>(readScalar(a.in(1)));
  if (endsAccumulation(a.step, a.attr("accumulate").getInt())) {
    LossScaleParams p;
    p.growthFactor = a.attr("growth_factor").getFloat();
    p.backoffFactor = a.attr("backoff_factor").getFloat();
    p.growthInterval = a.attr("growth_interval").getInt();
    p.minScale = a.attr("min_scale").getFloat();
    p.maxScale = a.attr("max_scale").getFloat();
    kernels::updateLossScale(scale, tracker, readScalar(a.in(2)) != 0, p);
  } else {
    a.reportStateUnchanged();
  }
  writeScalar(a.out(0), scale);
  writeScalar(a.out(1), tracker);
}

} // namespace ampc::kernels::ref
