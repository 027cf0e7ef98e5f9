//===- Shape.cpp - flatten, reshape, transpose, permute, concat, embedding, cast -===//
//
// Data movement ops accept any dtype (indices and masks move too), except
// embedding's table, which must be floating.
//
//===----------------------------------------------------------------------===//
#include "ir/GradientBuilder.h"
#include "ir/OpAttrs.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

// flatten(input, start_dim=1, end_dim=-1): dims start..end become one. A
// scalar flattens to [1], as torch.flatten does.
static bool inferFlatten(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const TensorType &x = ctx.operand(0);
  llvm::SmallVector<int64_t, 4> in(x.dims().begin(), x.dims().end());
  if (in.empty())
    in.push_back(1);
  unsigned start, end;
  if (!normalizeAxis(ctx, ctx.getInt("start_dim"), in.size(), start, "start_dim") ||
      !normalizeAxis(ctx, ctx.getInt("end_dim"), in.size(), end, "end_dim"))
    return false;
  if (start > end)
    return ctx.error("start_dim " + llvm::Twine(ctx.getInt("start_dim")) + " comes after end_dim " +
                     llvm::Twine(ctx.getInt("end_dim")) + " for input " + typeStr(x));
  llvm::SmallVector<int64_t, 4> dims(in.begin(), in.begin() + start);
  int64_t merged = 1;
  for (unsigned i = start; i <= end; ++i)
    merged *= in[i];
  dims.push_back(merged);
  dims.append(in.begin() + end + 1, in.end());
  results.push_back(TensorType(x.dtype(), dims));
  return true;
}

// reshape(input, shape): one entry may be -1 and is inferred from the rest.
static bool inferReshape(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const TensorType &x = ctx.operand(0);
  const std::vector<int64_t> &shape = ctx.getInts("shape");
  llvm::SmallVector<int64_t, 4> dims(shape.begin(), shape.end());
  std::optional<unsigned> inferred;
  int64_t known = 1;
  for (unsigned i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (inferred)
        return ctx.error("shape " + shapeStr(shape) + " has more than one -1");
      inferred = i;
      continue;
    }
    if (dims[i] < 0)
      return ctx.error("shape " + shapeStr(shape) + " has a negative dim");
    if (__builtin_mul_overflow(known, dims[i], &known))
      return ctx.error("shape " + shapeStr(shape) + " has too many elements");
  }
  int64_t count = x.numElements();
  if (inferred) {
    if (known == 0 || count % known != 0)
      return ctx.error("cannot reshape input " + typeStr(x) + " to " + shapeStr(shape));
    dims[*inferred] = count / known;
  } else if (known != count) {
    return ctx.error("cannot reshape input " + typeStr(x) + " (" + llvm::Twine(count) +
                     " elements) to " + shapeStr(shape) + " (" + llvm::Twine(known) + " elements)");
  }
  results.push_back(TensorType(x.dtype(), dims));
  return true;
}

// transpose(input, dim0, dim1): swaps two dims.
static bool inferTranspose(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const TensorType &x = ctx.operand(0);
  unsigned d0, d1;
  if (!normalizeAxis(ctx, ctx.getInt("dim0"), x.rank(), d0, "dim0") ||
      !normalizeAxis(ctx, ctx.getInt("dim1"), x.rank(), d1, "dim1"))
    return false;
  llvm::SmallVector<int64_t, 4> dims(x.dims().begin(), x.dims().end());
  std::swap(dims[d0], dims[d1]);
  results.push_back(TensorType(x.dtype(), dims));
  return true;
}

// permute(input, dims): result dim i is input dim dims[i].
static bool inferPermute(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const TensorType &x = ctx.operand(0);
  const std::vector<int64_t> &perm = ctx.getInts("dims");
  if (perm.size() != x.rank())
    return ctx.error("dims " + shapeStr(perm) + " must have one entry per dim of input " +
                     typeStr(x));
  llvm::SmallVector<bool, 4> seen(x.rank(), false);
  llvm::SmallVector<int64_t, 4> dims;
  for (int64_t p : perm) {
    unsigned d;
    if (!normalizeAxis(ctx, p, x.rank(), d))
      return false;
    if (seen[d])
      return ctx.error("dims " + shapeStr(perm) + " is not a permutation: dim " + llvm::Twine(d) +
                       " appears twice");
    seen[d] = true;
    dims.push_back(x.dim(d));
  }
  results.push_back(TensorType(x.dtype(), dims));
  return true;
}

// concat(inputs..., axis): same dtype and rank, equal dims except on axis.
static bool inferConcat(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const TensorType &first = ctx.operand(0);
  unsigned axis;
  if (!normalizeAxis(ctx, ctx.getInt("axis"), first.rank(), axis, "axis"))
    return false;
  llvm::SmallVector<int64_t, 4> dims(first.dims().begin(), first.dims().end());
  for (unsigned i = 1; i < ctx.numOperands(); ++i) {
    const TensorType &t = ctx.operand(i);
    if (t.dtype() != first.dtype())
      return ctx.error("inputs must have the same dtype, got " + typeStr(first) +
                       " (input 0) and " + typeStr(t) + " (input " + llvm::Twine(i) + ")");
    bool sameOffAxis = t.rank() == first.rank();
    for (unsigned d = 0; sameOffAxis && d < t.rank(); ++d)
      sameOffAxis = d == axis || t.dim(d) == first.dim(d);
    if (!sameOffAxis)
      return ctx.error("inputs must have the same shape except on axis " + llvm::Twine(axis) +
                       ", got " + typeStr(first) + " (input 0) and " + typeStr(t) + " (input " +
                       llvm::Twine(i) + ")");
    dims[axis] += t.dim(axis);
  }
  results.push_back(TensorType(first.dtype(), dims));
  return true;
}

// embedding(indices[...], weight[num, dim]) -> [..., dim] in weight's dtype.
static bool inferEmbedding(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireIndex(ctx, 0) || !requireFloat(ctx, 1) || !requireRank(ctx, 1, 2))
    return false;
  const TensorType &indices = ctx.operand(0), &w = ctx.operand(1);
  int64_t paddingIdx = ctx.getInt("padding_idx");
  if (paddingIdx < -1 || paddingIdx >= w.dim(0))
    return ctx.error("padding_idx " + llvm::Twine(paddingIdx) +
                     " must be -1 (none) or a row of weight " + typeStr(w));
  llvm::SmallVector<int64_t, 4> dims(indices.dims().begin(), indices.dims().end());
  dims.push_back(w.dim(1));
  results.push_back(TensorType(w.dtype(), dims));
  return true;
}

// cast(input, to): same shape, dtype `to`.
static bool inferCast(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  results.push_back(ctx.operand(0).withDType(ctx.getDType("to")));
  return true;
}

// slice(input, axis, start, end): input[..., start:end, ...] along axis, with
// 0 <= start <= end <= the axis's size (concat's backward).
static bool inferSlice(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const TensorType &x = ctx.operand(0);
  unsigned axis;
  if (!normalizeAxis(ctx, ctx.getInt("axis"), x.rank(), axis, "axis"))
    return false;
  int64_t start = ctx.getInt("start"), end = ctx.getInt("end");
  if (start < 0 || start > end || end > x.dim(axis))
    return ctx.error("slice [" + llvm::Twine(start) + ", " + llvm::Twine(end) +
                     ") is not within dim " + llvm::Twine(axis) + " of input " + typeStr(x));
  llvm::SmallVector<int64_t, 4> dims(x.dims().begin(), x.dims().end());
  dims[axis] = end - start;
  results.push_back(TensorType(x.dtype(), dims));
  return true;
}

// broadcast_to(input, shape): numpy broadcasting of input to exactly `shape`
// (reduce_sum's backward).
static bool inferBroadcastTo(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const TensorType &x = ctx.operand(0);
  const std::vector<int64_t> &shape = ctx.getInts("shape");
  bool fits = x.rank() <= shape.size();
  size_t offset = fits ? shape.size() - x.rank() : 0;
  for (unsigned d = 0; fits && d < x.rank(); ++d)
    fits = x.dim(d) == 1 || x.dim(d) == shape[d + offset];
  if (!fits)
    return ctx.error("cannot broadcast input " + typeStr(x) + " to " + shapeStr(shape));
  for (int64_t d : shape)
    if (d < 0)
      return ctx.error("shape " + shapeStr(shape) + " has a negative dim");
  results.push_back(TensorType(x.dtype(), shape));
  return true;
}

// embedding_grad(grad[..., dim], indices[...]) -> [num_embeddings, dim]: the
// rows of grad summed into the rows their indices name.
static bool inferEmbeddingGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireMinRank(ctx, 0, 1) || !requireIndex(ctx, 1))
    return false;
  const TensorType &grad = ctx.operand(0), &indices = ctx.operand(1);
  if (grad.rank() != indices.rank() + 1 ||
      grad.dims().drop_back() != llvm::ArrayRef<int64_t>(indices.dims()))
    return ctx.error("grad " + typeStr(grad) + " must have the shape of indices " +
                     typeStr(indices) + " plus one dim");
  int64_t numEmbeddings = ctx.getInt("num_embeddings");
  if (numEmbeddings < 1)
    return ctx.error("num_embeddings must be positive, got " + llvm::Twine(numEmbeddings));
  int64_t paddingIdx = ctx.getInt("padding_idx");
  if (paddingIdx < -1 || paddingIdx >= numEmbeddings)
    return ctx.error("padding_idx " + llvm::Twine(paddingIdx) +
                     " must be -1 (none) or below num_embeddings " + llvm::Twine(numEmbeddings));
  results.push_back(TensorType(grad.dtype(), {numEmbeddings, grad.dims().back()}));
  return true;
}

//===----------------------------------------------------------------------===//
// Gradient rules: data movement moves the gradient back the other way.
//===----------------------------------------------------------------------===//

static void gradReshapeBack(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                            llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.reshape(dys[0], fwd.operand(0)->type().dims());
}

// A transpose is its own inverse.
static void gradTranspose(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                          llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.build1(OpKind::Transpose, {dys[0]}, fwd.attrs());
}

// Result dim i is input dim perm[i], so the gradient goes back through the
// inverse permutation: inverse[perm[i]] = i.
static void gradPermute(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                        llvm::MutableArrayRef<Value *> dxs) {
  const std::vector<int64_t> &perm = attrs::Permute(fwd).dims();
  int64_t rank = static_cast<int64_t>(perm.size());
  std::vector<int64_t> inverse(perm.size());
  for (int64_t i = 0; i < rank; ++i)
    inverse[perm[i] < 0 ? perm[i] + rank : perm[i]] = i;
  dxs[0] = gb.build1(OpKind::Permute, {dys[0]}, {{"dims", Attribute(inverse)}});
}

// Each input gets its own slice of the gradient along the axis.
static void gradConcat(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                       llvm::MutableArrayRef<Value *> dxs) {
  int64_t axis = attrs::Concat(fwd).axis();
  int64_t rank = static_cast<int64_t>(fwd.result()->type().rank());
  if (axis < 0)
    axis += rank;
  int64_t start = 0;
  for (unsigned i = 0; i < fwd.numOperands(); ++i) {
    int64_t size = fwd.operand(i)->type().dim(axis);
    if (gb.needsGradient(i))
      dxs[i] = gb.build1(OpKind::Slice, {dys[0]},
                         {{"axis", Attribute(axis)},
                          {"start", Attribute(start)},
                          {"end", Attribute(start + size)}});
    start += size;
  }
}

// The weight's gradient is a scatter-add of the result's rows; the indices
// get none.
static void gradEmbedding(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                          llvm::MutableArrayRef<Value *> dxs) {
  if (!gb.needsGradient(1))
    return;
  dxs[1] = gb.build1(OpKind::EmbeddingGrad, {dys[0], fwd.operand(0)},
                     {{"num_embeddings", Attribute(fwd.operand(1)->type().dim(0))},
                      {"padding_idx", fwd.attr("padding_idx")}});
}

// The backward of a cast is a cast back, so a gradient arrives in its
// value's own dtype.
static void gradCast(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                     llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.castTo(dys[0], fwd.operand(0)->dtype());
}

// The gradient flows into the sliced range; the rest of the input gets
// zeros (a fill on each side, joined by concat).
static void gradSlice(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                      llvm::MutableArrayRef<Value *> dxs) {
  const TensorType &x = fwd.operand(0)->type();
  int64_t axis = attrs::Slice(fwd).axis();
  if (axis < 0)
    axis += x.rank();
  int64_t start = attrs::Slice(fwd).start(), end = attrs::Slice(fwd).end();
  auto zeros = [&](int64_t size) {
    std::vector<int64_t> dims(x.dims().begin(), x.dims().end());
    dims[axis] = size;
    return gb.build1(OpKind::Fill, {},
                     {{"value", Attribute(0.0)},
                      {"shape", Attribute(dims)},
                      {"dtype", Attribute(dys[0]->dtype())}});
  };
  llvm::SmallVector<Value *, 3> parts;
  if (start > 0)
    parts.push_back(zeros(start));
  parts.push_back(dys[0]);
  if (end < x.dim(axis))
    parts.push_back(zeros(x.dim(axis) - end));
  dxs[0] =
      parts.size() == 1 ? dys[0] : gb.build1(OpKind::Concat, parts, {{"axis", Attribute(axis)}});
}

static void gradBroadcastTo(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                            llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.sumToShape(dys[0], fwd.operand(0)->type().dims());
}

void registerShapeOps(OpRegistry &r) {
  OpRow(r.define(OpKind::Flatten))
      .operand("input")
      .infer(inferFlatten)
      .gradient(gradReshapeBack)
      .viewsOperand();
  OpRow(r.define(OpKind::Reshape))
      .operand("input")
      .infer(inferReshape)
      .gradient(gradReshapeBack)
      .viewsOperand();
  OpRow(r.define(OpKind::Transpose)).operand("input").infer(inferTranspose).gradient(gradTranspose);
  OpRow(r.define(OpKind::Permute)).operand("input").infer(inferPermute).gradient(gradPermute);
  OpRow(r.define(OpKind::Concat)).variadicOperand("inputs").infer(inferConcat).gradient(gradConcat);
  OpRow(r.define(OpKind::Embedding))
      .indexOperand("indices")
      .operand("weight")
      .infer(inferEmbedding)
      .gradient(gradEmbedding);
  // cacheable: set by the cast optimisation on casts of weights, whose result
  // the runtime may keep across steps until the weight changes.
  OpRow(r.define(OpKind::Cast)).operand("input").infer(inferCast).gradient(gradCast).elementwise();
  // slice is concat's backward, and a forward op of imported models
  // (ONNX Slice, Gather of a constant index).
  OpRow(r.define(OpKind::Slice)).operand("input").infer(inferSlice).gradient(gradSlice);
  OpRow(r.define(OpKind::BroadcastTo))
      .operand("input")
      .infer(inferBroadcastTo)
      .gradient(gradBroadcastTo);
  // Backward op (not differentiated again).
  OpRow(r.define(OpKind::EmbeddingGrad))
      .operand("grad")
      .indexOperand("indices")
      .infer(inferEmbeddingGrad);
}

} // namespace ampc
