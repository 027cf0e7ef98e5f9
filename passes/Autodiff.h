//===- Autodiff.h - Reverse-mode differentiation of the loss ---------------===//
#ifndef AMPC_PASSES_AUTODIFF_H
#define AMPC_PASSES_AUTODIFF_H

#include "passes/Pass.h"

namespace ampc {

/// Appends the backward pass to a forward graph with a loss: one generic
/// reverse walk that asks each op's registry row for its gradient rule. Only
/// gradients that reach a trainable parameter are built; a value used many
/// times gets its gradients summed into one. The gradient of parameter %p is
/// named %p.grad and becomes a graph output (the optimizer lowering consumes
/// it). The loss's gradient seed is named %loss.grad.
///
/// With amp.num_losses = N > 1 the loss must sum N terms (lossTerms), and
/// each term %t gets a walk of its own from its seed %t.grad: parameter %p
/// receives %p.grad.<k> from term k, and %p.grad is their sum (a node of its
/// own), so the loss-scale pass can scale each term by its own scaler.
class AutodiffPass : public Pass {
public:
  llvm::StringRef name() const override { return "autodiff"; }
  llvm::StringRef description() const override {
    return "append the backward pass (gradients of the loss for every trainable parameter)";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

/// The loss autodiff differentiates: the first result of the last node with
/// role loss, or null when the graph has none.
Value *findLoss(Graph &g);
/// The loss `n` defines: its first result when it has role loss, else null.
/// Passes that walk the graph anyway find the loss with it (the last
/// non-null one), without a walk of findLoss's own.
Value *lossDefinedBy(Node &n);

/// The name autodiff gives the gradient of `param`.
std::string gradientName(llvm::StringRef param);

} // namespace ampc

#endif
