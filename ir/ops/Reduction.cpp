//===- Reduction.cpp - reduce_sum/mean/max/min, argmax, fill ----------------===//
#include "ir/GradientBuilder.h"
#include "ir/OpAttrs.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

#include "llvm/ADT/SmallBitVector.h"

namespace ampc {
using namespace infer;

// reduce_sum / reduce_mean (input) over `dims` (empty = all), keeping them
// as 1s if keepdim. Accumulates in f32 for half inputs; the result keeps the
// input's dtype.
static bool inferReduce(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
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

/// The dims a reduction node reduces.
static llvm::SmallBitVector reducedDims(const Node &fwd) {
  const TensorType &x = fwd.operand(0)->type();
  const std::vector<int64_t> &axes = attrs::ReduceSum(fwd).dims();
  llvm::SmallBitVector reduced(x.rank(), axes.empty());
  for (int64_t d : axes)
    reduced.set(static_cast<unsigned>(d < 0 ? d + x.rank() : d));
  return reduced;
}

/// `g` (the reduction's result shape) reshaped to the keepdim shape (1 in
/// each reduced dim), then broadcast to the input's shape.
static Value *broadcastToInput(GradientBuilder &gb, const Node &fwd, Value *g) {
  const TensorType &x = fwd.operand(0)->type();
  llvm::SmallBitVector reduced = reducedDims(fwd);
  std::vector<int64_t> keptDims;
  for (unsigned i = 0; i < x.rank(); ++i)
    keptDims.push_back(reduced[i] ? 1 : x.dim(i));
  Value *kept = g ? gb.reshape(g, keptDims) : nullptr;
  if (!kept || kept->type().dims() == x.dims())
    return kept;
  std::vector<int64_t> shape(x.dims().begin(), x.dims().end());
  return gb.build1(OpKind::BroadcastTo, {kept}, {{"shape", Attribute(shape)}});
}

// Every summed element gets the gradient of its sum.
static void gradReduceSum(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                          llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = broadcastToInput(gb, fwd, dys[0]);
}

// Every averaged element gets 1/count of the gradient of its mean. The scale
// comes before the broadcast, on fewer elements (PyTorch divides after it:
// the two differ by a rounding where 1/count is inexact).
static void gradReduceMean(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                           llvm::MutableArrayRef<Value *> dxs) {
  const TensorType &x = fwd.operand(0)->type();
  llvm::SmallBitVector reduced = reducedDims(fwd);
  int64_t count = 1;
  for (unsigned i = 0; i < x.rank(); ++i)
    if (reduced[i])
      count *= x.dim(i);
  // count == 0: the input, and so its gradient, is empty.
  Value *scaled = count > 1 ? gb.scale(dys[0], 1.0 / static_cast<double>(count)) : dys[0];
  dxs[0] = broadcastToInput(gb, fwd, scaled);
}

// The extremum's gradient goes to the elements equal to it, shared among
// ties (torch.amax's rule).
static void gradReduceExtremum(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                               llvm::MutableArrayRef<Value *> dxs) {
  if (!dys[0])
    return;
  dxs[0] = gb.build1(OpKind::ReduceSelectGrad, {dys[0], fwd.operand(0), fwd.result()},
                     {{"dims", fwd.attr("dims")}, {"keepdim", fwd.attr("keepdim")}});
}

// reduce_select_grad(grad: reduced shape, input, result: reduced shape) ->
// input's type.
static bool inferReduceSelectGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireSameDType(ctx, 0, 1) || !requireSameDType(ctx, 0, 2) ||
      !requireSameShape(ctx, 0, 2))
    return false;
  InferContext reduce(ctx.op(), ctx.operands().slice(1, 1), ctx.attrs());
  llvm::SmallVector<TensorType, 1> reduced;
  if (!inferReduce(reduce, reduced))
    return ctx.error(reduce.errorMessage());
  if (reduced.front().dims() != ctx.operand(0).dims())
    return ctx.error("grad " + typeStr(ctx.operand(0)) + " is not the reduced shape of input " +
                     typeStr(ctx.operand(1)));
  results.push_back(ctx.operand(1));
  return true;
}

// argmax(input) -> i64: the index of the (first, or last) largest element
// along dim.
static bool inferArgMax(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0))
    return false;
  const TensorType &x = ctx.operand(0);
  unsigned axis;
  if (!normalizeAxis(ctx, ctx.getInt("dim"), x.rank(), axis))
    return false;
  if (x.dim(axis) < 1)
    return ctx.error("dim " + llvm::Twine(ctx.getInt("dim")) + " of " + typeStr(x) +
                     " is empty: it has no largest element");
  llvm::SmallVector<int64_t, 4> dims;
  for (unsigned i = 0; i < x.rank(); ++i) {
    if (i != axis)
      dims.push_back(x.dim(i));
    else if (ctx.getBool("keepdim"))
      dims.push_back(1);
  }
  results.push_back(TensorType(DType::I64, dims));
  return true;
}

void registerReductionOps(OpRegistry &r) {
  OpRow(r.define(OpKind::ReduceSum)).operand("input").infer(inferReduce).gradient(gradReduceSum);
  // reduce_mean: reduce_sum's kernels, each sum divided by its count.
  OpRow(r.define(OpKind::ReduceMean)).operand("input").infer(inferReduce).gradient(gradReduceMean);
  // fill has no operands, so nothing to differentiate.
  OpRow(r.define(OpKind::Fill)).infer(inferFill);
  OpRow(r.define(OpKind::ReduceMax))
      .operand("input")
      .infer(inferReduce)
      .gradient(gradReduceExtremum);
  OpRow(r.define(OpKind::ReduceMin))
      .operand("input")
      .infer(inferReduce)
      .gradient(gradReduceExtremum);
  // argmax: an index, not differentiable.
  OpRow(r.define(OpKind::ArgMax)).operand("input").infer(inferArgMax);
  // Backward op (not differentiated again).
  OpRow(r.define(OpKind::ReduceSelectGrad))
      .operand("grad")
      .operand("input")
      .operand("result")
      .infer(inferReduceSelectGrad);
}

} // namespace ampc
