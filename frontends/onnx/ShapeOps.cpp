//===- ShapeOps.cpp - Constants, shapes and data movement ------------------===//
//
// Every shape is static once the inputs are bound, so Shape is a constant
// and the arithmetic torch.onnx.export wraps around it (Gather, Concat,
// Slice, Unsqueeze, Cast) folds here. On values these ops lower to reshape,
// permute, slice, concat, embedding and cast.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"
#include "frontends/onnx/ConstFold.h"
#include "frontends/onnx/OnnxFile.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <numeric>

namespace ampc::onnxfe {

namespace {

/// The element count of `dims`, or -1 when it passes 2^40 (or a dim is
/// negative): no tensor of an imported model is that large.
int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && p > (int64_t(1) << 40) / d))
      return -1;
    p *= d;
  }
  return p;
}

/// The dims of input i, constant or value.
llvm::SmallVector<int64_t, 4> dimsOf(OnnxLowering &l, const onnx::NodeProto &n, int i) {
  const TensorType &t = l.typeOf(n, i);
  return llvm::SmallVector<int64_t, 4>(t.dims().begin(), t.dims().end());
}

/// Output 0 of n is input 0 with new dims: a folded constant or a reshape.
bool reshapeTo(OnnxLowering &l, const onnx::NodeProto &n, llvm::ArrayRef<int64_t> dims) {
  const Term *t = l.input(n, 0);
  if (!t)
    return l.error("input 0 is missing");
  if (product(dims) < 0)
    return l.error("the shape has a negative or too large dim");
  if (isFoldable(t)) {
    const ConstTensor *c = l.constantOf(n, 0, "data");
    if (!c)
      return false;
    if (product(dims) != c->numElements())
      return l.error("cannot reshape a constant of " + llvm::Twine(c->numElements()) +
                     " elements to " + llvm::Twine(product(dims)));
    ConstTensor out = *c;
    out.dims.assign(dims.begin(), dims.end());
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  if (product(dims) != x->type().numElements())
    return l.error("cannot reshape " + x->type().str() + " to " + llvm::Twine(product(dims)) +
                   " elements");
  l.setOutput(n, 0, l.reshape(x, dims, n.output(0)));
  return true;
}

/// Sorted, normalised axes from an `axes` input (opset 13+).
bool axesInput(OnnxLowering &l, const onnx::NodeProto &n, int i, unsigned rank,
               std::vector<int64_t> &axes) {
  const ConstTensor *c = l.constantOf(n, i, "axes");
  if (!c)
    return false;
  axes.clear();
  for (double a : c->values) {
    unsigned d;
    if (!l.normAxis(saturatingInt(a), rank, d, "axis"))
      return false;
    axes.push_back(d);
  }
  llvm::sort(axes);
  return true;
}

} // namespace

bool lowerConstant(OnnxLowering &l, const onnx::NodeProto &n) {
  ConstTensor c;
  if (n.attribute_size() != 1)
    return l.error("must have exactly one value attribute");
  const onnx::AttributeProto &a = n.attribute(0);
  if (a.name() == "value") {
    NpyArray array;
    std::string err;
    if (!tensorToArray(a.t(), ".", array, err))
      return l.error(err);
    if (array.numElements() > (int64_t(1) << 20))
      return l.error("a constant of " + llvm::Twine(array.numElements()) +
                     " elements is too large (store it as an initializer)");
    c.dtype = array.dtype;
    c.dims.assign(array.shape.begin(), array.shape.end());
    int64_t count = array.numElements();
    for (int64_t k = 0; k < count; ++k)
      c.values.push_back(arrayElement(array, k));
  } else if (a.name() == "value_float") {
    c.dtype = DType::F32;
    c.values = {a.f()};
  } else if (a.name() == "value_floats") {
    c.dtype = DType::F32;
    c.values.assign(a.floats().begin(), a.floats().end());
    c.dims = {int64_t(c.values.size())};
  } else if (a.name() == "value_int") {
    c.dtype = DType::I64;
    c.values = {double(a.i())};
  } else if (a.name() == "value_ints") {
    c.dtype = DType::I64;
    for (int64_t v : a.ints())
      c.values.push_back(double(v));
    c.dims = {int64_t(c.values.size())};
  } else {
    return l.error("the value attribute '" + a.name() + "' is not supported");
  }
  l.setConstant(n, 0, std::move(c));
  return true;
}

bool lowerIdentity(OnnxLowering &l, const onnx::NodeProto &n) {
  l.alias(n, 0, 0);
  return true;
}

bool lowerShape(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"start", "end"}))
    return false;
  llvm::SmallVector<int64_t, 4> dims = dimsOf(l, n, 0);
  int64_t rank = dims.size();
  int64_t start = l.intAttr(n, "start", 0), end = l.intAttr(n, "end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  ConstTensor c;
  c.dtype = DType::I64;
  for (int64_t d = start; d < end; ++d)
    c.values.push_back(double(dims[d]));
  c.dims = {int64_t(c.values.size())};
  l.setConstant(n, 0, std::move(c));
  return true;
}

bool lowerSize(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {}))
    return false;
  // Shapes are static once the inputs are bound, so the count is a constant.
  ConstTensor c;
  c.dtype = DType::I64;
  c.values.push_back(double(l.typeOf(n, 0).numElements()));
  l.setConstant(n, 0, std::move(c));
  return true;
}

namespace {

/// x gathered along `axis` by i64 indices `idx` (any shape): an embedding
/// lookup into x with the axis moved first and the other dims flattened,
/// then put back.
Value *gatherAlong(OnnxLowering &l, Value *x, Value *idx, unsigned axis, llvm::StringRef name) {
  llvm::ArrayRef<int64_t> dims = x->type().dims();
  std::vector<int64_t> perm{int64_t(axis)};
  for (unsigned d = 0; d < dims.size(); ++d)
    if (d != axis)
      perm.push_back(d);
  bool moved = axis != 0;
  Value *first = moved ? l.build1(OpKind::Permute, {x}, {{"dims", Attribute(perm)}}) : x;
  int64_t rest = 1;
  for (unsigned d = 0; d < dims.size(); ++d)
    if (d != axis)
      rest *= dims[d];
  Value *table = l.reshape(first, {dims[axis], rest});
  Value *rows = l.build1(OpKind::Embedding, {idx, table});
  if (!rows)
    return nullptr;
  // [indices..., other dims...], then the other dims before the axis go
  // back in front.
  llvm::ArrayRef<int64_t> idxDims = idx->type().dims();
  std::vector<int64_t> unflat(idxDims.begin(), idxDims.end());
  for (unsigned d = 0; d < dims.size(); ++d)
    if (d != axis)
      unflat.push_back(dims[d]);
  if (!moved)
    return l.reshape(rows, unflat, name);
  Value *y = l.reshape(rows, unflat);
  std::vector<int64_t> back;
  int64_t k = int64_t(idxDims.size());
  for (unsigned d = 0; d < axis; ++d)
    back.push_back(k + d);
  for (int64_t d = 0; d < k; ++d)
    back.push_back(d);
  for (size_t d = axis; d + 1 < dims.size(); ++d)
    back.push_back(k + int64_t(d));
  bool identity = true;
  for (size_t d = 0; d < back.size(); ++d)
    identity &= back[d] == int64_t(d);
  return identity ? l.reshape(y, y->type().dims(), name)
                  : l.build1(OpKind::Permute, {y}, {{"dims", Attribute(back)}}, name);
}

} // namespace

/// GatherElements (torch.gather): out[p] = data[p with p[axis] replaced by
/// indices[p]], the output shaped as the indices. A run-time lookup is an
/// embedding of the flattened data (a table of one column) at each output
/// element's flat offset, index * stride(axis) + the offset of its other
/// coordinates (a constant), so the gradient is embedding's scatter-add. The
/// offsets are computed in f64 (exact below 2^53) since the registry's
/// arithmetic is floating; negative indices count from the end.
bool lowerGatherElements(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"axis"}))
    return false;
  const Term *data = l.input(n, 0), *indices = l.input(n, 1);
  if (!data || !indices)
    return l.error("needs data and indices");
  llvm::SmallVector<int64_t, 4> dataDims = dimsOf(l, n, 0), idxDims = dimsOf(l, n, 1);
  if (dataDims.size() != idxDims.size() || dataDims.empty())
    return l.error("data and indices must have the same rank (>= 1), got " + l.typeOf(n, 0).str() +
                   " and " + l.typeOf(n, 1).str());
  unsigned axis;
  if (!l.normAxis(l.intAttr(n, "axis", 0), dataDims.size(), axis, "axis"))
    return false;
  unsigned rank = dataDims.size();
  for (unsigned d = 0; d < rank; ++d)
    if (d != axis && idxDims[d] > dataDims[d])
      return l.error("indices dim " + llvm::Twine(d) + " (" + llvm::Twine(idxDims[d]) +
                     ") is larger than the data's (" + llvm::Twine(dataDims[d]) + ")");
  std::vector<int64_t> strides(rank, 1);
  for (int d = int(rank) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dataDims[d + 1];
  int64_t count = 1;
  for (int64_t d : idxDims)
    count *= d;
  // Each output element's flat offset in the data without its axis term.
  ConstTensor base;
  base.dtype = DType::I64;
  base.dims.assign(idxDims.begin(), idxDims.end());
  base.values.resize(count);
  for (int64_t k = 0; k < count; ++k) {
    int64_t rest = k, offset = 0;
    for (int d = int(rank) - 1; d >= 0; --d) {
      if (unsigned(d) != axis)
        offset += (rest % idxDims[d]) * strides[d];
      rest /= idxDims[d];
    }
    base.values[k] = double(offset);
  }
  int64_t size = dataDims[axis];
  if (isFoldable(data) && isFoldable(indices)) {
    const ConstTensor *d = l.constantOf(n, 0, "data"), *idx = l.constantOf(n, 1, "indices");
    if (!d || !idx)
      return false;
    ConstTensor out = base;
    out.dtype = d->dtype;
    for (int64_t k = 0; k < count; ++k) {
      int64_t i = saturatingInt(idx->values[k]);
      if (i < -size || i >= size)
        return l.error("index " + llvm::Twine(i) + " is out of range for dim of size " +
                       llvm::Twine(size));
      out.values[k] =
          d->values[size_t(base.values[k] + double((i < 0 ? i + size : i) * strides[axis]))];
    }
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  Value *x = l.valueOf(n, 0), *idx = l.valueOf(n, 1, StateKind::Buffer);
  if (!x || !idx)
    return false;
  if (!isFloating(x->dtype()))
    return l.error("GatherElements of run-time " + llvm::Twine(dtypeName(x->dtype())) +
                   " data is not supported (floating data is)");
  if (idx->dtype() != DType::I64 && idx->dtype() != DType::I32)
    return l.error("indices must be int32 or int64, got " + idx->type().str());
  auto toF64 = [&](Value *v) {
    return v ? l.build1(OpKind::Cast, {v}, {{"to", Attribute(DType::F64)}}) : nullptr;
  };
  Value *zero = l.constantState("zero", TensorType(idx->dtype(), {}), 0.0);
  Value *negative =
      l.build1(OpKind::Compare, {idx, zero}, {{"predicate", Attribute(std::string("lt"))}});
  Value *wrapped =
      l.build1(OpKind::Add, {toF64(idx), l.build1(OpKind::Scale, {toF64(negative)},
                                                  {{"factor", Attribute(double(size))}})});
  Value *offset =
      l.build1(OpKind::Add,
               {l.build1(OpKind::Scale, {wrapped}, {{"factor", Attribute(double(strides[axis]))}}),
                toF64(l.constantBuffer("gather_offsets", base))});
  Value *flat =
      offset ? l.build1(OpKind::Cast, {offset}, {{"to", Attribute(DType::I64)}}) : nullptr;
  int64_t total = strides[0] * dataDims[0];
  Value *rows = flat ? l.build1(OpKind::Embedding, {flat, l.reshape(x, {total, 1})}) : nullptr;
  Value *y = rows ? l.reshape(rows, idxDims, n.output(0)) : nullptr;
  if (!y)
    return false;
  l.setOutput(n, 0, y);
  return true;
}

bool lowerGather(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"axis"}))
    return false;
  const Term *data = l.input(n, 0), *indices = l.input(n, 1);
  if (!data || !indices)
    return l.error("needs data and indices");
  llvm::SmallVector<int64_t, 4> dataDims = dimsOf(l, n, 0);
  unsigned axis;
  if (!l.normAxis(l.intAttr(n, "axis", 0), dataDims.size(), axis, "axis"))
    return false;
  // Constant data and indices (shape arithmetic, masks): fold.
  if (isFoldable(data) && isFoldable(indices)) {
    const ConstTensor *d = l.constantOf(n, 0, "data"), *idx = l.constantOf(n, 1, "indices");
    if (!d || !idx)
      return false;
    ConstTensor out;
    std::string err;
    if (!foldGather(*d, *idx, axis, out, err))
      return l.error(err);
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  int64_t size = dataDims[axis];
  if (!isFoldable(indices)) {
    // Run-time indices: an embedding lookup (a 2-D table along axis 0), or
    // one on the data with the axis moved first.
    Value *idx = l.valueOf(n, 1);
    if (!idx)
      return false;
    if (idx->dtype() != DType::I64)
      return l.error("Gather indices must be int64, got " + idx->type().str());
    if (axis == 0 && dataDims.size() == 2) {
      l.setOutput(n, 0, l.build1(OpKind::Embedding, {idx, x}, {}, n.output(0)));
      return true;
    }
    l.setOutput(n, 0, gatherAlong(l, x, idx, axis, n.output(0)));
    return true;
  }
  // Constant indices into a value: a slice where they are one contiguous
  // ascending run (a scalar index drops the axis; position ids), else a
  // gather by an index buffer.
  const ConstTensor *idx = l.constantOf(n, 1, "indices");
  if (!idx)
    return false;
  ConstTensor picks = *idx;
  picks.dtype = DType::I64;
  for (double &iv : picks.values) {
    int64_t i = saturatingInt(iv) < 0 ? saturatingInt(iv) + size : saturatingInt(iv);
    if (i < 0 || i >= size)
      return l.error("index " + llvm::Twine(saturatingInt(iv)) +
                     " is out of range for dim of size " + llvm::Twine(size));
    iv = double(i);
  }
  bool contiguous = !picks.values.empty();
  for (size_t k = 1; k < picks.values.size(); ++k)
    contiguous &= picks.values[k] == picks.values[k - 1] + 1;
  llvm::SmallVector<int64_t, 4> dims(dataDims.begin(), dataDims.begin() + axis);
  dims.append(idx->dims.begin(), idx->dims.end());
  dims.append(dataDims.begin() + axis + 1, dataDims.end());
  if (!contiguous) {
    Value *buffer = l.constantBuffer(n.output(0) + ".indices", picks);
    if (!buffer)
      return false;
    l.setOutput(n, 0, gatherAlong(l, x, buffer, axis, n.output(0)));
    return true;
  }
  int64_t first = int64_t(picks.values.front()), last = int64_t(picks.values.back());
  Value *y = x;
  if (first != 0 || last + 1 != size)
    y = l.build1(OpKind::Slice, {x},
                 {{"axis", Attribute(int64_t(axis))},
                  {"start", Attribute(first)},
                  {"end", Attribute(last + 1)}});
  if (!y)
    return false;
  if (y == x && x->type().dims() == llvm::ArrayRef<int64_t>(dims)) {
    l.alias(n, 0, 0);
    return true;
  }
  l.setOutput(n, 0, l.reshape(y, dims, n.output(0)));
  return true;
}

bool lowerConcat(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"axis"}))
    return false;
  if (n.input_size() == 0)
    return l.error("needs at least one input");
  unsigned rank = l.typeOf(n, 0).rank();
  unsigned axis;
  if (!l.normAxis(l.intAttr(n, "axis", 0), rank, axis, "axis"))
    return false;
  bool allConst = true;
  for (int i = 0; i < n.input_size(); ++i)
    allConst &= isFoldable(l.input(n, i));
  if (allConst) {
    llvm::SmallVector<const ConstTensor *, 4> parts;
    for (int i = 0; i < n.input_size(); ++i) {
      const ConstTensor *c = l.constantOf(n, i, "input");
      if (!c)
        return false;
      parts.push_back(c);
    }
    ConstTensor out;
    std::string err;
    if (!foldConcat(parts, axis, out, err))
      return l.error(err);
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  llvm::SmallVector<Value *, 4> values;
  for (int i = 0; i < n.input_size(); ++i) {
    Value *v = l.valueOf(n, i);
    if (!v)
      return false;
    values.push_back(v);
  }
  if (values.size() == 1) {
    l.alias(n, 0, 0);
    return true;
  }
  l.setOutput(n, 0,
              l.build1(OpKind::Concat, values, {{"axis", Attribute(int64_t(axis))}}, n.output(0)));
  return true;
}

namespace {

/// Every `step`-th element of x along `axis`, `count` of them from `start`
/// (step > 1): reshaped so that each step is a dim of its own, of which the
/// first element is kept; a last element past the whole steps is
/// concatenated.
Value *stridedSlice(OnnxLowering &l, Value *x, unsigned axis, int64_t start, int64_t step,
                    int64_t count) {
  llvm::ArrayRef<int64_t> dims = x->type().dims();
  auto slice = [&](Value *v, unsigned a, int64_t b, int64_t e) {
    if (b == 0 && e == v->type().dim(a))
      return v;
    return l.build1(
        OpKind::Slice, {v},
        {{"axis", Attribute(int64_t(a))}, {"start", Attribute(b)}, {"end", Attribute(e)}});
  };
  int64_t whole = start + count * step <= dims[axis] ? count : count - 1;
  Value *picked = nullptr;
  if (whole > 0) {
    Value *run = slice(x, axis, start, start + whole * step);
    std::vector<int64_t> split(dims.begin(), dims.end());
    split[axis] = whole;
    split.insert(split.begin() + axis + 1, step);
    Value *first = slice(l.reshape(run, split), axis + 1, 0, 1);
    std::vector<int64_t> merged(dims.begin(), dims.end());
    merged[axis] = whole;
    picked = l.reshape(first, merged);
  }
  if (whole == count)
    return picked;
  int64_t last = start + (count - 1) * step;
  Value *tail = slice(x, axis, last, last + 1);
  if (!picked)
    return tail;
  return l.build1(OpKind::Concat, {picked, tail}, {{"axis", Attribute(int64_t(axis))}});
}

} // namespace

bool lowerSlice(OnnxLowering &l, const onnx::NodeProto &n) {
  const ConstTensor *starts = l.constantOf(n, 1, "starts"), *ends = l.constantOf(n, 2, "ends");
  if (!starts || !ends)
    return false;
  llvm::SmallVector<int64_t, 4> dims = dimsOf(l, n, 0);
  unsigned rank = dims.size();
  std::vector<int64_t> axes, steps(starts->values.size(), 1);
  if (l.hasInput(n, 3)) {
    const ConstTensor *a = l.constantOf(n, 3, "axes");
    if (!a)
      return false;
    axes = a->asInts();
  } else {
    for (size_t k = 0; k < starts->values.size(); ++k)
      axes.push_back(int64_t(k));
  }
  if (l.hasInput(n, 4)) {
    const ConstTensor *s = l.constantOf(n, 4, "steps");
    if (!s)
      return false;
    steps = s->asInts();
  }
  if (axes.size() != starts->values.size() || axes.size() != ends->values.size() ||
      axes.size() != steps.size())
    return l.error("starts, ends, axes and steps must have the same length");
  // Each axis's first index, step and count, clamped as ONNX does.
  llvm::SmallVector<SliceAxis, 4> ranges;
  for (size_t k = 0; k < axes.size(); ++k) {
    unsigned axis;
    if (!l.normAxis(axes[k], rank, axis, "axis"))
      return false;
    for (const SliceAxis &r : ranges)
      if (r.axis == axis)
        return l.error("axis " + llvm::Twine(axis) + " is sliced twice");
    int64_t size = dims[axis], step = steps[k];
    if (step == 0)
      return l.error("steps must not be 0");
    auto index = [&](double v) {
      int64_t i = std::clamp<int64_t>(saturatingInt(v), -(int64_t(1) << 61), int64_t(1) << 61);
      return i < 0 ? i + size : i;
    };
    int64_t b = index(starts->values[k]), e = index(ends->values[k]);
    int64_t count;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, size);
      e = std::clamp<int64_t>(e, 0, size);
      count = e > b ? (e - b + step - 1) / step : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, size - 1);
      e = std::clamp<int64_t>(e, -1, size - 1);
      count = b > e ? (b - e + (-step) - 1) / (-step) : 0;
    }
    ranges.push_back({axis, b, step, count});
  }
  const Term *data = l.input(n, 0);
  if (isFoldable(data)) {
    const ConstTensor *c = l.constantOf(n, 0, "data");
    if (!c)
      return false;
    l.setConstant(n, 0, foldSlice(*c, ranges));
    return true;
  }
  Value *y = l.valueOf(n, 0);
  for (const SliceAxis &r : ranges) {
    if (!y)
      return false;
    if (r.step == 1 && r.start == 0 && r.count == dims[r.axis])
      continue;
    if (r.count == 0)
      return l.error("slicing axis " + llvm::Twine(r.axis) + " to no elements is not supported");
    if (r.step < 0)
      return l.error("negative steps are supported on constants only");
    if (r.step == 1 || r.count == 1)
      y = l.build1(OpKind::Slice, {y},
                   {{"axis", Attribute(int64_t(r.axis))},
                    {"start", Attribute(r.start)},
                    {"end", Attribute(r.start + r.count)}});
    else
      y = stridedSlice(l, y, r.axis, r.start, r.step, r.count);
  }
  if (!y)
    return false;
  if (y == l.valueOf(n, 0))
    l.alias(n, 0, 0);
  else
    l.setOutput(n, 0, y);
  return true;
}

bool lowerReshape(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"allowzero"}))
    return false;
  const ConstTensor *shape = l.constantOf(n, 1, "shape");
  if (!shape)
    return false;
  bool allowZero = l.intAttr(n, "allowzero", 0) != 0;
  llvm::SmallVector<int64_t, 4> in = dimsOf(l, n, 0);
  llvm::SmallVector<int64_t, 4> dims;
  int inferred = -1;
  for (size_t k = 0; k < shape->values.size(); ++k) {
    int64_t d = saturatingInt(shape->values[k]);
    if (d == 0 && !allowZero) {
      if (k >= in.size())
        return l.error("shape copies dim " + llvm::Twine(k) + " the input does not have");
      d = in[k];
    } else if (d == -1) {
      if (inferred >= 0)
        return l.error("shape has more than one -1");
      inferred = int(k);
      d = 1;
    } else if (d < 0) {
      return l.error("shape has a negative dim " + llvm::Twine(d));
    }
    dims.push_back(d);
  }
  int64_t total = product(in), known = product(dims);
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return l.error("cannot infer the -1 dim of the shape for " + llvm::Twine(total) +
                     " elements");
    dims[inferred] = total / known;
  }
  return reshapeTo(l, n, dims);
}

bool lowerFlatten(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"axis"}))
    return false;
  llvm::SmallVector<int64_t, 4> in = dimsOf(l, n, 0);
  int64_t axis = l.intAttr(n, "axis", 1);
  if (axis < 0)
    axis += in.size();
  if (axis < 0 || axis > int64_t(in.size()))
    return l.error("axis " + llvm::Twine(axis) + " is out of range");
  int64_t outer = product(llvm::ArrayRef<int64_t>(in).take_front(axis));
  int64_t inner = product(llvm::ArrayRef<int64_t>(in).drop_front(axis));
  return reshapeTo(l, n, {outer, inner});
}

bool lowerTranspose(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"perm"}))
    return false;
  llvm::SmallVector<int64_t, 4> in = dimsOf(l, n, 0);
  std::vector<int64_t> perm;
  if (std::optional<std::vector<int64_t>> p = l.intsAttr(n, "perm"))
    perm = *p;
  else
    for (int64_t d = int64_t(in.size()) - 1; d >= 0; --d)
      perm.push_back(d);
  bool identity = true;
  for (size_t k = 0; k < perm.size(); ++k)
    identity &= perm[k] == int64_t(k);
  if (identity) {
    l.alias(n, 0, 0);
    return true;
  }
  if (isFoldable(l.input(n, 0))) {
    const ConstTensor *c = l.constantOf(n, 0, "input");
    if (!c)
      return false;
    if (perm.size() != c->dims.size())
      return l.error("perm has " + llvm::Twine(perm.size()) + " dims for a tensor of rank " +
                     llvm::Twine(c->dims.size()));
    l.setConstant(n, 0, foldTranspose(*c, perm));
    return true;
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  l.setOutput(n, 0, l.build1(OpKind::Permute, {x}, {{"dims", Attribute(perm)}}, n.output(0)));
  return true;
}

bool lowerUnsqueeze(OnnxLowering &l, const onnx::NodeProto &n) {
  llvm::SmallVector<int64_t, 4> in = dimsOf(l, n, 0);
  const ConstTensor *given = l.constantOf(n, 1, "axes");
  std::vector<int64_t> axes;
  if (!given || !axesInput(l, n, 1, in.size() + given->values.size(), axes))
    return false;
  llvm::SmallVector<int64_t, 4> dims = in;
  for (size_t k = 0; k < axes.size(); ++k) {
    // Sorted, so each axis lands within the dims inserted so far.
    if (axes[k] > int64_t(dims.size()) || (k && axes[k] == axes[k - 1]))
      return l.error("axes must be distinct and within the result's rank");
    dims.insert(dims.begin() + axes[k], 1);
  }
  return reshapeTo(l, n, dims);
}

bool lowerSqueeze(OnnxLowering &l, const onnx::NodeProto &n) {
  llvm::SmallVector<int64_t, 4> in = dimsOf(l, n, 0);
  std::vector<int64_t> axes;
  if (l.hasInput(n, 1)) {
    if (!axesInput(l, n, 1, in.size(), axes))
      return false;
  } else {
    for (size_t d = 0; d < in.size(); ++d)
      if (in[d] == 1)
        axes.push_back(int64_t(d));
  }
  llvm::SmallVector<int64_t, 4> dims;
  for (size_t d = 0; d < in.size(); ++d) {
    if (llvm::is_contained(axes, int64_t(d))) {
      if (in[d] != 1)
        return l.error("cannot squeeze dim " + llvm::Twine(d) + " of size " + llvm::Twine(in[d]));
      continue;
    }
    dims.push_back(in[d]);
  }
  return reshapeTo(l, n, dims);
}

namespace {

/// Input 0 of n converted to `dtype`: folded on constants, an alias when
/// it has that dtype already, else a cast.
bool castInput(OnnxLowering &l, const onnx::NodeProto &n, DType dtype) {
  const Term *t = l.input(n, 0);
  if (isFoldable(t)) {
    const ConstTensor *c = l.constantOf(n, 0, "input");
    if (!c)
      return false;
    ConstTensor out = *c;
    convertElements(out, dtype);
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  if (x->dtype() == dtype) {
    l.alias(n, 0, 0);
    return true;
  }
  l.setOutput(n, 0, l.build1(OpKind::Cast, {x}, {{"to", Attribute(dtype)}}, n.output(0)));
  return true;
}

} // namespace

bool lowerCast(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"to", "saturate"}))
    return false;
  int32_t to = int32_t(l.intAttr(n, "to", 0));
  std::optional<DType> dtype = dtypeOfOnnx(to);
  if (!dtype)
    return l.error("casting to " + onnxTypeName(to) + " is not supported");
  return castInput(l, n, *dtype);
}

bool lowerCastLike(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"saturate"}))
    return false;
  if (!l.hasInput(n, 1))
    return l.error("the target_type input is missing");
  // Only the dtype of target_type is read: it may be a constant, a value or
  // an initializer, and is never materialised.
  return castInput(l, n, l.typeOf(n, 1).dtype());
}

} // namespace ampc::onnxfe
