//===- StructuralKeys.cpp ---------------------------------------------------===//
#include "passes/StructuralKeys.h"

#include "llvm/ADT/Hashing.h"

namespace ampc {

namespace {
uint64_t keyOfName(llvm::StringRef kind, llvm::StringRef name) {
  return static_cast<uint64_t>(llvm::hash_combine(kind, name));
}

/// Autodiff's seed d(loss)/d(loss): a scalar fill with no operands in the
/// backward pass. Under loss scaling the scaler's scale stands in for it.
bool isUnitSeed(const Node &n) {
  return n.role() == NodeRole::Backward && n.op().kind == OpKind::Fill && n.numOperands() == 0 &&
         n.numResults() == 1 && n.result()->type().rank() == 0;
}
} // namespace

llvm::DenseMap<const Value *, uint64_t> computeStructuralKeys(const Graph &g) {
  const uint64_t seedKey = keyOfName("seed", "");
  llvm::DenseMap<const Value *, uint64_t> keys;
  for (const Value *v : g.inputs())
    keys[v] = keyOfName("value", v->name());
  for (const Value *v : g.state())
    keys[v] = v->stateKind() == StateKind::ScalerState ? seedKey : keyOfName("value", v->name());
  // The graph's order is topological: operands are keyed before users.
  for (const Node &n : g.nodes()) {
    if (n.role() == NodeRole::LossScale) {
      for (unsigned r = 0; r < n.numResults(); ++r)
        keys[n.result(r)] = keyOfName("loss-scale", n.result(r)->name());
      continue;
    }
    if (n.op().kind == OpKind::Cast) {
      keys[n.result()] = keys.lookup(n.operand(0));
      continue;
    }
    if (isUnitSeed(n)) {
      keys[n.result()] = seedKey;
      continue;
    }
    llvm::hash_code key = llvm::hash_value(n.opName());
    for (const Value *operand : n.operands()) {
      if (operand->isResult() && operand->definingNode()->role() == NodeRole::LossScale)
        continue;
      key = llvm::hash_combine(key, keys.lookup(operand));
    }
    for (unsigned r = 0; r < n.numResults(); ++r)
      keys[n.result(r)] = static_cast<uint64_t>(r == 0 ? key : llvm::hash_combine(key, r));
  }
  return keys;
}

} // namespace ampc
