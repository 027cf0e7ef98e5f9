//===- WidenToF64.h - Retype a model's f32 to f64 ---------------*- C++ -*-===//
#ifndef AMPC_PASSES_WIDENTOF64_H
#define AMPC_PASSES_WIDENTOF64_H

#include "passes/Pass.h"

namespace ampc {

/// Retypes every f32 graph input and state tensor, and every f32 dtype
/// attribute (fill's dtype, cast's to), to f64, then re-infers the result
/// types. Run on an imported model before the precision passes, it gives
/// the f64 reference that `ampc compare --reference f64` measures both
/// levels against (on the reference backend, which runs every op in f64).
class WidenToF64Pass : public Pass {
public:
  llvm::StringRef name() const override { return "widen-f64"; }
  llvm::StringRef description() const override {
    return "retype f32 inputs, state and dtype attributes to f64 (a numeric reference)";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
