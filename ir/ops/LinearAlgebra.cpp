//===- LinearAlgebra.cpp - linear, matmul, batch_matmul, conv2d, attention -===//
#include "ir/GradientBuilder.h"
#include "ir/OpAttrs.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

#include "llvm/Support/MathExtras.h"

#include <optional>

namespace ampc {
using namespace infer;

// linear(input[..., in], weight[out, in], bias[out]?) -> [..., out]  (PyTorch layout)
static bool inferLinear(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 1, 2) || !requireSameDType(ctx, 0, 1))
    return false;
  const TensorType &x = ctx.operand(0), &w = ctx.operand(1);
  if (x.rank() < 1)
    return ctx.error("input must have at least 1 dim, got " + typeStr(x));
  if (x.dims().back() != w.dim(1))
    return ctx.error("input has " + llvm::Twine(x.dims().back()) + " features but weight " +
                     typeStr(w) + " expects " + llvm::Twine(w.dim(1)));
  if (ctx.numOperands() == 3) {
    const TensorType &b = ctx.operand(2);
    if (b.rank() != 1 || b.dim(0) != w.dim(0))
      return ctx.error("bias must be [" + llvm::Twine(w.dim(0)) + "], got " + typeStr(b));
    if (!requireSameDType(ctx, 0, 2))
      return false;
  }
  llvm::SmallVector<int64_t, 4> dims(x.dims().begin(), x.dims().end());
  dims.back() = w.dim(0);
  results.push_back(TensorType(x.dtype(), dims));
  return true;
}

// matmul(a[m, k], b[k, n]) -> [m, n]
static bool inferMatMul(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 2) || !requireRank(ctx, 1, 2) ||
      !requireSameDType(ctx, 0, 1))
    return false;
  const TensorType &a = ctx.operand(0), &b = ctx.operand(1);
  bool ta = ctx.getBool("transpose_a"), tb = ctx.getBool("transpose_b");
  int64_t m = ta ? a.dim(1) : a.dim(0), ka = ta ? a.dim(0) : a.dim(1);
  int64_t kb = tb ? b.dim(1) : b.dim(0), n = tb ? b.dim(0) : b.dim(1);
  if (ka != kb)
    return ctx.error("inner dimensions differ: " + typeStr(a) + " and " + typeStr(b));
  results.push_back(TensorType(a.dtype(), {m, n}));
  return true;
}

// batch_matmul(a[..., m, k], b[..., k, n]) -> [..., m, n]; batch dims broadcast.
static bool inferBatchMatMul(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireSameDType(ctx, 0, 1))
    return false;
  const TensorType &a = ctx.operand(0), &b = ctx.operand(1);
  if (a.rank() < 3 || b.rank() < 3)
    return ctx.error("operands must have at least 3 dims, got " + typeStr(a) + " and " +
                     typeStr(b));
  bool ta = ctx.getBool("transpose_a"), tb = ctx.getBool("transpose_b");
  unsigned ra = a.rank(), rb = b.rank();
  int64_t m = ta ? a.dim(ra - 1) : a.dim(ra - 2), ka = ta ? a.dim(ra - 2) : a.dim(ra - 1);
  int64_t kb = tb ? b.dim(rb - 1) : b.dim(rb - 2), n = tb ? b.dim(rb - 2) : b.dim(rb - 1);
  if (ka != kb)
    return ctx.error("inner dimensions differ: " + typeStr(a) + " and " + typeStr(b));
  llvm::SmallVector<int64_t, 4> batch;
  if (!broadcastShapes(ctx, a.dims().drop_back(2), b.dims().drop_back(2), batch))
    return false;
  batch.push_back(m);
  batch.push_back(n);
  results.push_back(TensorType(a.dtype(), batch));
  return true;
}

// Output size, or 0 when the dilated kernel does not fit the padded input.
// The sign is checked before dividing: C++ division truncates towards zero,
// so (-1) / 2 + 1 would claim one output where PyTorch reports an error.
// Every step is checked: an input dim near 2^63 plus padding would overflow
// (that, too, is "does not fit").
static int64_t convOut(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  int64_t padded = 0, reach = 0, span = 0;
  if (llvm::AddOverflow(in, 2 * p, padded) || llvm::MulOverflow(d, k - 1, reach) ||
      llvm::SubOverflow(padded - 1, reach, span) || span < 0)
    return 0;
  return span / s + 1;
}

// conv2d(input[N, C, H, W], weight[O, C/groups, kh, kw], bias[O]?) -> [N, O, H', W']
static bool inferConv2d(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 4) || !requireRank(ctx, 1, 4) ||
      !requireSameDType(ctx, 0, 1))
    return false;
  const TensorType &x = ctx.operand(0), &w = ctx.operand(1);
  const auto &stride = ctx.getInts("stride"), &pad = ctx.getInts("padding"),
             &dil = ctx.getInts("dilation");
  int64_t groups = ctx.getInt("groups");
  for (const auto *v : {&stride, &pad, &dil})
    if (v->size() != 2)
      return ctx.error("stride, padding and dilation must have 2 values each");
  if (stride[0] < 1 || stride[1] < 1 || dil[0] < 1 || dil[1] < 1 || pad[0] < 0 || pad[1] < 0)
    return ctx.error("stride and dilation must be >= 1 and padding >= 0");
  if (!requireGeometryBounds(ctx, {"stride", "padding", "dilation"}))
    return false;
  if (groups < 1 || x.dim(1) % groups != 0 || w.dim(0) % groups != 0)
    return ctx.error("groups " + llvm::Twine(groups) + " must divide input channels " +
                     llvm::Twine(x.dim(1)) + " and output channels " + llvm::Twine(w.dim(0)));
  if (w.dim(1) * groups != x.dim(1))
    return ctx.error("weight " + typeStr(w) + " expects " + llvm::Twine(w.dim(1) * groups) +
                     " input channels, input " + typeStr(x) + " has " + llvm::Twine(x.dim(1)));
  if (ctx.numOperands() == 3) {
    const TensorType &b = ctx.operand(2);
    if (b.rank() != 1 || b.dim(0) != w.dim(0))
      return ctx.error("bias must be [" + llvm::Twine(w.dim(0)) + "], got " + typeStr(b));
    if (!requireSameDType(ctx, 0, 2))
      return false;
  }
  int64_t oh = convOut(x.dim(2), w.dim(2), stride[0], pad[0], dil[0]);
  int64_t ow = convOut(x.dim(3), w.dim(3), stride[1], pad[1], dil[1]);
  if (oh < 1 || ow < 1)
    return ctx.error("kernel " + llvm::Twine(w.dim(2)) + "x" + llvm::Twine(w.dim(3)) +
                     " does not fit input " + typeStr(x) + " with this padding and dilation");
  results.push_back(TensorType(x.dtype(), {x.dim(0), w.dim(0), oh, ow}));
  return true;
}

// The result type of attention over the query, key and value operands at
// `first`, first + 1 and first + 2, by layout:
//   bhsd: q[..., Sq, D], k[..., Sk, D], v[..., Sk, Dv] -> [..., Sq, Dv];
//   bshd: q[..., Sq, H, D], k[..., Sk, H, D], v[..., Sk, H, Dv] -> [..., Sq, H, Dv]
// (the heads after the sequence: every head is one slice, as a leading dim
// of bhsd is).
static bool attentionResult(InferContext &ctx, unsigned first, TensorType &result) {
  if (!requireFloat(ctx, first) || !requireSameDType(ctx, first, first + 1) ||
      !requireSameDType(ctx, first, first + 2))
    return false;
  const std::string &layoutName =
      attrs::ScaledDotProductAttention(ctx.attrs()).layoutAttr().getString();
  std::optional<AttentionLayout> layout = attrs::parseEnum<AttentionLayout>(layoutName);
  if (!layout)
    return ctx.error("layout must be \"bhsd\" or \"bshd\", got \"" + layoutName + "\"");
  bool bshd = *layout == AttentionLayout::Bshd;
  unsigned minRank = bshd ? 3 : 2;
  const TensorType &q = ctx.operand(first), &k = ctx.operand(first + 1),
                   &v = ctx.operand(first + 2);
  if (q.rank() < minRank || k.rank() != q.rank() || v.rank() != q.rank())
    return ctx.error("query, key and value must have the same rank (at least " +
                     llvm::Twine(minRank) + " for layout " + layoutName + "), got " + typeStr(q) +
                     ", " + typeStr(k) + ", " + typeStr(v));
  unsigned r = q.rank(), seq = bshd ? r - 3 : r - 2;
  if (q.dims().take_front(seq) != k.dims().take_front(seq) ||
      q.dims().take_front(seq) != v.dims().take_front(seq))
    return ctx.error("query, key and value batch dims differ");
  if (bshd && (q.dim(r - 2) != k.dim(r - 2) || q.dim(r - 2) != v.dim(r - 2)))
    return ctx.error("query, key and value head counts differ: " + typeStr(q) + ", " + typeStr(k) +
                     ", " + typeStr(v));
  if (q.dim(r - 1) != k.dim(r - 1))
    return ctx.error("query and key head sizes differ: " + typeStr(q) + " and " + typeStr(k));
  if (k.dim(seq) != v.dim(seq))
    return ctx.error("key and value sequence lengths differ: " + typeStr(k) + " and " + typeStr(v));
  if (ctx.getBool("causal") && q.dim(seq) != k.dim(seq))
    return ctx.error("causal attention needs equal query and key lengths");
  llvm::SmallVector<int64_t, 4> dims(q.dims().begin(), q.dims().end());
  dims.back() = v.dim(r - 1);
  result = TensorType(q.dtype(), dims);
  return true;
}

// scaled_dot_product_attention(q[..., Sq, D], k[..., Sk, D], v[..., Sk, Dv]) -> [..., Sq, Dv]
static bool inferAttention(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  TensorType result;
  if (!attentionResult(ctx, 0, result))
    return false;
  results.push_back(result);
  return true;
}

// The attributes that describe a convolution's geometry, checked once for the
// forward op and both backward ops.
static bool checkConvAttrs(InferContext &ctx) {
  const auto &stride = ctx.getInts("stride"), &pad = ctx.getInts("padding"),
             &dil = ctx.getInts("dilation");
  for (const auto *v : {&stride, &pad, &dil})
    if (v->size() != 2)
      return ctx.error("stride, padding and dilation must have 2 values each");
  if (stride[0] < 1 || stride[1] < 1 || dil[0] < 1 || dil[1] < 1 || pad[0] < 0 || pad[1] < 0)
    return ctx.error("stride and dilation must be >= 1 and padding >= 0");
  if (!requireGeometryBounds(ctx, {"stride", "padding", "dilation"}))
    return false;
  if (ctx.getInt("groups") < 1)
    return ctx.error("groups must be >= 1, got " + llvm::Twine(ctx.getInt("groups")));
  return true;
}

// Checks that a convolution of input `x` by weight `w` (both as shapes)
// produces grad_output's shape; the backward ops get the shape they do not
// receive as a tensor through an attribute, so it is validated here.
static bool checkConvShapes(InferContext &ctx, llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> w,
                            const TensorType &dy) {
  if (x.size() != 4 || w.size() != 4)
    return ctx.error("input and weight shapes must have 4 dims, got " + shapeStr(x) + " and " +
                     shapeStr(w));
  int64_t groups = ctx.getInt("groups");
  if (x[1] % groups != 0 || w[0] % groups != 0 || w[1] * groups != x[1])
    return ctx.error("weight " + shapeStr(w) + " with groups " + llvm::Twine(groups) +
                     " does not fit input " + shapeStr(x));
  const auto &stride = ctx.getInts("stride"), &pad = ctx.getInts("padding"),
             &dil = ctx.getInts("dilation");
  int64_t oh = convOut(x[2], w[2], stride[0], pad[0], dil[0]);
  int64_t ow = convOut(x[3], w[3], stride[1], pad[1], dil[1]);
  llvm::SmallVector<int64_t, 4> expected{x[0], w[0], oh, ow};
  if (dy.dims() != llvm::ArrayRef<int64_t>(expected))
    return ctx.error("grad_output " + typeStr(dy) + " does not match the convolution output " +
                     shapeStr(expected));
  return true;
}

// conv2d_grad_input(grad_output[N, O, H', W'], weight[O, C/groups, kh, kw])
//   -> [N, C, H, W] = input_shape
static bool inferConv2dGradInput(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 4) || !requireRank(ctx, 1, 4) ||
      !requireSameDType(ctx, 0, 1) || !checkConvAttrs(ctx))
    return false;
  const std::vector<int64_t> &inputShape = ctx.getInts("input_shape");
  if (!checkConvShapes(ctx, inputShape, ctx.operand(1).dims(), ctx.operand(0)))
    return false;
  results.push_back(TensorType(ctx.operand(0).dtype(), inputShape));
  return true;
}

// conv2d_grad_weight(grad_output[N, O, H', W'], input[N, C, H, W])
//   -> [O, C/groups, kh, kw] = weight_shape
static bool inferConv2dGradWeight(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 4) || !requireRank(ctx, 1, 4) ||
      !requireSameDType(ctx, 0, 1) || !checkConvAttrs(ctx))
    return false;
  const std::vector<int64_t> &weightShape = ctx.getInts("weight_shape");
  if (!checkConvShapes(ctx, ctx.operand(1).dims(), weightShape, ctx.operand(0)))
    return false;
  results.push_back(TensorType(ctx.operand(0).dtype(), weightShape));
  return true;
}

// scaled_dot_product_attention_grad(grad_output, query, key, value)
//   -> grad_query, grad_key, grad_value (the types of query, key, value)
static bool inferAttentionGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  TensorType forwardResult;
  if (!attentionResult(ctx, 1, forwardResult))
    return false;
  if (ctx.operand(0) != forwardResult)
    return ctx.error("grad_output " + typeStr(ctx.operand(0)) +
                     " does not match the attention output " + typeStr(forwardResult));
  for (unsigned i = 1; i < 4; ++i)
    results.push_back(ctx.operand(i));
  return true;
}

// --- Gradient rules ---------------------------------------------------------

static AttrMap transposes(bool a, bool b) {
  return {{"transpose_a", Attribute(a)}, {"transpose_b", Attribute(b)}};
}

// With C = op(A) op(B) (op = optional transpose): dA = dC op(B)^T stored as
// op(A) is, and dB = op(A)^T dC likewise. `mm` is matmul or batch_matmul.
static void gemmGradients(GradientBuilder &gb, OpKind mm, const Node &fwd, Value *dy,
                          llvm::MutableArrayRef<Value *> dxs) {
  Value *a = fwd.operand(0), *b = fwd.operand(1);
  bool ta = attrs::MatMul(fwd).transpose_a(), tb = attrs::MatMul(fwd).transpose_b();
  if (gb.needsGradient(0)) {
    Value *da = ta ? gb.build1(mm, {b, dy}, transposes(tb, true))
                   : gb.build1(mm, {dy, b}, transposes(false, !tb));
    dxs[0] = da ? gb.sumToShape(da, a->type().dims()) : nullptr;
  }
  if (gb.needsGradient(1)) {
    Value *db = tb ? gb.build1(mm, {dy, a}, transposes(true, ta))
                   : gb.build1(mm, {a, dy}, transposes(!ta, false));
    dxs[1] = db ? gb.sumToShape(db, b->type().dims()) : nullptr;
  }
}

static void gradMatMul(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                       llvm::MutableArrayRef<Value *> dxs) {
  gemmGradients(gb, OpKind::MatMul, fwd, dys[0], dxs);
}

// Broadcast batch dims are summed back by sumToShape.
static void gradBatchMatMul(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                            llvm::MutableArrayRef<Value *> dxs) {
  gemmGradients(gb, OpKind::BatchMatMul, fwd, dys[0], dxs);
}

// y = x W^T + b over rows of x: with dy and x flattened to matrices,
// dx = dy W, dW = dy^T x, db = column sums of dy.
static void gradLinear(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                       llvm::MutableArrayRef<Value *> dxs) {
  Value *x = fwd.operand(0), *w = fwd.operand(1);
  int64_t outFeatures = w->type().dim(0), inFeatures = w->type().dim(1);
  int64_t rows = x->type().numElements() / inFeatures;
  Value *dy2d = gb.reshape(dys[0], {rows, outFeatures});
  if (gb.needsGradient(0))
    dxs[0] = gb.reshape(gb.build1(OpKind::MatMul, {dy2d, w}), x->type().dims());
  if (gb.needsGradient(1))
    dxs[1] = gb.build1(OpKind::MatMul, {dy2d, gb.reshape(x, {rows, inFeatures})},
                       transposes(true, false));
  if (fwd.numOperands() > 2 && gb.needsGradient(2))
    dxs[2] = gb.build1(OpKind::ReduceSum, {dy2d}, {{"dims", Attribute(std::vector<int64_t>{0})}});
}

static AttrMap convAttrs(const Node &fwd) {
  return {{"stride", fwd.attr("stride")},
          {"padding", fwd.attr("padding")},
          {"dilation", fwd.attr("dilation")},
          {"groups", fwd.attr("groups")}};
}

static std::vector<int64_t> dimsOf(const Value *v) {
  return std::vector<int64_t>(v->type().dims().begin(), v->type().dims().end());
}

static void gradConv2d(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                       llvm::MutableArrayRef<Value *> dxs) {
  Value *dy = dys[0], *x = fwd.operand(0), *w = fwd.operand(1);
  if (gb.needsGradient(0)) {
    AttrMap attrs = convAttrs(fwd);
    attrs["input_shape"] = Attribute(dimsOf(x));
    dxs[0] = gb.build1(OpKind::Conv2dGradInput, {dy, w}, std::move(attrs));
  }
  if (gb.needsGradient(1)) {
    AttrMap attrs = convAttrs(fwd);
    attrs["weight_shape"] = Attribute(dimsOf(w));
    dxs[1] = gb.build1(OpKind::Conv2dGradWeight, {dy, x}, std::move(attrs));
  }
  if (fwd.numOperands() > 2 && gb.needsGradient(2))
    dxs[2] =
        gb.build1(OpKind::ReduceSum, {dy}, {{"dims", Attribute(std::vector<int64_t>{0, 2, 3})}});
}

// conv2d_grad_input is also a layer of its own: ONNX ConvTranspose (a
// decoder's upsampling) lowers to it. y = convT(g, w), the transpose of
// x -> conv(x, w): dL/dg = conv(dy, w) and dL/dw = the convolution's weight
// gradient with dy in the input's place and g in the output gradient's.
static void gradConv2dGradInput(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                                llvm::MutableArrayRef<Value *> dxs) {
  Value *dy = dys[0], *g = fwd.operand(0), *w = fwd.operand(1);
  if (gb.needsGradient(0))
    dxs[0] = gb.build1(OpKind::Conv2d, {dy, w}, convAttrs(fwd));
  if (gb.needsGradient(1)) {
    AttrMap attrs = convAttrs(fwd);
    attrs["weight_shape"] = Attribute(dimsOf(w));
    dxs[1] = gb.build1(OpKind::Conv2dGradWeight, {g, dy}, std::move(attrs));
  }
}

// One fused backward computes all three gradients: they share the recomputed
// attention probabilities.
static void gradAttention(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                          llvm::MutableArrayRef<Value *> dxs) {
  auto grads = gb.build(OpKind::ScaledDotProductAttentionGrad,
                        {dys[0], fwd.operand(0), fwd.operand(1), fwd.operand(2)},
                        {{"causal", fwd.attr("causal")},
                         {"scale", fwd.attr("scale")},
                         {"layout", fwd.attr("layout")}});
  if (grads.empty())
    return;
  for (unsigned i = 0; i < 3; ++i)
    if (gb.needsGradient(i))
      dxs[i] = grads[i];
}

//===----------------------------------------------------------------------===//
// Arithmetic (profiles' GFLOP/s): 2 flops per multiply-add.
//===----------------------------------------------------------------------===//

static double elements(const Value *v) { return static_cast<double>(v->type().numElements()); }

// Every result element is a dot product over the contracted dimension.
static double flopsLinear(const Node &n) {
  return 2 * elements(n.result(0)) * double(n.operand(1)->type().dims().back());
}
template <class Attrs> static double flopsMatMul(const Node &n) {
  const TensorType &a = n.operand(0)->type();
  int64_t k = Attrs(n).transpose_a() ? a.dim(a.rank() - 2) : a.dim(a.rank() - 1);
  return 2 * elements(n.result(0)) * double(k);
}
// Convolution and both its backward passes: every output element (of the
// forward) meets C/groups x kh x kw weights, i.e. weight elements / O.
static double convFlops(const Value *output, const Value *weight) {
  double outChannels = double(weight->type().dim(0));
  return 2 * elements(output) * elements(weight) / outChannels;
}
static double flopsConv2d(const Node &n) { return convFlops(n.result(0), n.operand(1)); }
static double flopsConv2dGradInput(const Node &n) { return convFlops(n.operand(0), n.operand(1)); }
static double flopsConv2dGradWeight(const Node &n) { return convFlops(n.operand(0), n.result(0)); }
// Q K^T and P V, each 2 S T D per head: 4 x (query elements) x T. The
// backward's four GEMMs of the same sizes (dQ, dK, dV, dP): twice that, the
// usual convention (a recomputed Q K^T is not counted).
static double attentionFlops(const Node &n, const Value *query, const Value *key) {
  const TensorType &k = key->type();
  bool bshd = attrs::ScaledDotProductAttention(n).layout() == AttentionLayout::Bshd;
  return 4 * elements(query) * double(k.dim(k.rank() - (bshd ? 3 : 2)));
}
static double flopsAttention(const Node &n) {
  return attentionFlops(n, n.operand(0), n.operand(1));
}
static double flopsAttentionGrad(const Node &n) {
  return 2 * attentionFlops(n, n.operand(1), n.operand(2));
}

void registerLinearAlgebraOps(OpRegistry &r) {
  OpRow(r.define(OpKind::Linear))
      .operand("input")
      .operand("weight")
      .optionalOperand("bias")
      .infer(inferLinear)
      .gradient(gradLinear)
      .flops(flopsLinear);
  OpRow(r.define(OpKind::MatMul))
      .operand("a")
      .operand("b")
      .infer(inferMatMul)
      .gradient(gradMatMul)
      .flops(flopsMatMul<attrs::MatMul>)
      .readsTransposed(0, "transpose_a")
      .readsTransposed(1, "transpose_b");
  OpRow(r.define(OpKind::BatchMatMul))
      .operand("a")
      .operand("b")
      .infer(inferBatchMatMul)
      .gradient(gradBatchMatMul)
      .flops(flopsMatMul<attrs::BatchMatMul>)
      .readsTransposed(0, "transpose_a")
      .readsTransposed(1, "transpose_b");
  OpRow(r.define(OpKind::Conv2d))
      .operand("input")
      .operand("weight")
      .optionalOperand("bias")
      .infer(inferConv2d)
      .gradient(gradConv2d)
      .flops(flopsConv2d);
  // scale <= 0 means the default 1/sqrt(head size), as PyTorch's scale=None.
  OpRow(r.define(OpKind::ScaledDotProductAttention))
      .operand("query")
      .operand("key")
      .operand("value")
      .infer(inferAttention)
      .gradient(gradAttention)
      .flops(flopsAttention)
      // q, k, v permuted from [B, S, H, D] to [B, H, S, D] (heads split off
      // a linear layer's output) are read in place in layout bshd.
      .readsPermuted({0, 2, 1, 3}, "layout", "bhsd", "bshd");

  // Backward ops (not differentiated again).
  OpRow(r.define(OpKind::Conv2dGradInput))
      .operand("grad_output")
      .operand("weight")
      .infer(inferConv2dGradInput)
      .gradient(gradConv2dGradInput)
      .flops(flopsConv2dGradInput);
  OpRow(r.define(OpKind::Conv2dGradWeight))
      .operand("grad_output")
      .operand("input")
      .infer(inferConv2dGradWeight)
      .flops(flopsConv2dGradWeight);
  OpRow(r.define(OpKind::ScaledDotProductAttentionGrad))
      .operand("grad_output")
      .operand("query")
      .operand("key")
      .operand("value")
      .infer(inferAttentionGrad)
      .flops(flopsAttentionGrad);
}

} // namespace ampc
