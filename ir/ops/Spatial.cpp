//===- Spatial.cpp - pad, resize and their backward ops --------------------===//
//
// pad (ONNX Pad): constant, reflect or edge padding of every dim, a negative
// pad cropping (constant mode only). resize (ONNX Resize): nearest,
// (bi)linear or (bi)cubic resizing of the H and W dims of [N, C, H, W], with
// ONNX's coordinate mappings. Index maps: kernels/common/ResampleMath.h.
//
//===----------------------------------------------------------------------===//
#include "ir/GradientBuilder.h"
#include "ir/OpAttrs.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

namespace ampc {
using namespace infer;

// --- pad ----------------------------------------------------------------------

// The padded dims of `in`: dim d grows by pads[d] before and pads[rank + d]
// after.
static bool paddedDims(InferContext &ctx, llvm::ArrayRef<int64_t> in,
                       llvm::SmallVectorImpl<int64_t> &out) {
  const std::string &modeName = attrs::Pad(ctx.attrs()).modeAttr().getString();
  std::optional<PadMode> mode = attrs::parseEnum<PadMode>(modeName);
  if (!mode)
    return ctx.error("mode must be \"constant\", \"reflect\" or \"edge\", got \"" + modeName +
                     "\"");
  const std::vector<int64_t> &pads = ctx.getInts("pads");
  size_t rank = in.size();
  if (pads.size() != 2 * rank)
    return ctx.error("pads must have 2 values per dim (" + llvm::Twine(2 * rank) + " for a rank-" +
                     llvm::Twine(rank) + " input), got " + shapeStr(pads));
  if (!requireGeometryBounds(ctx, {"pads"}))
    return false;
  out.clear();
  for (size_t d = 0; d < rank; ++d) {
    int64_t before = pads[d], after = pads[rank + d];
    if (*mode != PadMode::Constant && (before < 0 || after < 0))
      return ctx.error("negative pads " + shapeStr(pads) + " (cropping) need mode \"constant\"");
    if (-before > in[d] || -after > in[d] || in[d] + before + after < 0)
      return ctx.error("pads " + shapeStr(pads) + " crop more than dim " + llvm::Twine(d) + " of " +
                       shapeStr(in) + " holds");
    if (*mode == PadMode::Reflect &&
        ((before > 0 && before >= in[d]) || (after > 0 && after >= in[d])))
      return ctx.error("reflect pads " + shapeStr(pads) + " must be smaller than dim " +
                       llvm::Twine(d) + " of " + shapeStr(in));
    if (*mode == PadMode::Edge && in[d] == 0 && (before > 0 || after > 0))
      return ctx.error("edge padding needs elements to repeat, dim " + llvm::Twine(d) + " of " +
                       shapeStr(in) + " has none");
    out.push_back(in[d] + before + after);
  }
  return true;
}

// pad(input) -> input's dtype, padded dims. Any dtype: the elements move.
static bool inferPad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  llvm::SmallVector<int64_t, 4> dims;
  if (!paddedDims(ctx, ctx.operand(0).dims(), dims))
    return false;
  results.push_back(TensorType(ctx.operand(0).dtype(), dims));
  return true;
}

// pad_grad(grad_output) -> the forward input's shape (grad_output's dims
// less the pads), which must pad back to grad_output's.
static bool inferPadGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0))
    return false;
  const TensorType &dy = ctx.operand(0);
  const std::vector<int64_t> &pads = ctx.getInts("pads");
  size_t rank = dy.rank();
  if (pads.size() != 2 * rank)
    return ctx.error("pads must have 2 values per dim of grad_output " + typeStr(dy) + ", got " +
                     shapeStr(pads));
  if (!requireGeometryBounds(ctx, {"pads"}))
    return false;
  llvm::SmallVector<int64_t, 4> in, padded;
  for (size_t d = 0; d < rank; ++d)
    in.push_back(dy.dim(d) - pads[d] - pads[rank + d]);
  if (llvm::any_of(in, [](int64_t v) { return v < 0; }))
    return ctx.error("grad_output " + typeStr(dy) + " is smaller than its pads " + shapeStr(pads));
  if (!paddedDims(ctx, in, padded))
    return false;
  results.push_back(TensorType(dy.dtype(), in));
  return true;
}

// Constant padding's gradient is the gradient cropped back to the input: a
// pad by the negated pads (a negative pad of the forward, which cropped,
// pads the gradient with zeros). Reflect and edge padding send each
// gradient element to the input element it read: pad_grad.
static void gradPad(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                    llvm::MutableArrayRef<Value *> dxs) {
  attrs::Pad a(fwd);
  if (a.mode() == PadMode::Constant) {
    std::vector<int64_t> negated;
    for (int64_t p : a.pads())
      negated.push_back(-p);
    dxs[0] = gb.build1(
        OpKind::Pad, {dys[0]},
        {{"pads", Attribute(negated)}, {"mode", a.modeAttr()}, {"value", Attribute(0.0)}});
    return;
  }
  dxs[0] = gb.build1(OpKind::PadGrad, {dys[0]},
                     {{"pads", a.padsAttr()}, {"mode", a.modeAttr()}, {"value", a.valueAttr()}});
}

// --- resize -------------------------------------------------------------------

// Checks the enums, size and scales of a resize node.
static bool checkResizeAttrs(InferContext &ctx) {
  attrs::Resize a(ctx.attrs());
  const std::string &mode = a.modeAttr().getString(), &coords = a.coordinate_modeAttr().getString(),
                    &nearest = a.nearest_modeAttr().getString();
  if (!attrs::parseEnum<ResizeMode>(mode))
    return ctx.error("mode must be \"nearest\", \"linear\" or \"cubic\", got \"" + mode + "\"");
  if (!attrs::parseEnum<ResizeCoordinates>(coords))
    return ctx.error("coordinate_mode must be \"half_pixel\", \"pytorch_half_pixel\", "
                     "\"align_corners\" or \"asymmetric\", got \"" +
                     coords + "\"");
  if (!attrs::parseEnum<ResizeNearest>(nearest))
    return ctx.error("nearest_mode must be \"round_prefer_floor\", \"round_prefer_ceil\", "
                     "\"floor\" or \"ceil\", got \"" +
                     nearest + "\"");
  if (!requireIntsCount(ctx, "size", 2) || !requireGeometryBounds(ctx, {"size"}))
    return false;
  const std::vector<int64_t> &size = ctx.getInts("size");
  if (size[0] < 1 || size[1] < 1)
    return ctx.error("size " + shapeStr(size) + " must be >= 1");
  const std::vector<double> &scales = a.scales();
  if (!scales.empty() && (scales.size() != 2 || !llvm::all_of(scales, [](double s) {
                            return std::isfinite(s) && s > 0;
                          })))
    return ctx.error("scales must be empty or 2 finite factors > 0");
  if (!std::isfinite(a.cubic_coeff_a()))
    return ctx.error("cubic_coeff_a must be finite");
  return true;
}

// resize(input[N, C, H, W]) -> [N, C, size[0], size[1]]
static bool inferResize(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 4) || !checkResizeAttrs(ctx))
    return false;
  const TensorType &x = ctx.operand(0);
  if (x.dim(2) < 1 || x.dim(3) < 1)
    return ctx.error("input " + typeStr(x) + " has no spatial elements to resize");
  const std::vector<int64_t> &size = ctx.getInts("size");
  results.push_back(TensorType(x.dtype(), {x.dim(0), x.dim(1), size[0], size[1]}));
  return true;
}

// resize_grad(grad_output[N, C, size...]) -> input_shape [N, C, H, W]
static bool inferResizeGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !checkResizeAttrs(ctx))
    return false;
  const std::vector<int64_t> &in = ctx.getInts("input_shape"), &size = ctx.getInts("size");
  if (in.size() != 4 || in[2] < 1 || in[3] < 1 || llvm::any_of(in, [](int64_t d) { return d < 0; }))
    return ctx.error("input_shape " + shapeStr(in) + " must have 4 dims and spatial elements");
  llvm::SmallVector<int64_t, 4> resized{in[0], in[1], size[0], size[1]};
  if (ctx.operand(0).dims() != llvm::ArrayRef<int64_t>(resized))
    return ctx.error("grad_output " + typeStr(ctx.operand(0)) + " must be " + shapeStr(resized));
  results.push_back(TensorType(ctx.operand(0).dtype(), in));
  return true;
}

// Each input element gets the gradients of the outputs that read it, by
// the forward's weights: resize_grad, the transposed interpolation.
static void gradResize(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                       llvm::MutableArrayRef<Value *> dxs) {
  attrs::Resize a(fwd);
  llvm::ArrayRef<int64_t> in = fwd.operand(0)->type().dims();
  AttrMap attrs{{"size", a.sizeAttr()},
                {"scales", a.scalesAttr()},
                {"mode", a.modeAttr()},
                {"coordinate_mode", a.coordinate_modeAttr()},
                {"nearest_mode", a.nearest_modeAttr()},
                {"input_shape", Attribute(std::vector<int64_t>(in.begin(), in.end()))}};
  // Only cubic reads them: nearest and linear backward nodes print as before.
  if (a.mode() == ResizeMode::Cubic) {
    attrs["cubic_coeff_a"] = a.cubic_coeff_aAttr();
    attrs["exclude_outside"] = a.exclude_outsideAttr();
  }
  dxs[0] = gb.build1(OpKind::ResizeGrad, {dys[0]}, std::move(attrs));
}

void registerSpatialOps(OpRegistry &r) {
  OpRow(r.define(OpKind::Pad)).operand("input").infer(inferPad).gradient(gradPad);
  OpRow(r.define(OpKind::Resize)).operand("input").infer(inferResize).gradient(gradResize);

  // Backward ops (not differentiated again).
  OpRow(r.define(OpKind::PadGrad)).operand("grad_output").infer(inferPadGrad);
  OpRow(r.define(OpKind::ResizeGrad)).operand("grad_output").infer(inferResizeGrad);
}

} // namespace ampc
