//===- DeadCodeElimination.cpp ----------------------------------------------===//
#include "passes/DeadCodeElimination.h"

#include "ir/IdMap.h"

namespace ampc {

IdSet<Value> stepRoots(const Graph &g) {
  IdSet<Value> roots(g.idBound());
  roots.insertAll(g.outputs());
  for (const StateUpdate &u : g.stateUpdates())
    roots.insert(u.newValue);
  return roots;
}

PassResult DeadCodeEliminationPass::run(Graph &g, PassContext &) {
  IdSet<Value> roots = stepRoots(g);

  // Walking backwards, a node's users have already been visited, so "no uses
  // left" is final by the time we reach it.
  bool changed = false;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend();) {
    Node &n = *it++;
    if (n.op().hasSideEffects)
      continue;
    bool needed = false;
    for (unsigned i = 0; i < n.numResults() && !needed; ++i)
      needed = n.result(i)->hasUses() || roots.count(n.result(i));
    if (needed)
      continue;
    g.eraseNode(&n);
    changed = true;
  }
  return changed ? PassResult::Changed : PassResult::Unchanged;
}

} // namespace ampc
