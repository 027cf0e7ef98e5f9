//===- ShapeOps.cpp - Constants, shapes and data movement ------------------===//
//
// Every shape is static once the inputs are bound, so Shape is a constant
// and the arithmetic torch.onnx.export wraps around it (Gather, Concat,
// Slice, Unsqueeze, Cast) folds here. On values these ops lower to reshape,
// permute, slice, concat, embedding and cast.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"
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

/// The elements of constant c at the positions an N-D result walks in
/// row-major order: result dim k runs over indexLists[k], which index
/// c's dim axisOf[k] (each of c's dims appears once).
std::vector<double> gatherConstant(const ConstTensor &c, llvm::ArrayRef<unsigned> axisOf,
                                   llvm::ArrayRef<std::vector<int64_t>> indexLists) {
  size_t rank = c.dims.size();
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;)
    strides[d - 1] = strides[d] * c.dims[d];
  std::vector<double> out;
  int64_t total = 1;
  for (const std::vector<int64_t> &list : indexLists)
    total *= int64_t(list.size());
  if (total == 0)
    return out;
  std::vector<size_t> position(rank, 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t offset = 0;
    for (size_t k = 0; k < rank; ++k)
      offset += indexLists[k][position[k]] * strides[axisOf[k]];
    out.push_back(c.values[offset]);
    for (size_t k = rank; k-- > 0;) {
      if (++position[k] < indexLists[k].size())
        break;
      position[k] = 0;
    }
  }
  return out;
}

/// Slice of a constant, any rank, with ONNX's steps (negative ones walk
/// backwards: exporters reverse pad lists this way).
bool foldSlice(OnnxLowering &l, const onnx::NodeProto &n, const ConstTensor &starts,
               const ConstTensor &ends, llvm::ArrayRef<int64_t> axes,
               llvm::ArrayRef<int64_t> steps) {
  const ConstTensor *c = l.constantOf(n, 0, "data");
  if (!c)
    return false;
  size_t rank = c->dims.size();
  llvm::SmallVector<std::vector<int64_t>, 4> indexLists;
  std::vector<unsigned> axisOf;
  for (size_t d = 0; d < rank; ++d) {
    std::vector<int64_t> all;
    for (int64_t i = 0; i < c->dims[d]; ++i)
      all.push_back(i);
    indexLists.push_back(std::move(all));
    axisOf.push_back(unsigned(d));
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    unsigned axis;
    if (!l.normAxis(axes[k], rank, axis, "axis"))
      return false;
    int64_t size = c->dims[axis], step = steps[k];
    if (step == 0)
      return l.error("a Slice step of 0");
    // ONNX: negative indices count from the end, then clamp to [0, size]
    // (forwards) or [-1, size - 1] (backwards).
    auto index = [&](double v) {
      int64_t i = std::clamp<int64_t>(saturatingInt(v), -(int64_t(1) << 61), int64_t(1) << 61);
      return i < 0 ? i + size : i;
    };
    int64_t b = index(starts.values[k]), e = index(ends.values[k]);
    std::vector<int64_t> picked;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, size);
      e = std::clamp<int64_t>(e, 0, size);
      for (int64_t i = b; i < e; i += step)
        picked.push_back(i);
    } else {
      b = std::clamp<int64_t>(b, 0, size - 1);
      e = std::clamp<int64_t>(e, -1, size - 1);
      for (int64_t i = b; i > e; i += step)
        picked.push_back(i);
    }
    indexLists[axis] = std::move(picked);
  }
  ConstTensor out;
  out.dtype = c->dtype;
  for (const std::vector<int64_t> &list : indexLists)
    out.dims.push_back(int64_t(list.size()));
  out.values = gatherConstant(*c, axisOf, indexLists);
  l.setConstant(n, 0, std::move(out));
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
  // Constant data and indices (shape arithmetic): fold.
  if (isFoldable(data) && isFoldable(indices)) {
    const ConstTensor *d = l.constantOf(n, 0, "data"), *idx = l.constantOf(n, 1, "indices");
    if (!d || !idx)
      return false;
    int64_t outer = product(llvm::ArrayRef<int64_t>(d->dims).take_front(axis));
    int64_t inner = product(llvm::ArrayRef<int64_t>(d->dims).drop_front(axis + 1));
    int64_t size = d->dims[axis];
    if (outer * inner * idx->numElements() > (int64_t(1) << 20))
      return l.error("folding this Gather would make a constant of more than 2^20 elements");
    ConstTensor out;
    out.dtype = d->dtype;
    out.dims.assign(d->dims.begin(), d->dims.begin() + axis);
    out.dims.append(idx->dims.begin(), idx->dims.end());
    out.dims.append(d->dims.begin() + axis + 1, d->dims.end());
    for (int64_t o = 0; o < outer; ++o)
      for (double iv : idx->values) {
        int64_t i = saturatingInt(iv) < 0 ? saturatingInt(iv) + size : saturatingInt(iv);
        if (i < 0 || i >= size)
          return l.error("index " + llvm::Twine(saturatingInt(iv)) +
                         " is out of range for dim of size " + llvm::Twine(size));
        for (int64_t k = 0; k < inner; ++k)
          out.values.push_back(d->values[(o * size + i) * inner + k]);
      }
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  // Rows of a table by run-time indices: an embedding lookup.
  if (!isFoldable(indices)) {
    if (axis != 0 || dataDims.size() != 2)
      return l.error("Gather with run-time indices is supported on a 2-D table along axis 0 "
                     "(an embedding), got data " +
                     l.typeOf(n, 0).str());
    Value *idx = l.valueOf(n, 1), *table = l.valueOf(n, 0);
    if (!idx || !table)
      return false;
    if (idx->dtype() != DType::I64)
      return l.error("embedding indices must be int64, got " + idx->type().str());
    l.setOutput(n, 0, l.build1(OpKind::Embedding, {idx, table}, {}, n.output(0)));
    return true;
  }
  // Constant indices into a value: slices (a scalar index drops the axis).
  const ConstTensor *idx = l.constantOf(n, 1, "indices");
  if (!idx)
    return false;
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  int64_t size = dataDims[axis];
  llvm::SmallVector<int64_t, 4> picks;
  for (double iv : idx->values) {
    int64_t i = saturatingInt(iv) < 0 ? saturatingInt(iv) + size : saturatingInt(iv);
    if (i < 0 || i >= size)
      return l.error("index " + llvm::Twine(saturatingInt(iv)) +
                     " is out of range for dim of size " + llvm::Twine(size));
    picks.push_back(i);
  }
  bool contiguous = true;
  for (size_t k = 1; k < picks.size(); ++k)
    contiguous &= picks[k] == picks[k - 1] + 1;
  if (picks.empty() || !contiguous || idx->dims.size() > 1)
    return l.error("Gather of constant indices from a value is supported for a scalar or a "
                   "contiguous 1-D range");
  Value *y = l.build1(OpKind::Slice, {x},
                      {{"axis", Attribute(int64_t(axis))},
                       {"start", Attribute(picks.front())},
                       {"end", Attribute(picks.back() + 1)}});
  if (!y)
    return false;
  llvm::SmallVector<int64_t, 4> dims(y->type().dims().begin(), y->type().dims().end());
  if (idx->dims.empty())
    dims.erase(dims.begin() + axis);
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
    if (rank != 1)
      return l.error("folding a Concat of constants is supported for 1-D tensors");
    ConstTensor out;
    for (int i = 0; i < n.input_size(); ++i) {
      const ConstTensor *c = l.constantOf(n, i, "input");
      if (!c)
        return false;
      out.dtype = c->dtype;
      out.values.insert(out.values.end(), c->values.begin(), c->values.end());
    }
    out.dims = {int64_t(out.values.size())};
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

bool lowerSlice(OnnxLowering &l, const onnx::NodeProto &n) {
  const ConstTensor *starts = l.constantOf(n, 1, "starts"), *ends = l.constantOf(n, 2, "ends");
  if (!starts || !ends)
    return false;
  llvm::SmallVector<int64_t, 4> dims = dimsOf(l, n, 0);
  unsigned rank = dims.size();
  std::vector<int64_t> axes;
  if (l.hasInput(n, 3)) {
    const ConstTensor *a = l.constantOf(n, 3, "axes");
    if (!a)
      return false;
    axes = a->asInts();
  } else {
    for (size_t k = 0; k < starts->values.size(); ++k)
      axes.push_back(int64_t(k));
  }
  std::vector<int64_t> steps(axes.size(), 1);
  if (l.hasInput(n, 4)) {
    const ConstTensor *given = l.constantOf(n, 4, "steps");
    if (!given)
      return false;
    steps = given->asInts();
  }
  if (axes.size() != starts->values.size() || axes.size() != ends->values.size() ||
      axes.size() != steps.size())
    return l.error("starts, ends, axes and steps must have the same length");
  if (isFoldable(l.input(n, 0)))
    return foldSlice(l, n, *starts, *ends, axes, steps);
  if (llvm::any_of(steps, [](int64_t s) { return s != 1; }))
    return l.error("steps other than 1 are supported when slicing constants only");
  // Each axis's [begin, end), clamped as ONNX does.
  struct Range {
    unsigned axis;
    int64_t begin, end;
  };
  llvm::SmallVector<Range, 4> ranges;
  for (size_t k = 0; k < axes.size(); ++k) {
    unsigned axis;
    if (!l.normAxis(axes[k], rank, axis, "axis"))
      return false;
    int64_t size = dims[axis];
    auto clampIndex = [&](double v) {
      int64_t i = saturatingInt(v);
      i = std::clamp<int64_t>(i, -(int64_t(1) << 61), int64_t(1) << 61);
      if (i < 0)
        i += size;
      return std::clamp<int64_t>(i, 0, size);
    };
    int64_t b = clampIndex(starts->values[k]), e = std::max(b, clampIndex(ends->values[k]));
    ranges.push_back({axis, b, e});
  }
  if (ranges.empty()) {
    l.alias(n, 0, 0);
    return true;
  }
  Value *y = l.valueOf(n, 0);
  for (const Range &r : ranges) {
    if (!y)
      return false;
    if (r.begin == 0 && r.end == dims[r.axis])
      continue;
    y = l.build1(OpKind::Slice, {y},
                 {{"axis", Attribute(int64_t(r.axis))},
                  {"start", Attribute(r.begin)},
                  {"end", Attribute(r.end)}});
  }
  if (!y)
    return false;
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
    const ConstTensor *c = l.constantOf(n, 0, "data");
    if (!c)
      return false;
    if (perm.size() != c->dims.size())
      return l.error("perm has " + llvm::Twine(perm.size()) + " entries for a rank-" +
                     llvm::Twine(c->dims.size()) + " constant");
    // Result dim k walks the constant's dim perm[k].
    llvm::SmallVector<std::vector<int64_t>, 4> indexLists;
    std::vector<unsigned> axesOf;
    ConstTensor out;
    out.dtype = c->dtype;
    for (int64_t d : perm) {
      unsigned axis;
      if (!l.normAxis(d, c->dims.size(), axis, "perm entry"))
        return false;
      if (llvm::is_contained(axesOf, axis))
        return l.error("perm repeats dim " + llvm::Twine(axis));
      axesOf.push_back(axis);
      out.dims.push_back(c->dims[axis]);
      std::vector<int64_t> all;
      for (int64_t i = 0; i < c->dims[axis]; ++i)
        all.push_back(i);
      indexLists.push_back(std::move(all));
    }
    out.values = gatherConstant(*c, axesOf, indexLists);
    l.setConstant(n, 0, std::move(out));
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

bool lowerCast(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"to", "saturate"}))
    return false;
  int32_t to = int32_t(l.intAttr(n, "to", 0));
  std::optional<DType> dtype = dtypeOfOnnx(to);
  if (!dtype)
    return l.error("casting to " + onnxTypeName(to) + " is not supported");
  const Term *t = l.input(n, 0);
  if (isFoldable(t)) {
    const ConstTensor *c = l.constantOf(n, 0, "input");
    if (!c)
      return false;
    ConstTensor out = *c;
    out.dtype = *dtype;
    if (!isFloating(*dtype))
      for (double &v : out.values)
        v = *dtype == DType::Bool ? (v != 0) : std::trunc(v);
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  if (x->dtype() == *dtype) {
    l.alias(n, 0, 0);
    return true;
  }
  l.setOutput(n, 0, l.build1(OpKind::Cast, {x}, {{"to", Attribute(*dtype)}}, n.output(0)));
  return true;
}

// Always folds: its shape input is a constant once the inputs are bound
// (exporters build pad lists with it).
bool lowerConstantOfShape(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"value"}))
    return false;
  const ConstTensor *shape = l.constantOf(n, 0, "shape");
  if (!shape)
    return false;
  ConstTensor c;
  c.dtype = DType::F32;
  double fill = 0;
  if (const onnx::AttributeProto *a = l.attr(n, "value")) {
    NpyArray array;
    std::string err;
    if (!tensorToArray(a->t(), ".", array, err))
      return l.error(err);
    if (array.numElements() != 1)
      return l.error("value must hold one element");
    c.dtype = array.dtype;
    fill = arrayElement(array, 0);
  }
  for (double d : shape->values)
    c.dims.push_back(saturatingInt(d));
  int64_t count = product(c.dims);
  if (count < 0 || count > (int64_t(1) << 20))
    return l.error("the shape has a negative dim or more than 2^20 elements");
  c.values.assign(size_t(count), fill);
  l.setConstant(n, 0, std::move(c));
  return true;
}

} // namespace ampc::onnxfe
