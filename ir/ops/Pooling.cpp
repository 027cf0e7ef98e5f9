//===- Pooling.cpp - maxpool2d, avgpool2d, global_avgpool -------------------===//
#include "ir/GradientBuilder.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

// The pooled shape of input x ([N, C, H, W]) by PyTorch's rule: with the
// window's span e = (kernel - 1) * dilation + 1,
//   H' = floor_or_ceil((H + pad_top + pad_bottom - e) / stride) + 1,
// and in ceil mode a last window that would start in the bottom padding is
// dropped. stride [] means stride = kernel; padding [ph, pw] pads both
// sides, [top, left, bottom, right] each side (ONNX's order).
static bool poolResultDims(InferContext &ctx, const TensorType &x,
                           llvm::SmallVectorImpl<int64_t> &out) {
  bool hasDilation = ctx.op().findAttr("dilation") != nullptr;
  if (!requireIntsCount(ctx, "kernel", 2) ||
      (hasDilation && !requireIntsCount(ctx, "dilation", 2)) ||
      !requireGeometryBounds(ctx, {"kernel", "stride", "padding"}) ||
      (hasDilation && !requireGeometryBounds(ctx, {"dilation"})))
    return false;
  const std::vector<int64_t> &kernel = ctx.getInts("kernel"), &pad = ctx.getInts("padding");
  if (pad.size() != 2 && pad.size() != 4)
    return ctx.error("padding must have 2 values ([ph, pw]) or 4 ([top, left, bottom, right]), "
                     "got " +
                     shapeStr(pad));
  std::vector<int64_t> stride = ctx.getInts("stride");
  if (stride.empty())
    stride = kernel;
  else if (!requireIntsCount(ctx, "stride", 2))
    return false;
  std::vector<int64_t> dilation =
      hasDilation ? ctx.getInts("dilation") : std::vector<int64_t>{1, 1};
  bool ceilMode = ctx.getBool("ceil_mode");
  out.assign({x.dim(0), x.dim(1)});
  for (unsigned i = 0; i < 2; ++i) {
    if (kernel[i] < 1 || stride[i] < 1 || dilation[i] < 1)
      return ctx.error("kernel, stride and dilation must be >= 1, got kernel " + shapeStr(kernel) +
                       ", stride " + shapeStr(stride) + " and dilation " + shapeStr(dilation));
    int64_t span = (kernel[i] - 1) * dilation[i] + 1;
    int64_t before = pad[i], after = pad.size() == 4 ? pad[2 + i] : pad[i];
    // A pad as wide as the window would make windows of padding alone.
    if (before < 0 || after < 0 || before >= span || after >= span)
      return ctx.error("padding " + shapeStr(pad) +
                       " must be >= 0 and smaller than the window (kernel " + shapeStr(kernel) +
                       (hasDilation ? ", dilation " + shapeStr(dilation) : std::string()) + ")");
    int64_t in = x.dim(2 + i);
    // Checked before dividing: C++ division truncates towards zero, which
    // would turn a kernel one larger than the padded input into one output.
    if (in + before + after < span)
      return ctx.error("kernel " + shapeStr(kernel) + " does not fit input " + typeStr(x) +
                       " with padding " + shapeStr(pad));
    int64_t room = in + before + after - span;
    int64_t size = (ceilMode ? (room + stride[i] - 1) / stride[i] : room / stride[i]) + 1;
    if (ceilMode && (size - 1) * stride[i] >= in + before)
      --size;
    out.push_back(size);
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

/// The window attributes a backward op takes from its forward node.
static AttrMap windowAttrs(const Node &fwd) {
  AttrMap attrs;
  for (llvm::StringRef name : {"kernel", "stride", "padding", "dilation", "ceil_mode"})
    if (const Attribute *a = fwd.findAttr(name))
      attrs[name] = *a;
  return attrs;
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
