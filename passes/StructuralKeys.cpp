//===- StructuralKeys.cpp ---------------------------------------------------===//
#include "passes/StructuralKeys.h"

#include "ir/OpAttrs.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/Hashing.h"

#include <bit>

namespace ampc {

namespace {
uint64_t keyOfName(llvm::StringRef kind, llvm::StringRef name) {
  return static_cast<uint64_t>(llvm::hash_combine(kind, name));
}

/// Autodiff's seed d(loss)/d(loss): a scalar fill of 1 with no operands in
/// the backward pass. Under loss scaling the scaler's scale stands in for
/// it. (A scalar fill of 0 is another quantity: the gradient of a constant
/// operand, where's -inf in a causal mask.)
bool isUnitSeed(const Node &n) {
  return n.role() == NodeRole::Backward && n.op().kind == OpKind::Fill && n.numOperands() == 0 &&
         n.numResults() == 1 && n.result()->type().rank() == 0 && attrs::Fill(n).value() == 1.0;
}

llvm::hash_code hashAttribute(const Attribute &a) {
  auto bits = [](double d) { return std::bit_cast<uint64_t>(d); };
  switch (a.type()) {
  case AttrType::Int:
    return llvm::hash_combine(0, a.getInt());
  case AttrType::Float:
    return llvm::hash_combine(1, bits(a.getFloat()));
  case AttrType::Bool:
    return llvm::hash_combine(2, a.getBool());
  case AttrType::String:
    return llvm::hash_combine(3, llvm::StringRef(a.getString()));
  case AttrType::Ints:
    return llvm::hash_combine(4, llvm::hash_combine_range(a.getInts().begin(), a.getInts().end()));
  case AttrType::Floats: {
    llvm::hash_code h = llvm::hash_value(5);
    for (double d : a.getFloats())
      h = llvm::hash_combine(h, bits(d));
    return h;
  }
  case AttrType::DType:
    break;
  }
  return llvm::hash_value(6);
}

/// What a node computes from its operands: its op and the attributes its op
/// declares (as set, or by default). Annotations the passes add (the
/// precision decision, a cast's cacheability) are not declared and do not
/// count. Nor does a dtype attribute (a fill's): it is the level's
/// precision, which is what the two levels differ in, not which quantity
/// the node computes.
llvm::hash_code hashOpAndAttributes(const Node &n) {
  llvm::hash_code key = llvm::hash_value(n.opName());
  for (const AttrSpec &spec : n.op().attrs) {
    if (spec.type == AttrType::DType)
      continue;
    const Attribute *a = n.findAttr(spec.name);
    if (!a && spec.defaultValue)
      a = &*spec.defaultValue;
    key = llvm::hash_combine(key, llvm::StringRef(spec.name),
                             a ? hashAttribute(*a) : llvm::hash_value(7));
  }
  return key;
}
} // namespace

llvm::DenseMap<const Value *, uint64_t> computeStructuralKeys(const Graph &g) {
  const uint64_t seedKey = keyOfName("seed", "");
  llvm::DenseMap<const Value *, uint64_t> keys;
  // How many nodes before have had each key: the k-th node computing the
  // same thing as others pairs with the k-th at the other level.
  llvm::DenseMap<uint64_t, unsigned> seen;
  for (const Value *v : g.inputs())
    keys[v] = keyOfName("value", v->name());
  // With a loss scaler per loss term (amp.num_losses), term k's seed is
  // the k-th unit fill at O0 and %loss_scale.<k>.scale under scaling: both
  // get the k-th seed key, so they pair.
  auto kthSeedKey = [&](unsigned k) {
    return k == 0 ? seedKey : static_cast<uint64_t>(llvm::hash_combine(seedKey, k));
  };
  auto scalerTerm = [](llvm::StringRef name) -> unsigned {
    unsigned k = 0;
    if (name.consume_front("loss_scale.") && name.consume_back(".scale") &&
        !name.getAsInteger(10, k))
      return k;
    return 0;
  };
  for (const Value *v : g.state())
    keys[v] = v->stateKind() == StateKind::ScalerState ? kthSeedKey(scalerTerm(v->name()))
                                                       : keyOfName("value", v->name());
  unsigned seeds = 0;
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
      keys[n.result()] = kthSeedKey(seeds++);
      continue;
    }
    llvm::hash_code key = hashOpAndAttributes(n);
    for (const Value *operand : n.operands()) {
      if (operand->isResult() && operand->definingNode()->role() == NodeRole::LossScale)
        continue;
      key = llvm::hash_combine(key, keys.lookup(operand));
    }
    if (unsigned earlier = seen[static_cast<uint64_t>(key)]++)
      key = llvm::hash_combine(key, llvm::StringRef("repeat"), earlier);
    for (unsigned r = 0; r < n.numResults(); ++r)
      keys[n.result(r)] = static_cast<uint64_t>(r == 0 ? key : llvm::hash_combine(key, r));
  }
  return keys;
}

} // namespace ampc
