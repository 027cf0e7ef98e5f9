//===- LossScale.cpp - Loss-scaling ops: check, scale update ---------------===//
//
// The ops the loss-scale pass (passes/LossScale.cpp) adds to a training step
// for dynamic (or static, != 1) loss scaling, as graph ops on the scaler's
// state (PyTorch's torch.cuda.amp.GradScaler, Apex's LossScaler):
//
//   unscale_check(scale, grads...) -> (found_inf, used_scale, inv_scale)
//     One fused read-only pass over all gradients: found_inf (f32[]) is 1
//     when any unscaled element grad * (1 / scale), computed in f32 (f64 for
//     f64 gradients), is inf or NaN, else 0; used_scale (f32[]) is a copy of
//     `scale`, the scale this step used (a graph output, so a trainer can log
//     it; the state itself already holds the next step's scale when the step
//     is over); inv_scale (f32[]) is 1 / scale, which the updates take as
//     (part of) their grad_scale: they unscale each gradient element in f32
//     as they read it, so no unscaled copy of the gradients is ever stored,
//     and half gradients that were only representable thanks to the scale do
//     not underflow again. With accumulation (attr accumulate = k > 1)
//     found_inf is only computed on the last micro-step of a group, the one
//     whose (accumulated) gradients the optimizer applies; on the others it
//     is 0.
//
//   update_loss_scale(scale, growth_tracker, found_inf)
//       -> (new scale, new growth_tracker)
//     GradScaler's _amp_update_scale_, clamped to [min_scale, max_scale] as
//     Apex clamps: on found_inf the scale is multiplied by backoff_factor and
//     the tracker (consecutive finite steps) restarts at 0; otherwise the
//     tracker counts the step and, on reaching growth_interval, the scale is
//     multiplied by growth_factor (kept when the product is not finite) and
//     the tracker restarts. With accumulation it acts on the last micro-step
//     of each group only; on the others both results are copies.
//
// Neither op is differentiated. Scalars are f32[]: the tracker counts in f32,
// exact up to 2^24, which bounds growth_interval.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

#include <cmath>

namespace ampc {
using namespace infer;

namespace {

/// The largest count an f32 tracker holds exactly.
constexpr int64_t kMaxGrowthInterval = int64_t(1) << 24;

bool requireFloatScalar(InferContext &ctx, unsigned i) {
  return requireFloat(ctx, i) && requireRank(ctx, i, 0);
}

bool requireAccumulate(InferContext &ctx) {
  if (ctx.getInt("accumulate") >= 1)
    return true;
  return ctx.error("accumulate must be >= 1, got " + llvm::Twine(ctx.getInt("accumulate")));
}

bool inferUnscaleCheck(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireAccumulate(ctx) || !requireFloatScalar(ctx, 0))
    return false;
  for (unsigned i = 1; i < ctx.numOperands(); ++i)
    if (!requireFloat(ctx, i))
      return false;
  results.push_back(TensorType(DType::F32, {}));
  results.push_back(ctx.operand(0));
  results.push_back(TensorType(DType::F32, {}));
  return true;
}

bool inferUpdateLossScale(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireAccumulate(ctx))
    return false;
  double growth = ctx.getFloat("growth_factor"), backoff = ctx.getFloat("backoff_factor");
  if (!(growth >= 1))
    return ctx.error("growth_factor must be >= 1, got " + formatDouble(growth));
  if (!(backoff > 0 && backoff <= 1))
    return ctx.error("backoff_factor must be in (0, 1], got " + formatDouble(backoff));
  int64_t interval = ctx.getInt("growth_interval");
  if (interval < 1 || interval > kMaxGrowthInterval)
    return ctx.error("growth_interval must be in [1, " + llvm::Twine(kMaxGrowthInterval) +
                     "], got " + llvm::Twine(interval));
  double lo = ctx.getFloat("min_scale"), hi = ctx.getFloat("max_scale");
  if (!(lo > 0) || !(hi >= lo) || !std::isfinite(hi))
    return ctx.error("min_scale and max_scale must satisfy 0 < min_scale <= max_scale < inf, "
                     "got " +
                     formatDouble(lo) + " and " + formatDouble(hi));
  for (unsigned i = 0; i < 3; ++i)
    if (!requireFloatScalar(ctx, i))
      return false;
  results.push_back(ctx.operand(0));
  results.push_back(ctx.operand(1));
  return true;
}

} // namespace

void registerLossScaleOps(OpRegistry &r) {
  OpRow(r.define(OpKind::UnscaleCheck))
      .fp32Operand("scale")
      .variadicOperand("grads")
      .infer(inferUnscaleCheck);
  OpRow(r.define(OpKind::UpdateLossScale))
      .fp32Operand("scale")
      .fp32Operand("growth_tracker")
      .fp32Operand("found_inf")
      .updatesStateInPlace()
      .infer(inferUpdateLossScale);
}

} // namespace ampc
