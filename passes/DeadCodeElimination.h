//===- DeadCodeElimination.h - Drop nodes nothing needs --------------------===//
#ifndef AMPC_PASSES_DEADCODEELIMINATION_H
#define AMPC_PASSES_DEADCODEELIMINATION_H

#include "passes/Pass.h"

namespace ampc {

/// Removes nodes without side effects whose results reach neither a graph
/// output nor a state update. One backward sweep: linear in the graph size.
class DeadCodeEliminationPass : public Pass {
public:
  llvm::StringRef name() const override { return "dce"; }
  llvm::StringRef description() const override {
    return "remove nodes whose results are never needed";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
