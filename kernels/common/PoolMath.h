//===- PoolMath.h - Pooling windows and reductions, PyTorch semantics -----===//
//
// Window bounds follow PyTorch's pooling: a window starts at out * stride -
// padBegin, spans `kernel` taps `dilation` apart over the padded input, and
// is clipped to the real input. Average pooling divides by the padded window
// size (count_include_pad, clipped at the end padding as PyTorch does in ceil
// mode) or by the number of real elements; max pooling ignores padding (as
// if it held -inf) and propagates NaN. How many windows there are (floor or
// ceil mode) is the result's shape, inferred by the op row.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_POOLMATH_H
#define AMPC_KERNELS_COMMON_POOLMATH_H

#include "ir/HostDevice.h"

#include <cstdint>

namespace ampc::kernels {

/// The geometry of one spatial axis of a pooling node: window size,
/// stride, padding before and after the input, and the spacing of the
/// window's taps (dilation; max pooling only).
struct PoolAxis {
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t padBegin = 0;
  int64_t padEnd = 0;
  int64_t dilation = 1;
};

/// One dimension of a pooling window: the real input positions it reads,
/// begin, begin + step, ... below end (empty when begin == end), and how
/// many positions it covers counting padding (the average's divisor).
struct PoolWindow {
  int64_t begin;
  int64_t end;
  int64_t paddedSize;
  int64_t step;
};

AMPC_HD inline PoolWindow poolWindow(int64_t out, int64_t inputSize, const PoolAxis &a) {
  int64_t start = out * a.stride - a.padBegin;
  int64_t last = start + (a.kernel - 1) * a.dilation; // the last tap
  // The padded window never reaches past the end padding (PyTorch clips it
  // there before counting; only a ceil-mode window can reach that far).
  int64_t paddedEnd = last + 1 < inputSize + a.padEnd ? last + 1 : inputSize + a.padEnd;
  int64_t begin = start;
  if (begin < 0) // the first tap inside the input
    begin += (-begin + a.dilation - 1) / a.dilation * a.dilation;
  if (last >= inputSize) // the last tap inside the input
    last -= (last - inputSize + a.dilation) / a.dilation * a.dilation;
  int64_t end = begin <= last ? last + 1 : begin;
  return {begin, end, paddedEnd - start, a.dilation};
}

/// The divisor of one average-pooling window.
AMPC_HD inline int64_t avgPoolDivisor(const PoolWindow &rows, const PoolWindow &cols,
                                      bool countIncludePad) {
  if (countIncludePad)
    return rows.paddedSize * cols.paddedSize;
  // Average pooling has no dilation: step is 1.
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
