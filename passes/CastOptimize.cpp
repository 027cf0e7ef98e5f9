//===- CastOptimize.cpp -----------------------------------------------------===//
#include "passes/CastOptimize.h"
#include "ir/IdMap.h"
#include "ir/OpAttrs.h"
#include "passes/DeadCodeElimination.h"

#include "llvm/ADT/SmallVector.h"

#include <array>

namespace ampc {

bool isLosslessCast(DType from, DType to) {
  if (from == to)
    return true;
  switch (from) {
  case DType::F16:
  case DType::BF16:
    return to == DType::F32 || to == DType::F64;
  case DType::F32:
    return to == DType::F64;
  case DType::I32:
    return to == DType::I64;
  case DType::F64:
  case DType::I64:
  case DType::Bool:
    return false;
  }
  return false;
}

namespace {

Node *castProducing(const Value *v) {
  Node *n = v->isResult() ? v->definingNode() : nullptr;
  return n && n->kind() == OpKind::Cast ? n : nullptr;
}

class CastOptimizer {
public:
  explicit CastOptimizer(Graph &g) : g_(g) {}

  bool run() {
    llvm::SmallVector<Node *, 32> casts;
    for (Node &n : g_.nodes())
      if (n.kind() == OpKind::Cast)
        casts.push_back(&n);
    // In execution order, so a cast's input cast is already in final form.
    // Per target dtype, by the input's id (ir/IdMap.h): a big graph's hash
    // or tree lookups each miss the caches.
    std::array<IdMap<Value, Value *>, std::size(kAllDTypes)> firstCast;
    for (Node *cast : casts) {
      Value *in = cast->operand(0);
      // The result's dtype is `to` (type inference): read it there rather
      // than search the attribute array by name (about 30 % of the pass's
      // instructions on a big graph; docs/performance.md).
      DType to = cast->result()->dtype();
      if (Node *inner = castProducing(in)) {
        Value *source = inner->operand(0);
        if (isLosslessCast(source->dtype(), in->dtype())) {
          // `in` holds exactly the values of `source`: read that instead.
          cast->setOperand(0, source);
          in = source;
          changed_ = true;
        }
      }
      if (in->dtype() == to) {
        replace(cast, in);
        continue;
      }
      Value *&first = firstCast[static_cast<unsigned>(to)][in];
      if (first) {
        replace(cast, first);
        continue;
      }
      first = cast->result();
      bool cacheable = in->isState();
      if (attrs::Cast(*cast).cacheable() != cacheable) {
        cast->setAttr("cacheable", Attribute(cacheable));
        changed_ = true;
      }
    }
    replaceInOutputsAndUpdates();
    eraseDeadCasts();
    return changed_;
  }

private:
  /// Points everything that reads cast's result at `with`; the graph's
  /// outputs and state updates follow in replaceInOutputsAndUpdates.
  void replace(Node *cast, Value *with) {
    Value *old = cast->result();
    old->replaceAllUsesWith(with);
    replaced_[old] = with;
    anyReplaced_ = true;
    changed_ = true;
  }

  /// The replacements, in one pass over the outputs and the state updates
  /// (a pass per replaced cast would be quadratic). A replacement is never
  /// itself replaced later: it has uses (or is a kept cast), and only casts
  /// whose results are read get replaced after it.
  void replaceInOutputsAndUpdates() {
    if (!anyReplaced_)
      return;
    auto resolve = [&](Value *v) {
      Value *with = replaced_.lookup(v);
      return with ? with : v;
    };
    std::vector<Value *> outputs = g_.outputs();
    for (Value *&o : outputs)
      o = resolve(o);
    g_.setOutputs(std::move(outputs));
    std::vector<StateUpdate> updates = g_.stateUpdates();
    for (StateUpdate &u : updates)
      u.newValue = resolve(u.newValue);
    g_.setStateUpdates(std::move(updates));
  }

  /// Casts nothing reads any more (replaced ones, and inner casts of folded
  /// round trips), users before producers.
  void eraseDeadCasts() {
    IdSet<Value> roots = stepRoots(g_);
    for (auto it = g_.nodes().rbegin(); it != g_.nodes().rend();) {
      Node &n = *it++;
      if (n.kind() != OpKind::Cast || n.result()->hasUses() || roots.count(n.result()))
        continue;
      g_.eraseNode(&n);
      changed_ = true;
    }
  }

  Graph &g_;
  IdMap<Value, Value *> replaced_;
  bool anyReplaced_ = false;
  bool changed_ = false;
};

} // namespace

PassResult CastOptimizePass::run(Graph &g, PassContext &) {
  return CastOptimizer(g).run() ? PassResult::Changed : PassResult::Unchanged;
}

} // namespace ampc
