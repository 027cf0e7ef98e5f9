//===- EvalMode.cpp ---------------------------------------------------------===//
#include "passes/EvalMode.h"

#include "ir/Builder.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace ampc {

namespace {

bool runsInTrainingMode(const Node &n) {
  const Attribute *a = n.findAttr("training");
  return a && a->is(AttrType::Bool) && a->getBool();
}

} // namespace

PassResult EvalModePass::run(Graph &g, PassContext &ctx) {
  for (const Node &n : g.nodes())
    if (n.role() == NodeRole::Backward || n.role() == NodeRole::Optimizer) {
      ctx.diag.error(n.loc(), "eval-mode: the graph already has a backward pass; run "
                              "eval-mode on the forward graph");
      return PassResult::Failed;
    }

  llvm::SmallVector<Node *, 16> training;
  for (Node &n : g.nodes())
    if (runsInTrainingMode(n))
      training.push_back(&n);
  if (training.empty())
    return PassResult::Unchanged;

  for (Node *old : training) {
    // The extra results of the training form may only feed state updates
    // (they are dropped); anything else would lose a computation silently.
    llvm::DenseSet<const Value *> extra;
    for (unsigned r = 1; r < old->numResults(); ++r) {
      if (old->result(r)->hasUses()) {
        ctx.diag.error(old->loc(), "eval-mode: result '" + old->result(r)->name() +
                                       "' of a training-mode " + old->op().name +
                                       " is used by another op; it has no inference form");
        return PassResult::Failed;
      }
      extra.insert(old->result(r));
    }
    std::vector<StateUpdate> kept;
    for (const StateUpdate &u : g.stateUpdates())
      if (!extra.count(u.newValue))
        kept.push_back(u);
    g.setStateUpdates(std::move(kept));

    AttrMap attrs = old->attrs();
    attrs["training"] = Attribute(false);
    llvm::SmallVector<Value *, 4> operands(old->operands().begin(), old->operands().end());
    Node *eval = buildNode(g, old->op(), operands, std::move(attrs), old->loc(), ctx.diag, {}, old);
    if (!eval)
      return PassResult::Failed;
    if (eval->numResults() != 1) {
      ctx.diag.error(old->loc(), "eval-mode: the inference form of " + old->op().name +
                                     " must have one result");
      return PassResult::Failed;
    }
    eval->setRole(old->role());
    eval->setPrecisionOverride(old->precisionOverride());
    Value *y = old->result(0);
    std::string name = y->name().str();
    y->replaceAllUsesWith(eval->result(0));
    std::vector<Value *> outputs = g.outputs();
    for (Value *&o : outputs)
      if (o == y)
        o = eval->result(0);
    g.setOutputs(std::move(outputs));
    g.eraseNode(old);
    g.renameValue(eval->result(0), name);
  }
  return PassResult::Changed;
}

} // namespace ampc
