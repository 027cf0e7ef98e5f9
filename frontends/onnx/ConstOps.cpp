//===- ConstOps.cpp - Range, ConstantOfShape, Expand, Tile, Trilu, ... -----===//
//
// Generators (Range, ConstantOfShape) and the ops exporters apply to
// masks and index tensors (Trilu, CumSum, ScatterND) fold at import; Expand,
// Tile, Split and Trilu also lower on values, to broadcast_to, reshape,
// slice and where.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"
#include "frontends/onnx/ConstFold.h"
#include "frontends/onnx/OnnxFile.h"

#include "llvm/ADT/STLExtras.h"

namespace ampc::onnxfe {

namespace {

bool folded(OnnxLowering &l, const onnx::NodeProto &n, bool ok, ConstTensor &out,
            const std::string &err) {
  if (!ok)
    return l.error(err);
  l.setConstant(n, 0, std::move(out));
  return true;
}

std::vector<int64_t> dimsOfType(const TensorType &t) {
  return std::vector<int64_t>(t.dims().begin(), t.dims().end());
}

} // namespace

bool lowerRange(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {}))
    return false;
  const ConstTensor *start = l.constantOf(n, 0, "start"), *limit = l.constantOf(n, 1, "limit"),
                    *delta = l.constantOf(n, 2, "delta");
  if (!start || !limit || !delta)
    return false;
  if (!start->isScalarLike() || !limit->isScalarLike() || !delta->isScalarLike())
    return l.error("start, limit and delta must be scalars");
  ConstTensor out;
  std::string err;
  bool ok = foldRange(start->values[0], limit->values[0], delta->values[0], start->dtype, out, err);
  return folded(l, n, ok, out, err);
}

bool lowerConstantOfShape(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"value"}))
    return false;
  const ConstTensor *shape = l.constantOf(n, 0, "shape");
  if (!shape)
    return false;
  ConstTensor out;
  out.dtype = DType::F32;
  double value = 0;
  if (const onnx::AttributeProto *a = l.attr(n, "value")) {
    NpyArray array;
    std::string err;
    if (!a->has_t() || !tensorToArray(a->t(), ".", array, err) || array.numElements() != 1)
      return l.error("value must be a one-element tensor" + (err.empty() ? "" : ": " + err));
    out.dtype = array.dtype;
    value = arrayElement(array, 0);
  }
  for (double d : shape->values)
    out.dims.push_back(saturatingInt(d));
  int64_t count = foldedCount(out.dims);
  if (count < 0)
    return l.error("the shape has a negative dim or more than " + llvm::Twine(kMaxFoldedElements) +
                   " elements");
  out.values.assign(size_t(count), value);
  l.setConstant(n, 0, std::move(out));
  return true;
}

bool lowerExpand(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {}))
    return false;
  const ConstTensor *shape = l.constantOf(n, 1, "shape");
  if (!shape)
    return false;
  std::vector<int64_t> target = shape->asInts();
  std::vector<int64_t> in = dimsOfType(l.typeOf(n, 0));
  llvm::SmallVector<int64_t, 6> dims;
  std::string err;
  if (!broadcastShapes({in, target}, dims, err))
    return l.error(err);
  if (isFoldable(l.input(n, 0))) {
    const ConstTensor *c = l.constantOf(n, 0, "input");
    ConstTensor out;
    return c && folded(l, n, foldExpand(*c, dims, out, err), out, err);
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  if (llvm::ArrayRef<int64_t>(dims) == x->type().dims()) {
    l.alias(n, 0, 0);
    return true;
  }
  // broadcast_to aligns ranks itself only through a reshape: give x the
  // result's rank first.
  llvm::SmallVector<int64_t, 6> ranked(dims.size() - in.size(), 1);
  ranked.append(in.begin(), in.end());
  Value *r = l.reshape(x, ranked);
  l.setOutput(n, 0,
              l.build1(OpKind::BroadcastTo, {r},
                       {{"shape", Attribute(std::vector<int64_t>(dims.begin(), dims.end()))}},
                       n.output(0)));
  return true;
}

bool lowerTile(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {}))
    return false;
  const ConstTensor *repeats = l.constantOf(n, 1, "repeats");
  if (!repeats)
    return false;
  std::vector<int64_t> reps = repeats->asInts();
  std::vector<int64_t> in = dimsOfType(l.typeOf(n, 0));
  if (reps.size() != in.size())
    return l.error("repeats has " + llvm::Twine(reps.size()) + " values for an input of rank " +
                   llvm::Twine(in.size()));
  std::string err;
  if (isFoldable(l.input(n, 0))) {
    const ConstTensor *c = l.constantOf(n, 0, "input");
    ConstTensor out;
    return c && folded(l, n, foldTile(*c, reps, out, err), out, err);
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  if (llvm::all_of(reps, [](int64_t r) { return r == 1; })) {
    l.alias(n, 0, 0);
    return true;
  }
  // [d0, d1] -> [1, d0, 1, d1] -> broadcast [r0, d0, r1, d1] -> [r0 d0, r1 d1].
  std::vector<int64_t> split, spread, merged;
  for (size_t d = 0; d < in.size(); ++d) {
    if (reps[d] < 1)
      return l.error("repeats must be positive on a run-time value");
    split.insert(split.end(), {1, in[d]});
    spread.insert(spread.end(), {reps[d], in[d]});
    merged.push_back(reps[d] * in[d]);
  }
  Value *wide =
      l.build1(OpKind::BroadcastTo, {l.reshape(x, split)}, {{"shape", Attribute(spread)}});
  l.setOutput(n, 0, l.reshape(wide, merged, n.output(0)));
  return true;
}

bool lowerTrilu(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"upper"}))
    return false;
  bool upper = l.intAttr(n, "upper", 1) != 0;
  int64_t k = 0;
  if (l.hasInput(n, 1)) {
    const ConstTensor *kc = l.constantOf(n, 1, "k");
    if (!kc)
      return false;
    if (!kc->isScalarLike())
      return l.error("k must be a scalar");
    k = saturatingInt(kc->values[0]);
  }
  const TensorType &type = l.typeOf(n, 0);
  if (type.rank() < 2)
    return l.error("the input must have at least 2 dims, got " + type.str());
  if (isFoldable(l.input(n, 0))) {
    const ConstTensor *c = l.constantOf(n, 0, "input");
    if (!c)
      return false;
    l.setConstant(n, 0, foldTrilu(*c, k, upper));
    return true;
  }
  // On a value: where(mask, x, 0) with the mask a bool buffer.
  ConstTensor ones;
  ones.dtype = DType::Bool;
  ones.dims = {type.dim(type.rank() - 2), type.dim(type.rank() - 1)};
  if (foldedCount(ones.dims) < 0)
    return l.error("the triangle mask would pass " + llvm::Twine(kMaxFoldedElements) + " elements");
  ones.values.assign(size_t(ones.dims[0] * ones.dims[1]), 1.0);
  Value *mask = l.constantBuffer(n.output(0) + ".mask", foldTrilu(ones, k, upper));
  Value *x = l.valueOf(n, 0);
  if (!mask || !x)
    return false;
  Value *zero = l.constantState(n.output(0) + ".zero", TensorType(x->dtype(), {}), 0.0);
  l.setOutput(n, 0, l.build1(OpKind::Where, {mask, x, zero}, {}, n.output(0)));
  return true;
}

/// CumSum of a run-time tensor (position ids counted from an attention
/// mask): with the axis moved last, each output is the sum of the input row
/// times a 0/1 row saying which positions it adds, [..., 1, L] * [L, L]
/// summed over the last dim. Registry ops only, so the gradient is theirs,
/// and no GEMM that a half level would round: the products are exact and
/// the sum runs in f32, or f64 for f64 (integers are counted in f32, exact
/// below 2^24).
/// Costs L times the input's elements.
static bool lowerRunTimeCumSum(OnnxLowering &l, const onnx::NodeProto &n, unsigned axis,
                               bool exclusive, bool reverse) {
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  const TensorType &t = x->type();
  DType dtype = t.dtype();
  if (dtype == DType::Bool)
    return l.error("CumSum of a bool tensor is not supported");
  // f64 sums in f64; everything else (integers, halves) in f32.
  DType sumType = dtype == DType::F64 ? DType::F64 : DType::F32;
  unsigned last = t.rank() - 1;
  std::vector<int64_t> perm;
  for (unsigned d = 0; d < t.rank(); ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  bool moved = axis != last;
  Value *v = dtype == sumType ? x : l.build1(OpKind::Cast, {x}, {{"to", Attribute(sumType)}});
  if (moved)
    v = l.build1(OpKind::Permute, {v}, {{"dims", Attribute(perm)}});
  if (!v)
    return false;
  int64_t length = t.dim(axis);
  llvm::SmallVector<int64_t, 6> rowDims(v->type().dims().begin(), v->type().dims().end());
  rowDims.insert(rowDims.end() - 1, 1);
  ConstTensor adds; // adds[i][j]: output i adds input j
  adds.dtype = sumType;
  adds.dims = {length, length};
  for (int64_t i = 0; i < length; ++i)
    for (int64_t j = 0; j < length; ++j) {
      bool in = reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
      adds.values.push_back(in ? 1.0 : 0.0);
    }
  Value *mask = l.constantBuffer("cumsum", adds);
  if (mask && mask->dtype() != sumType) // buffers of f64 constants are kept in f32
    mask = l.build1(OpKind::Cast, {mask}, {{"to", Attribute(sumType)}});
  Value *products = l.build1(OpKind::Mul, {l.reshape(v, rowDims), mask});
  Value *sums = l.build1(OpKind::ReduceSum, {products},
                         {{"dims", Attribute(std::vector<int64_t>{int64_t(last + 1)})},
                          {"keepdim", Attribute(false)}});
  if (moved && sums) {
    std::vector<int64_t> back(t.rank());
    for (unsigned d = 0; d < t.rank(); ++d)
      back[perm[d]] = d;
    sums = l.build1(OpKind::Permute, {sums}, {{"dims", Attribute(back)}});
  }
  if (sums && dtype != sumType)
    sums = l.build1(OpKind::Cast, {sums}, {{"to", Attribute(dtype)}});
  if (!sums)
    return false;
  l.setOutput(n, 0, sums);
  return true;
}

bool lowerCumSum(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"exclusive", "reverse"}))
    return false;
  const ConstTensor *axis = l.constantOf(n, 1, "axis");
  if (!axis)
    return false;
  if (!axis->isScalarLike())
    return l.error("axis must be a scalar");
  unsigned a;
  if (!l.normAxis(saturatingInt(axis->values[0]), l.typeOf(n, 0).rank(), a, "axis"))
    return false;
  bool exclusive = l.intAttr(n, "exclusive", 0) != 0, reverse = l.intAttr(n, "reverse", 0) != 0;
  if (!isFoldable(l.input(n, 0)))
    return lowerRunTimeCumSum(l, n, a, exclusive, reverse);
  const ConstTensor *c = l.constantOf(n, 0, "input");
  if (!c)
    return false;
  l.setConstant(n, 0, foldCumSum(*c, a, exclusive, reverse));
  return true;
}

/// ScatterND into run-time data or of run-time updates, at indices known at
/// import (x[idx] = v): each data element either keeps its value or takes
/// the one update element written to it (the last, where several are), so
/// the result is where(written, embedding(source, updates), data) with the
/// mask and the source positions computed now, by folding the scatter of
/// the updates' own positions. Registry ops only, so both data and updates
/// get their gradients. Add and mul reductions need the indices folded
/// with the values.
static bool lowerRunTimeScatterND(OnnxLowering &l, const onnx::NodeProto &n,
                                  const std::string &reduction) {
  if (reduction != "none")
    return l.error("ScatterND with reduction '" + reduction +
                   "' is supported on tensors known when the model is imported; here the data "
                   "or the updates are computed at run time");
  const ConstTensor *indices = l.constantOf(n, 1, "indices");
  if (!indices)
    return false;
  const TensorType &dataType = l.typeOf(n, 0), &updatesType = l.typeOf(n, 2);
  ConstTensor unwritten, positions, source;
  unwritten.dtype = positions.dtype = DType::F64;
  unwritten.dims.assign(dataType.dims().begin(), dataType.dims().end());
  unwritten.values.assign(dataType.numElements(), -1.0);
  positions.dims.assign(updatesType.dims().begin(), updatesType.dims().end());
  positions.values.resize(updatesType.numElements());
  for (size_t k = 0; k < positions.values.size(); ++k)
    positions.values[k] = double(k);
  std::string err;
  if (!foldScatterNd(unwritten, *indices, positions, "none", source, err))
    return l.error(err);
  Value *data = l.valueOf(n, 0), *updates = l.valueOf(n, 2);
  if (!data || !updates)
    return false;
  if (!isFloating(data->dtype()) || updates->dtype() != data->dtype())
    return l.error("ScatterND into run-time data needs floating data and updates of its dtype, "
                   "got " +
                   data->type().str() + " and " + updates->type().str());
  ConstTensor written = source, from = source;
  written.dtype = DType::Bool;
  from.dtype = DType::I64;
  for (size_t k = 0; k < source.values.size(); ++k) {
    written.values[k] = source.values[k] >= 0 ? 1.0 : 0.0;
    from.values[k] = std::max(source.values[k], 0.0);
  }
  int64_t count = std::max<int64_t>(updatesType.numElements(), 1);
  Value *table = l.reshape(updates, {count, 1});
  Value *picked = l.build1(OpKind::Embedding, {l.constantBuffer("scatter_from", from), table});
  Value *y = picked ? l.build1(OpKind::Where,
                               {l.constantBuffer("scatter_written", written),
                                l.reshape(picked, dataType.dims()), data},
                               {}, n.output(0))
                    : nullptr;
  if (!y)
    return false;
  l.setOutput(n, 0, y);
  return true;
}

bool lowerScatterND(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"reduction"}))
    return false;
  std::string reduction = l.stringAttr(n, "reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul")
    return l.error("reduction '" + reduction + "' is not supported");
  if (!isFoldable(l.input(n, 0)) || !isFoldable(l.input(n, 2)))
    return lowerRunTimeScatterND(l, n, reduction);
  if (!isFoldable(l.input(n, 1)))
    return l.constantOf(n, 1, "indices") != nullptr; // says they must be known, and how
  const ConstTensor *data = l.constantOf(n, 0, "data"), *indices = l.constantOf(n, 1, "indices"),
                    *updates = l.constantOf(n, 2, "updates");
  if (!data || !indices || !updates)
    return false;
  ConstTensor out;
  std::string err;
  return folded(l, n, foldScatterNd(*data, *indices, *updates, reduction, out, err), out, err);
}

bool lowerSplit(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"axis", "split"}))
    return false;
  const TensorType &type = l.typeOf(n, 0);
  unsigned axis;
  if (!l.normAxis(l.intAttr(n, "axis", 0), type.rank(), axis, "axis"))
    return false;
  int64_t size = type.dim(axis);
  std::vector<int64_t> sizes;
  if (l.hasInput(n, 1)) {
    const ConstTensor *s = l.constantOf(n, 1, "split");
    if (!s)
      return false;
    sizes = s->asInts();
  } else if (std::optional<std::vector<int64_t>> s = l.intsAttr(n, "split")) {
    sizes = *s;
  } else {
    int64_t parts = n.output_size();
    if (parts < 1 || size % parts)
      return l.error("cannot split a dim of " + llvm::Twine(size) + " into " + llvm::Twine(parts) +
                     " equal parts");
    sizes.assign(size_t(parts), size / parts);
  }
  if (int64_t(sizes.size()) != n.output_size())
    return l.error("split has " + llvm::Twine(sizes.size()) + " sizes for " +
                   llvm::Twine(n.output_size()) + " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return l.error("split sizes must not be negative");
    total += s;
  }
  if (total != size)
    return l.error("split sizes add up to " + llvm::Twine(total) + ", the dim is " +
                   llvm::Twine(size));
  bool constant = isFoldable(l.input(n, 0));
  const ConstTensor *c = constant ? l.constantOf(n, 0, "input") : nullptr;
  Value *x = constant ? nullptr : l.valueOf(n, 0);
  if (constant ? !c : !x)
    return false;
  int64_t start = 0;
  for (int i = 0; i < n.output_size(); ++i) {
    int64_t end = start + sizes[size_t(i)];
    if (constant) {
      ConstTensor part = foldSlice(*c, {SliceAxis{axis, start, 1, end - start}});
      l.setConstant(n, i, std::move(part));
    } else if (start == 0 && end == size) {
      l.alias(n, i, 0);
    } else {
      l.setOutput(n, i,
                  l.build1(OpKind::Slice, {x},
                           {{"axis", Attribute(int64_t(axis))},
                            {"start", Attribute(start)},
                            {"end", Attribute(end)}},
                           n.output(i)));
    }
    start = end;
  }
  return true;
}

} // namespace ampc::onnxfe
