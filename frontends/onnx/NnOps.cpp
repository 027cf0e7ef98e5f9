//===- NnOps.cpp - Convolution, normalisation, pooling, dense layers -------===//
#include "frontends/onnx/Builders.h"

#include "llvm/ADT/STLExtras.h"

namespace ampc::onnxfe {

namespace {

/// ONNX pads [h_begin, w_begin, h_end, w_end] as ampc's symmetric padding.
bool symmetricPads(OnnxLowering &l, const onnx::NodeProto &n, std::vector<int64_t> &padding) {
  std::string autoPad = l.stringAttr(n, "auto_pad", "NOTSET");
  std::vector<int64_t> pads = l.intsAttr(n, "pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
  if (autoPad == "VALID")
    pads = {0, 0, 0, 0};
  else if (autoPad != "NOTSET")
    return l.error("auto_pad " + autoPad + " is not supported (export with explicit pads)");
  if (pads.size() != 4)
    return l.error("pads must have 4 values for a 2-D window, got " + llvm::Twine(pads.size()));
  if (pads[0] != pads[2] || pads[1] != pads[3])
    return l.error("asymmetric pads [" + llvm::Twine(pads[0]) + ", " + llvm::Twine(pads[1]) + ", " +
                   llvm::Twine(pads[2]) + ", " + llvm::Twine(pads[3]) + "] are not supported");
  padding = {pads[0], pads[1]};
  return true;
}

bool requireRank4(OnnxLowering &l, Value *x) {
  if (x->type().rank() != 4)
    return l.error("only 2-D windows (4-D inputs) are supported, the input is " + x->type().str());
  return true;
}

bool onesOrAbsent(OnnxLowering &l, const onnx::NodeProto &n, llvm::StringRef name) {
  std::optional<std::vector<int64_t>> v = l.intsAttr(n, name);
  if (v && llvm::any_of(*v, [](int64_t d) { return d != 1; }))
    return l.error(name + " other than 1 are not supported");
  return true;
}

} // namespace

bool lowerConv(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}))
    return false;
  Value *x = l.valueOf(n, 0), *w = l.valueOf(n, 1);
  if (!x || !w || !requireRank4(l, x))
    return false;
  std::vector<int64_t> padding;
  if (!symmetricPads(l, n, padding))
    return false;
  llvm::SmallVector<Value *, 3> operands{x, w};
  if (l.hasInput(n, 2)) {
    Value *b = l.valueOf(n, 2);
    if (!b)
      return false;
    operands.push_back(b);
  }
  AttrMap attrs{
      {"stride", Attribute(l.intsAttr(n, "strides").value_or(std::vector<int64_t>{1, 1}))},
      {"padding", Attribute(padding)},
      {"dilation", Attribute(l.intsAttr(n, "dilations").value_or(std::vector<int64_t>{1, 1}))},
      {"groups", Attribute(l.intAttr(n, "group", 1))}};
  l.setOutput(n, 0, l.build1(OpKind::Conv2d, operands, std::move(attrs), n.output(0)));
  return true;
}

bool lowerBatchNormalization(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"epsilon", "momentum", "training_mode", "spatial"}))
    return false;
  Value *x = l.valueOf(n, 0), *scale = l.valueOf(n, 1), *bias = l.valueOf(n, 2);
  Value *mean = l.privateBuffer(n, 3), *var = l.privateBuffer(n, 4);
  if (!x || !scale || !bias || !mean || !var)
    return false;
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty() && (!l.consumers(n.output(i)).empty() || l.isGraphOutput(n.output(i))))
      return l.error("the running statistics outputs are used by the graph; ampc updates them "
                     "itself when training");
  const TensorType xType = x->type();
  // BatchNorm1d exports [N, C] or [N, C, L]: run it as [N, C, L, 1].
  Value *x4 = x;
  if (xType.rank() == 2 || xType.rank() == 3) {
    x4 = l.reshape(x, {xType.dim(0), xType.dim(1), xType.rank() == 3 ? xType.dim(2) : 1, 1});
  } else if (xType.rank() != 4) {
    return l.error("input must have 2 to 4 dims, got " + xType.str());
  }
  // ONNX: running = running * momentum + batch * (1 - momentum); PyTorch's
  // (and ampc's) momentum is the weight of the batch.
  double momentum = 1.0 - l.floatAttr(n, "momentum", 0.9);
  bool training = l.training();
  AttrMap attrs{{"eps", Attribute(l.floatAttr(n, "epsilon", 1e-5))},
                {"momentum", Attribute(momentum)},
                {"training", Attribute(training)}};
  std::vector<std::string> names;
  if (x4 == x)
    names.push_back(l.valueName(n.output(0)));
  else
    names.push_back("");
  if (training) {
    names.push_back("");
    names.push_back("");
  }
  Node *bn = l.build(OpKind::BatchNorm2d, {x4, scale, bias, mean, var}, std::move(attrs), names);
  if (!bn)
    return false;
  if (training) {
    l.graph().addStateUpdate(mean, bn->result(1));
    l.graph().addStateUpdate(var, bn->result(2));
  }
  Value *y = bn->result(0);
  if (x4 != x)
    y = l.reshape(y, xType.dims(), n.output(0));
  l.setOutput(n, 0, y);
  return true;
}

static bool lowerPool(OnnxLowering &l, const onnx::NodeProto &n, bool isMax) {
  if (isMax) {
    if (!l.checkAttrs(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                          "storage_order", "strides"}))
      return false;
  } else if (!l.checkAttrs(n, {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads",
                               "strides"})) {
    return false;
  }
  if (n.output_size() > 1 && !n.output(1).empty())
    return l.error("the Indices output is not supported");
  Value *x = l.valueOf(n, 0);
  if (!x || !requireRank4(l, x))
    return false;
  if (l.intAttr(n, "ceil_mode", 0) != 0)
    return l.error("ceil_mode=1 is not supported");
  if (isMax && !onesOrAbsent(l, n, "dilations"))
    return false;
  std::optional<std::vector<int64_t>> kernel = l.intsAttr(n, "kernel_shape");
  if (!kernel || kernel->size() != 2)
    return l.error("kernel_shape must have 2 values");
  std::vector<int64_t> padding;
  if (!symmetricPads(l, n, padding))
    return false;
  AttrMap attrs{
      {"kernel", Attribute(*kernel)},
      {"stride", Attribute(l.intsAttr(n, "strides").value_or(std::vector<int64_t>{1, 1}))},
      {"padding", Attribute(padding)}};
  if (!isMax)
    attrs["count_include_pad"] = Attribute(l.intAttr(n, "count_include_pad", 0) != 0);
  l.setOutput(
      n, 0,
      l.build1(isMax ? OpKind::MaxPool2d : OpKind::AvgPool2d, {x}, std::move(attrs), n.output(0)));
  return true;
}

bool lowerMaxPool(OnnxLowering &l, const onnx::NodeProto &n) { return lowerPool(l, n, true); }
bool lowerAveragePool(OnnxLowering &l, const onnx::NodeProto &n) { return lowerPool(l, n, false); }

bool lowerGlobalAveragePool(OnnxLowering &l, const onnx::NodeProto &n) {
  Value *x = l.valueOf(n, 0);
  if (!x || !requireRank4(l, x))
    return false;
  l.setOutput(n, 0, l.build1(OpKind::GlobalAvgPool, {x}, {}, n.output(0)));
  return true;
}

bool lowerGemm(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"alpha", "beta", "transA", "transB"}))
    return false;
  double alpha = l.floatAttr(n, "alpha", 1.0), beta = l.floatAttr(n, "beta", 1.0);
  bool ta = l.intAttr(n, "transA", 0) != 0, tb = l.intAttr(n, "transB", 0) != 0;
  Value *a = l.valueOf(n, 0), *b = l.valueOf(n, 1);
  if (!a || !b)
    return false;
  Value *c = nullptr;
  if (l.hasInput(n, 2) && !(c = l.valueOf(n, 2)))
    return false;
  // The nn.Linear export: A[M, K] x B[N, K]^T + C[N] is `linear` with
  // PyTorch's weight layout.
  if (!ta && tb && alpha == 1.0 && (!c || beta == 1.0) && b->type().rank() == 2 &&
      (!c || (c->type().rank() == 1 && c->type().dim(0) == b->type().dim(0)))) {
    llvm::SmallVector<Value *, 3> ops{a, b};
    if (c)
      ops.push_back(c);
    l.setOutput(n, 0, l.build1(OpKind::Linear, ops, {}, n.output(0)));
    return true;
  }
  Value *y = l.build1(OpKind::MatMul, {a, b},
                      {{"transpose_a", Attribute(ta)}, {"transpose_b", Attribute(tb)}},
                      c || alpha != 1.0 ? "" : n.output(0));
  if (y && alpha != 1.0)
    y = l.build1(OpKind::Scale, {y}, {{"factor", Attribute(alpha)}}, c ? "" : n.output(0));
  if (y && c) {
    if (beta != 1.0)
      c = l.build1(OpKind::Scale, {c}, {{"factor", Attribute(beta)}});
    y = l.build1(OpKind::Add, {y, c}, {}, n.output(0));
  }
  if (!y)
    return false;
  l.setOutput(n, 0, y);
  return true;
}

bool lowerMatMul(OnnxLowering &l, const onnx::NodeProto &n) {
  Value *a = l.valueOf(n, 0), *b = l.valueOf(n, 1);
  if (!a || !b)
    return false;
  TensorType at = a->type(), bt = b->type();
  if (at.rank() == 0 || bt.rank() == 0)
    return l.error("operands must have at least 1 dim");
  // numpy: a 1-D operand gains a dim that the result drops again.
  llvm::SmallVector<int64_t, 4> resultDims;
  bool squeezeM = at.rank() == 1, squeezeN = bt.rank() == 1;
  if (squeezeM)
    a = l.reshape(a, {1, at.dim(0)});
  if (squeezeN)
    b = l.reshape(b, {bt.dim(0), 1});
  at = a->type();
  bt = b->type();
  Value *y = nullptr;
  if (bt.rank() == 2) {
    // [..., M, K] x [K, N]: one matmul over the flattened rows.
    int64_t rows = 1;
    for (unsigned d = 0; d + 1 < at.rank(); ++d)
      rows *= at.dim(d);
    Value *a2 = l.reshape(a, {rows, at.dims().back()});
    y = l.build1(OpKind::MatMul, {a2, b});
    if (!y)
      return false;
    llvm::SmallVector<int64_t, 4> dims(at.dims().begin(), at.dims().end());
    dims.back() = bt.dim(1);
    resultDims = dims;
  } else {
    if (at.rank() == 2)
      a = l.reshape(a, {1, at.dim(0), at.dim(1)});
    y = l.build1(OpKind::BatchMatMul, {a, b});
    if (!y)
      return false;
    resultDims.assign(y->type().dims().begin(), y->type().dims().end());
  }
  if (squeezeM)
    resultDims.erase(resultDims.end() - 2);
  if (squeezeN)
    resultDims.pop_back();
  l.setOutput(n, 0, l.reshape(y, resultDims, n.output(0)));
  return true;
}

bool lowerLayerNormalization(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"axis", "epsilon", "stash_type"}))
    return false;
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty() && !l.consumers(n.output(i)).empty())
      return l.error("the Mean and InvStdDev outputs are not supported");
  Value *x = l.valueOf(n, 0), *scale = l.valueOf(n, 1);
  if (!x || !scale)
    return false;
  unsigned axis;
  if (!l.normAxis(l.intAttr(n, "axis", -1), x->type().rank(), axis, "axis"))
    return false;
  Value *bias = l.hasInput(n, 2)
                    ? l.valueOf(n, 2)
                    : l.constantState(scale->name().str() + ".zero_bias", scale->type(), 0.0);
  if (!bias)
    return false;
  l.setOutput(n, 0,
              l.build1(OpKind::LayerNorm, {x, scale, bias},
                       {{"normalized_dims", Attribute(int64_t(x->type().rank() - axis))},
                        {"eps", Attribute(l.floatAttr(n, "epsilon", 1e-5))}},
                       n.output(0)));
  return true;
}

static bool lowerSoftmaxLike(OnnxLowering &l, const onnx::NodeProto &n, OpKind kind) {
  if (!l.checkAttrs(n, {"axis"}))
    return false;
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  unsigned axis;
  if (!l.normAxis(l.intAttr(n, "axis", -1), x->type().rank(), axis, "axis"))
    return false;
  l.setOutput(n, 0, l.build1(kind, {x}, {{"dim", Attribute(int64_t(axis))}}, n.output(0)));
  return true;
}

bool lowerSoftmax(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerSoftmaxLike(l, n, OpKind::Softmax);
}
bool lowerLogSoftmax(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerSoftmaxLike(l, n, OpKind::LogSoftmax);
}

bool lowerDropout(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"seed"}))
    return false;
  if (n.output_size() > 1 && !n.output(1).empty() && !l.consumers(n.output(1)).empty())
    return l.error("the mask output is not supported");
  // Inference: the identity, whatever training_mode the export recorded.
  if (!l.training()) {
    l.alias(n, 0, 0);
    return true;
  }
  double p = 0.5;
  if (l.hasInput(n, 1)) {
    const ConstTensor *ratio = l.constantOf(n, 1, "ratio");
    if (!ratio)
      return false;
    if (ratio->numElements() != 1)
      return l.error("ratio must be a scalar");
    p = ratio->values.front();
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  // Each dropout draws its own stream: its position among the graph's nodes.
  l.setOutput(n, 0,
              l.build1(OpKind::Dropout, {x},
                       {{"p", Attribute(p)},
                        {"seed", Attribute(int64_t(l.graph().numNodes()))},
                        {"training", Attribute(true)}},
                       n.output(0)));
  return true;
}

} // namespace ampc::onnxfe
