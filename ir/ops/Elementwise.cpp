//===- Elementwise.cpp - add, sub, mul, div, scale --------------------------===//
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

// Binary arithmetic with numpy broadcasting. The dtypes must already agree:
// mixing them is the precision pass's job (it inserts casts to the widest).
static bool inferBinary(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireFloat(ctx, 1) || !requireSameDType(ctx, 0, 1))
    return false;
  llvm::SmallVector<int64_t, 4> dims;
  if (!broadcastShapes(ctx, ctx.operand(0).dims(), ctx.operand(1).dims(), dims))
    return false;
  results.push_back(TensorType(ctx.operand(0).dtype(), dims));
  return true;
}

void registerElementwiseOps(OpRegistry &r) {
  for (OpKind kind : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div})
    OpRow(r.define(kind)).operand("a").operand("b").infer(inferBinary);
  // scale(x) = x * factor, a constant known when the graph is built.
  OpRow(r.define(OpKind::Scale))
      .operand("input")
      .attr("factor", AttrType::Float)
      .infer(inferUnaryFloat);
}

} // namespace ampc
