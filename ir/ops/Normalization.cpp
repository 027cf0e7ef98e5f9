//===- Normalization.cpp - batchnorm2d, layernorm ---------------------------===//
#include "ir/GradientBuilder.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

// batchnorm2d(input[N, C, H, W], weight[C], bias[C], running_mean[C], running_var[C])
//   training: -> y, new_running_mean[C], new_running_var[C]
//   eval:     -> y
// The four per-channel operands may stay f32 when the input is half (cuDNN and
// Apex's keep_batchnorm_fp32 both want that); the new statistics keep the
// dtype of the old ones so the state update is type-preserving.
static bool inferBatchNorm2d(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 4))
    return false;
  const TensorType &x = ctx.operand(0);
  int64_t channels = x.dim(1);
  for (unsigned i = 1; i < 5; ++i)
    if (!requireParam(ctx, i, 0, {channels}))
      return false;
  double eps = ctx.getFloat("eps"), momentum = ctx.getFloat("momentum");
  if (!(eps >= 0))
    return ctx.error("eps must be >= 0, got " + formatDouble(eps));
  if (!(momentum >= 0 && momentum <= 1))
    return ctx.error("momentum must be in [0, 1], got " + formatDouble(momentum));
  results.push_back(x);
  if (ctx.getBool("training")) {
    results.push_back(ctx.operand(3));
    results.push_back(ctx.operand(4));
  }
  return true;
}

// layernorm(input[..., D...], weight[D...], bias[D...]) -> input's type, where
// D... are the last `normalized_dims` dims (PyTorch's normalized_shape).
static bool inferLayerNorm(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0))
    return false;
  const TensorType &x = ctx.operand(0);
  int64_t normalizedDims = ctx.getInt("normalized_dims");
  if (normalizedDims < 1 || normalizedDims > static_cast<int64_t>(x.rank()))
    return ctx.error("normalized_dims " + llvm::Twine(normalizedDims) +
                     " must be between 1 and the rank of input " + typeStr(x));
  if (!(ctx.getFloat("eps") >= 0))
    return ctx.error("eps must be >= 0, got " + formatDouble(ctx.getFloat("eps")));
  llvm::ArrayRef<int64_t> normalized = x.dims().take_back(normalizedDims);
  if (!requireParam(ctx, 1, 0, normalized) || !requireParam(ctx, 2, 0, normalized))
    return false;
  results.push_back(x);
  return true;
}

// batchnorm2d_grad(grad_output[N, C, H, W], input[N, C, H, W], weight[C],
//                  running_mean[C], running_var[C])
//   -> grad_input (input's type), grad_weight, grad_bias (weight's type)
// Training mode differentiates through the batch statistics (recomputed from
// the input); eval mode normalizes with the running statistics, which are
// then constants. The running statistics are read only in eval mode.
static bool inferBatchNorm2dGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 1) || !requireRank(ctx, 1, 4) || !requireSameDType(ctx, 0, 1) ||
      !requireSameShape(ctx, 0, 1))
    return false;
  int64_t channels = ctx.operand(1).dim(1);
  for (unsigned i = 2; i < 5; ++i)
    if (!requireParam(ctx, i, 1, {channels}))
      return false;
  if (!(ctx.getFloat("eps") >= 0))
    return ctx.error("eps must be >= 0, got " + formatDouble(ctx.getFloat("eps")));
  results.push_back(ctx.operand(1));
  results.push_back(ctx.operand(2));
  results.push_back(ctx.operand(2));
  return true;
}

// layernorm_grad(grad_output, input, weight)
//   -> grad_input (input's type), grad_weight, grad_bias (weight's type)
static bool inferLayerNormGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 1) || !requireSameDType(ctx, 0, 1) || !requireSameShape(ctx, 0, 1))
    return false;
  const TensorType &x = ctx.operand(1);
  int64_t normalizedDims = ctx.getInt("normalized_dims");
  if (normalizedDims < 1 || normalizedDims > static_cast<int64_t>(x.rank()))
    return ctx.error("normalized_dims " + llvm::Twine(normalizedDims) +
                     " must be between 1 and the rank of input " + typeStr(x));
  if (!(ctx.getFloat("eps") >= 0))
    return ctx.error("eps must be >= 0, got " + formatDouble(ctx.getFloat("eps")));
  if (!requireParam(ctx, 2, 1, x.dims().take_back(normalizedDims)))
    return false;
  results.push_back(x);
  results.push_back(ctx.operand(2));
  results.push_back(ctx.operand(2));
  return true;
}

// --- Gradient rules ---------------------------------------------------------

// Only result 0 is differentiated: the new running statistics are state
// updates, not functions anything downstream differentiates. The running
// statistics themselves get no gradient (they are buffers, not parameters).
static void gradBatchNorm2d(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                            llvm::MutableArrayRef<Value *> dxs) {
  if (!dys[0])
    return;
  auto grads = gb.build(OpKind::BatchNorm2dGrad,
                        {dys[0], fwd.operand(0), fwd.operand(1), fwd.operand(3), fwd.operand(4)},
                        {{"eps", fwd.attr("eps")}, {"training", fwd.attr("training")}});
  if (grads.empty())
    return;
  for (unsigned i = 0; i < 3; ++i)
    if (gb.needsGradient(i))
      dxs[i] = grads[i];
}

static void gradLayerNorm(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                          llvm::MutableArrayRef<Value *> dxs) {
  auto grads =
      gb.build(OpKind::LayerNormGrad, {dys[0], fwd.operand(0), fwd.operand(1)},
               {{"normalized_dims", fwd.attr("normalized_dims")}, {"eps", fwd.attr("eps")}});
  if (grads.empty())
    return;
  for (unsigned i = 0; i < 3; ++i)
    if (gb.needsGradient(i))
      dxs[i] = grads[i];
}

void registerNormalizationOps(OpRegistry &r) {
  OpRow(r.define(OpKind::BatchNorm2d))
      .operand("input")
      .fp32Operand("weight")
      .fp32Operand("bias")
      .fp32Operand("running_mean")
      .fp32Operand("running_var")
      .updatesStateInPlace()
      .infer(inferBatchNorm2d)
      .gradient(gradBatchNorm2d);
  OpRow(r.define(OpKind::LayerNorm))
      .operand("input")
      .operand("weight")
      .operand("bias")
      .infer(inferLayerNorm)
      .gradient(gradLayerNorm);

  // Backward ops (not differentiated again).
  OpRow(r.define(OpKind::BatchNorm2dGrad))
      .operand("grad_output")
      .operand("input")
      .fp32Operand("weight")
      .fp32Operand("running_mean")
      .fp32Operand("running_var")
      .infer(inferBatchNorm2dGrad);
  OpRow(r.define(OpKind::LayerNormGrad))
      .operand("grad_output")
      .operand("input")
      .operand("weight")
      .infer(inferLayerNormGrad);
}

} // namespace ampc
