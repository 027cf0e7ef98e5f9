//===- DeadCodeElimination.h - Drop nodes nothing needs --------------------===//
#ifndef AMPC_PASSES_DEADCODEELIMINATION_H
#define AMPC_PASSES_DEADCODEELIMINATION_H

#include "passes/Pass.h"

#include "ir/IdMap.h"

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

/// The values a step must produce whatever reads them: the graph's outputs
/// and the new values of its state updates.
IdSet<Value> stepRoots(const Graph &g);

} // namespace ampc

#endif
