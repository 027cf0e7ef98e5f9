//===- Recompute.h - Recompute cheap activations in the backward pass -----===//
#ifndef AMPC_PASSES_RECOMPUTE_H
#define AMPC_PASSES_RECOMPUTE_H

#include "passes/Pass.h"

namespace ampc {

/// With meta `train.recompute` = `cheap` (the model file's `train:
/// {recompute: cheap}`, `ampc --recompute cheap`), a forward value that the
/// backward pass reads is computed again just before its first backward
/// reader instead of being kept from the forward pass, where that costs no
/// memory elsewhere: its producer is elementwise (OpInfo::elementwise:
/// activations, casts, arithmetic; no state, randomness or side effects) or
/// a view (reshape, flatten), and each of its operands is still live at
/// that point anyway (kept for another backward reader, a graph input or
/// state) or is itself such a value, recomputed in a chain of at most
/// kMaxChain nodes from live ones. GEMMs, convolutions, normalisations and
/// random ops are never recomputed. The clone computes the same op on the
/// same bits, so the step's results are bit for bit those without it; the
/// value's buffer is free from its last forward reader to the clone, and
/// the memory plan's peak falls when that span holds it. Values of state
/// alone (a weight's cast, served by the cast cache) are left as they are.
/// Meta `train.recompute.values` lists the recomputed values, comma-separated
/// (each clone's result is the value's name with ".recomputed").
/// `none` (the default) leaves the graph unchanged. Runs after every pass
/// that adds backward readers (loss-scale, ema, cast-optimize), before dce.
/// The values train.recompute takes ("none", "cheap"), and the error for
/// another: "recompute must be none or cheap, got 'x'".
bool isRecomputeMode(llvm::StringRef mode);
std::string recomputeModeError(llvm::StringRef mode);

class RecomputePass : public Pass {
public:
  /// Nodes one recomputation may clone: the value's producer and the
  /// producers of operands that are not live where it is recomputed.
  static constexpr unsigned kMaxChain = 4;

  llvm::StringRef name() const override { return "recompute"; }
  llvm::StringRef description() const override {
    return "recompute cheap forward values for the backward pass instead of keeping them "
           "(train.recompute)";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
