//===- LossScale.h - Loss scaling as graph ops on scaler state ------------===//
#ifndef AMPC_PASSES_LOSSSCALE_H
#define AMPC_PASSES_LOSSSCALE_H

#include "passes/Pass.h"

namespace ampc {

/// Splices loss scaling into a training step after the optimizer (and
/// master-weights) passes, when the precision policy scales the loss
/// (amp.loss_scale dynamic, or a static amp.loss_scale.value other than 1;
/// passes/PrecisionPolicy.h). Without it the pass changes nothing.
///
///   scaler %loss_scale.scale : f32[] init constant(<init or static value>)
///   scaler %loss_scale.growth_tracker : f32[] init zeros       (dynamic)
///   the backward seed %loss.grad (fill 1) becomes %loss_scale.scale (cast
///     to the seed's dtype if that is not f32): the gradients come out scaled,
///     the loss itself is not
///   %skipped, %loss_scale, %loss_scale.inverse = unscale_check(%loss_scale.scale, %g...)
///     over the gradients the updates apply (the accumulated ones under
///     gradient accumulation), right after the last of them is computed; the
///     gradients stay scaled and are never copied: the update ops get
///     grad_scale = %loss_scale.inverse (a clip coefficient takes it as its
///     own grad_scale, any other factor is multiplied by it) and unscale each
///     element in f32 as they read it. A global_norm of the gradients
///     (clipping) is followed by `mul` with %loss_scale.inverse, which takes
///     over its name and readers, so the clip coefficient and the logged norm
///     are of the unscaled gradients. A later reader of a gradient other
///     than an update or global_norm is an error.
///   the update ops and step_counter get skip = %skipped: a step with an
///     inf/NaN gradient changes no parameter, master weight, optimizer state
///     or step count
///   %loss_scale.scale.next, %loss_scale.growth_tracker.next =
///       update_loss_scale(%loss_scale.scale, %loss_scale.growth_tracker, %skipped)
///     {growth_factor, backoff_factor, growth_interval, min_scale, max_scale}
///                                                               (dynamic)
///   graph outputs "loss_scale" (the scale this step used) and "skipped"
///   (1 when the step was skipped, on the last micro-step of a group)
///
/// With amp.num_losses = N > 1 (Apex's num_losses) each term of a list of
/// losses has its own scaler, check and update_loss_scale, autodiff having
/// walked back from each term separately; the updates then read the
/// unscaled f32 sum of the terms' gradients and skip when any term
/// overflowed, while only that term's scaler backs off (LossScale.cpp,
/// runPerLoss).
///
/// The new nodes have role loss-scale. A static scale never changes but
/// still skips non-finite steps (Apex's static scaler would apply them and
/// ruin the weights).
class LossScalePass : public Pass {
public:
  llvm::StringRef name() const override { return "loss-scale"; }
  llvm::StringRef description() const override {
    return "scale the loss seed, check the gradients and fold 1/scale into the updates, skip "
           "non-finite steps, update the scale (amp.loss_scale)";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
