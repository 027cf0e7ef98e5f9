//===- BatchNorm.cu - batchnorm2d and its gradient, any float dtype -------===//
//
// Our own batchnorm for what cuDNN's legacy API does not take: bf16 inputs
// (the default half type), half per-channel parameters (O3 without
// keep_batchnorm_fp32), eval-mode backward and eps below
// CUDNN_BN_MIN_EPSILON. Two launches each way:
//   1. one block per channel: the statistics, two passes as the reference
//      (mean, then mean squared deviation) in ComputeT<D>, summed by a fixed
//      tree (deterministic, equal to the reference up to summation order);
//      the running statistics (forward) or the parameter gradients and the
//      two means normalizeBackward needs (backward) are written there;
//   2. one thread per element: normalizeAffine or normalizeBackward
//      (kernels/common/NormMath.h, the reference's math).
// The per-channel numbers pass through `scratch` as doubles.
//
//===----------------------------------------------------------------------===//
#include "kernels/common/NormMath.h"
#include "kernels/cuda/Common.cuh"

namespace ampc::kernels::cuda {
namespace {

template <DType D> __device__ ComputeT<D> param(const Tensor &t, int64_t c) {
  return static_cast<ComputeT<D>>(loadAsDouble(t.dtype, t.data, c));
}

/// The channel's i-th of its batch * plane elements.
__device__ inline int64_t channelIndex(const BatchNormShape &s, int64_t c, int64_t i) {
  return ((i / s.plane) * s.channels + c) * s.plane + i % s.plane;
}

/// Mean and 1/sqrt(var + eps) of channel c: the batch's (training) or the
/// running statistics (eval).
template <DType D>
__device__ void channelStatistics(const void *x, const BatchNormParams &p, const BatchNormShape &s,
                                  int64_t c, ComputeT<D> *shared, ComputeT<D> &mean,
                                  ComputeT<D> &variance, ComputeT<D> &invStdDev) {
  using T = ComputeT<D>;
  T eps = static_cast<T>(s.eps);
  if (!s.training) {
    mean = param<D>(p.runningMean, c);
    variance = param<D>(p.runningVar, c);
    invStdDev = inverseStdDev(variance, eps);
    return;
  }
  int64_t count = s.batch * s.plane;
  T sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads)
    sum += load<D>(x, channelIndex(s, c, i));
  T m0 = blockSum(sum, shared) / static_cast<T>(count);
  T deviations = 0, squares = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    T deviation = load<D>(x, channelIndex(s, c, i)) - m0;
    deviations += deviation;
    squares += deviation * deviation;
  }
  deviations = blockSum(deviations, shared);
  correctedMoments(m0, deviations, blockSum(squares, shared), count, mean, variance);
  invStdDev = inverseStdDev(variance, eps);
}

template <DType D>
__global__ void forwardStatsKernel(const void *x, BatchNormParams p, BatchNormShape s,
                                   double *stats) {
  using T = ComputeT<D>;
  __shared__ T shared[kThreads];
  int64_t c = blockIdx.x;
  T mean, variance, invStdDev;
  channelStatistics<D>(x, p, s, c, shared, mean, variance, invStdDev);
  if (threadIdx.x != 0)
    return;
  stats[2 * c] = mean;
  stats[2 * c + 1] = invStdDev;
  if (!s.training || !p.newMean.data)
    return;
  T momentum = static_cast<T>(s.momentum);
  int64_t count = s.batch * s.plane;
  storeFromDouble(p.newMean.dtype, p.newMean.data, c,
                  runningStatUpdate(param<D>(p.runningMean, c), mean, momentum));
  storeFromDouble(
      p.newVar.dtype, p.newVar.data, c,
      runningStatUpdate(param<D>(p.runningVar, c), unbiasedVariance(variance, count), momentum));
}

template <DType D>
__global__ void normalizeKernel(const void *x, BatchNormParams p, BatchNormShape s, void *y,
                                const double *stats) {
  using T = ComputeT<D>;
  int64_t n = s.batch * s.channels * s.plane;
  AMPC_GRID_STRIDE(i, n) {
    int64_t c = (i / s.plane) % s.channels;
    store<D>(y, i,
             normalizeAffine(load<D>(x, i), static_cast<T>(stats[2 * c]),
                             static_cast<T>(stats[2 * c + 1]), param<D>(p.weight, c),
                             param<D>(p.bias, c)));
  }
}

// stats per channel: mean, invStdDev, w * mean(dy), w * mean(dy * xhat).
template <DType D>
__global__ void backwardStatsKernel(const void *dy, const void *x, BatchNormParams p,
                                    BatchNormShape s, double *stats) {
  using T = ComputeT<D>;
  __shared__ T shared[kThreads];
  int64_t c = blockIdx.x;
  T mean, variance, invStdDev;
  channelStatistics<D>(x, p, s, c, shared, mean, variance, invStdDev);
  int64_t count = s.batch * s.plane;
  T sumDy = 0, sumDyXhat = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    int64_t at = channelIndex(s, c, i);
    T g = load<D>(dy, at);
    sumDy += g;
    sumDyXhat += g * (load<D>(x, at) - mean) * invStdDev;
  }
  sumDy = blockSum(sumDy, shared);
  sumDyXhat = blockSum(sumDyXhat, shared);
  if (threadIdx.x != 0)
    return;
  T w = param<D>(p.weight, c);
  stats[4 * c] = mean;
  stats[4 * c + 1] = invStdDev;
  stats[4 * c + 2] = w * sumDy / static_cast<T>(count);
  stats[4 * c + 3] = w * sumDyXhat / static_cast<T>(count);
  storeFromDouble(p.dWeight.dtype, p.dWeight.data, c, sumDyXhat);
  storeFromDouble(p.dBias.dtype, p.dBias.data, c, sumDy);
}

template <DType D>
__global__ void backwardKernel(const void *dy, const void *x, BatchNormParams p, BatchNormShape s,
                               void *dx, const double *stats) {
  using T = ComputeT<D>;
  int64_t n = s.batch * s.channels * s.plane;
  AMPC_GRID_STRIDE(i, n) {
    int64_t c = (i / s.plane) % s.channels;
    T invStdDev = static_cast<T>(stats[4 * c + 1]);
    T g = param<D>(p.weight, c) * load<D>(dy, i);
    if (!s.training) {
      store<D>(dx, i, g * invStdDev);
      continue;
    }
    T xhat = (load<D>(x, i) - static_cast<T>(stats[4 * c])) * invStdDev;
    store<D>(dx, i,
             normalizeBackward(g, xhat, static_cast<T>(stats[4 * c + 2]),
                               static_cast<T>(stats[4 * c + 3]), invStdDev));
  }
}

bool channelsFit(const BatchNormShape &s) { return s.channels > 0 && s.channels <= 0x7fffffff; }

} // namespace

size_t batchNormScratchBytes(int64_t channels) {
  return static_cast<size_t>(channels) * 4 * sizeof(double);
}

cudaError_t batchNorm(const Launch &l, DType t, const void *x, const BatchNormParams &p, void *y,
                      const BatchNormShape &s, void *scratch) {
  if (s.batch * s.plane == 0 || !channelsFit(s))
    return cudaSuccess;
  auto *stats = static_cast<double *>(scratch);
  return withFloat(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    forwardStatsKernel<D>
        <<<static_cast<unsigned>(s.channels), kThreads, 0, l.stream>>>(x, p, s, stats);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
      return err;
    normalizeKernel<D>
        <<<blocksFor(s.batch * s.channels * s.plane), kThreads, 0, l.stream>>>(x, p, s, y, stats);
    return cudaGetLastError();
  });
}

cudaError_t batchNormGrad(const Launch &l, DType t, const void *dy, const void *x,
                          const BatchNormParams &p, void *dx, const BatchNormShape &s,
                          void *scratch) {
  if (!channelsFit(s))
    return cudaSuccess;
  auto *stats = static_cast<double *>(scratch);
  return withFloat(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    backwardStatsKernel<D>
        <<<static_cast<unsigned>(s.channels), kThreads, 0, l.stream>>>(dy, x, p, s, stats);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess || s.batch * s.plane == 0)
      return err;
    backwardKernel<D><<<blocksFor(s.batch * s.channels * s.plane), kThreads, 0, l.stream>>>(
        dy, x, p, s, dx, stats);
    return cudaGetLastError();
  });
}

} // namespace ampc::kernels::cuda
