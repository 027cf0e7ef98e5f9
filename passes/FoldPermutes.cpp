//===- FoldPermutes.cpp -----------------------------------------------------===//
#include "passes/FoldPermutes.h"

#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace ampc {

namespace {

/// The permute by `dims` that produces `v`, or null.
Node *permuteBy(const Value *v, const std::vector<int64_t> &dims) {
  Node *n = v->definingNode();
  if (!n || n->kind() != OpKind::Permute || attrs::Permute(*n).dims() != dims)
    return nullptr;
  return n;
}

std::vector<int64_t> inverse(const std::vector<int64_t> &dims) {
  std::vector<int64_t> inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inv[static_cast<size_t>(dims[i])] = static_cast<int64_t>(i);
  return inv;
}

/// Whether node `n` can be rebuilt in its permuted form: the attribute has
/// the form's `from` value and every operand is a permute by its dims.
bool foldable(const Node &n, const OpInfo::PermutedForm &form) {
  const Attribute *a = n.findAttr(form.attr);
  if (!a || !a->is(AttrType::String) || a->getString() != form.from || n.numOperands() == 0)
    return false;
  for (const Value *v : n.operands())
    if (!permuteBy(v, form.dims))
      return false;
  return true;
}

/// Points every use of `from`, and the graph's outputs, at `to`.
void replaceEverywhere(Graph &g, Value *from, Value *to) {
  from->replaceAllUsesWith(to);
  std::vector<Value *> outputs = g.outputs();
  for (Value *&o : outputs)
    if (o == from)
      o = to;
  g.setOutputs(std::move(outputs));
}

/// Replaces `old` (foldable) by its permuted form, which keeps its result
/// names. Returns false after reporting a failure.
bool fold(Graph &g, Node *old, const OpInfo::PermutedForm &form, DiagnosticEngine &diag) {
  llvm::SmallVector<Value *, 4> operands;
  llvm::SmallSetVector<Node *, 4> permutes;
  for (Value *v : old->operands()) {
    Node *p = permuteBy(v, form.dims);
    permutes.insert(p);
    operands.push_back(p->operand(0));
  }
  AttrMap attrs = old->attrs();
  attrs[form.attr] = Attribute(form.to);
  Node *folded = buildNode(g, old->op(), operands, std::move(attrs), old->loc(), diag, {}, old);
  if (!folded)
    return false;
  folded->setRole(old->role());
  folded->setPrecisionOverride(old->precisionOverride());
  AttrMap permuteBack;
  permuteBack["dims"] = Attribute(inverse(form.dims));
  // Per result, what takes its name once `old` is gone.
  llvm::SmallVector<std::pair<Value *, std::string>, 2> renames;
  for (unsigned r = 0; r < old->numResults(); ++r) {
    Value *y = old->result(r), *now = folded->result(r);
    // Users that permute y by the form's dims get the new result itself;
    // the rest (and the graph's outputs) a permute of it back to y's layout.
    llvm::SmallVector<Node *, 4> unpermuting;
    bool othersUse = llvm::is_contained(g.outputs(), y);
    for (const Use &u : y->uses()) {
      if (u.user->kind() == OpKind::Permute && attrs::Permute(*u.user).dims() == form.dims)
        unpermuting.push_back(u.user);
      else
        othersUse = true;
    }
    for (Node *p : unpermuting) {
      replaceEverywhere(g, p->result(0), now);
      g.eraseNode(p);
    }
    Value *named = now;
    if (othersUse) {
      Node *restore = buildNode(g, OpRegistry::builtin().get(OpKind::Permute), {now}, permuteBack,
                                old->loc(), diag, {}, old);
      if (!restore)
        return false;
      restore->setRole(old->role());
      replaceEverywhere(g, y, restore->result(0));
      named = restore->result(0);
      g.renameValue(now, g.uniqueName((y->name() + "." + form.to).str()));
    }
    renames.push_back({named, y->name().str()});
  }
  g.eraseNode(old);
  for (auto &[value, name] : renames)
    if (g.isNameFree(name))
      g.renameValue(value, name);
  // The operands' permutes go unless something else reads them.
  for (Node *p : permutes)
    if (!p->result(0)->hasUses() && !llvm::is_contained(g.outputs(), p->result(0)))
      g.eraseNode(p);
  return true;
}

/// Whether `v` is a permute that swaps the last two dims and keeps the rest.
Node *lastTwoSwapped(const Value *v) {
  Node *n = v->definingNode();
  if (!n || n->kind() != OpKind::Permute)
    return nullptr;
  const std::vector<int64_t> &dims = attrs::Permute(*n).dims();
  size_t rank = dims.size();
  if (rank < 2 || dims[rank - 1] != int64_t(rank) - 2 || dims[rank - 2] != int64_t(rank) - 1)
    return nullptr;
  for (size_t d = 0; d + 2 < rank; ++d)
    if (dims[d] != int64_t(d))
      return nullptr;
  return n;
}

/// Reads each of `n`'s operands that is a transposing permute from the
/// permute's input instead (OpInfo::transposedOperands); drops the permutes
/// nothing else reads. Returns whether anything changed.
bool foldTransposes(Graph &g, Node &n) {
  bool changed = false;
  for (const OpInfo::TransposedOperand &t : n.op().transposedOperands) {
    if (t.operand >= n.numOperands())
      continue;
    const Attribute *flag = n.findAttr(t.attr);
    Node *p = lastTwoSwapped(n.operand(t.operand));
    if (!p || (flag && !flag->is(AttrType::Bool)))
      continue;
    n.setOperand(t.operand, p->operand(0));
    n.setAttr(t.attr, Attribute(!(flag && flag->getBool())));
    if (!p->result(0)->hasUses() && !llvm::is_contained(g.outputs(), p->result(0)))
      g.eraseNode(p);
    changed = true;
  }
  return changed;
}

} // namespace

PassResult FoldPermutesPass::run(Graph &g, PassContext &ctx) {
  for (const Node &n : g.nodes())
    if (n.role() == NodeRole::Backward || n.role() == NodeRole::Optimizer) {
      ctx.diag.error(n.loc(), "fold-permutes: the graph already has a backward pass; run "
                              "fold-permutes on the forward graph");
      return PassResult::Failed;
    }
  llvm::SmallVector<Node *, 8> candidates;
  for (Node &n : g.nodes())
    if (n.op().permutedForm && foldable(n, *n.op().permutedForm))
      candidates.push_back(&n);
  for (Node *n : candidates) {
    // An earlier fold may have replaced this node's operand permutes (a
    // permute of an earlier candidate's result).
    if (!foldable(*n, *n->op().permutedForm))
      continue;
    if (!fold(g, n, *n->op().permutedForm, ctx.diag))
      return PassResult::Failed;
  }
  bool transposed = false;
  llvm::SmallVector<Node *, 8> readers;
  for (Node &n : g.nodes())
    if (!n.op().transposedOperands.empty())
      readers.push_back(&n);
  for (Node *n : readers)
    transposed |= foldTransposes(g, *n);
  return candidates.empty() && !transposed ? PassResult::Unchanged : PassResult::Changed;
}

} // namespace ampc
