//===- Loss.cpp - mse_loss, cross_entropy, binary_cross_entropy -------------===//
//
// Every loss reduces to a mean over the batch: the result is a scalar (rank 0)
// in the input's dtype.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

// mse_loss(input, target) and binary_cross_entropy(input, target): the same
// shape and dtype, no broadcasting.
static bool inferPairwiseLoss(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireSameDType(ctx, 0, 1) || !requireSameShape(ctx, 0, 1))
    return false;
  results.push_back(TensorType(ctx.operand(0).dtype(), {}));
  return true;
}

// cross_entropy(input[N, C] logits, target[N] class indices) -> scalar
static bool inferCrossEntropy(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 2) || !requireIndex(ctx, 1) ||
      !requireRank(ctx, 1, 1))
    return false;
  const TensorType &logits = ctx.operand(0), &target = ctx.operand(1);
  if (target.dim(0) != logits.dim(0))
    return ctx.error("target " + typeStr(target) + " must have one label per row of input " +
                     typeStr(logits));
  if (logits.dim(1) < 1)
    return ctx.error("input " + typeStr(logits) + " has no classes");
  double smoothing = ctx.getFloat("label_smoothing");
  if (!(smoothing >= 0 && smoothing <= 1))
    return ctx.error("label_smoothing must be in [0, 1], got " + formatDouble(smoothing));
  results.push_back(TensorType(logits.dtype(), {}));
  return true;
}

void registerLossOps(OpRegistry &r) {
  OpRow(r.define(OpKind::MseLoss)).operand("input").operand("target").infer(inferPairwiseLoss);
  OpRow(r.define(OpKind::CrossEntropy))
      .operand("input")
      .indexOperand("target")
      .attr("ignore_index", AttrType::Int, -100)
      .attr("label_smoothing", AttrType::Float, 0.0)
      .infer(inferCrossEntropy);
  OpRow(r.define(OpKind::BinaryCrossEntropy))
      .operand("input")
      .operand("target")
      .infer(inferPairwiseLoss);
}

} // namespace ampc
