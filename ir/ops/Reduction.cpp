//===- Reduction.cpp - reduce_sum, fill ------------------------------------===//
#include "ir/GradientBuilder.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

#include "llvm/ADT/SmallBitVector.h"

namespace ampc {
using namespace infer;

// reduce_sum(input) over `dims` (empty = all), keeping them as 1s if keepdim.
// Accumulates in f32 for half inputs; the result keeps the input's dtype.
static bool inferReduceSum(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0))
    return false;
  const TensorType &x = ctx.operand(0);
  llvm::SmallBitVector reduced(x.rank(), ctx.getInts("dims").empty());
  for (int64_t d : ctx.getInts("dims")) {
    unsigned axis;
    if (!normalizeAxis(ctx, d, x.rank(), axis))
      return false;
    if (reduced[axis])
      return ctx.error("dim " + llvm::Twine(d) + " is listed twice");
    reduced.set(axis);
  }
  bool keep = ctx.getBool("keepdim");
  llvm::SmallVector<int64_t, 4> dims;
  for (unsigned i = 0; i < x.rank(); ++i) {
    if (!reduced[i])
      dims.push_back(x.dim(i));
    else if (keep)
      dims.push_back(1);
  }
  results.push_back(TensorType(x.dtype(), dims));
  return true;
}

// fill() -> a tensor of `shape` and `dtype` holding `value` everywhere.
static bool inferFill(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  for (int64_t d : ctx.getInts("shape"))
    if (d < 0)
      return ctx.error("shape " + shapeStr(ctx.getInts("shape")) + " has a negative dim");
  results.push_back(TensorType(ctx.getDType("dtype"), ctx.getInts("shape")));
  return true;
}

// Every summed element gets the gradient of its sum: dy reshaped to the
// keepdim shape (1 in each reduced dim), then broadcast to the input's shape.
static void gradReduceSum(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                          llvm::MutableArrayRef<Value *> dxs) {
  const TensorType &x = fwd.operand(0)->type();
  const std::vector<int64_t> &axes = fwd.attr("dims").getInts();
  llvm::SmallBitVector reduced(x.rank(), axes.empty());
  for (int64_t d : axes)
    reduced.set(static_cast<unsigned>(d < 0 ? d + x.rank() : d));
  std::vector<int64_t> keptDims;
  for (unsigned i = 0; i < x.rank(); ++i)
    keptDims.push_back(reduced[i] ? 1 : x.dim(i));
  Value *kept = gb.reshape(dys[0], keptDims);
  if (!kept)
    return;
  if (kept->type().dims() == x.dims()) {
    dxs[0] = kept;
    return;
  }
  std::vector<int64_t> shape(x.dims().begin(), x.dims().end());
  dxs[0] = gb.build1(OpKind::BroadcastTo, {kept}, {{"shape", Attribute(shape)}});
}

void registerReductionOps(OpRegistry &r) {
  OpRow(r.define(OpKind::ReduceSum))
      .operand("input")
      .attr("dims", AttrType::Ints, std::vector<int64_t>{})
      .attr("keepdim", AttrType::Bool, false)
      .infer(inferReduceSum)
      .gradient(gradReduceSum);
  // fill has no operands, so nothing to differentiate.
  OpRow(r.define(OpKind::Fill))
      .attr("value", AttrType::Float, 0.0)
      .attr("shape", AttrType::Ints, std::vector<int64_t>{})
      .attr("dtype", AttrType::DType, DType::F32)
      .infer(inferFill);
}

} // namespace ampc
