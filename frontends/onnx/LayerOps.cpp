//===- LayerOps.cpp - InstanceNormalization and ConvTranspose --------------===//
//
// Both are compositions of registry ops:
// - InstanceNormalization normalises each (sample, channel) over its
//   spatial elements: a layernorm over the last dim of [N, C, H*W], then the
//   per-channel scale and bias. PyTorch exports GroupNorm this way (a
//   reshape to [N, groups, -1], an InstanceNormalization with unit scale and
//   zero bias, a reshape back, the affine weight and bias).
// - ConvTranspose is the input gradient of the convolution it transposes:
//   conv2d_grad_input, whose own gradient rule makes it trainable, plus
//   the bias.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"

#include "llvm/ADT/STLExtras.h"

namespace ampc::onnxfe {

namespace {

/// Whether input i is a constant whose every element is `v` (GroupNorm's
/// unit scale and zero bias).
bool isUniformConstant(OnnxLowering &l, const onnx::NodeProto &n, int i, double v) {
  const Term *t = l.input(n, i);
  if (!isFoldable(t) || (t->initializer && isFloating(t->type.dtype()) && !t->onlyFeedsMasks))
    return false;
  const ConstTensor *c = l.constantOf(n, i, "input");
  return c && llvm::all_of(c->values, [v](double x) { return x == v; });
}

/// [C] -> [C, 1, ...] to broadcast against [N, C, spatial...].
Value *perChannel(OnnxLowering &l, Value *v, unsigned rank) {
  std::vector<int64_t> dims{v->type().numElements()};
  dims.resize(rank - 1, 1);
  return l.reshape(v, dims);
}

} // namespace

bool lowerInstanceNormalization(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"epsilon"}))
    return false;
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  const TensorType &type = x->type();
  if (type.rank() < 3)
    return l.error("the input must have at least 3 dims [N, C, ...], got " + type.str());
  int64_t channels = type.dim(1), spatial = 1;
  for (unsigned d = 2; d < type.rank(); ++d)
    spatial *= type.dim(d);
  for (int i : {1, 2})
    if (l.typeOf(n, i).numElements() != channels)
      return l.error(llvm::Twine(i == 1 ? "scale" : "B") + " must have " + llvm::Twine(channels) +
                     " elements, got " + l.typeOf(n, i).str());
  // The layernorm's own affine parameters stay neutral: constants, not
  // trained.
  TensorType affine(x->dtype() == DType::F64 ? DType::F64 : DType::F32, {spatial});
  Value *ones = l.constantState(n.output(0) + ".unit_scale", affine, 1.0);
  Value *zeros = l.constantState(n.output(0) + ".zero_shift", affine, 0.0);
  Value *flat = l.reshape(x, {type.dim(0), channels, spatial});
  Value *normed = l.build1(OpKind::LayerNorm, {flat, ones, zeros},
                           {{"normalized_dims", Attribute(int64_t(1))},
                            {"eps", Attribute(l.floatAttr(n, "epsilon", 1e-5))}});
  bool unitScale = isUniformConstant(l, n, 1, 1.0), zeroBias = isUniformConstant(l, n, 2, 0.0);
  std::string name = unitScale && zeroBias ? n.output(0) : "";
  Value *y = l.reshape(normed, type.dims(), name);
  if (!unitScale) {
    Value *scale = l.valueOf(n, 1);
    y = scale ? l.build1(OpKind::Mul, {y, perChannel(l, scale, type.rank())}, {},
                         zeroBias ? n.output(0) : "")
              : nullptr;
  }
  if (!zeroBias && y) {
    Value *bias = l.valueOf(n, 2);
    y = bias ? l.build1(OpKind::Add, {y, perChannel(l, bias, type.rank())}, {}, n.output(0))
             : nullptr;
  }
  if (!y)
    return false;
  l.setOutput(n, 0, y);
  return true;
}

bool lowerConvTranspose(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                        "output_shape", "pads", "strides"}))
    return false;
  Value *x = l.valueOf(n, 0), *w = l.valueOf(n, 1);
  if (!x || !w)
    return false;
  unsigned rank = x->type().rank();
  if ((rank != 3 && rank != 4) || w->type().rank() != rank)
    return l.error("ConvTranspose is supported with 1-D or 2-D windows (3-D or 4-D inputs and "
                   "weights), got " +
                   x->type().str() + " and " + w->type().str());
  unsigned spatial = rank - 2;
  auto attrOr = [&](llvm::StringRef name, int64_t dflt, unsigned count) {
    std::vector<int64_t> v = l.intsAttr(n, name).value_or(std::vector<int64_t>(count, dflt));
    return v;
  };
  std::vector<int64_t> strides = attrOr("strides", 1, spatial),
                       dilations = attrOr("dilations", 1, spatial),
                       outputPadding = attrOr("output_padding", 0, spatial),
                       pads = attrOr("pads", 0, 2 * spatial);
  std::string autoPad = l.stringAttr(n, "auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID")
    return l.error("auto_pad " + autoPad + " is not supported (export with explicit pads)");
  if (autoPad == "VALID")
    pads.assign(2 * spatial, 0);
  if (l.attr(n, "output_shape"))
    return l.error("output_shape is not supported (export with output_padding)");
  if (strides.size() != spatial || dilations.size() != spatial || outputPadding.size() != spatial ||
      pads.size() != 2 * spatial)
    return l.error("strides, dilations, output_padding and pads must have one value per spatial "
                   "dim (pads two)");
  for (unsigned d = 0; d < spatial; ++d) {
    if (pads[d] != pads[d + spatial])
      return l.error("asymmetric pads are not supported");
    if (outputPadding[d] < 0 || outputPadding[d] >= std::max(strides[d], dilations[d]))
      return l.error("output_padding must be smaller than the stride or the dilation");
  }
  int64_t groups = l.intAttr(n, "group", 1);
  // 1-D windows run as 2-D ones of width 1.
  auto widen = [&](std::vector<int64_t> v, int64_t fill) {
    if (spatial == 1)
      v.push_back(fill);
    return v;
  };
  Value *x4 = x, *w4 = w;
  if (spatial == 1) {
    x4 = l.reshape(x, {x->type().dim(0), x->type().dim(1), x->type().dim(2), 1});
    w4 = l.reshape(w, {w->type().dim(0), w->type().dim(1), w->type().dim(2), 1});
  }
  std::vector<int64_t> stride = widen(strides, 1), dilation = widen(dilations, 1),
                       padding = widen({pads.begin(), pads.begin() + spatial}, 0),
                       extra = widen(outputPadding, 0);
  const TensorType &xt = x4->type(), &wt = w4->type();
  if (wt.dim(0) != xt.dim(1))
    return l.error("the weight's first dim " + llvm::Twine(wt.dim(0)) +
                   " must be the input's channels " + llvm::Twine(xt.dim(1)));
  std::vector<int64_t> outShape{xt.dim(0), wt.dim(1) * groups};
  for (unsigned d = 0; d < 2; ++d) {
    int64_t size = (xt.dim(2 + d) - 1) * stride[d] - 2 * padding[d] +
                   dilation[d] * (wt.dim(2 + d) - 1) + extra[d] + 1;
    if (size < 1)
      return l.error("the output would have no elements");
    outShape.push_back(size);
  }
  Value *y = l.build1(OpKind::Conv2dGradInput, {x4, w4},
                      {{"stride", Attribute(stride)},
                       {"padding", Attribute(padding)},
                       {"dilation", Attribute(dilation)},
                       {"groups", Attribute(groups)},
                       {"input_shape", Attribute(outShape)}});
  if (y && l.hasInput(n, 2)) {
    Value *b = l.valueOf(n, 2);
    y = b ? l.build1(OpKind::Add, {y, perChannel(l, b, 4)}) : nullptr;
  }
  if (!y)
    return false;
  if (spatial == 1)
    y = l.reshape(y, {outShape[0], outShape[1], outShape[2]});
  l.setOutput(n, 0, l.reshape(y, y->type().dims(), n.output(0)));
  return true;
}

} // namespace ampc::onnxfe
