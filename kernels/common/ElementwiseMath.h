//===- ElementwiseMath.h - Element math of the arithmetic ops -------------===//
//
// Binary arithmetic and scale-by-constant, shared by every backend (AMPC_HD).
// T is the compute type (float for f32/f16/bf16, double for f64), so half
// inputs are widened, combined in f32 and rounded once on store, exactly as
// PyTorch's CPU and CUDA kernels do through their f32 "opmath" type.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_ELEMENTWISEMATH_H
#define AMPC_KERNELS_COMMON_ELEMENTWISEMATH_H

#include "ir/HostDevice.h"

namespace ampc::kernels {

template <class T> AMPC_HD inline T addOp(T a, T b) { return a + b; }
template <class T> AMPC_HD inline T subOp(T a, T b) { return a - b; }
template <class T> AMPC_HD inline T mulOp(T a, T b) { return a * b; }
/// IEEE division: x / 0 is +-inf, 0 / 0 is NaN (as torch.div).
template <class T> AMPC_HD inline T divOp(T a, T b) { return a / b; }

/// x * factor; the factor (a double attribute) is first rounded to T, as a
/// Python scalar multiplying a tensor is rounded to its opmath type.
template <class T> AMPC_HD inline T scaleOp(T x, double factor) { return x * T(factor); }

// Elementwise max and min (ONNX Max and Min, torch.maximum and
// torch.minimum): NaN if either operand is NaN; on ties the first operand
// (so max(-0, +0) is -0, as ATen's std::max gives).
template <class T> AMPC_HD inline T maxOp(T a, T b) {
  if (a != a)
    return a;
  if (b != b)
    return b;
  return a < b ? b : a;
}
template <class T> AMPC_HD inline T minOp(T a, T b) {
  if (a != a)
    return a;
  if (b != b)
    return b;
  return b < a ? b : a;
}

/// The share of max(a, b)'s gradient that goes to a: 1 where a > b, 1/2
/// on a tie, 0 where a < b, and 1 where either is NaN (torch.maximum's
/// backward: each operand gets the gradient unless it is strictly the
/// smaller, half on ties). b's share is greaterShare(b, a); min(a, b)'s
/// shares are the same with the operands swapped.
template <class T> AMPC_HD inline T greaterShareOp(T a, T b) {
  return a == b ? T(0.5) : a < b ? T(0) : T(1);
}

// --- Element functors of ir/Pointwise.def's rows ---------------------------

struct AddFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return addOp(a, b); }
};
struct SubFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return subOp(a, b); }
};
struct MulFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return mulOp(a, b); }
};
struct DivFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return divOp(a, b); }
};
struct MaxFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return maxOp(a, b); }
};
struct MinFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return minOp(a, b); }
};
struct GreaterShareFn {
  template <class T> AMPC_HD T operator()(T a, T b) const { return greaterShareOp(a, b); }
};

struct ScaleFn {
  double factor = 0;
  template <class T> AMPC_HD T operator()(T x) const { return scaleOp(x, factor); }
};

} // namespace ampc::kernels

#endif
