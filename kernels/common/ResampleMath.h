//===- ResampleMath.h - Index maps of pad and resize, host and device -----===//
//
// Which input element each output element of `pad` and `resize` reads, per
// dimension, shared by every backend so that all of them pick the same
// elements and weights.
//
// pad: output position o of a dim reads input o - begin; outside the input,
// constant mode reads nothing (the value), edge the nearest end and reflect
// the mirror image without repeating the end (PyTorch's "reflect", ONNX's).
//
// resize: an output position maps to an input coordinate by ONNX's
// coordinate_transformation_mode, computed as PyTorch computes it: with the
// reciprocal scale (1 / scale, or in / out when no scale is given) rounded
// to the compute type T (float for f32/f16/bf16, double for f64) and
// multiplied, so that nearest picks PyTorch's element even where a floor
// lands on an integer. Nearest rounds the coordinate by nearest_mode;
// linear clamps it to [0, in - 1] and weighs the two neighbours; cubic
// weighs the four neighbours floor(x) - 1 .. floor(x) + 2 by Keys' cubic
// convolution kernel with ONNX's cubic_coeff_a (PyTorch's bicubic: A =
// -0.75), reading the edge element for a tap outside the input, or, with
// exclude_outside, giving such taps no weight and renormalising the rest
// (ONNX Resize-13).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_RESAMPLEMATH_H
#define AMPC_KERNELS_COMMON_RESAMPLEMATH_H

#include "ir/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace ampc::kernels {

enum class PadKind : uint8_t { Constant, Reflect, Edge };

/// The input index that output position `o` of one dim reads, or -1 for the
/// constant. The op row keeps reflect's pads below the input size (one
/// mirroring suffices) and edge's input non-empty.
AMPC_HD inline int64_t padSource(int64_t o, int64_t begin, int64_t inputSize, PadKind kind) {
  int64_t i = o - begin;
  if (i >= 0 && i < inputSize)
    return i;
  switch (kind) {
  case PadKind::Constant:
    return -1;
  case PadKind::Edge:
    return i < 0 ? 0 : inputSize - 1;
  case PadKind::Reflect:
    return i < 0 ? -i : 2 * (inputSize - 1) - i;
  }
  return -1;
}

enum class ResizeCoord : uint8_t { HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric };
enum class ResizeRound : uint8_t { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

/// One resized dim.
struct ResizeAxis {
  int64_t inSize = 1;
  int64_t outSize = 1;
  double inverseScale = 1; ///< 1 / scale, or inSize / outSize without one
  /// The output length align_corners divides by: inSize * scale, unrounded,
  /// when a scale is given (ONNX's definition), else outSize.
  double resizedLength = 1;
  ResizeCoord coord = ResizeCoord::HalfPixel;
  ResizeRound round = ResizeRound::RoundPreferFloor;
  double cubicA = -0.75;       ///< cubic mode's kernel coefficient A
  bool excludeOutside = false; ///< cubic mode: taps outside the input weigh 0
};

/// The input coordinate of output position o (ONNX's transformations).
template <class T> AMPC_HD inline T resizeSource(int64_t o, const ResizeAxis &a) {
  T inverse = static_cast<T>(a.inverseScale);
  T out = static_cast<T>(o);
  switch (a.coord) {
  case ResizeCoord::HalfPixel:
    return (out + T(0.5)) * inverse - T(0.5);
  case ResizeCoord::PytorchHalfPixel:
    return a.outSize > 1 ? (out + T(0.5)) * inverse - T(0.5) : T(0);
  case ResizeCoord::AlignCorners:
    return a.resizedLength != 1
               ? out * (static_cast<T>(a.inSize - 1) / static_cast<T>(a.resizedLength - 1))
               : T(0);
  case ResizeCoord::Asymmetric:
    return out * inverse;
  }
  return T(0);
}

/// The input element nearest mode reads for output position o.
template <class T> AMPC_HD inline int64_t resizeNearest(int64_t o, const ResizeAxis &a) {
  using std::ceil;
  using std::floor;
  T x = resizeSource<T>(o, a);
  T below = floor(x);
  T picked = below;
  switch (a.round) {
  case ResizeRound::Floor:
    break;
  case ResizeRound::Ceil:
    picked = ceil(x);
    break;
  case ResizeRound::RoundPreferFloor: // a tie goes down
    picked = x - below > T(0.5) ? below + T(1) : below;
    break;
  case ResizeRound::RoundPreferCeil: // a tie goes up
    picked = x - below >= T(0.5) ? below + T(1) : below;
    break;
  }
  if (picked < T(0))
    return 0;
  if (picked > static_cast<T>(a.inSize - 1))
    return a.inSize - 1;
  return static_cast<int64_t>(picked);
}

/// The two input elements linear mode reads for output position o and their
/// weights (w0 for i0, w1 for i1; i1 == i0 at the last element).
template <class T> struct LinearTaps {
  int64_t i0, i1;
  T w0, w1;
};

template <class T> AMPC_HD inline LinearTaps<T> resizeLinear(int64_t o, const ResizeAxis &a) {
  T x = resizeSource<T>(o, a);
  T last = static_cast<T>(a.inSize - 1);
  x = x < T(0) ? T(0) : x > last ? last : x;
  int64_t i0 = static_cast<int64_t>(x); // x >= 0: truncation is the floor
  int64_t i1 = i0 < a.inSize - 1 ? i0 + 1 : i0;
  T w1 = x - static_cast<T>(i0);
  return {i0, i1, T(1) - w1, w1};
}

/// Keys' cubic convolution kernel W(d) for a tap at distance d from the
/// coordinate: cubicNear for d <= 1, cubicFar for 1 < d < 2. Written in
/// PyTorch's (and ONNX's reference's) Horner form, so that f32 results
/// round as PyTorch's bicubic does.
template <class T> AMPC_HD inline T cubicNear(T d, T A) {
  return ((A + T(2)) * d - (A + T(3))) * d * d + T(1);
}
template <class T> AMPC_HD inline T cubicFar(T d, T A) {
  return ((A * d - T(5) * A) * d + T(8) * A) * d - T(4) * A;
}

/// The four input elements cubic mode reads for output position o (clamped
/// into the input) and their weights, in tap order floor(x) - 1 ..
/// floor(x) + 2.
template <class T> struct CubicTaps {
  int64_t i[4];
  T w[4];
};

template <class T> AMPC_HD inline CubicTaps<T> resizeCubic(int64_t o, const ResizeAxis &a) {
  using std::floor;
  T x = resizeSource<T>(o, a);
  T below = floor(x);
  // The coordinate is not clamped (unlike linear's): near an edge the outer
  // taps fall outside and read the edge element, as PyTorch and ONNX do.
  int64_t first = static_cast<int64_t>(below) - 1;
  T t = x - below, A = static_cast<T>(a.cubicA);
  CubicTaps<T> r;
  r.w[0] = cubicFar(t + T(1), A);
  r.w[1] = cubicNear(t, A);
  r.w[2] = cubicNear(T(1) - t, A);
  r.w[3] = cubicFar(T(2) - t, A);
  if (a.excludeOutside) {
    T sum = T(0);
    for (int k = 0; k < 4; ++k) {
      int64_t i = first + k;
      if (i < 0 || i >= a.inSize)
        r.w[k] = T(0);
      sum += r.w[k];
    }
    // Every coordinate mapping keeps x in [-0.5, in), so tap floor(x) or
    // floor(x) + 1 is inside with a weight near 1; a sum of 0 (only for an
    // absurd A) leaves the weights 0 rather than making them NaN.
    if (sum != T(0))
      for (int k = 0; k < 4; ++k)
        r.w[k] = r.w[k] / sum;
  }
  for (int k = 0; k < 4; ++k) {
    int64_t i = first + k;
    r.i[k] = i < 0 ? 0 : i >= a.inSize ? a.inSize - 1 : i;
  }
  return r;
}

} // namespace ampc::kernels

#endif
