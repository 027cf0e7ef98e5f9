//===- ReduceMath.h - Element math shared by the reductions ---------------===//
//
// What reduce_sum's kernels on every backend (AMPC_HD) turn a sum into for
// reduce_mean, so the backends agree wherever their sums do. T is the
// compute type the sum was accumulated in (f32 for halves, f64 for f64).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_REDUCEMATH_H
#define AMPC_KERNELS_COMMON_REDUCEMATH_H

#include "ir/HostDevice.h"

#include <cstdint>

namespace ampc::kernels {

/// The mean of `count` elements from their sum, divided as torch.mean does
/// on the CPU (sum / count, not sum * (1 / count)); an empty mean is 0 / 0 =
/// NaN, as PyTorch's.
template <class T> AMPC_HD inline T meanOfSum(T sum, int64_t count) { return sum / T(count); }

} // namespace ampc::kernels

#endif
