//===- ReduceOps.cpp - ONNX's Reduce* ops, ArgMax, ArgMin ------------------===//
//
// On values: reduce_sum, reduce_max, reduce_min and argmax; the other
// reductions compose them: ReduceL2 is sqrt(reduce_sum(x * x)), ReduceL1
// reduce_sum(abs(x)), ReduceSumSquare reduce_sum(x * x), ReduceLogSum
// log(reduce_sum(x)), ReduceLogSumExp the same shifted by the maximum, and
// ArgMin is argmax(-x). On constants (index arithmetic) they fold.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"
#include "frontends/onnx/ConstFold.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

namespace ampc::onnxfe {

namespace {

enum class Reduce { Sum, Max, Min, L2, L1, SumSquare, LogSum, LogSumExp };

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

/// For each element of `c`, the index of the element of the reduction it
/// falls into (the reduced dims kept as 1s in `keptDims`).
std::vector<size_t> reductionSlots(const ConstTensor &c, const std::vector<int64_t> &axes,
                                   std::vector<int64_t> &keptDims) {
  size_t rank = c.dims.size();
  keptDims.clear();
  for (size_t d = 0; d < rank; ++d)
    keptDims.push_back(llvm::is_contained(axes, int64_t(d)) ? 1 : c.dims[d]);
  std::vector<size_t> slots;
  slots.reserve(c.values.size());
  llvm::SmallVector<int64_t, 6> index(rank, 0);
  for (size_t i = 0; i < c.values.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d)
      o = o * keptDims[d] + (keptDims[d] == 1 ? 0 : index[d]);
    slots.push_back(size_t(o));
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < c.dims[d])
        break;
      index[d] = 0;
    }
  }
  return slots;
}

/// The reduction of `c` into `count` slots: each element mapped by `pre`,
/// then combined, in element order (as the kernels do).
std::vector<double> foldInto(const ConstTensor &c, const std::vector<size_t> &slots, size_t count,
                             Reduce kind, llvm::function_ref<double(size_t, double)> pre) {
  bool isMax = kind == Reduce::Max, isMin = kind == Reduce::Min;
  std::vector<double> acc(count, isMax ? -INFINITY : isMin ? INFINITY : 0.0);
  for (size_t i = 0; i < c.values.size(); ++i) {
    double v = pre(slots[i], c.values[i]);
    double &a = acc[slots[i]];
    a = isMax ? std::max(a, v) : isMin ? std::min(a, v) : a + v;
  }
  return acc;
}

/// The folded values of a reduction of `kind`.
std::vector<double> foldValues(const ConstTensor &c, const std::vector<size_t> &slots, size_t count,
                               Reduce kind) {
  auto same = [](size_t, double v) { return v; };
  auto square = [](size_t, double v) { return v * v; };
  switch (kind) {
  case Reduce::Sum:
  case Reduce::Max:
  case Reduce::Min:
    return foldInto(c, slots, count, kind, same);
  case Reduce::SumSquare:
    return foldInto(c, slots, count, Reduce::Sum, square);
  case Reduce::L1:
    return foldInto(c, slots, count, Reduce::Sum, [](size_t, double v) { return std::fabs(v); });
  case Reduce::L2:
  case Reduce::LogSum: {
    std::vector<double> out =
        foldInto(c, slots, count, Reduce::Sum, kind == Reduce::L2 ? square : same);
    for (double &v : out)
      v = kind == Reduce::L2 ? std::sqrt(v) : std::log(v);
    return out;
  }
  case Reduce::LogSumExp: {
    std::vector<double> top = foldInto(c, slots, count, Reduce::Max, same);
    for (double &m : top)
      m = std::isfinite(m) ? m : 0.0; // all -inf, or an inf: exp needs no shift
    std::vector<double> out = foldInto(c, slots, count, Reduce::Sum,
                                       [&](size_t o, double v) { return std::exp(v - top[o]); });
    for (size_t o = 0; o < count; ++o)
      out[o] = std::log(out[o]) + top[o];
    return out;
  }
  }
  return {};
}

bool foldReduce(OnnxLowering &l, const onnx::NodeProto &n, Reduce kind,
                const std::vector<int64_t> &axes, bool keep) {
  const ConstTensor *c = l.constantOf(n, 0, "data");
  if (!c)
    return false;
  std::vector<int64_t> keptDims;
  std::vector<size_t> slots = reductionSlots(*c, axes, keptDims);
  ConstTensor out;
  out.dtype = c->dtype;
  for (size_t d = 0; d < keptDims.size(); ++d)
    if (!llvm::is_contained(axes, int64_t(d)) || keep)
      out.dims.push_back(keptDims[d]);
  out.values = foldValues(*c, slots, size_t(foldedCount(keptDims)), kind);
  convertElements(out, out.dtype);
  l.setConstant(n, 0, std::move(out));
  return true;
}

/// reduce_sum/max/min of x over `axes`.
Value *reduceOp(OnnxLowering &l, OpKind op, Value *x, const std::vector<int64_t> &axes, bool keep,
                llvm::StringRef name = "") {
  return l.build1(op, {x}, {{"dims", Attribute(axes)}, {"keepdim", Attribute(keep)}}, name);
}

/// log(sum(exp(x))) shifted by the maximum, so that exp cannot overflow. A
/// maximum that is not finite (every element -inf, or an inf or NaN among
/// them) shifts by 0 instead: x - m would be NaN where the unshifted sum
/// gives the right -inf, inf or NaN.
Value *logSumExp(OnnxLowering &l, Value *x, const std::vector<int64_t> &axes, bool keep,
                 llvm::StringRef name) {
  Value *top = reduceOp(l, OpKind::ReduceMax, x, axes, /*keep=*/true);
  if (!top)
    return nullptr;
  Value *zero = l.constantState("zero", TensorType(top->dtype(), {}), 0.0);
  // m - m is 0 exactly when m is finite.
  Value *finite = l.build1(OpKind::Compare, {l.build1(OpKind::Sub, {top, top}), zero},
                           {{"predicate", Attribute(std::string("eq"))}});
  Value *shift = l.build1(OpKind::Where, {finite, top, zero});
  Value *sum = reduceOp(l, OpKind::ReduceSum,
                        l.build1(OpKind::Exp, {l.build1(OpKind::Sub, {x, shift})}), axes, keep);
  Value *log = l.build1(OpKind::Log, {sum});
  if (!log)
    return nullptr;
  return l.build1(OpKind::Add, {log, l.reshape(shift, log->type().dims())}, {}, name);
}

/// The lowering of a reduction of `kind` on a run-time value, its result
/// named after the ONNX output `name`.
Value *buildReduce(OnnxLowering &l, Value *x, Reduce kind, const std::vector<int64_t> &axes,
                   bool keep, llvm::StringRef name) {
  switch (kind) {
  case Reduce::Sum:
    return reduceOp(l, OpKind::ReduceSum, x, axes, keep, name);
  case Reduce::Max:
    return reduceOp(l, OpKind::ReduceMax, x, axes, keep, name);
  case Reduce::Min:
    return reduceOp(l, OpKind::ReduceMin, x, axes, keep, name);
  case Reduce::SumSquare:
    return reduceOp(l, OpKind::ReduceSum, l.build1(OpKind::Mul, {x, x}), axes, keep, name);
  case Reduce::L1:
    return reduceOp(l, OpKind::ReduceSum, l.build1(OpKind::Abs, {x}), axes, keep, name);
  case Reduce::L2:
    return l.build1(OpKind::Sqrt,
                    {reduceOp(l, OpKind::ReduceSum, l.build1(OpKind::Mul, {x, x}), axes, keep)}, {},
                    name);
  case Reduce::LogSum:
    return l.build1(OpKind::Log, {reduceOp(l, OpKind::ReduceSum, x, axes, keep)}, {}, name);
  case Reduce::LogSumExp:
    return logSumExp(l, x, axes, keep, name);
  }
  return nullptr;
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
  l.setOutput(n, 0, buildReduce(l, x, kind, axes, keep, n.output(0)));
  return true;
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
bool lowerReduceL1(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerReduce(l, n, Reduce::L1, /*axesInput=*/false);
}
bool lowerReduceSumSquare(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerReduce(l, n, Reduce::SumSquare, /*axesInput=*/false);
}
bool lowerReduceLogSum(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerReduce(l, n, Reduce::LogSum, /*axesInput=*/false);
}
bool lowerReduceLogSumExp(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerReduce(l, n, Reduce::LogSumExp, /*axesInput=*/false);
}

namespace {

/// ArgMax (or ArgMin) of a constant: the first (or last) extremum.
bool foldArgExtremum(OnnxLowering &l, const onnx::NodeProto &n, unsigned axis, bool keep, bool last,
                     bool min) {
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
        if ((min ? v < b : v > b) || (last && v == b))
          best = k;
      }
      out.values.push_back(double(best));
    }
  l.setConstant(n, 0, std::move(out));
  return true;
}

bool lowerArgExtremum(OnnxLowering &l, const onnx::NodeProto &n, bool min) {
  if (!l.checkAttrs(n, {"axis", "keepdims", "select_last_index"}))
    return false;
  unsigned axis;
  if (!l.normAxis(l.intAttr(n, "axis", 0), l.typeOf(n, 0).rank(), axis, "axis"))
    return false;
  bool keep = l.intAttr(n, "keepdims", 1) != 0;
  bool last = l.intAttr(n, "select_last_index", 0) != 0;
  if (isFoldable(l.input(n, 0)))
    return foldArgExtremum(l, n, axis, keep, last, min);
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  // The smallest elements of x are the largest of -x, ties included (negation
  // is exact and keeps equal elements equal), so argmax of -x picks the same
  // first (or last) index.
  if (min)
    x = l.build1(OpKind::Neg, {x});
  l.setOutput(n, 0,
              l.build1(OpKind::ArgMax, {x},
                       {{"dim", Attribute(int64_t(axis))},
                        {"keepdim", Attribute(keep)},
                        {"select_last_index", Attribute(last)}},
                       n.output(0)));
  return true;
}

} // namespace

bool lowerArgMax(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerArgExtremum(l, n, /*min=*/false);
}
bool lowerArgMin(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerArgExtremum(l, n, /*min=*/true);
}

} // namespace ampc::onnxfe
