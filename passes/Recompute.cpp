//===- Recompute.cpp - Recompute cheap activations in the backward pass ---===//
#include "passes/Recompute.h"

#include "ir/MetaReader.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>
#include <vector>

namespace ampc {

namespace {

bool cheapToRecompute(const Node &n) {
  const OpInfo &op = n.op();
  return (op.elementwise || op.resultViewsOperand) && !op.hasSideEffects && !op.collective &&
         n.numResults() == 1;
}

bool runsBeforeTheBackward(const Node &n) {
  return n.role() == NodeRole::Forward || n.role() == NodeRole::Loss;
}

/// One walk over the forward nodes, deciding and cloning as it goes.
class Recomputer {
public:
  explicit Recomputer(Graph &g) : g_(g) {
    unsigned i = 0;
    for (Node &n : g.nodes())
      position_[&n] = i++;
    for (const Value *v : g.outputs())
      kept_.insert(v);
    for (const StateUpdate &u : g.stateUpdates())
      kept_.insert(u.newValue);
  }

  /// The recomputed values' names, in forward order.
  std::vector<std::string> run() {
    std::vector<Node *> forward;
    for (Node &n : g_.nodes())
      if (runsBeforeTheBackward(n) && cheapToRecompute(n))
        forward.push_back(&n);
    std::vector<std::string> names;
    for (Node *n : forward)
      if (recompute(n->result(0)))
        names.push_back(n->result(0)->name().str());
    return names;
  }

private:
  /// Where a node runs in the graph as it was (clones have no position:
  /// they are never the late readers this walk looks for).
  std::optional<unsigned> positionOf(const Node *n) const {
    auto it = position_.find(n);
    if (it == position_.end())
      return std::nullopt;
    return it->second;
  }

  /// v's readers at or after `at`, and whether they all belong to the backward.
  bool lateReaders(const Value *v, unsigned at, std::vector<Use> &late) const {
    for (const Use &u : v->uses()) {
      std::optional<unsigned> p = positionOf(u.user);
      if (!p || *p < at)
        continue;
      if (u.user->role() != NodeRole::Backward)
        return false;
      late.push_back(u);
    }
    return true;
  }

  /// The value holding x's bits that is live just before position `at`
  /// anyway, or null.
  Value *liveAt(Value *x, unsigned at) const {
    if (x->isInput() || x->isState())
      return x;
    if (auto clone = clones_.find(x); clone != clones_.end()) {
      // Recomputed: its clone, when that runs earlier and is still read.
      const Recomputed &r = clone->second;
      return r.at < at && r.lastRead >= at ? r.value : nullptr;
    }
    for (const Use &u : x->uses())
      if (std::optional<unsigned> p = positionOf(u.user); p && *p >= at)
        return x;
    return nullptr;
  }

  /// Adds to `chain` (operands first) the nodes that recompute x before
  /// `at` from live values; false when it cannot be done within kMaxChain.
  bool plan(Value *x, unsigned at, std::vector<Node *> &chain,
            llvm::SmallPtrSetImpl<Value *> &planned, bool &readsStepValue) const {
    if (planned.count(x))
      return true;
    if (Value *live = liveAt(x, at)) {
      readsStepValue |= !live->isState();
      return true;
    }
    Node *n = x->definingNode();
    if (!n || !runsBeforeTheBackward(*n) || !cheapToRecompute(*n) ||
        chain.size() >= RecomputePass::kMaxChain)
      return false;
    // A function of state alone (a weight's cast) is the cast cache's: a
    // clone would be a second cached copy.
    if (llvm::all_of(n->operands(), [](const Value *o) { return o->isState(); }))
      return false;
    for (Value *operand : n->operands())
      if (!plan(operand, at, chain, planned, readsStepValue))
        return false;
    chain.push_back(n);
    planned.insert(x);
    return true;
  }

  bool recompute(Value *v) {
    if (kept_.count(v) || !v->hasUses())
      return false;
    // The first backward reader: where the clone goes.
    std::optional<unsigned> first;
    for (const Use &u : v->uses())
      if (u.user->role() == NodeRole::Backward)
        if (std::optional<unsigned> p = positionOf(u.user); p && (!first || *p < *first))
          first = p;
    if (!first)
      return false;
    std::vector<Use> late;
    if (!lateReaders(v, *first, late) || late.empty())
      return false;
    // Plan v's producer with its operands (v itself is what is dropped).
    Node *producer = v->definingNode();
    std::vector<Node *> chain;
    llvm::SmallPtrSet<Value *, 8> planned;
    bool readsStepValue = false;
    for (Value *operand : producer->operands())
      if (!plan(operand, *first, chain, planned, readsStepValue))
        return false;
    if (chain.size() + 1 > RecomputePass::kMaxChain || !readsStepValue)
      return false; // too long, or a function of state alone (the cast cache's)
    chain.push_back(producer);

    Node *before = late.front().user;
    for (const Use &u : late)
      if (*positionOf(u.user) < *positionOf(before))
        before = u.user;
    llvm::DenseMap<Value *, Value *> copies;
    for (Node *n : chain) {
      std::vector<Value *> operands;
      for (Value *operand : n->operands()) {
        auto copy = copies.find(operand);
        operands.push_back(copy != copies.end() ? copy->second : liveAt(operand, *first));
      }
      Value *original = n->result(0);
      Node *clone =
          g_.createNode(n->op(), operands, n->attrs(), {original->type()},
                        {g_.uniqueName(original->name().str() + ".recomputed")}, n->loc(), before);
      clone->setRole(NodeRole::Backward);
      clone->setPrecisionOverride(n->precisionOverride());
      copies[original] = clone->result(0);
    }
    Value *copy = copies[v];
    unsigned lastRead = 0;
    for (const Use &u : late) {
      u.user->setOperand(u.operandIndex, copy);
      lastRead = std::max(lastRead, *positionOf(u.user));
    }
    clones_[v] = {copy, *first, lastRead};
    return true;
  }

  struct Recomputed {
    Value *value;      ///< the clone's result
    unsigned at;       ///< the position it runs before
    unsigned lastRead; ///< its last reader's position
  };

  Graph &g_;
  llvm::DenseMap<const Node *, unsigned> position_;
  llvm::SmallPtrSet<const Value *, 16> kept_; ///< outputs and new state values
  llvm::DenseMap<const Value *, Recomputed> clones_;
};

} // namespace

bool isRecomputeMode(llvm::StringRef mode) { return mode == "none" || mode == "cheap"; }

std::string recomputeModeError(llvm::StringRef mode) {
  return "recompute must be none or cheap, got '" + mode.str() + "'";
}

PassResult RecomputePass::run(Graph &g, PassContext &ctx) {
  std::string mode = metaString(g, "train.recompute", "none");
  if (!isRecomputeMode(mode)) {
    ctx.diag.error(g.metaLocation("train.recompute"), "train." + recomputeModeError(mode));
    return PassResult::Failed;
  }
  if (mode == "none")
    return PassResult::Unchanged;
  std::vector<std::string> names = Recomputer(g).run();
  if (names.empty())
    return PassResult::Unchanged;
  // For --explain: which values the backward computes again (each clone's
  // result is the value's name with ".recomputed").
  std::string list;
  for (const std::string &name : names)
    list += (list.empty() ? "" : ",") + name;
  g.meta()["train.recompute.values"] = Attribute(list);
  return PassResult::Changed;
}

} // namespace ampc
