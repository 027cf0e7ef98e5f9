//===- LinearAlgebraMath.h - Index and scale math of GEMM, conv, attention ===//
//
// The pieces of linear, matmul, batch_matmul, conv2d and attention that every
// backend must agree on: where a (possibly transposed) matrix element lives,
// which input pixel a convolution tap reads (and, for the backward, which
// output reads a given input pixel), the attention scale, exp and mask.
// Host-device (AMPC_HD) and free of LLVM so nvcc compiles it too.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_LINEARALGEBRAMATH_H
#define AMPC_KERNELS_COMMON_LINEARALGEBRAMATH_H

#include "ir/HostDevice.h"
#include "kernels/common/ExpMath.h"

#include <cmath>
#include <cstdint>

namespace ampc::kernels {

/// Offset of logical element (row, col) of a rows x cols matrix stored in C
/// order, or stored as its transpose (cols x rows) when `transposed`.
AMPC_HD inline int64_t matrixOffset(int64_t row, int64_t col, int64_t rows, int64_t cols,
                                    bool transposed) {
  return transposed ? col * rows + row : row * cols + col;
}

/// Input coordinate read by output coordinate `out` through kernel tap `tap`
/// (PyTorch's cross-correlation; may be outside [0, size) where padding is).
AMPC_HD inline int64_t convInputCoord(int64_t out, int64_t tap, int64_t stride, int64_t padding,
                                      int64_t dilation) {
  return out * stride - padding + tap * dilation;
}

/// The output coordinate whose kernel tap `tap` reads input coordinate `in`
/// (the inverse of convInputCoord), or -1 when no output in [0, outSize)
/// does: the backward of a convolution gathers through it.
AMPC_HD inline int64_t convOutputCoord(int64_t in, int64_t tap, int64_t stride, int64_t padding,
                                       int64_t dilation, int64_t outSize) {
  int64_t shifted = in + padding - tap * dilation;
  if (shifted < 0 || shifted % stride != 0)
    return -1;
  int64_t out = shifted / stride;
  return out < outSize ? out : -1;
}

/// Where attention's rows live. An operand is `slices` sequences of `len`
/// rows of `width` elements. In layout bhsd ([..., heads, seq, width]) a
/// slice is every leading index, its rows contiguous: `heads` is 1. In
/// layout bshd ([..., seq, heads, width]) a slice is a (leading index, head)
/// pair and its rows are `heads` x width elements apart: the operand is read
/// in place, with no permute to bhsd.
struct AttentionRows {
  int64_t heads = 1;

  /// Element offset of row `row` of slice `slice` of an operand of
  /// sequences of `len` rows of `width`.
  AMPC_HD int64_t offset(int64_t slice, int64_t row, int64_t len, int64_t width) const {
    int64_t outer = slice / heads, head = slice % heads;
    return ((outer * len + row) * heads + head) * width;
  }
  /// Elements from one row of a slice to the next.
  AMPC_HD int64_t stride(int64_t width) const { return heads * width; }
};

/// The softmax temperature: the `scale` attribute when positive, otherwise
/// 1/sqrt(head size) as PyTorch's scale=None. Computed in double and rounded
/// once to T so every backend starts from the same constant.
template <class T> AMPC_HD inline T attentionScale(double scaleAttr, int64_t headSize) {
  if (scaleAttr > 0)
    return static_cast<T>(scaleAttr);
  return static_cast<T>(1.0 / std::sqrt(static_cast<double>(headSize)));
}

/// The exp of attention's softmax: portableExp in f32, which the fast CPU
/// loops vectorize with the reference's bits (kernels/common/ExpMath.h);
/// libm's in f64.
AMPC_HD inline float attentionExp(float x) { return portableExp(x); }
AMPC_HD inline double attentionExp(double x) { return std::exp(x); }

/// Whether query position q may not see key position k (causal: the strict
/// upper triangle is excluded).
AMPC_HD inline bool attentionMasked(int64_t q, int64_t k, bool causal) { return causal && k > q; }

} // namespace ampc::kernels

#endif
