//===- Loss.cpp - mse_loss, cross_entropy, binary_cross_entropy -------------===//
//
// Every loss reduces to a mean over the batch: the result is a scalar (rank 0)
// in the input's dtype.
//
//===----------------------------------------------------------------------===//
#include "ir/GradientBuilder.h"
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

//===----------------------------------------------------------------------===//
// Backward ops: (grad, input, target) -> a gradient of input's type, where
// grad is the loss's scalar gradient.
//===----------------------------------------------------------------------===//

/// grad must be a scalar of the input's dtype.
static bool requireScalarGrad(InferContext &ctx) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 0) || !requireSameDType(ctx, 0, 1))
    return false;
  return true;
}

static bool inferPairwiseLossGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireScalarGrad(ctx) || !requireFloat(ctx, 1) || !requireSameDType(ctx, 1, 2) ||
      !requireSameShape(ctx, 1, 2))
    return false;
  results.push_back(ctx.operand(1));
  return true;
}

static bool inferCrossEntropyGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireScalarGrad(ctx) || !requireFloat(ctx, 1) || !requireRank(ctx, 1, 2) ||
      !requireIndex(ctx, 2) || !requireRank(ctx, 2, 1))
    return false;
  const TensorType &logits = ctx.operand(1), &target = ctx.operand(2);
  if (target.dim(0) != logits.dim(0))
    return ctx.error("target " + typeStr(target) + " must have one label per row of input " +
                     typeStr(logits));
  double smoothing = ctx.getFloat("label_smoothing");
  if (!(smoothing >= 0 && smoothing <= 1))
    return ctx.error("label_smoothing must be in [0, 1], got " + formatDouble(smoothing));
  results.push_back(logits);
  return true;
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

// d/d input = 2 (input - target) dy / n; d/d target is its negation.
static void gradMseLoss(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                        llvm::MutableArrayRef<Value *> dxs) {
  Value *inputGrad = gb.build1(OpKind::MseLossGrad, {dys[0], fwd.operand(0), fwd.operand(1)});
  if (gb.needsGradient(0))
    dxs[0] = inputGrad;
  if (gb.needsGradient(1))
    dxs[1] = gb.scale(inputGrad, -1.0);
}

// Only the logits get a gradient; labels are integral.
static void gradCrossEntropy(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                             llvm::MutableArrayRef<Value *> dxs) {
  if (!gb.needsGradient(0))
    return;
  dxs[0] =
      gb.build1(OpKind::CrossEntropyGrad, {dys[0], fwd.operand(0), fwd.operand(1)}, fwd.attrs());
}

static void gradBinaryCrossEntropy(GradientBuilder &gb, const Node &fwd,
                                   llvm::ArrayRef<Value *> dys,
                                   llvm::MutableArrayRef<Value *> dxs) {
  if (gb.needsGradient(0))
    dxs[0] =
        gb.build1(OpKind::BinaryCrossEntropyGradInput, {dys[0], fwd.operand(0), fwd.operand(1)});
  if (gb.needsGradient(1))
    dxs[1] =
        gb.build1(OpKind::BinaryCrossEntropyGradTarget, {dys[0], fwd.operand(0), fwd.operand(1)});
}

void registerLossOps(OpRegistry &r) {
  OpRow(r.define(OpKind::MseLoss))
      .operand("input")
      .operand("target")
      .infer(inferPairwiseLoss)
      .gradient(gradMseLoss);
  OpRow(r.define(OpKind::CrossEntropy))
      .operand("input")
      .indexOperand("target")
      .infer(inferCrossEntropy)
      .gradient(gradCrossEntropy);
  OpRow(r.define(OpKind::BinaryCrossEntropy))
      .operand("input")
      .operand("target")
      .infer(inferPairwiseLoss)
      .gradient(gradBinaryCrossEntropy);
  // Backward ops (not differentiated again).
  OpRow(r.define(OpKind::MseLossGrad))
      .operand("grad")
      .operand("input")
      .operand("target")
      .infer(inferPairwiseLossGrad);
  OpRow(r.define(OpKind::CrossEntropyGrad))
      .operand("grad")
      .operand("input")
      .indexOperand("target")
      .infer(inferCrossEntropyGrad);
  OpRow(r.define(OpKind::BinaryCrossEntropyGradInput))
      .operand("grad")
      .operand("input")
      .operand("target")
      .infer(inferPairwiseLossGrad);
  OpRow(r.define(OpKind::BinaryCrossEntropyGradTarget))
      .operand("grad")
      .operand("input")
      .operand("target")
      .infer(inferPairwiseLossGrad);
}

} // namespace ampc
