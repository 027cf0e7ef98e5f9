//===- Logic.cpp - Reference compare, logical, where and the extremum ops --===//
//
// Comparisons read both operands as doubles, which holds every value of
// every dtype exactly; where moves element bytes unchanged, so it is exact in
// any dtype. The extremum reductions pick elements, so they are exact too;
// NaN wins a max or min, as torch.amax/amin and argmax treat it.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallVector.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace ampc::kernels::ref {

namespace {

/// Strides of `dims` aligned right against `outDims`, 0 along broadcast dims.
llvm::SmallVector<int64_t, 6> broadcastStrides(llvm::ArrayRef<int64_t> dims,
                                               llvm::ArrayRef<int64_t> outDims) {
  size_t offset = outDims.size() - dims.size();
  llvm::SmallVector<int64_t, 6> strides(outDims.size(), 0);
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    strides[d + offset] = dims[d] == 1 && outDims[d + offset] != 1 ? 0 : stride;
    stride *= dims[d];
  }
  return strides;
}

/// Calls f(outIndex, operandIndices) over the output of a broadcasting op.
template <class F>
void forEachBroadcast(const KernelArgs &a, llvm::ArrayRef<unsigned> operands, F &&f) {
  llvm::ArrayRef<int64_t> outDims = a.out().dims();
  llvm::SmallVector<llvm::SmallVector<int64_t, 6>, 3> strides;
  for (unsigned k : operands)
    strides.push_back(broadcastStrides(a.in(k).dims(), outDims));
  llvm::SmallVector<int64_t, 6> position(outDims.size(), 0);
  llvm::SmallVector<int64_t, 3> at(operands.size());
  for (int64_t i = 0, n = a.out().numElements(); i < n; ++i) {
    for (size_t k = 0; k < operands.size(); ++k) {
      at[k] = 0;
      for (size_t d = 0; d < outDims.size(); ++d)
        at[k] += position[d] * strides[k][d];
    }
    f(i, llvm::ArrayRef<int64_t>(at));
    for (size_t d = outDims.size(); d-- > 0;) {
      if (++position[d] < outDims[d])
        break;
      position[d] = 0;
    }
  }
}

/// Bool elements are bytes (kernels/common/Storage.h); any non-zero is true.
bool isTrue(const TensorArg &t, int64_t i) { return static_cast<const uint8_t *>(t.data)[i] != 0; }

bool comparePredicate(ComparePredicate p, double x, double y) {
  switch (p) {
  case ComparePredicate::Eq:
    return x == y;
  case ComparePredicate::Ne:
    return x != y;
  case ComparePredicate::Lt:
    return x < y;
  case ComparePredicate::Le:
    return x <= y;
  case ComparePredicate::Gt:
    return x > y;
  case ComparePredicate::Ge:
    return x >= y;
  }
  return false;
}

/// For each input element, the flat index of its output element under a
/// reduction over `reduced` dims.
std::vector<int64_t> reducedIndex(llvm::ArrayRef<int64_t> dims,
                                  const llvm::SmallBitVector &reduced) {
  unsigned rank = dims.size();
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  std::vector<int64_t> out(static_cast<size_t>(n));
  llvm::SmallVector<int64_t, 6> index(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t o = 0;
    for (unsigned k = 0; k < rank; ++k)
      if (!reduced[k])
        o = o * dims[k] + index[k];
    out[size_t(i)] = o;
    for (unsigned k = rank; k-- > 0;) {
      if (++index[k] < dims[k])
        break;
      index[k] = 0;
    }
  }
  return out;
}

llvm::SmallBitVector reducedDims(const KernelArgs &a, unsigned rank) {
  const std::vector<int64_t> &axes = attrs::ReduceMax(*a.node).dims();
  llvm::SmallBitVector reduced(rank, axes.empty());
  for (int64_t d : axes)
    reduced.set(unsigned(d < 0 ? d + rank : d));
  return reduced;
}

/// reduce_max (max) or reduce_min over the node's dims.
void reduceExtremum(const KernelArgs &a, bool max) {
  const TensorArg &x = a.in(0), &y = a.out();
  std::vector<int64_t> to = reducedIndex(x.dims(), reducedDims(a, x.dims().size()));
  std::vector<double> best(size_t(y.numElements()), max ? -INFINITY : INFINITY);
  for (size_t i = 0; i < to.size(); ++i) {
    double v = loadAsDouble(x.dtype(), x.data, int64_t(i));
    double &b = best[size_t(to[i])];
    if (std::isnan(v) || (!std::isnan(b) && (max ? v > b : v < b)))
      b = v;
  }
  for (size_t i = 0; i < best.size(); ++i)
    storeFromDouble(y.dtype(), y.data, int64_t(i), best[i]);
}

bool sameValue(double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); }

} // namespace

void compare(const KernelArgs &a) {
  ComparePredicate p = attrs::Compare(*a.node).predicate();
  const TensorArg &x = a.in(0), &y = a.in(1);
  uint8_t *out = a.out().as<uint8_t>();
  forEachBroadcast(a, {0, 1}, [&](int64_t i, llvm::ArrayRef<int64_t> at) {
    out[i] = comparePredicate(p, loadAsDouble(x.dtype(), x.data, at[0]),
                              loadAsDouble(y.dtype(), y.data, at[1]));
  });
}

void logical(const KernelArgs &a) {
  LogicalOp op = attrs::Logical(*a.node).op();
  uint8_t *out = a.out().as<uint8_t>();
  forEachBroadcast(a, {0, 1}, [&](int64_t i, llvm::ArrayRef<int64_t> at) {
    bool x = isTrue(a.in(0), at[0]), y = isTrue(a.in(1), at[1]);
    out[i] = op == LogicalOp::And ? (x && y) : op == LogicalOp::Or ? (x || y) : (x != y);
  });
}

void logicalNot(const KernelArgs &a) {
  uint8_t *out = a.out().as<uint8_t>();
  for (int64_t i = 0, n = a.out().numElements(); i < n; ++i)
    out[i] = !isTrue(a.in(0), i);
}

void where(const KernelArgs &a) {
  size_t size = dtypeSize(a.out().dtype());
  char *out = a.out().as<char>();
  const char *x = a.in(1).as<const char>(), *y = a.in(2).as<const char>();
  forEachBroadcast(a, {0, 1, 2}, [&](int64_t i, llvm::ArrayRef<int64_t> at) {
    const char *src = isTrue(a.in(0), at[0]) ? x + at[1] * size : y + at[2] * size;
    std::memcpy(out + i * size, src, size);
  });
}

void reduceMax(const KernelArgs &a) { reduceExtremum(a, true); }
void reduceMin(const KernelArgs &a) { reduceExtremum(a, false); }

void reduceSelectGrad(const KernelArgs &a) {
  const TensorArg &dy = a.in(0), &x = a.in(1), &y = a.in(2), &dx = a.out();
  std::vector<int64_t> to = reducedIndex(x.dims(), reducedDims(a, x.dims().size()));
  std::vector<int64_t> ties(size_t(y.numElements()), 0);
  for (size_t i = 0; i < to.size(); ++i)
    ties[size_t(to[i])] += sameValue(loadAsDouble(x.dtype(), x.data, int64_t(i)),
                                     loadAsDouble(y.dtype(), y.data, to[i]));
  for (size_t i = 0; i < to.size(); ++i) {
    int64_t o = to[i];
    bool chosen =
        sameValue(loadAsDouble(x.dtype(), x.data, int64_t(i)), loadAsDouble(y.dtype(), y.data, o));
    double g = chosen ? loadAsDouble(dy.dtype(), dy.data, o) / double(ties[size_t(o)]) : 0.0;
    storeFromDouble(dx.dtype(), dx.data, int64_t(i), g);
  }
}

void argMax(const KernelArgs &a) {
  attrs::ArgMax attrs(*a.node);
  const TensorArg &x = a.in(0);
  llvm::ArrayRef<int64_t> dims = x.dims();
  int64_t rank = int64_t(dims.size()), axis = attrs.dim() < 0 ? attrs.dim() + rank : attrs.dim();
  int64_t size = dims[size_t(axis)], inner = 1, outer = 1;
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= dims[size_t(d)];
  for (int64_t d = 0; d < axis; ++d)
    outer *= dims[size_t(d)];
  int64_t *out = a.out().as<int64_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t e = 0; e < inner; ++e) {
      int64_t bestIndex = 0;
      double best = loadAsDouble(x.dtype(), x.data, o * size * inner + e);
      for (int64_t k = 1; k < size && !std::isnan(best); ++k) {
        double v = loadAsDouble(x.dtype(), x.data, (o * size + k) * inner + e);
        if (std::isnan(v) || v > best || (attrs.select_last_index() && v == best)) {
          best = v;
          bestIndex = k;
        }
      }
      out[o * inner + e] = bestIndex;
    }
}

} // namespace ampc::kernels::ref
