//===- Pooling.cpp - maxpool2d, avgpool2d, global_avgpool -------------------===//
#include "ir/GradientBuilder.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

// The pooled shape of input x ([N, C, H, W]) with PyTorch's floor mode:
// H' = (H + 2p - k) / s + 1. stride [] means stride = kernel.
static bool poolResultDims(InferContext &ctx, const TensorType &x,
                           llvm::SmallVectorImpl<int64_t> &out) {
  if (!requireIntsCount(ctx, "kernel", 2) || !requireIntsCount(ctx, "padding", 2) ||
      !requireGeometryBounds(ctx, {"kernel", "stride", "padding"}))
    return false;
  const std::vector<int64_t> &kernel = ctx.getInts("kernel"), &pad = ctx.getInts("padding");
  std::vector<int64_t> stride = ctx.getInts("stride");
  if (stride.empty())
    stride = kernel;
  else if (!requireIntsCount(ctx, "stride", 2))
    return false;
  out.assign({x.dim(0), x.dim(1)});
  for (unsigned i = 0; i < 2; ++i) {
    if (kernel[i] < 1 || stride[i] < 1)
      return ctx.error("kernel and stride must be >= 1, got kernel " + shapeStr(kernel) +
                       " and stride " + shapeStr(stride));
    if (pad[i] < 0 || pad[i] > kernel[i] / 2)
      return ctx.error("padding " + shapeStr(pad) + " must be >= 0 and at most half of kernel " +
                       shapeStr(kernel));
    int64_t in = x.dim(2 + i);
    // Checked before dividing: C++ division truncates towards zero, which
    // would turn a kernel one larger than the padded input into one output.
    if (in + 2 * pad[i] < kernel[i])
      return ctx.error("kernel " + shapeStr(kernel) + " does not fit input " + typeStr(x) +
                       " with padding " + shapeStr(pad));
    out.push_back((in + 2 * pad[i] - kernel[i]) / stride[i] + 1);
  }
  return true;
}

// maxpool2d / avgpool2d(input[N, C, H, W]) -> [N, C, H', W']
static bool inferPool2d(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 4))
    return false;
  llvm::SmallVector<int64_t, 4> dims;
  if (!poolResultDims(ctx, ctx.operand(0), dims))
    return false;
  results.push_back(TensorType(ctx.operand(0).dtype(), dims));
  return true;
}

// grad_output must have the pooled shape of `inputShape`.
static bool checkPoolGradOutput(InferContext &ctx, llvm::ArrayRef<int64_t> inputShape) {
  if (inputShape.size() != 4)
    return ctx.error("input shape must have 4 dims, got " + shapeStr(inputShape));
  llvm::SmallVector<int64_t, 4> pooled;
  if (!poolResultDims(ctx, TensorType(ctx.operand(0).dtype(), inputShape), pooled))
    return false;
  if (ctx.operand(0).dims() != llvm::ArrayRef<int64_t>(pooled))
    return ctx.error("grad_output " + typeStr(ctx.operand(0)) +
                     " does not match the pooled shape " + shapeStr(pooled));
  return true;
}

// maxpool2d_grad(grad_output[N, C, H', W'], input[N, C, H, W]) -> input's type
static bool inferMaxPool2dGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 1, 4) || !requireSameDType(ctx, 0, 1) ||
      !checkPoolGradOutput(ctx, ctx.operand(1).dims()))
    return false;
  results.push_back(ctx.operand(1));
  return true;
}

// avgpool2d_grad(grad_output[N, C, H', W']) -> [N, C, H, W] = input_shape
static bool inferAvgPool2dGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const std::vector<int64_t> &inputShape = ctx.getInts("input_shape");
  if (!requireFloat(ctx, 0) || !checkPoolGradOutput(ctx, inputShape))
    return false;
  results.push_back(TensorType(ctx.operand(0).dtype(), inputShape));
  return true;
}

// global_avgpool_grad(grad_output[N, C, 1, 1]) -> [N, C, H, W] = input_shape
static bool inferGlobalAvgPoolGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const std::vector<int64_t> &inputShape = ctx.getInts("input_shape");
  if (!requireFloat(ctx, 0))
    return false;
  if (inputShape.size() != 4 || inputShape[2] < 1 || inputShape[3] < 1)
    return ctx.error("input_shape " + shapeStr(inputShape) +
                     " must have 4 dims and spatial elements");
  llvm::SmallVector<int64_t, 4> pooled{inputShape[0], inputShape[1], 1, 1};
  if (ctx.operand(0).dims() != llvm::ArrayRef<int64_t>(pooled))
    return ctx.error("grad_output " + typeStr(ctx.operand(0)) + " must be " + shapeStr(pooled));
  results.push_back(TensorType(ctx.operand(0).dtype(), inputShape));
  return true;
}

// global_avgpool(input[N, C, H, W]) -> [N, C, 1, 1]
static bool inferGlobalAvgPool(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 4))
    return false;
  const TensorType &x = ctx.operand(0);
  if (x.dim(2) < 1 || x.dim(3) < 1)
    return ctx.error("input " + typeStr(x) + " has no spatial elements to average");
  results.push_back(TensorType(x.dtype(), {x.dim(0), x.dim(1), 1, 1}));
  return true;
}

// --- Gradient rules ---------------------------------------------------------

static AttrMap windowAttrs(const Node &fwd) {
  return {{"kernel", fwd.attr("kernel")},
          {"stride", fwd.attr("stride")},
          {"padding", fwd.attr("padding")}};
}

static Attribute shapeAttr(const Value *v) {
  return Attribute(std::vector<int64_t>(v->type().dims().begin(), v->type().dims().end()));
}

// The backward finds each window's maximum again in the input, so no index
// tensor has to be kept from the forward pass.
static void gradMaxPool2d(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                          llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.build1(OpKind::MaxPool2dGrad, {dys[0], fwd.operand(0)}, windowAttrs(fwd));
}

static void gradAvgPool2d(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                          llvm::MutableArrayRef<Value *> dxs) {
  AttrMap attrs = windowAttrs(fwd);
  attrs["count_include_pad"] = fwd.attr("count_include_pad");
  attrs["input_shape"] = shapeAttr(fwd.operand(0));
  dxs[0] = gb.build1(OpKind::AvgPool2dGrad, {dys[0]}, std::move(attrs));
}

static void gradGlobalAvgPool(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                              llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] =
      gb.build1(OpKind::GlobalAvgPoolGrad, {dys[0]}, {{"input_shape", shapeAttr(fwd.operand(0))}});
}

void registerPoolingOps(OpRegistry &r) {
  OpRow(r.define(OpKind::MaxPool2d)).operand("input").infer(inferPool2d).gradient(gradMaxPool2d);
  OpRow(r.define(OpKind::AvgPool2d)).operand("input").infer(inferPool2d).gradient(gradAvgPool2d);
  OpRow(r.define(OpKind::GlobalAvgPool))
      .operand("input")
      .infer(inferGlobalAvgPool)
      .gradient(gradGlobalAvgPool);

  // Backward ops (not differentiated again).
  OpRow(r.define(OpKind::MaxPool2dGrad))
      .operand("grad_output")
      .operand("input")
      .infer(inferMaxPool2dGrad);
  OpRow(r.define(OpKind::AvgPool2dGrad)).operand("grad_output").infer(inferAvgPool2dGrad);
  OpRow(r.define(OpKind::GlobalAvgPoolGrad)).operand("grad_output").infer(inferGlobalAvgPoolGrad);
}

} // namespace ampc
