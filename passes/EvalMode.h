//===- EvalMode.h - Turn a training forward graph into an inference one ----===//
#ifndef AMPC_PASSES_EVALMODE_H
#define AMPC_PASSES_EVALMODE_H

#include "passes/Pass.h"

namespace ampc {

/// Rebuilds every node that has a boolean `training` attribute set to true
/// (batchnorm, dropout, and any custom op that declares one) with
/// `training = false`, and drops the state updates that fed on the training
/// form's extra results (batchnorm's running statistics). The op rows decide
/// what the eval form computes and how many results it has; the pass knows no
/// op by name. Runs on a forward graph, before autodiff.
class EvalModePass : public Pass {
public:
  llvm::StringRef name() const override { return "eval-mode"; }
  llvm::StringRef description() const override {
    return "switch training-mode ops (batchnorm, dropout) to inference and drop their state "
           "updates";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
