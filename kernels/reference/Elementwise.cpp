//===- Elementwise.cpp - Reference kernels of the pointwise ops -----------===//
//
// Three loops serve every row of ir/Pointwise.def: unary ops, the backward
// ops of activations (incoming gradient and saved forward value, both of the
// result's shape) and binary ops, which broadcast as numpy does: shapes align
// at the right, a dim of 1 (or a missing leading dim) repeats. The element
// math is the row's functor (kernels/common).
//
//===----------------------------------------------------------------------===//
#include "kernels/Pointwise.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include "llvm/ADT/SmallVector.h"

#include <cassert>

namespace ampc::kernels::ref {

namespace {

/// Strides of `dims` (C order) aligned to the right of an output of rank
/// `outRank`; a broadcast dim (size 1 where the output is larger, or absent)
/// gets stride 0 so every output position along it reads the same element.
llvm::SmallVector<int64_t, 6> broadcastStrides(llvm::ArrayRef<int64_t> dims,
                                               llvm::ArrayRef<int64_t> outDims) {
  size_t outRank = outDims.size(), offset = outRank - dims.size();
  llvm::SmallVector<int64_t, 6> strides(outRank, 0);
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    strides[d + offset] = dims[d] == 1 && outDims[d + offset] != 1 ? 0 : stride;
    stride *= dims[d];
  }
  return strides;
}

/// out = f(a, b) with broadcasting, f over ComputeT<D>.
template <class BinaryFn> void binaryMap(const KernelArgs &args, BinaryFn f) {
  const TensorArg &lhs = args.in(0), &rhs = args.in(1), &out = args.out();
  llvm::ArrayRef<int64_t> outDims = out.dims();
  llvm::SmallVector<int64_t, 6> lhsStrides = broadcastStrides(lhs.dims(), outDims);
  llvm::SmallVector<int64_t, 6> rhsStrides = broadcastStrides(rhs.dims(), outDims);
  bool handled = dispatchFloat(out.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    llvm::SmallVector<int64_t, 6> position(outDims.size(), 0);
    for (int64_t i = 0, n = out.numElements(); i < n; ++i) {
      int64_t lhsIndex = 0, rhsIndex = 0;
      for (size_t d = 0; d < outDims.size(); ++d) {
        lhsIndex += position[d] * lhsStrides[d];
        rhsIndex += position[d] * rhsStrides[d];
      }
      store<D>(out.data, i, f(load<D>(lhs.data, lhsIndex), load<D>(rhs.data, rhsIndex)));
      // Advance the multi-index like an odometer (last dim fastest).
      for (size_t d = outDims.size(); d-- > 0;) {
        if (++position[d] < outDims[d])
          break;
        position[d] = 0;
      }
    }
  });
  assert(handled && "arithmetic on a non-floating dtype");
  (void)handled;
}

} // namespace

/// out[i] = f(in[i]) for every element, in the compute type of in's dtype.
template <class Fn> void unaryPointwise(const KernelArgs &a) {
  Fn f = makeElementFn<Fn>(a);
  const TensorArg &in = a.in(0), &out = a.out();
  bool handled = dispatchFloat(in.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    for (int64_t i = 0, n = in.numElements(); i < n; ++i)
      store<D>(out.data, i, f(load<D>(in.data, i)));
  });
  assert(handled && "pointwise op on a non-floating dtype");
  (void)handled;
}

/// out[i] = f.grad(dy[i], saved[i]): the backward of activation Fn.
template <class Fn> void gradPointwise(const KernelArgs &a) {
  GradOf<Fn> f = makeGradFn<Fn>(a);
  const TensorArg &dy = a.in(0), &saved = a.in(1), &out = a.out();
  bool handled = dispatchFloat(out.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    for (int64_t i = 0, n = out.numElements(); i < n; ++i)
      store<D>(out.data, i, f(load<D>(dy.data, i), load<D>(saved.data, i)));
  });
  assert(handled && "activation gradient on a non-floating dtype");
  (void)handled;
}

template <class Fn> void binaryPointwise(const KernelArgs &a) {
  binaryMap(a, makeElementFn<Fn>(a));
}

#define AMPC_POINTWISE_UNARY(Op, Fn) template void unaryPointwise<Fn>(const KernelArgs &);
#define AMPC_POINTWISE_GRAD(Op, GradOp, Fn, Saved)                                                 \
  template void gradPointwise<Fn>(const KernelArgs &);
#define AMPC_POINTWISE_BINARY(Op, Fn) template void binaryPointwise<Fn>(const KernelArgs &);
#include "ir/Pointwise.def"

} // namespace ampc::kernels::ref
