//===- Autodiff.cpp ---------------------------------------------------------===//
#include "passes/Autodiff.h"
#include "passes/OptimizerSets.h"

#include "ir/GradientBuilder.h"
#include "ir/IdMap.h"
#include "passes/PrecisionPolicy.h"

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

namespace {

/// One reverse walk over the forward nodes (backward nodes are appended),
/// from `seedAt` seeded with 1: fills `grads` with the gradient of `seedAt`
/// for every value it reaches that depends on a trainable parameter.
bool backpropagate(GradientBuilder &gb, Graph &g, Value *seedAt, llvm::ArrayRef<Node *> forward,
                   const IdSet<Value> &dependsOnParam, IdMap<Value, Value *> &grads,
                   DiagnosticEngine &diag) {
  // The seed d(loss)/d(loss) = 1, in the loss's dtype.
  gb.beginNode(*seedAt->definingNode(), {});
  Value *seed = gb.build1(OpKind::Fill, {},
                          {{"value", Attribute(1.0)},
                           {"shape", Attribute(std::vector<int64_t>{})},
                           {"dtype", Attribute(seedAt->dtype())}});
  if (!seed)
    return false;
  g.renameValue(seed, g.uniqueName(gradientName(seedAt->name())));
  grads[seedAt] = seed;

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
      diag.error(n.loc(), "autodiff: " + n.opName() + " has no gradient rule");
      return false;
    }
    llvm::SmallVector<Value *, 4> operandGrads(n.numOperands(), nullptr);
    gb.beginNode(n, needed);
    n.op().gradient(gb, n, resultGrads, operandGrads);
    if (gb.failed())
      return false;
    for (unsigned i = 0; i < n.numOperands(); ++i) {
      if (!needed[i] || !operandGrads[i])
        continue;
      Value *operand = n.operand(i);
      Value *grad = operandGrads[i];
      if (grad->type().dims() != operand->type().dims()) {
        diag.error(n.loc(), "autodiff: the gradient rule of " + n.opName() + " gave operand " +
                                llvm::Twine(i) + " a gradient of type " + grad->type().str() +
                                " for " + operand->type().str());
        return false;
      }
      // A gradient always has its value's dtype (the backward of a cast is a
      // cast back, so a parameter's gradient comes out in its storage dtype).
      grad = gb.castTo(grad, operand->dtype());
      grads[operand] = gb.add(grads.lookup(operand), grad);
      if (gb.failed())
        return false;
    }
  }
  return true;
}

/// The graph's precision policy, or nullopt when it cannot be read (the
/// passes that need it report that).
std::optional<PrecisionPolicy> policyOf(const Graph &g) {
  DiagnosticEngine quiet;
  return resolvePolicy(g, quiet);
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
  // With amp.num_losses = N > 1 every term of the sum gets a backward walk
  // of its own, so that the loss-scale pass can scale and check each one
  // with its own scaler (Apex's num_losses: one backward per loss).
  // Several optimizers (OptimizerSets.h) each apply the gradients of their
  // own term, so every term gets a walk of its own too.
  std::vector<Value *> seeds = {loss};
  std::optional<PrecisionPolicy> policy = policyOf(g);
  std::optional<std::vector<OptimizerSet>> sets = readOptimizerSets(g, ctx.diag);
  if (!sets)
    return PassResult::Failed;
  const bool severalOptimizers = !sets->empty();
  if (int64_t numLosses = policy ? policy->numLosses : 1; numLosses > 1 || severalOptimizers) {
    seeds = lossTerms(loss);
    if (numLosses > 1 && int64_t(seeds.size()) != numLosses) {
      ctx.diag.error(loss->loc(), "autodiff: amp.num_losses is " + llvm::Twine(numLosses) +
                                      " but the loss sums " + llvm::Twine(seeds.size()) +
                                      " term(s); give one loss per scaler");
      return PassResult::Failed;
    }
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
  for (Value *seed : seeds)
    if (!dependsOnParam.count(seed)) {
      std::string which = seed == loss ? "" : " term %" + seed->name().str();
      ctx.diag.error(seed->loc(),
                     "autodiff: the loss" + which + " does not depend on any trainable parameter");
      return PassResult::Failed;
    }

  GradientBuilder gb(g, ctx.diag);
  // One walk per seed, each keyed by forward values, nearly all of which
  // get a gradient.
  std::vector<IdMap<Value, Value *>> walks;
  for (Value *seed : seeds) {
    walks.emplace_back(g.idBound());
    if (!backpropagate(gb, g, seed, forward, dependsOnParam, walks.back(), ctx.diag))
      return PassResult::Failed;
  }

  bool anyParameterGrad = false;
  for (Value *p : g.state(StateKind::Parameter))
    for (const IdMap<Value, Value *> &grads : walks)
      anyParameterGrad |= p->trainable() && grads.lookup(p) != nullptr;
  if (!anyParameterGrad) {
    ctx.diag.error(loss->loc(), "autodiff: no trainable parameter receives a gradient from the "
                                "loss (it depends on them only through non-differentiable paths)");
    return PassResult::Failed;
  }

  IdSet<Value> claimed(g.idBound()); // gradients already named after a parameter
  // `grad` under `name`, or a copy of it when it is another value's too (or
  // a graph input), so that the name names exactly one thing.
  auto own = [&](Value *grad, const std::string &name) -> Value * {
    if (!grad->isResult() || grad->definingNode()->role() != NodeRole::Backward ||
        claimed.count(grad) || !g.isNameFree(name)) {
      gb.beginNode(*loss->definingNode(), {});
      grad = gb.scale(grad, 1.0);
      if (!grad)
        return nullptr;
    }
    if (g.isNameFree(name))
      g.renameValue(grad, name);
    claimed.insert(grad);
    return grad;
  };
  for (Value *p : g.state(StateKind::Parameter)) {
    if (!p->trainable())
      continue;
    std::string name = gradientName(p->name());
    Value *grad = nullptr;
    if (severalOptimizers) {
      // Only the term of the parameter's own optimizer: the others' walks
      // may reach it (a GAN's discriminator loss reaches the generator) but
      // their gradients are not applied to it.
      int64_t optimizer = optimizerIndexOf(g, p);
      if (optimizer < 0)
        continue;
      int64_t term = optimizer < int64_t(sets->size()) ? (*sets)[size_t(optimizer)].lossTerm : 0;
      if (term < 0 || term >= int64_t(walks.size())) {
        ctx.diag.error(p->loc(), "autodiff: the optimizer of parameter '" + p->name() +
                                     "' steps on loss term " + llvm::Twine(term) +
                                     " but the loss has " + llvm::Twine(walks.size()) + " term(s)");
        return PassResult::Failed;
      }
      grad = walks[size_t(term)].lookup(p);
      if (grad && walks.size() > 1 && policy && policy->scalesLoss()) {
        // %p.grad.<k> and its copy %p.grad, which the loss-scale pass
        // replaces by the unscaled part (a scaler per term); unscaled, the
        // part is %p.grad itself, with no copy a step.
        if (!(grad = own(grad, name + "." + std::to_string(term))))
          return PassResult::Failed;
        gb.beginNode(*loss->definingNode(), {});
        if (!(grad = gb.scale(grad, 1.0)))
          return PassResult::Failed;
      }
    } else if (walks.size() == 1) {
      grad = walks[0].lookup(p);
    } else {
      // %p.grad.<k> from loss k, summed into %p.grad (always a node of its
      // own, which the loss-scale pass replaces by the unscaled sum).
      llvm::SmallVector<Value *, 4> parts;
      for (size_t k = 0; k < walks.size(); ++k)
        if (Value *part = walks[k].lookup(p)) {
          if (!(part = own(part, name + "." + std::to_string(k))))
            return PassResult::Failed;
          parts.push_back(part);
        }
      if (parts.empty())
        continue;
      gb.beginNode(*loss->definingNode(), {});
      grad = parts.size() == 1 ? gb.scale(parts[0], 1.0) : parts[0];
      for (size_t i = 1; i < parts.size(); ++i)
        grad = gb.add(grad, parts[i]);
      if (gb.failed() || !grad)
        return PassResult::Failed;
    }
    if (!grad)
      continue;
    if (!(grad = own(grad, name)))
      return PassResult::Failed;
    g.addOutput(grad);
  }
  pruneDeadBackwardNodes(g);
  return PassResult::Changed;
}

} // namespace ampc
