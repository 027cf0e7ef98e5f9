//===- Collective.cu - Unpacking an all-reduce's result on the device -----===//
//
// NCCL sums a bucket's gradients packed into one buffer (the packing is a
// cast: kernels/cuda/Elementwise.cu); this kernel divides the sums and
// stores them into the results, with the math the CPU route uses
// (kernels/common/CollectiveMath.h).
//
//===----------------------------------------------------------------------===//
#include "kernels/common/CollectiveMath.h"
#include "kernels/cuda/Common.cuh"

namespace ampc::kernels::cuda {

namespace {

template <DType Wire, DType Out>
__global__ void unpackReducedKernel(const void *x, void *y, int64_t n, float divisor) {
  AMPC_GRID_STRIDE(i, n) unpackReducedElement<Wire, Out>(x, y, i, divisor);
}

bool isCollectiveType(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

} // namespace

cudaError_t unpackReduced(const Launch &l, Tensor x, float divisor, MutableTensor y) {
  if (x.n != y.n || !isCollectiveType(x.dtype) || !isCollectiveType(y.dtype))
    return cudaErrorInvalidValue;
  if (x.n == 0)
    return cudaSuccess;
  return withFloat(x.dtype, [&](auto wire) {
    return withFloat(y.dtype, [&](auto out) {
      constexpr DType W = decltype(wire)::value, O = decltype(out)::value;
      if constexpr (W == DType::F64 || O == DType::F64) {
        return cudaErrorInvalidValue; // excluded above
      } else {
        unpackReducedKernel<W, O>
            <<<blocksFor(x.n), kThreads, 0, l.stream>>>(x.data, y.data, x.n, divisor);
        return cudaGetLastError();
      }
    });
  });
}

} // namespace ampc::kernels::cuda
