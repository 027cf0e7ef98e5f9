//===- Logic.cpp - compare, logical, logical_not, where ---------------------===//
//
// Masks computed from run-time values: a padding mask from an
// attention_mask input (compare), combined (logical), applied (where).
// Masks built from constants fold when a model is imported and reach the
// graph as bool buffers; these ops are for the rest.
//
//===----------------------------------------------------------------------===//
#include "ir/GradientBuilder.h"
#include "ir/OpAttrs.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

static bool requireBool(InferContext &ctx, unsigned i) {
  if (ctx.operand(i).dtype() != DType::Bool)
    return ctx.error(ctx.op().operands[i].name + " must be bool, got " + typeStr(ctx.operand(i)));
  return true;
}

/// A string attribute must spell a value of enum E (its spellings listed
/// in the message).
template <class E> static bool requireEnum(InferContext &ctx, llvm::StringRef attr) {
  const std::string &spelling = ctx.getString(attr);
  if (attrs::parseEnum<E>(spelling))
    return true;
  std::string allowed;
  for (const auto &e : attrs::EnumTraits<E>::entries)
    allowed += (allowed.empty() ? "" : ", ") + std::string(e.spelling);
  return ctx.error(attr + " must be one of " + allowed + ", got \"" + spelling + "\"");
}

// A bool of the two operands' broadcast shape.
static bool broadcastBool(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  llvm::SmallVector<int64_t, 4> dims;
  if (!broadcastShapes(ctx, ctx.operand(0).dims(), ctx.operand(1).dims(), dims))
    return false;
  results.push_back(TensorType(DType::Bool, dims));
  return true;
}

// compare(a, b) -> bool[broadcast]: a and b of one dtype (the precision pass
// casts float operands of two precisions to the wider).
static bool inferCompare(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  return requireEnum<ComparePredicate>(ctx, "predicate") && requireSameDType(ctx, 0, 1) &&
         broadcastBool(ctx, results);
}

// logical(a: bool, b: bool) -> bool[broadcast]
static bool inferLogical(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  return requireEnum<LogicalOp>(ctx, "op") && requireBool(ctx, 0) && requireBool(ctx, 1) &&
         broadcastBool(ctx, results);
}

// logical_not(a: bool) -> bool
static bool inferLogicalNot(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireBool(ctx, 0))
    return false;
  results.push_back(ctx.operand(0));
  return true;
}

// where(condition: bool, x, y) -> x's dtype, the three shapes broadcast.
static bool inferWhere(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireBool(ctx, 0) || !requireSameDType(ctx, 1, 2))
    return false;
  llvm::SmallVector<int64_t, 4> xy, dims;
  if (!broadcastShapes(ctx, ctx.operand(1).dims(), ctx.operand(2).dims(), xy) ||
      !broadcastShapes(ctx, ctx.operand(0).dims(), xy, dims))
    return false;
  results.push_back(TensorType(ctx.operand(1).dtype(), dims));
  return true;
}

// Each data operand gets the gradient where it was chosen, zero elsewhere,
// summed back over the dims it was broadcast along.
static void gradWhere(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                      llvm::MutableArrayRef<Value *> dxs) {
  Value *dy = dys[0];
  if (!dy)
    return;
  Value *zero = gb.build1(OpKind::Fill, {},
                          {{"value", Attribute(0.0)},
                           {"shape", Attribute(std::vector<int64_t>{})},
                           {"dtype", Attribute(dy->dtype())}});
  Value *cond = fwd.operand(0);
  if (gb.needsGradient(1))
    dxs[1] =
        gb.sumToShape(gb.build1(OpKind::Where, {cond, dy, zero}), fwd.operand(1)->type().dims());
  if (gb.needsGradient(2))
    dxs[2] =
        gb.sumToShape(gb.build1(OpKind::Where, {cond, zero, dy}), fwd.operand(2)->type().dims());
}

void registerLogicOps(OpRegistry &r) {
  // Not differentiable: a bool result carries no gradient.
  OpRow(r.define(OpKind::Compare)).operand("a").operand("b").infer(inferCompare);
  OpRow(r.define(OpKind::Logical)).operand("a").operand("b").infer(inferLogical);
  OpRow(r.define(OpKind::LogicalNot)).operand("a").infer(inferLogicalNot);
  OpRow(r.define(OpKind::Where))
      .indexOperand("condition")
      .operand("x")
      .operand("y")
      .infer(inferWhere)
      .gradient(gradWhere);
}

} // namespace ampc
