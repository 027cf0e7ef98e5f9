//===- InferTypes.h - Recompute every result type from the registry -------===//
#ifndef AMPC_PASSES_INFERTYPES_H
#define AMPC_PASSES_INFERTYPES_H

#include "passes/Pass.h"

namespace ampc {

/// Re-runs each node's shape/dtype inference in order and updates result
/// types, so that a change to an input or operand type propagates. Fails with
/// the op's diagnostic when a node no longer type-checks.
class InferTypesPass : public Pass {
public:
  llvm::StringRef name() const override { return "infer-types"; }
  llvm::StringRef description() const override {
    return "recompute result types from operand types";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
