//===- FoldPermutes.h - Read permuted operands in place --------*- C++ -*-===//
#ifndef AMPC_PASSES_FOLDPERMUTES_H
#define AMPC_PASSES_FOLDPERMUTES_H

#include "passes/Pass.h"

namespace ampc {

/// For every node whose op has a permuted form (OpInfo::permutedForm:
/// attention in layout bshd) and whose operands are all permutes by that
/// form's dims: rebuilds the node to read the permutes' inputs with the
/// form's attribute, and gives the users that permuted its results back
/// the new results directly. The permutes that then have no use go. A
/// permute copies its whole tensor (and its gradient another), so a
/// transformer layer loses eight copies. Then every operand an op can read
/// transposed (OpInfo::transposedOperands: the GEMMs) that is a permute of
/// its last two dims is read from the permute's input with the op's
/// transpose attribute negated, and that permute goes when nothing else
/// reads it. The pass knows no op by name. Runs on a forward graph, before
/// autodiff; numerically a no-op.
class FoldPermutesPass : public Pass {
public:
  llvm::StringRef name() const override { return "fold-permutes"; }
  llvm::StringRef description() const override {
    return "read permuted operands in place where an op has a form for it (attention in layout "
           "bshd) and drop the permutes";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
