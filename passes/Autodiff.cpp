//===- Autodiff.cpp ---------------------------------------------------------===//
#include "passes/Autodiff.h"

#include "ir/GradientBuilder.h"
#include "ir/IdMap.h"

#include "llvm/ADT/STLExtras.h"

namespace ampc {

std::string gradientName(llvm::StringRef param) { return (param + ".grad").str(); }

Value *lossDefinedBy(Node &n) {
  return n.role() == NodeRole::Loss && n.numResults() > 0 ? n.result(0) : nullptr;
}

Value *findLoss(Graph &g) {
  Value *loss = nullptr;
  for (Node &n : g.nodes())
    if (Value *v = lossDefinedBy(n))
      loss = v;
  return loss;
}

namespace {

bool differentiableOperand(const Node &n, unsigned i) {
  const OperandSpec *spec = n.op().operandSpec(i);
  return spec && !spec->integral && isFloating(n.operand(i)->dtype());
}

bool isLive(const IdSet<Value> &outputs, const Node &n) {
  for (unsigned r = 0; r < n.numResults(); ++r)
    if (n.result(r)->hasUses() || outputs.count(n.result(r)))
      return true;
  return false;
}

/// Gradient rules build every term of an operand's gradient before the walk
/// knows whether anything reaches a parameter through it (a loss that only
/// depends on a parameter through running statistics, say). Erase backward
/// nodes nobody reads, consumers before producers.
void pruneDeadBackwardNodes(Graph &g) {
  std::vector<Node *> backward;
  for (Node &n : g.nodes())
    if (n.role() == NodeRole::Backward)
      backward.push_back(&n);
  // A set: the outputs hold a gradient per parameter, so a scan per node
  // would be quadratic.
  IdSet<Value> outputs(g.idBound());
  outputs.insertAll(g.outputs());
  for (auto it = backward.rbegin(); it != backward.rend(); ++it)
    if (!isLive(outputs, **it))
      g.eraseNode(*it);
}

} // namespace

PassResult AutodiffPass::run(Graph &g, PassContext &ctx) {
  // The loss and a backward pass already there, in one walk.
  Value *loss = nullptr;
  Node *backward = nullptr;
  for (Node &n : g.nodes()) {
    if (Value *v = lossDefinedBy(n))
      loss = v;
    if (n.role() == NodeRole::Backward && !backward)
      backward = &n;
  }
  if (!loss) {
    ctx.diag.error(g.loc(), "autodiff: the graph has no loss (a node with role loss)");
    return PassResult::Failed;
  }
  if (backward) {
    ctx.diag.error(backward->loc(), "autodiff: the graph already has a backward pass");
    return PassResult::Failed;
  }
  if (loss->type().rank() != 0) {
    ctx.diag.error(loss->loc(), "autodiff: the loss must be a scalar, got " + loss->type().str());
    return PassResult::Failed;
  }

  // Forward: which values depend on a trainable parameter.
  IdSet<Value> dependsOnParam(g.idBound());
  for (Value *v : g.state(StateKind::Parameter))
    if (v->trainable())
      dependsOnParam.insert(v);
  std::vector<Node *> forward;
  for (Node &n : g.nodes()) {
    forward.push_back(&n);
    for (unsigned i = 0; i < n.numOperands(); ++i)
      if (dependsOnParam.count(n.operand(i)) && differentiableOperand(n, i)) {
        for (unsigned r = 0; r < n.numResults(); ++r)
          dependsOnParam.insert(n.result(r));
        break;
      }
  }
  if (!dependsOnParam.count(loss)) {
    ctx.diag.error(loss->loc(), "autodiff: the loss does not depend on any trainable parameter");
    return PassResult::Failed;
  }

  GradientBuilder gb(g, ctx.diag);
  // Keyed by forward values, nearly all of which get a gradient.
  IdMap<Value, Value *> grads(g.idBound());
  // The seed d(loss)/d(loss) = 1, in the loss's dtype.
  gb.beginNode(*loss->definingNode(), {});
  Value *seed = gb.build1(OpKind::Fill, {},
                          {{"value", Attribute(1.0)},
                           {"shape", Attribute(std::vector<int64_t>{})},
                           {"dtype", Attribute(loss->dtype())}});
  if (!seed)
    return PassResult::Failed;
  g.renameValue(seed, g.uniqueName(gradientName(loss->name())));
  grads[loss] = seed;

  // Reverse walk over the forward nodes only (backward nodes are appended).
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Node &n = **it;
    llvm::SmallVector<Value *, 3> resultGrads;
    bool anyResultGrad = false;
    for (unsigned r = 0; r < n.numResults(); ++r) {
      Value *gr = grads.lookup(n.result(r));
      resultGrads.push_back(gr);
      anyResultGrad |= gr != nullptr;
    }
    if (!anyResultGrad)
      continue;
    llvm::SmallBitVector needed(n.numOperands());
    for (unsigned i = 0; i < n.numOperands(); ++i)
      needed[i] = dependsOnParam.count(n.operand(i)) && differentiableOperand(n, i);
    if (needed.none())
      continue;
    if (!n.op().gradient) {
      ctx.diag.error(n.loc(), "autodiff: " + n.opName() + " has no gradient rule");
      return PassResult::Failed;
    }
    llvm::SmallVector<Value *, 4> operandGrads(n.numOperands(), nullptr);
    gb.beginNode(n, needed);
    n.op().gradient(gb, n, resultGrads, operandGrads);
    if (gb.failed())
      return PassResult::Failed;
    for (unsigned i = 0; i < n.numOperands(); ++i) {
      if (!needed[i] || !operandGrads[i])
        continue;
      Value *operand = n.operand(i);
      Value *grad = operandGrads[i];
      if (grad->type().dims() != operand->type().dims()) {
        ctx.diag.error(n.loc(), "autodiff: the gradient rule of " + n.opName() + " gave operand " +
                                    llvm::Twine(i) + " a gradient of type " + grad->type().str() +
                                    " for " + operand->type().str());
        return PassResult::Failed;
      }
      // A gradient always has its value's dtype (the backward of a cast is a
      // cast back, so a parameter's gradient comes out in its storage dtype).
      grad = gb.castTo(grad, operand->dtype());
      grads[operand] = gb.add(grads.lookup(operand), grad);
      if (gb.failed())
        return PassResult::Failed;
    }
  }

  bool anyParameterGrad = false;
  for (Value *p : g.state(StateKind::Parameter))
    anyParameterGrad |= p->trainable() && grads.lookup(p) != nullptr;
  if (!anyParameterGrad) {
    ctx.diag.error(loss->loc(), "autodiff: no trainable parameter receives a gradient from the "
                                "loss (it depends on them only through non-differentiable paths)");
    return PassResult::Failed;
  }

  IdSet<Value> claimed(g.idBound()); // gradients already named after a parameter
  for (Value *p : g.state(StateKind::Parameter)) {
    Value *grad = grads.lookup(p);
    if (!p->trainable() || !grad)
      continue;
    std::string name = gradientName(p->name());
    // A gradient that is another value's too (or a graph input) gets its own
    // node so that %p.grad names exactly one thing.
    if (!grad->isResult() || grad->definingNode()->role() != NodeRole::Backward ||
        claimed.count(grad) || !g.isNameFree(name)) {
      gb.beginNode(*loss->definingNode(), {});
      grad = gb.scale(grad, 1.0);
      if (!grad)
        return PassResult::Failed;
    }
    if (g.isNameFree(name))
      g.renameValue(grad, name);
    claimed.insert(grad);
    g.addOutput(grad);
  }
  pruneDeadBackwardNodes(g);
  return PassResult::Changed;
}

} // namespace ampc
