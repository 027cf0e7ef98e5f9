//===- CollectiveMath.h - Unpacking an all-reduce's result ------*- C++ -*-===//
//
// An all-reduce sums the ranks' values in its wire type (f32, or the
// gradients' own half type); each result element is then that sum divided by
// the divisor (the number of ranks for a mean, 1 for a sum) in f32 and
// stored in the result's dtype, rounded once. The CPU route (MPI, host
// memory: runtime/dist/CollectiveKernel.cpp) and the CUDA route (NCCL,
// kernels/cuda/Collective.cu) both unpack with it, so equal sums give equal
// bits on either.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_COLLECTIVEMATH_H
#define AMPC_KERNELS_COMMON_COLLECTIVEMATH_H

#include "kernels/common/Storage.h"

#include <cstdint>

namespace ampc::kernels {

/// Element i of a reduced buffer of wire dtype `Wire` (f32, f16 or bf16),
/// divided by `divisor`, stored as element i of `out` (f32, f16 or bf16).
template <DType Wire, DType Out>
AMPC_HD inline void unpackReducedElement(const void *sums, void *out, int64_t i, float divisor) {
  store<Out>(out, i, load<Wire>(sums, i) / divisor);
}

} // namespace ampc::kernels

#endif
