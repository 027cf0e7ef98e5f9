//===- Optimizer.h - Lower the optimizer into the training-step graph -----===//
#ifndef AMPC_PASSES_OPTIMIZER_H
#define AMPC_PASSES_OPTIMIZER_H

#include "passes/Pass.h"

namespace ampc {

/// Turns a graph after autodiff into a full training step: for every
/// trainable parameter %p with a gradient output %p.grad it adds optimizer
/// state, the update node (role optimizer) and the state updates, driven by
/// the graph's meta (docs/model-format.md, "optimizer" and "train"):
///
///   %lr = learning_rate() {schedule, lr, ...}              graph output "lr"
///   %optimizer.step.next = step_counter(%optimizer.step)   (shared f32[] count)
///   [%p.grad_accum.next = accumulate_grad(%p.grad_accum, %p.grad)]  accumulate > 1
///   [%grad_norm = global_norm(<all grads>)                 graph output "grad_norm"
///    %grad_clip_coef = clip_coefficient(%grad_norm) {max_norm}]      clip_grad_norm
///   %p.next, <state>.next = sgd_update | sgd_momentum_update | adam_update(...)
///   update %p = %p.next, update <state> = <state>.next, update %optimizer.step = ...
///
/// State (kind optstate, init zeros, f32 — f64 for f64 parameters):
/// %p.momentum_buffer (SGD with momentum), %p.exp_avg and %p.exp_avg_sq
/// (Adam/AdamW), %p.grad_accum (accumulation) and one shared
/// %optimizer.step (when the update needs it: SGD with momentum, Adam): the
/// number of optimizer steps taken, as PyTorch's
/// state['step'] (every parameter steps together, so one count serves all).
/// The %p.grad outputs are consumed and removed from the graph's outputs;
/// "lr" (and "grad_norm") are appended.
class OptimizerPass : public Pass {
public:
  llvm::StringRef name() const override { return "optimizer"; }
  llvm::StringRef description() const override {
    return "add the optimizer update (state, learning-rate schedule, clipping, accumulation)";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

/// The dtype of optimizer state kept for a parameter (or its master) of
/// dtype `param`: f32, but f64 for f64 parameters, so the reference runs in
/// f64 end to end. The EMA pass keeps its averages the same way.
inline DType optimizerStateDType(DType param) {
  return param == DType::F64 ? DType::F64 : DType::F32;
}

} // namespace ampc

#endif
