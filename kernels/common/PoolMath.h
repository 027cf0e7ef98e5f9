//===- PoolMath.h - Pooling windows and reductions, PyTorch semantics -----===//
//
// Window bounds follow PyTorch's floor-mode pooling: a window starts at
// out * stride - padding, spans `kernel` positions of the padded input, and
// is clipped to the real input. Average pooling divides by the padded window
// size (count_include_pad) or by the number of real elements; max pooling
// ignores padding (as if it held -inf) and propagates NaN.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_POOLMATH_H
#define AMPC_KERNELS_COMMON_POOLMATH_H

#include "ir/HostDevice.h"

#include <cstdint>

namespace ampc::kernels {

/// One dimension of a pooling window: the real input positions [begin, end)
/// and how many positions the window covers counting padding.
struct PoolWindow {
  int64_t begin;
  int64_t end;
  int64_t paddedSize;
};

AMPC_HD inline PoolWindow poolWindow(int64_t out, int64_t inputSize, int64_t kernel, int64_t stride,
                                     int64_t padding) {
  int64_t begin = out * stride - padding;
  int64_t end = begin + kernel;
  // A window never reaches past the right padding (PyTorch clips it there
  // before counting, which matters only in ceil mode, but costs nothing).
  if (end > inputSize + padding)
    end = inputSize + padding;
  int64_t paddedSize = end - begin;
  if (begin < 0)
    begin = 0;
  if (end > inputSize)
    end = inputSize;
  return {begin, end, paddedSize};
}

/// The divisor of one average-pooling window.
AMPC_HD inline int64_t avgPoolDivisor(const PoolWindow &rows, const PoolWindow &cols,
                                      bool countIncludePad) {
  if (countIncludePad)
    return rows.paddedSize * cols.paddedSize;
  return (rows.end - rows.begin) * (cols.end - cols.begin);
}

/// Whether a running maximum moves to `candidate`: it does when candidate is
/// larger or NaN, so NaN wins as in PyTorch's max pooling (a plain `a > b`
/// comparison would silently drop a NaN input), and of equal values the
/// first one seen stays (the element the backward routes the gradient to).
template <class T> AMPC_HD inline bool maxPoolTakes(T current, T candidate) {
  bool candidateIsNaN = candidate != candidate;
  return candidate > current || candidateIsNaN;
}

/// Running maximum by maxPoolTakes.
template <class T> AMPC_HD inline T maxPoolCombine(T current, T candidate) {
  return maxPoolTakes(current, candidate) ? candidate : current;
}

} // namespace ampc::kernels

#endif
