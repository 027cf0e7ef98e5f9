//===- ReduceOps.cpp - ReduceSum/Max/Min/L2, ArgMax ------------------------===//
//
// On values: reduce_sum, reduce_max, reduce_min and argmax; ReduceL2 is
// sqrt(reduce_sum(x * x)). On constants (index arithmetic) they fold.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"
#include "frontends/onnx/ConstFold.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

namespace ampc::onnxfe {

namespace {

enum class Reduce { Sum, Max, Min, L2 };

/// The reduced axes (normalised, sorted), from the `axes` attribute or, for
/// ReduceSum (opset 13+), the axes input; empty axes reduce every dim
/// unless noop_with_empty_axes.
bool reducedAxes(OnnxLowering &l, const onnx::NodeProto &n, bool axesInput, unsigned rank,
                 std::vector<int64_t> &axes, bool &noop) {
  noop = false;
  axes.clear();
  if (axesInput) {
    if (l.hasInput(n, 1)) {
      const ConstTensor *c = l.constantOf(n, 1, "axes");
      if (!c)
        return false;
      axes = c->asInts();
    }
  } else if (std::optional<std::vector<int64_t>> a = l.intsAttr(n, "axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (l.intAttr(n, "noop_with_empty_axes", 0) != 0) {
      noop = true;
      return true;
    }
    for (unsigned d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes) {
    unsigned d;
    if (!l.normAxis(a, rank, d, "axis"))
      return false;
    a = d;
  }
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return l.error("an axis is listed twice");
  return true;
}

bool foldReduce(OnnxLowering &l, const onnx::NodeProto &n, Reduce kind,
                const std::vector<int64_t> &axes, bool keep) {
  const ConstTensor *c = l.constantOf(n, 0, "data");
  if (!c)
    return false;
  size_t rank = c->dims.size();
  ConstTensor out;
  out.dtype = c->dtype;
  std::vector<int64_t> keptDims;
  for (size_t d = 0; d < rank; ++d) {
    bool reduced = llvm::is_contained(axes, int64_t(d));
    keptDims.push_back(reduced ? 1 : c->dims[d]);
    if (!reduced || keep)
      out.dims.push_back(reduced ? 1 : c->dims[d]);
  }
  int64_t count = 1;
  for (int64_t d : keptDims)
    count *= d;
  double init = kind == Reduce::Max ? -INFINITY : kind == Reduce::Min ? INFINITY : 0.0;
  out.values.assign(size_t(count), init);
  llvm::SmallVector<int64_t, 6> index(rank, 0);
  for (double v : c->values) {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d)
      o = o * keptDims[d] + (keptDims[d] == 1 ? 0 : index[d]);
    double &acc = out.values[size_t(o)];
    acc = kind == Reduce::Sum   ? acc + v
          : kind == Reduce::L2  ? acc + v * v
          : kind == Reduce::Max ? std::max(acc, v)
                                : std::min(acc, v);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < c->dims[d])
        break;
      index[d] = 0;
    }
  }
  if (kind == Reduce::L2)
    for (double &v : out.values)
      v = std::sqrt(v);
  convertElements(out, out.dtype);
  l.setConstant(n, 0, std::move(out));
  return true;
}

bool lowerReduce(OnnxLowering &l, const onnx::NodeProto &n, Reduce kind, bool axesInput) {
  if (!l.checkAttrs(
          n, axesInput ? std::initializer_list<llvm::StringRef>{"keepdims", "noop_with_empty_axes"}
                       : std::initializer_list<llvm::StringRef>{"axes", "keepdims"}))
    return false;
  unsigned rank = l.typeOf(n, 0).rank();
  std::vector<int64_t> axes;
  bool noop;
  if (!reducedAxes(l, n, axesInput, rank, axes, noop))
    return false;
  bool keep = l.intAttr(n, "keepdims", 1) != 0;
  if (noop) {
    l.alias(n, 0, 0);
    return true;
  }
  if (isFoldable(l.input(n, 0)))
    return foldReduce(l, n, kind, axes, keep);
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  AttrMap attrs{{"dims", Attribute(axes)}, {"keepdim", Attribute(keep)}};
  switch (kind) {
  case Reduce::Sum:
    l.setOutput(n, 0, l.build1(OpKind::ReduceSum, {x}, std::move(attrs), n.output(0)));
    return true;
  case Reduce::Max:
    l.setOutput(n, 0, l.build1(OpKind::ReduceMax, {x}, std::move(attrs), n.output(0)));
    return true;
  case Reduce::Min:
    l.setOutput(n, 0, l.build1(OpKind::ReduceMin, {x}, std::move(attrs), n.output(0)));
    return true;
  case Reduce::L2: {
    Value *squares = l.build1(OpKind::Mul, {x, x});
    Value *sum = l.build1(OpKind::ReduceSum, {squares}, std::move(attrs));
    l.setOutput(n, 0, l.build1(OpKind::Sqrt, {sum}, {}, n.output(0)));
    return true;
  }
  }
  return false;
}

} // namespace

bool lowerReduceSum(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerReduce(l, n, Reduce::Sum, /*axesInput=*/true);
}
bool lowerReduceMax(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerReduce(l, n, Reduce::Max, /*axesInput=*/false);
}
bool lowerReduceMin(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerReduce(l, n, Reduce::Min, /*axesInput=*/false);
}
bool lowerReduceL2(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerReduce(l, n, Reduce::L2, /*axesInput=*/false);
}

bool lowerArgMax(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"axis", "keepdims", "select_last_index"}))
    return false;
  unsigned axis;
  if (!l.normAxis(l.intAttr(n, "axis", 0), l.typeOf(n, 0).rank(), axis, "axis"))
    return false;
  bool keep = l.intAttr(n, "keepdims", 1) != 0;
  bool last = l.intAttr(n, "select_last_index", 0) != 0;
  if (isFoldable(l.input(n, 0))) {
    const ConstTensor *c = l.constantOf(n, 0, "data");
    if (!c)
      return false;
    int64_t size = c->dims[axis], inner = 1, outer = 1;
    for (size_t d = axis + 1; d < c->dims.size(); ++d)
      inner *= c->dims[d];
    for (unsigned d = 0; d < axis; ++d)
      outer *= c->dims[d];
    ConstTensor out;
    out.dtype = DType::I64;
    for (size_t d = 0; d < c->dims.size(); ++d)
      if (d != axis || keep)
        out.dims.push_back(d == axis ? 1 : c->dims[d]);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < inner; ++e) {
        int64_t best = 0;
        for (int64_t k = 1; k < size; ++k) {
          double v = c->values[size_t((o * size + k) * inner + e)];
          double b = c->values[size_t((o * size + best) * inner + e)];
          if (v > b || (last && v == b))
            best = k;
        }
        out.values.push_back(double(best));
      }
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  l.setOutput(n, 0,
              l.build1(OpKind::ArgMax, {x},
                       {{"dim", Attribute(int64_t(axis))},
                        {"keepdim", Attribute(keep)},
                        {"select_last_index", Attribute(last)}},
                       n.output(0)));
  return true;
}

} // namespace ampc::onnxfe
