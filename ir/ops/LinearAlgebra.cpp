//===- LinearAlgebra.cpp - linear, matmul, batch_matmul, conv2d, attention -===//
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

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
static int64_t convOut(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0)
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

// scaled_dot_product_attention(q[..., Sq, D], k[..., Sk, D], v[..., Sk, Dv]) -> [..., Sq, Dv]
static bool inferAttention(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireSameDType(ctx, 0, 1) || !requireSameDType(ctx, 0, 2))
    return false;
  const TensorType &q = ctx.operand(0), &k = ctx.operand(1), &v = ctx.operand(2);
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank())
    return ctx.error("query, key and value must have the same rank (at least 2), got " +
                     typeStr(q) + ", " + typeStr(k) + ", " + typeStr(v));
  unsigned r = q.rank();
  if (q.dims().drop_back(2) != k.dims().drop_back(2) ||
      q.dims().drop_back(2) != v.dims().drop_back(2))
    return ctx.error("query, key and value batch dims differ");
  if (q.dim(r - 1) != k.dim(r - 1))
    return ctx.error("query and key head sizes differ: " + typeStr(q) + " and " + typeStr(k));
  if (k.dim(r - 2) != v.dim(r - 2))
    return ctx.error("key and value sequence lengths differ: " + typeStr(k) + " and " + typeStr(v));
  if (ctx.getBool("causal") && q.dim(r - 2) != k.dim(r - 2))
    return ctx.error("causal attention needs equal query and key lengths");
  llvm::SmallVector<int64_t, 4> dims(q.dims().begin(), q.dims().end());
  dims.back() = v.dim(r - 1);
  results.push_back(TensorType(q.dtype(), dims));
  return true;
}

void registerLinearAlgebraOps(OpRegistry &r) {
  OpRow(r.define(OpKind::Linear))
      .operand("input")
      .operand("weight")
      .optionalOperand("bias")
      .infer(inferLinear);
  OpRow(r.define(OpKind::MatMul))
      .operand("a")
      .operand("b")
      .attr("transpose_a", AttrType::Bool, false)
      .attr("transpose_b", AttrType::Bool, false)
      .infer(inferMatMul);
  OpRow(r.define(OpKind::BatchMatMul))
      .operand("a")
      .operand("b")
      .attr("transpose_a", AttrType::Bool, false)
      .attr("transpose_b", AttrType::Bool, false)
      .infer(inferBatchMatMul);
  OpRow(r.define(OpKind::Conv2d))
      .operand("input")
      .operand("weight")
      .optionalOperand("bias")
      .attr("stride", AttrType::Ints, std::vector<int64_t>{1, 1})
      .attr("padding", AttrType::Ints, std::vector<int64_t>{0, 0})
      .attr("dilation", AttrType::Ints, std::vector<int64_t>{1, 1})
      .attr("groups", AttrType::Int, 1)
      .infer(inferConv2d);
  // scale <= 0 means the default 1/sqrt(head size), as PyTorch's scale=None.
  OpRow(r.define(OpKind::ScaledDotProductAttention))
      .operand("query")
      .operand("key")
      .operand("value")
      .attr("causal", AttrType::Bool, false)
      .attr("scale", AttrType::Float, 0.0)
      .infer(inferAttention);
}

} // namespace ampc
