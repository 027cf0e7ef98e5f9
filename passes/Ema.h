//===- Ema.h - Exponential moving average of the trained weights ----------===//
#ifndef AMPC_PASSES_EMA_H
#define AMPC_PASSES_EMA_H

#include "passes/Pass.h"

namespace ampc {

/// With meta `train.ema.decay` (the model file's `train: {ema: {decay: D}}`)
/// keeps an average of every trained parameter over the optimizer steps, as
/// torch.optim.swa_utils.AveragedModel with an EMA avg_fn does when called
/// after each optimizer.step():
///
///   %ema.count.next = step_counter(%ema.count, [%skipped]) {accumulate}
///   %p.ema.next = ema_update(%p.ema, %p.next, %ema.count.next, [%skipped]) {decay, accumulate}
///   update %p.ema = %p.ema.next, update %ema.count = %ema.count.next
///
/// %p.next is the parameter's new value as its update wrote it: the f32
/// master's under master weights (O2), so the average is of the fp32 truth,
/// not of the rounded half weight. State (kind optstate, zeros, f32 -- f64
/// for f64 parameters): %p.ema per trained parameter and one shared
/// %ema.count, the steps averaged. A step that does not update (a
/// micro-step that accumulates, or one skipped for non-finite gradients)
/// leaves the average as it is. With several optimizers (OptimizerSets.h)
/// each has its own count, %ema.<name>.count, skipped as its updates skip
/// (off its turns too), so each network's average moves on its own steps.
/// Runs after the optimizer, master-weights and
/// loss-scale passes, whose updates it reads; a graph without the meta key
/// is left unchanged.
class EmaPass : public Pass {
public:
  llvm::StringRef name() const override { return "ema"; }
  llvm::StringRef description() const override {
    return "keep an exponential moving average of the trained weights (train.ema)";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
