//===- NnOps.cpp - Convolution, normalisation, pooling, dense layers -------===//
#include "frontends/onnx/Builders.h"

#include "ir/OpAttrs.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

namespace ampc::onnxfe {

namespace {

/// A Conv's or pooling's window in the 2-D form of the registry's ops: a
/// 1-D window (a 3-D input [N, C, L]) runs as [k, 1] over [N, C, L, 1].
struct Window {
  unsigned spatial = 2; ///< the ONNX node's window dims, 1 or 2
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads; ///< [top, left, bottom, right]
};

/// The 4-D form of x ([N, C, L] -> [N, C, L, 1]); x itself when 4-D.
Value *as4d(OnnxLowering &l, Value *x) {
  const TensorType &t = x->type();
  return t.rank() == 3 ? l.reshape(x, {t.dim(0), t.dim(1), t.dim(2), 1}) : x;
}

bool requireWindowRank(OnnxLowering &l, Value *x) {
  unsigned rank = x->type().rank();
  if (rank != 3 && rank != 4)
    return l.error("only 1-D and 2-D windows (3-D and 4-D inputs) are supported, the input is " +
                   x->type().str());
  return true;
}

/// Reads kernel (`kernel` when the node has no kernel_shape), strides,
/// dilations and pads (auto_pad resolved against x's spatial dims) into
/// their 2-D form.
bool readWindow(OnnxLowering &l, const onnx::NodeProto &n, const TensorType &x,
                std::optional<std::vector<int64_t>> kernel, Window &w) {
  unsigned spatial = x.rank() - 2;
  w.spatial = spatial;
  if (std::optional<std::vector<int64_t>> k = l.intsAttr(n, "kernel_shape"))
    kernel = k;
  if (!kernel || kernel->size() != spatial)
    return l.error("kernel_shape must have " + llvm::Twine(spatial) + " values");
  std::vector<int64_t> ones(spatial, 1);
  w.kernel = *kernel;
  w.strides = l.intsAttr(n, "strides").value_or(ones);
  w.dilations = l.intsAttr(n, "dilations").value_or(ones);
  if (w.strides.size() != spatial || w.dilations.size() != spatial)
    return l.error("strides and dilations must have " + llvm::Twine(spatial) + " values");
  // Bounded as the registry bounds windows, before the SAME arithmetic.
  constexpr int64_t kLimit = int64_t(1) << 31;
  for (unsigned d = 0; d < spatial; ++d)
    if (w.kernel[d] < 1 || w.strides[d] < 1 || w.dilations[d] < 1 || w.kernel[d] >= kLimit ||
        w.strides[d] >= kLimit || w.dilations[d] >= kLimit)
      return l.error("kernel_shape, strides and dilations must be >= 1 and below 2^31");
  std::vector<int64_t> pads = l.intsAttr(n, "pads").value_or(std::vector<int64_t>(2 * spatial, 0));
  std::string autoPad = l.stringAttr(n, "auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    pads.assign(2 * spatial, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // ONNX: the output is ceil(in / stride); the padding it takes is split
    // evenly, the odd one at the end (UPPER) or the beginning (LOWER).
    pads.assign(2 * spatial, 0);
    for (unsigned d = 0; d < spatial; ++d) {
      int64_t in = x.dim(2 + d), out = (in + w.strides[d] - 1) / w.strides[d];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[d] +
                                               (w.kernel[d] - 1) * w.dilations[d] + 1 - in);
      int64_t small = total / 2;
      pads[d] = autoPad == "SAME_UPPER" ? small : total - small;
      pads[spatial + d] = total - pads[d];
    }
  } else if (autoPad != "NOTSET") {
    return l.error("auto_pad " + autoPad + " is not supported");
  }
  if (pads.size() != 2 * spatial)
    return l.error("pads must have " + llvm::Twine(2 * spatial) + " values, got " +
                   llvm::Twine(pads.size()));
  if (llvm::any_of(pads, [](int64_t p) { return p < 0; }))
    return l.error("pads must be >= 0");
  if (spatial == 1) {
    w.kernel.push_back(1);
    w.strides.push_back(1);
    w.dilations.push_back(1);
    w.pads = {pads[0], 0, pads[1], 0};
  } else {
    w.pads = pads;
  }
  return true;
}

/// The registry's padding attribute: [ph, pw] when both sides match, else
/// [top, left, bottom, right].
Attribute paddingAttr(llvm::ArrayRef<int64_t> pads) {
  if (pads[0] == pads[2] && pads[1] == pads[3])
    return Attribute(std::vector<int64_t>{pads[0], pads[1]});
  return Attribute(std::vector<int64_t>(pads.begin(), pads.end()));
}

/// y ([N, C', L', 1] for a 1-D window) back in the node's rank, named after
/// output 0.
void setWindowOutput(OnnxLowering &l, const onnx::NodeProto &n, const Window &w, Value *y) {
  if (y && w.spatial == 1) {
    const TensorType &t = y->type();
    y = l.reshape(y, {t.dim(0), t.dim(1), t.dim(2)}, n.output(0));
  }
  l.setOutput(n, 0, y);
}

} // namespace

bool lowerConv(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}))
    return false;
  Value *x = l.valueOf(n, 0), *w = l.valueOf(n, 1);
  if (!x || !w || !requireWindowRank(l, x))
    return false;
  if (w->type().rank() != x->type().rank())
    return l.error("the weight " + w->type().str() + " must have the input's rank");
  std::vector<int64_t> weightKernel(w->type().dims().begin() + 2, w->type().dims().end());
  Window win;
  if (!readWindow(l, n, x->type(), weightKernel, win))
    return false;
  Value *x4 = as4d(l, x), *w4 = as4d(l, w);
  // conv2d pads both sides alike: the common part goes to it, the rest is
  // an explicit zero pad before it.
  std::vector<int64_t> common = {std::min(win.pads[0], win.pads[2]),
                                 std::min(win.pads[1], win.pads[3])};
  std::vector<int64_t> extra = {0, 0, win.pads[0] - common[0], win.pads[1] - common[1],
                                0, 0, win.pads[2] - common[0], win.pads[3] - common[1]};
  if (llvm::any_of(extra, [](int64_t p) { return p != 0; }))
    x4 = l.build1(OpKind::Pad, {x4}, {{"pads", Attribute(extra)}});
  llvm::SmallVector<Value *, 3> operands{x4, w4};
  if (l.hasInput(n, 2)) {
    Value *b = l.valueOf(n, 2);
    if (!b)
      return false;
    operands.push_back(b);
  }
  if (!x4 || !w4)
    return false;
  AttrMap attrs{{"stride", Attribute(win.strides)},
                {"padding", Attribute(common)},
                {"dilation", Attribute(win.dilations)},
                {"groups", Attribute(l.intAttr(n, "group", 1))}};
  setWindowOutput(
      l, n, win,
      l.build1(OpKind::Conv2d, operands, std::move(attrs), win.spatial == 2 ? n.output(0) : ""));
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

namespace {

/// When x is the result of a pad node that only this pooling reads and
/// that pads the spatial dims with what the pooling's own padding means
/// (zeros counted by the average, -inf for the maximum), the pad's input
/// and the pads in `win`'s 2-D form; the caller folds them into the
/// pooling and erases the pad. Exporters write nn.AvgPool2d(padding=p)
/// this way (torch 1.13: Pad + AveragePool).
Node *foldablePad(OnnxLowering &l, const onnx::NodeProto &n, Value *x, bool isMax,
                  std::vector<int64_t> &spatialPads) {
  Node *pad = x->definingNode();
  if (!pad || pad->kind() != OpKind::Pad || x->hasUses() || l.isGraphOutput(n.input(0)) ||
      l.consumers(n.input(0)).size() != 1)
    return nullptr;
  attrs::Pad a(*pad);
  double value = a.value();
  if (a.mode() != PadMode::Constant || !(isMax ? (std::isinf(value) && value < 0) : value == 0))
    return nullptr;
  const std::vector<int64_t> &pads = a.pads();
  size_t rank = pads.size() / 2;
  if (rank != 3 && rank != 4)
    return nullptr;
  for (size_t d = 0; d < rank; ++d) {
    bool batchOrChannel = d < 2;
    if (pads[d] < 0 || pads[rank + d] < 0 ||
        (batchOrChannel && (pads[d] != 0 || pads[rank + d] != 0)))
      return nullptr;
  }
  if (rank == 3)
    spatialPads = {pads[2], 0, pads[5], 0};
  else
    spatialPads = {pads[2], pads[3], pads[6], pads[7]};
  return pad;
}

} // namespace

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
  if (!x || !requireWindowRank(l, x))
    return false;
  Window win;
  if (!readWindow(l, n, x->type(), std::nullopt, win))
    return false;
  bool ceilMode = l.intAttr(n, "ceil_mode", 0) != 0;
  bool countIncludePad = l.intAttr(n, "count_include_pad", 0) != 0;
  // Pad + pooling as one padded pooling, where the pooling's rules give
  // the same windows: no ceil mode (its last-window rule reads the
  // padding), every window keeping an input element, and for the average
  // the explicit zeros counted (count_include_pad, or no padding of its
  // own to count).
  std::vector<int64_t> extra;
  Node *pad = foldablePad(l, n, x, isMax, extra);
  if (pad && !ceilMode &&
      (isMax || countIncludePad || llvm::all_of(win.pads, [](int64_t p) { return p == 0; }))) {
    std::vector<int64_t> merged = win.pads;
    bool fits = true;
    for (unsigned k = 0; k < 4; ++k) {
      merged[k] += extra[k];
      unsigned d = k % 2;
      fits &= merged[k] < (win.kernel[d] - 1) * win.dilations[d] + 1;
    }
    if (fits) {
      x = pad->operand(0);
      win.pads = merged;
      countIncludePad = true;
    } else {
      pad = nullptr;
    }
  } else {
    pad = nullptr;
  }
  AttrMap attrs{{"kernel", Attribute(win.kernel)},
                {"stride", Attribute(win.strides)},
                {"padding", paddingAttr(win.pads)},
                {"ceil_mode", Attribute(ceilMode)}};
  if (isMax)
    attrs["dilation"] = Attribute(win.dilations);
  else
    attrs["count_include_pad"] = Attribute(countIncludePad);
  Value *y = l.build1(isMax ? OpKind::MaxPool2d : OpKind::AvgPool2d, {as4d(l, x)}, std::move(attrs),
                      win.spatial == 2 ? n.output(0) : "");
  if (y && pad && !pad->result()->hasUses())
    l.graph().eraseNode(pad);
  setWindowOutput(l, n, win, y);
  return true;
}

bool lowerMaxPool(OnnxLowering &l, const onnx::NodeProto &n) { return lowerPool(l, n, true); }
bool lowerAveragePool(OnnxLowering &l, const onnx::NodeProto &n) { return lowerPool(l, n, false); }

bool lowerGlobalAveragePool(OnnxLowering &l, const onnx::NodeProto &n) {
  Value *x = l.valueOf(n, 0);
  if (!x || !requireWindowRank(l, x))
    return false;
  Window win;
  win.spatial = x->type().rank() - 2;
  setWindowOutput(
      l, n, win,
      l.build1(OpKind::GlobalAvgPool, {as4d(l, x)}, {}, win.spatial == 2 ? n.output(0) : ""));
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

/// LayerNormalization's optional Mean and InvStdDev outputs (the statistics
/// over the normalized dims, kept as dims of 1), where the graph reads them:
/// computed beside the fused layernorm from reduce_mean, as ONNX defines
/// them (the variance is the mean of squared deviations, InvStdDev
/// 1 / sqrt(variance + epsilon)).
static bool lowerLayerNormStatistics(OnnxLowering &l, const onnx::NodeProto &n, Value *x,
                                     unsigned axis) {
  auto wanted = [&](int i) {
    return n.output_size() > i && !n.output(i).empty() &&
           (!l.consumers(n.output(i)).empty() || l.isGraphOutput(n.output(i)));
  };
  if (!wanted(1) && !wanted(2))
    return true;
  std::vector<int64_t> dims;
  for (unsigned d = axis; d < x->type().rank(); ++d)
    dims.push_back(int64_t(d));
  auto mean = [&](Value *v, llvm::StringRef name) {
    return l.build1(OpKind::ReduceMean, {v},
                    {{"dims", Attribute(dims)}, {"keepdim", Attribute(true)}}, name);
  };
  Value *mu = mean(x, wanted(1) ? llvm::StringRef(n.output(1)) : llvm::StringRef());
  if (!mu)
    return false;
  l.setOutput(n, 1, mu);
  if (!wanted(2))
    return true;
  Value *deviation = l.build1(OpKind::Sub, {x, mu});
  Value *variance = mean(l.build1(OpKind::Mul, {deviation, deviation}), "");
  Value *eps = l.constantState(n.output(2) + ".epsilon", TensorType(x->dtype(), {}),
                               l.floatAttr(n, "epsilon", 1e-5));
  Value *invStd =
      l.build1(OpKind::Reciprocal,
               {l.build1(OpKind::Sqrt, {l.build1(OpKind::Add, {variance, eps})})}, {}, n.output(2));
  if (!invStd)
    return false;
  l.setOutput(n, 2, invStd);
  return true;
}

bool lowerLayerNormalization(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"axis", "epsilon", "stash_type"}))
    return false;
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
  return lowerLayerNormStatistics(l, n, x, axis);
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
  bool maskWanted = n.output_size() > 1 && !n.output(1).empty() &&
                    (!l.consumers(n.output(1)).empty() || l.isGraphOutput(n.output(1)));
  // Inference: the identity, whatever training_mode the export recorded,
  // and a mask that keeps every element.
  if (!l.training()) {
    l.alias(n, 0, 0);
    if (maskWanted) {
      ConstTensor keep;
      keep.dtype = DType::Bool;
      const TensorType &t = l.typeOf(n, 0);
      keep.dims.assign(t.dims().begin(), t.dims().end());
      keep.values.assign(t.numElements(), 1.0);
      l.setConstant(n, 1, std::move(keep));
    }
    return true;
  }
  if (maskWanted)
    return l.error("the mask output is not supported when training (ampc draws and keeps the "
                   "mask itself)");
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
