//===- CastOptimize.h - Fold, share and mark casts -------------------------===//
#ifndef AMPC_PASSES_CASTOPTIMIZE_H
#define AMPC_PASSES_CASTOPTIMIZE_H

#include "passes/Pass.h"

namespace ampc {

/// Whether every value of `from` is exactly representable in `to` (f16 and
/// bf16 in f32 or f64, f32 in f64, i32 in i64, and a dtype in itself).
bool isLosslessCast(DType from, DType to);

/// Cleans up the casts of a whole training graph (after autodiff, the
/// optimizer and loss scaling), in one walk in execution order:
///  - a cast to the dtype its input already has is removed;
///  - a cast of a lossless widening reads the widening's input instead:
///    cast(cast(x: f16 -> f32) -> f16) is x, and cast(cast(x: f16 -> f32) ->
///    bf16) is cast(x -> bf16) (same rounding, one step). A narrowing round
///    trip (f32 -> f16 -> f32) rounds, so it stays;
///  - casts of the same value to the same dtype are one (the first);
///  - casts of state tensors get cacheable = true (the runtime's cast cache
///    serves them until the tensor changes), every other cast false;
///  - casts left without users are erased.
/// Graph outputs and state updates follow the values they named. None of
/// this changes a computed value.
class CastOptimizePass : public Pass {
public:
  llvm::StringRef name() const override { return "cast-optimize"; }
  llvm::StringRef description() const override {
    return "share casts, remove no-op casts and lossless round trips, mark weight casts "
           "cacheable";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
