//===- InferTypes.cpp -------------------------------------------------------===//
#include "passes/InferTypes.h"

#include "ir/Builder.h"

namespace ampc {

PassResult InferTypesPass::run(Graph &g, PassContext &ctx) {
  bool changed = false;
  llvm::SmallVector<TensorType, 4> operandTypes;
  llvm::SmallVector<TensorType, 2> results;
  std::string err;
  for (Node &n : g.nodes()) {
    operandTypes.clear();
    for (Value *v : n.operands())
      operandTypes.push_back(v->type());
    if (!inferResultTypes(n.op(), operandTypes, n.attrs(), results, err)) {
      ctx.diag.error(n.loc(), n.opName() + ": " + err);
      return PassResult::Failed;
    }
    if (results.size() != n.numResults()) {
      ctx.diag.error(n.loc(), n.opName() + ": inference gives " + llvm::Twine(results.size()) +
                                  " results but the node has " + llvm::Twine(n.numResults()));
      return PassResult::Failed;
    }
    for (unsigned i = 0; i < results.size(); ++i)
      if (n.result(i)->type() != results[i]) {
        n.result(i)->setType(results[i]);
        changed = true;
      }
  }
  return changed ? PassResult::Changed : PassResult::Unchanged;
}

} // namespace ampc
