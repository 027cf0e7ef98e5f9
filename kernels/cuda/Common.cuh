//===- Common.cuh - Launch helpers shared by the .cu files -----*- CUDA -*-===//
#ifndef AMPC_KERNELS_CUDA_COMMON_CUH
#define AMPC_KERNELS_CUDA_COMMON_CUH

#include "kernels/common/Storage.h"
#include "kernels/cuda/CudaKernels.h"

#include <cuda_runtime.h>

namespace ampc::kernels::cuda {

constexpr int kThreads = 256;

/// A grid of `blocks` blocks, capped (grid-stride loops cover the rest).
inline unsigned gridOf(int64_t blocks) {
  if (blocks < 1)
    blocks = 1;
  if (blocks > 65535)
    blocks = 65535;
  return static_cast<unsigned>(blocks);
}

/// Blocks for n elements with grid-stride loops.
inline unsigned blocksFor(int64_t n) { return gridOf((n + kThreads - 1) / kThreads); }

#define AMPC_GRID_STRIDE(i, n)                                                                     \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);           \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

/// Calls f(DTypeTag<D>{}) for a floating dtype and returns its result;
/// cudaErrorInvalidValue for the others.
template <class F> cudaError_t withFloat(DType t, F &&f) {
  switch (t) {
  case DType::F32:
    return f(DTypeTag<DType::F32>{});
  case DType::F64:
    return f(DTypeTag<DType::F64>{});
  case DType::F16:
    return f(DTypeTag<DType::F16>{});
  case DType::BF16:
    return f(DTypeTag<DType::BF16>{});
  case DType::I64:
  case DType::I32:
  case DType::Bool:
    return cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}

/// Any dtype, for casts.
template <class F> cudaError_t withAny(DType t, F &&f) {
  switch (t) {
  case DType::F32:
    return f(DTypeTag<DType::F32>{});
  case DType::F64:
    return f(DTypeTag<DType::F64>{});
  case DType::F16:
    return f(DTypeTag<DType::F16>{});
  case DType::BF16:
    return f(DTypeTag<DType::BF16>{});
  case DType::I64:
    return f(DTypeTag<DType::I64>{});
  case DType::I32:
    return f(DTypeTag<DType::I32>{});
  case DType::Bool:
    return f(DTypeTag<DType::Bool>{});
  }
  return cudaErrorInvalidValue;
}

/// Bytes of one element (DType.h's dtypeSize is host-only).
__host__ __device__ inline unsigned dtypeSizeOnDevice(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::Bool:
    return 1;
  }
  return 1;
}

/// Sum of one value per thread of a kThreads block, by a fixed tree
/// (deterministic); every thread gets it. Ends with a barrier, so the next
/// sum may reuse `shared` at once.
template <class T> __device__ T blockSum(T v, T *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width)
      shared[threadIdx.x] += shared[threadIdx.x + width];
    __syncthreads();
  }
  T total = shared[0];
  __syncthreads();
  return total;
}

/// A scalar operand as double (0 when absent).
__device__ inline double readScalar(const Scalar &s) {
  return s.data ? loadAsDouble(s.dtype, s.data, 0) : 0.0;
}

/// Copies element i unchanged (any dtype; bit for bit).
__device__ inline void copyElement(DType t, const void *src, void *dst, int64_t i) {
  switch (dtypeSizeOnDevice(t)) {
  case 1:
    static_cast<uint8_t *>(dst)[i] = static_cast<const uint8_t *>(src)[i];
    break;
  case 2:
    static_cast<uint16_t *>(dst)[i] = static_cast<const uint16_t *>(src)[i];
    break;
  case 4:
    static_cast<uint32_t *>(dst)[i] = static_cast<const uint32_t *>(src)[i];
    break;
  default:
    static_cast<uint64_t *>(dst)[i] = static_cast<const uint64_t *>(src)[i];
    break;
  }
}

} // namespace ampc::kernels::cuda

#endif
