//===- WidenToF64.cpp -------------------------------------------------------===//
#include "passes/WidenToF64.h"

#include "passes/InferTypes.h"

namespace ampc {

namespace {
bool widen(Value &v) {
  if (v.dtype() != DType::F32)
    return false;
  v.setType(TensorType(DType::F64, v.type().dims()));
  return true;
}
} // namespace

PassResult WidenToF64Pass::run(Graph &g, PassContext &ctx) {
  bool changed = false;
  for (Value *v : g.inputs())
    changed |= widen(*v);
  for (Value *v : g.state())
    changed |= widen(*v);
  for (Node &n : g.nodes())
    for (const auto &[name, attr] : n.attrs())
      if (attr.is(AttrType::DType) && attr.getDType() == DType::F32) {
        n.setAttr(name, Attribute(DType::F64));
        changed = true;
      }
  // Every result follows its operands (and the attributes just changed).
  PassResult inferred = InferTypesPass().run(g, ctx);
  if (inferred == PassResult::Failed)
    return inferred;
  return changed || inferred == PassResult::Changed ? PassResult::Changed : PassResult::Unchanged;
}

} // namespace ampc
