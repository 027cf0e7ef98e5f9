//===- GradientBuilder.cpp --------------------------------------------------===//
#include "ir/GradientBuilder.h"

#include "ir/Builder.h"

namespace ampc {

llvm::SmallVector<Value *, 3> GradientBuilder::build(OpKind kind, llvm::ArrayRef<Value *> operands,
                                                     AttrMap attrs) {
  return build(OpRegistry::builtin().get(kind), operands, std::move(attrs));
}

llvm::SmallVector<Value *, 3>
GradientBuilder::build(const OpInfo &op, llvm::ArrayRef<Value *> operands, AttrMap attrs) {
  Location loc = forward_ ? forward_->loc() : Location();
  for (Value *v : operands)
    if (!v) {
      diag_.error(loc, "gradient of " + (forward_ ? forward_->opName() : "?") + ": " + op.name +
                           " was given a missing operand");
      failed_ = true;
      return {};
    }
  // Gradient rules often pass the forward node's attributes on; its
  // annotations (the precision decision) describe the forward node only.
  for (auto it = attrs.begin(); it != attrs.end();)
    it = isAnnotationAttr(it->first) ? attrs.erase(it) : std::next(it);
  Node *n = buildNode(g_, op, operands, std::move(attrs), loc, diag_);
  if (!n) {
    diag_.note(loc, "while building the gradient of " +
                        (forward_ ? forward_->opName() : llvm::StringRef("?")));
    failed_ = true;
    return {};
  }
  n->setRole(NodeRole::Backward);
  llvm::SmallVector<Value *, 3> results;
  for (unsigned i = 0; i < n->numResults(); ++i)
    results.push_back(n->result(i));
  return results;
}

Value *GradientBuilder::build1(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs) {
  auto results = build(kind, operands, std::move(attrs));
  return results.empty() ? nullptr : results[0];
}

Value *GradientBuilder::sumToShape(Value *grad, llvm::ArrayRef<int64_t> shape) {
  if (!grad)
    return nullptr;
  llvm::ArrayRef<int64_t> have = grad->type().dims();
  if (have == shape)
    return grad;
  // Broadcasting aligned the shapes at the right: sum the leading extra dims
  // and every dim that was 1 in `shape` but is not in the gradient.
  size_t extra = have.size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < have.size(); ++i)
    if (i < extra || (shape[i - extra] == 1 && have[i] != 1))
      dims.push_back(static_cast<int64_t>(i));
  Value *summed = build1(OpKind::ReduceSum, {grad}, {{"dims", Attribute(dims)}});
  if (!summed || summed->type().dims() == shape)
    return summed;
  return reshape(summed, shape);
}

Value *GradientBuilder::reshape(Value *v, llvm::ArrayRef<int64_t> shape) {
  if (!v || v->type().dims() == shape)
    return v;
  return build1(OpKind::Reshape, {v},
                {{"shape", Attribute(std::vector<int64_t>(shape.begin(), shape.end()))}});
}

Value *GradientBuilder::castTo(Value *v, DType t) {
  if (!v || v->dtype() == t)
    return v;
  return build1(OpKind::Cast, {v}, {{"to", Attribute(t)}});
}

Value *GradientBuilder::scale(Value *v, double factor) {
  if (!v)
    return nullptr;
  return build1(OpKind::Scale, {v}, {{"factor", Attribute(factor)}});
}

Value *GradientBuilder::add(Value *a, Value *b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return build1(OpKind::Add, {a, b});
}

} // namespace ampc
