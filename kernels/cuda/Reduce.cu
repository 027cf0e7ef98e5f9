//===- Reduce.cu - Softmax, reduce_sum, pooling, layernorm, losses --------===//
//
// Row-wise ops give one thread a row (softmax, layernorm) or an output
// element (pooling, short sums) and visit elements in the reference's order,
// so they match it bit for bit. Long sums (reduce_sum over many elements,
// the losses' means) use a fixed tree: deterministic run to run, equal to
// the reference up to summation order.
//
//===----------------------------------------------------------------------===//
#include "kernels/common/ActivationMath.h"
#include "kernels/common/LossMath.h"
#include "kernels/common/NormMath.h"
#include "kernels/common/PoolMath.h"
#include "kernels/common/ReduceMath.h"
#include "kernels/cuda/Common.cuh"

namespace ampc::kernels::cuda {
namespace {

// --- softmax -------------------------------------------------------------------

template <DType D> __global__ void softmaxKernel(const void *x, void *y, AxisShape s, bool log) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(row, s.outer * s.inner) {
    int64_t o = row / s.inner, inner = row % s.inner;
    int64_t base = o * s.size * s.inner + inner;
    T rowMax = load<D>(x, base);
    for (int64_t k = 1; k < s.size; ++k)
      rowMax = softmaxMaxStep(rowMax, load<D>(x, base + k * s.inner));
    T sumExp = T(0);
    for (int64_t k = 0; k < s.size; ++k)
      sumExp += softmaxExpTerm(load<D>(x, base + k * s.inner), rowMax);
    for (int64_t k = 0; k < s.size; ++k) {
      T v = load<D>(x, base + k * s.inner);
      store<D>(y, base + k * s.inner,
               log ? logSoftmaxOutput(v, rowMax, sumExp) : softmaxOutput(v, rowMax, sumExp));
    }
  }
}

template <DType D>
__global__ void softmaxGradKernel(const void *dy, const void *y, void *dx, AxisShape s, bool log) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(row, s.outer * s.inner) {
    int64_t o = row / s.inner, inner = row % s.inner;
    int64_t base = o * s.size * s.inner + inner;
    T rowSum = T(0);
    for (int64_t k = 0; k < s.size; ++k) {
      T g = load<D>(dy, base + k * s.inner);
      rowSum += log ? g : softmaxGradDotTerm(g, load<D>(y, base + k * s.inner));
    }
    for (int64_t k = 0; k < s.size; ++k) {
      int64_t i = base + k * s.inner;
      T g = load<D>(dy, i), yk = load<D>(y, i);
      store<D>(dx, i, log ? logSoftmaxGradOp(g, yk, rowSum) : softmaxGradOp(g, yk, rowSum));
    }
  }
}

// --- reduce_sum ------------------------------------------------------------------

__device__ inline int64_t keptOffset(const ReduceShape &s, int64_t out) {
  int64_t offset = 0;
  for (int d = s.keptRank - 1; d >= 0; --d) {
    offset += (out % s.keptDims[d]) * s.keptStrides[d];
    out /= s.keptDims[d];
  }
  return offset;
}

__device__ inline int64_t reducedOffset(const ReduceShape &s, int64_t r) {
  int64_t offset = 0;
  for (int d = s.reducedRank - 1; d >= 0; --d) {
    offset += (r % s.reducedDims[d]) * s.reducedStrides[d];
    r /= s.reducedDims[d];
  }
  return offset;
}

/// Reduced elements [begin, end) of output `out`, in increasing input order.
template <DType D>
__device__ ComputeT<D> sumRange(const void *x, const ReduceShape &s, int64_t out, int64_t begin,
                                int64_t end) {
  int64_t base = keptOffset(s, out);
  ComputeT<D> acc = 0;
  for (int64_t r = begin; r < end; ++r)
    acc += load<D>(x, base + reducedOffset(s, r));
  return acc;
}

/// What an output stores: its sum, or for reduce_mean the reference's mean of it.
template <class T> __device__ T finishSum(T sum, const ReduceShape &s) {
  return s.mean ? meanOfSum(sum, s.reducedCount) : sum;
}

// Three plans (reducePlanOf). Direct: a thread per output adds its elements
// in the reference's order (short sums). Rows: the input's innermost
// dimension is reduced, so an output's elements lie in runs; a block per
// (output, chunk) reads its chunk coalesced and adds it by blockSum's tree.
// Columns: the innermost dimension is kept, so neighbouring outputs are
// neighbours in memory; a thread per (output, chunk), neighbouring threads on
// neighbouring outputs. Chunked plans then add each output's chunk sums in
// order. Every plan is fixed by the shape: deterministic run to run.

template <DType D> __global__ void reduceDirectKernel(const void *x, void *y, ReduceShape s) {
  AMPC_GRID_STRIDE(out, s.outputs)
  store<D>(y, out, finishSum(sumRange<D>(x, s, out, 0, s.reducedCount), s));
}

/// Block b sums chunk b % chunks of output b / chunks; with one chunk it
/// stores the output, else its partial sum (partial[b]).
template <DType D>
__global__ void reduceRowsKernel(const void *x, void *y, ComputeT<D> *partial, ReduceShape s,
                                 int64_t chunks, int64_t chunkLength) {
  using T = ComputeT<D>;
  __shared__ T shared[kThreads];
  for (int64_t b = blockIdx.x; b < s.outputs * chunks; b += gridDim.x) {
    int64_t out = b / chunks, begin = (b % chunks) * chunkLength;
    int64_t end = begin + chunkLength < s.reducedCount ? begin + chunkLength : s.reducedCount;
    int64_t base = keptOffset(s, out);
    T acc = 0;
    for (int64_t r = begin + threadIdx.x; r < end; r += kThreads)
      acc += load<D>(x, base + reducedOffset(s, r));
    T total = blockSum(acc, shared);
    if (threadIdx.x == 0) {
      if (chunks == 1)
        store<D>(y, out, finishSum(total, s));
      else
        partial[b] = total;
    }
  }
}

/// Thread i sums chunk i / outputs of output i % outputs into partial[i].
template <DType D>
__global__ void reduceColumnsKernel(const void *x, ComputeT<D> *partial, ReduceShape s,
                                    int64_t chunks, int64_t chunkLength) {
  AMPC_GRID_STRIDE(i, s.outputs * chunks) {
    int64_t out = i % s.outputs, begin = (i / s.outputs) * chunkLength;
    int64_t end = begin + chunkLength < s.reducedCount ? begin + chunkLength : s.reducedCount;
    partial[i] = sumRange<D>(x, s, out, begin, end);
  }
}

/// Output out's chunk sums, in chunk order: partial[out * outStride + c * chunkStride].
template <DType D>
__global__ void reduceChunksKernel(const ComputeT<D> *partial, void *y, ReduceShape s,
                                   int64_t chunks, int64_t outStride, int64_t chunkStride) {
  AMPC_GRID_STRIDE(out, s.outputs) {
    ComputeT<D> acc = 0;
    for (int64_t c = 0; c < chunks; ++c)
      acc += partial[out * outStride + c * chunkStride];
    store<D>(y, out, finishSum(acc, s));
  }
}

// --- pooling ------------------------------------------------------------------------

struct Windows {
  PoolWindow rows, cols;
};

__device__ inline Windows windowsOf(const PoolShape &s, int64_t oh, int64_t ow) {
  return {poolWindow(oh, s.inH, s.axis[0]), poolWindow(ow, s.inW, s.axis[1])};
}

/// The input element (within its plane) that max pooling window (oh, ow) picks.
template <DType D>
__device__ int64_t maxPoolPick(const void *x, int64_t plane, const PoolShape &s, int64_t oh,
                               int64_t ow) {
  Windows w = windowsOf(s, oh, ow);
  int64_t best = w.rows.begin * s.inW + w.cols.begin;
  ComputeT<D> bestValue = load<D>(x, plane + best);
  for (int64_t h = w.rows.begin; h < w.rows.end; ++h)
    for (int64_t c = w.cols.begin; c < w.cols.end; ++c) {
      ComputeT<D> value = load<D>(x, plane + h * s.inW + c);
      if (maxPoolTakes(bestValue, value)) {
        best = h * s.inW + c;
        bestValue = value;
      }
    }
  return best;
}

template <DType D> __global__ void maxPoolKernel(const void *x, void *y, PoolShape s) {
  AMPC_GRID_STRIDE(i, s.planes * s.outH * s.outW) {
    int64_t ow = i % s.outW, oh = i / s.outW % s.outH, p = i / (s.outW * s.outH);
    int64_t plane = p * s.inH * s.inW;
    Windows w = windowsOf(s, oh, ow);
    ComputeT<D> best = load<D>(x, plane + w.rows.begin * s.inW + w.cols.begin);
    for (int64_t h = w.rows.begin; h < w.rows.end; ++h)
      for (int64_t c = w.cols.begin; c < w.cols.end; ++c)
        best = maxPoolCombine(best, load<D>(x, plane + h * s.inW + c));
    store<D>(y, i, best);
  }
}

template <DType D> __global__ void avgPoolKernel(const void *x, void *y, PoolShape s) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(i, s.planes * s.outH * s.outW) {
    int64_t ow = i % s.outW, oh = i / s.outW % s.outH, p = i / (s.outW * s.outH);
    int64_t plane = p * s.inH * s.inW;
    Windows w = windowsOf(s, oh, ow);
    T sum = 0;
    for (int64_t h = w.rows.begin; h < w.rows.end; ++h)
      for (int64_t c = w.cols.begin; c < w.cols.end; ++c)
        sum += load<D>(x, plane + h * s.inW + c);
    store<D>(y, i, sum / static_cast<T>(avgPoolDivisor(w.rows, w.cols, s.countIncludePad)));
  }
}

/// The outputs along one dim whose windows cover input coordinate `in`.
__device__ inline void coveringOutputs(int64_t in, const PoolAxis &a, int64_t outSize,
                                       int64_t &first, int64_t &last) {
  // out * stride - padBegin <= in < out * stride - padBegin + kernel
  int64_t hi = (in + a.padBegin) / a.stride;
  int64_t lowNumerator = in + a.padBegin - a.kernel + 1;
  int64_t lo = lowNumerator <= 0 ? 0 : (lowNumerator + a.stride - 1) / a.stride;
  first = lo;
  last = hi < outSize - 1 ? hi : outSize - 1;
}

// The gradient kernels gather, per input element, from the windows that
// cover it in the reference's window order, so the sums round the same way.
template <DType D>
__global__ void maxPoolGradKernel(const void *dy, const void *x, void *dx, PoolShape s) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(i, s.planes * s.inH * s.inW) {
    int64_t iw = i % s.inW, ih = i / s.inW % s.inH, p = i / (s.inW * s.inH);
    int64_t plane = p * s.inH * s.inW, here = ih * s.inW + iw;
    int64_t oh0, oh1, ow0, ow1;
    coveringOutputs(ih, s.axis[0], s.outH, oh0, oh1);
    coveringOutputs(iw, s.axis[1], s.outW, ow0, ow1);
    T acc = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow)
        if (maxPoolPick<D>(x, plane, s, oh, ow) == here)
          acc += load<D>(dy, (p * s.outH + oh) * s.outW + ow);
    store<D>(dx, i, acc);
  }
}

template <DType D> __global__ void avgPoolGradKernel(const void *dy, void *dx, PoolShape s) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(i, s.planes * s.inH * s.inW) {
    int64_t iw = i % s.inW, ih = i / s.inW % s.inH, p = i / (s.inW * s.inH);
    int64_t oh0, oh1, ow0, ow1;
    coveringOutputs(ih, s.axis[0], s.outH, oh0, oh1);
    coveringOutputs(iw, s.axis[1], s.outW, ow0, ow1);
    T acc = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        Windows w = windowsOf(s, oh, ow);
        acc += load<D>(dy, (p * s.outH + oh) * s.outW + ow) /
               static_cast<T>(avgPoolDivisor(w.rows, w.cols, s.countIncludePad));
      }
    store<D>(dx, i, acc);
  }
}

template <DType D>
__global__ void globalAvgPoolKernel(const void *x, void *y, int64_t planes, int64_t planeSize) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(p, planes) {
    T sum = 0;
    for (int64_t e = 0; e < planeSize; ++e)
      sum += load<D>(x, p * planeSize + e);
    store<D>(y, p, sum / static_cast<T>(planeSize));
  }
}

template <DType D>
__global__ void globalAvgPoolGradKernel(const void *dy, void *dx, int64_t planes,
                                        int64_t planeSize) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(i, planes * planeSize) {
    T share = load<D>(dy, i / planeSize) / static_cast<T>(planeSize);
    store<D>(dx, i, share);
  }
}

// --- layernorm --------------------------------------------------------------------------

template <DType D>
__device__ void rowStatistics(const void *x, int64_t base, int64_t size, ComputeT<D> eps,
                              ComputeT<D> &mean, ComputeT<D> &invStdDev) {
  using T = ComputeT<D>;
  T sum = 0;
  for (int64_t e = 0; e < size; ++e)
    sum += load<D>(x, base + e);
  T m0 = sum / static_cast<T>(size);
  T deviations = 0, squares = 0;
  for (int64_t e = 0; e < size; ++e) {
    T deviation = load<D>(x, base + e) - m0;
    deviations += deviation;
    squares += deviation * deviation;
  }
  T variance;
  correctedMoments(m0, deviations, squares, size, mean, variance);
  invStdDev = inverseStdDev(variance, eps);
}

template <DType D> __device__ ComputeT<D> loadParam(const Tensor &t, int64_t i) {
  return static_cast<ComputeT<D>>(loadAsDouble(t.dtype, t.data, i));
}

template <DType D>
__global__ void layerNormKernel(const void *x, Tensor weight, Tensor bias, void *y, int64_t rows,
                                int64_t size, ComputeT<D> eps) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(r, rows) {
    int64_t base = r * size;
    T mean, invStdDev;
    rowStatistics<D>(x, base, size, eps, mean, invStdDev);
    for (int64_t e = 0; e < size; ++e)
      store<D>(y, base + e,
               normalizeAffine(load<D>(x, base + e), mean, invStdDev, loadParam<D>(weight, e),
                               loadParam<D>(bias, e)));
  }
}

template <DType D>
__global__ void layerNormGradRowsKernel(const void *dy, const void *x, Tensor weight, void *dx,
                                        int64_t rows, int64_t size, ComputeT<D> eps,
                                        double *stats) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(r, rows) {
    int64_t base = r * size;
    T mean, invStdDev;
    rowStatistics<D>(x, base, size, eps, mean, invStdDev);
    stats[2 * r] = mean;
    stats[2 * r + 1] = invStdDev;
    T sumG = 0, sumGXhat = 0;
    for (int64_t e = 0; e < size; ++e) {
      T xhat = (load<D>(x, base + e) - mean) * invStdDev;
      T g = loadParam<D>(weight, e) * load<D>(dy, base + e);
      sumG += g;
      sumGXhat += g * xhat;
    }
    T meanG = sumG / static_cast<T>(size);
    T meanGXhat = sumGXhat / static_cast<T>(size);
    for (int64_t e = 0; e < size; ++e) {
      T g = loadParam<D>(weight, e) * load<D>(dy, base + e);
      T xhat = (load<D>(x, base + e) - mean) * invStdDev;
      store<D>(dx, base + e, normalizeBackward(g, xhat, meanG, meanGXhat, invStdDev));
    }
  }
}

template <DType D>
__global__ void layerNormGradParamsKernel(const void *dy, const void *x, MutableTensor dWeight,
                                          MutableTensor dBias, int64_t rows, int64_t size,
                                          const double *stats) {
  using T = ComputeT<D>;
  AMPC_GRID_STRIDE(e, size) {
    T sumDyXhat = 0, sumDy = 0;
    for (int64_t r = 0; r < rows; ++r) {
      T mean = static_cast<T>(stats[2 * r]), invStdDev = static_cast<T>(stats[2 * r + 1]);
      T d = load<D>(dy, r * size + e);
      T xhat = (load<D>(x, r * size + e) - mean) * invStdDev;
      sumDyXhat += d * xhat;
      sumDy += d;
    }
    storeFromDouble(dWeight.dtype, dWeight.data, e, sumDyXhat);
    storeFromDouble(dBias.dtype, dBias.data, e, sumDy);
  }
}

// --- losses -------------------------------------------------------------------------------

/// Block b's part of sum (input - target)^2: elements [b * chunk, (b + 1) * chunk).
template <DType D>
__global__ void mseLossPartialKernel(const void *input, const void *target, ComputeT<D> *partial,
                                     int64_t n, int64_t chunk) {
  using T = ComputeT<D>;
  __shared__ T shared[kThreads];
  int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  int64_t end = begin + chunk < n ? begin + chunk : n;
  T sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads)
    sum += squaredErrorTerm(load<D>(input, i), load<D>(target, i));
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = sum;
}

/// One block: the parts' total over n.
template <DType D>
__global__ void mseLossTotalKernel(const ComputeT<D> *partial, int64_t parts, void *out,
                                   int64_t n) {
  using T = ComputeT<D>;
  __shared__ T shared[kThreads];
  T sum = 0;
  for (int64_t i = threadIdx.x; i < parts; i += kThreads)
    sum += partial[i];
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0)
    store<D>(out, 0, sum / T(n));
}

template <DType D>
__global__ void mseLossGradKernel(const void *dy, const void *input, const void *target, void *dx,
                                  int64_t n) {
  using T = ComputeT<D>;
  T scale = load<D>(dy, 0) / T(n);
  AMPC_GRID_STRIDE(i, n)
  store<D>(dx, i, squaredErrorGradTerm(load<D>(input, i), load<D>(target, i), scale));
}

/// Row r's softmax pieces: the maximum and the sum of exp(x - max).
template <DType D>
__device__ void rowSoftmax(const void *logits, int64_t r, int64_t classes, ComputeT<D> &rowMax,
                           ComputeT<D> &sumExp) {
  rowMax = load<D>(logits, r * classes);
  for (int64_t c = 1; c < classes; ++c)
    rowMax = softmaxMaxStep(rowMax, load<D>(logits, r * classes + c));
  sumExp = 0;
  for (int64_t c = 0; c < classes; ++c)
    sumExp += softmaxExpTerm(load<D>(logits, r * classes + c), rowMax);
}

template <DType D>
__global__ void crossEntropyKernel(const void *logits, const void *labels, void *out,
                                   CrossEntropyShape s) {
  using T = ComputeT<D>;
  __shared__ T sharedT[kThreads];
  __shared__ long long sharedCount[kThreads];
  T nll = 0, smooth = 0;
  long long counted = 0, bad = 0;
  for (int64_t r = threadIdx.x; r < s.rows; r += kThreads) {
    int64_t label = loadIndex(s.labelType, labels, r);
    if (label == s.ignoreIndex)
      continue;
    if (label < 0 || label >= s.classes) {
      bad = 1;
      continue;
    }
    ++counted;
    T rowMax, sumExp;
    rowSoftmax<D>(logits, r, s.classes, rowMax, sumExp);
    nll -= logSoftmaxOutput(load<D>(logits, r * s.classes + label), rowMax, sumExp);
    if (s.labelSmoothing != 0)
      for (int64_t c = 0; c < s.classes; ++c)
        smooth -= logSoftmaxOutput(load<D>(logits, r * s.classes + c), rowMax, sumExp);
  }
  nll = blockSum(nll, sharedT);
  __syncthreads();
  smooth = blockSum(smooth, sharedT);
  __syncthreads();
  counted = blockSum(counted, sharedCount);
  __syncthreads();
  bad = blockSum(bad, sharedCount);
  if (threadIdx.x == 0) {
    T count = T(counted);
    T loss = crossEntropyCombine(nll / count, smooth / count, s.labelSmoothing,
                                 static_cast<long long>(s.classes));
    store<D>(out, 0, bad ? T(NAN) : loss); // a bad label: NaN, as the reference
  }
}

__global__ void countLabelsKernel(const void *labels, CrossEntropyShape s, long long *counts) {
  __shared__ long long shared[kThreads];
  long long counted = 0, bad = 0;
  for (int64_t r = threadIdx.x; r < s.rows; r += kThreads) {
    int64_t label = loadIndex(s.labelType, labels, r);
    if (label == s.ignoreIndex)
      continue;
    if (label < 0 || label >= s.classes)
      bad = 1;
    else
      ++counted;
  }
  counted = blockSum(counted, shared);
  __syncthreads();
  bad = blockSum(bad, shared);
  if (threadIdx.x == 0) {
    counts[0] = counted;
    counts[1] = bad;
  }
}

template <DType D>
__global__ void crossEntropyGradKernel(const void *dy, const void *logits, const void *labels,
                                       void *dx, CrossEntropyShape s, const long long *counts) {
  using T = ComputeT<D>;
  T scale = load<D>(dy, 0) / T(counts[0]);
  bool bad = counts[1] != 0;
  AMPC_GRID_STRIDE(r, s.rows) {
    int64_t label = loadIndex(s.labelType, labels, r);
    if (bad || label == s.ignoreIndex) {
      T fillValue = bad ? T(NAN) : T(0);
      for (int64_t c = 0; c < s.classes; ++c)
        store<D>(dx, r * s.classes + c, fillValue);
      continue;
    }
    T rowMax, sumExp;
    rowSoftmax<D>(logits, r, s.classes, rowMax, sumExp);
    for (int64_t c = 0; c < s.classes; ++c)
      store<D>(dx, r * s.classes + c,
               crossEntropyGradTerm(
                   softmaxOutput(load<D>(logits, r * s.classes + c), rowMax, sumExp), c == label,
                   s.labelSmoothing, static_cast<long long>(s.classes), scale));
  }
}

} // namespace

cudaError_t softmax(const Launch &l, DType t, const void *x, void *y, AxisShape s, bool log) {
  int64_t rows = s.outer * s.inner;
  if (rows == 0 || s.size == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    softmaxKernel<decltype(tag)::value><<<blocksFor(rows), kThreads, 0, l.stream>>>(x, y, s, log);
    return cudaGetLastError();
  });
}

cudaError_t softmaxGrad(const Launch &l, DType t, const void *dy, const void *y, void *dx,
                        AxisShape s, bool log) {
  int64_t rows = s.outer * s.inner;
  if (rows == 0 || s.size == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    softmaxGradKernel<decltype(tag)::value>
        <<<blocksFor(rows), kThreads, 0, l.stream>>>(dy, y, dx, s, log);
    return cudaGetLastError();
  });
}

namespace {
enum class ReduceKind { Direct, Rows, Columns };
struct ReducePlan {
  ReduceKind kind = ReduceKind::Direct;
  int64_t chunks = 1, chunkLength = 0;
};

/// Rows: a block's chunk, 32 elements a thread. Columns: enough threads to
/// fill the device, each adding at least kMinColumnChunk elements.
constexpr int64_t kRowChunk = 32 * kThreads;
constexpr int64_t kMinRowReduction = 2 * kThreads;
constexpr int64_t kThreadsWanted = 1 << 17;
constexpr int64_t kMinColumnChunk = 16;

ReducePlan reducePlanOf(const ReduceShape &s) {
  ReducePlan p;
  p.chunkLength = s.reducedCount;
  bool innermostReduced = s.reducedRank > 0 && s.reducedStrides[s.reducedRank - 1] == 1;
  if (innermostReduced && s.reducedCount >= kMinRowReduction) {
    p.kind = ReduceKind::Rows;
    p.chunkLength = kRowChunk;
    p.chunks = (s.reducedCount + kRowChunk - 1) / kRowChunk;
    return p;
  }
  int64_t wanted = (kThreadsWanted + s.outputs - 1) / s.outputs;
  int64_t most = (s.reducedCount + kMinColumnChunk - 1) / kMinColumnChunk;
  int64_t chunks = wanted < most ? wanted : most;
  if (chunks <= 1)
    return p;
  p.kind = ReduceKind::Columns;
  p.chunkLength = (s.reducedCount + chunks - 1) / chunks;
  p.chunks = (s.reducedCount + p.chunkLength - 1) / p.chunkLength;
  return p;
}
} // namespace

size_t reduceSumScratchBytes(DType t, const ReduceShape &s) {
  ReducePlan p = reducePlanOf(s);
  if (p.chunks <= 1)
    return 0;
  size_t element = t == DType::F64 ? sizeof(double) : sizeof(float);
  return static_cast<size_t>(s.outputs * p.chunks) * element;
}

cudaError_t reduceSum(const Launch &l, DType t, const void *x, void *y, const ReduceShape &s,
                      void *scratch) {
  if (s.outputs == 0)
    return cudaSuccess;
  ReducePlan p = reducePlanOf(s);
  return withFloat(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    auto *partial = static_cast<ComputeT<D> *>(scratch);
    switch (p.kind) {
    case ReduceKind::Direct:
      reduceDirectKernel<D><<<blocksFor(s.outputs), kThreads, 0, l.stream>>>(x, y, s);
      return cudaGetLastError();
    case ReduceKind::Rows: {
      reduceRowsKernel<D><<<gridOf(s.outputs * p.chunks), kThreads, 0, l.stream>>>(
          x, y, partial, s, p.chunks, p.chunkLength);
      if (cudaError_t err = cudaGetLastError(); err != cudaSuccess || p.chunks == 1)
        return err;
      reduceChunksKernel<D>
          <<<blocksFor(s.outputs), kThreads, 0, l.stream>>>(partial, y, s, p.chunks, p.chunks, 1);
      return cudaGetLastError();
    }
    case ReduceKind::Columns: {
      reduceColumnsKernel<D><<<blocksFor(s.outputs * p.chunks), kThreads, 0, l.stream>>>(
          x, partial, s, p.chunks, p.chunkLength);
      if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
        return err;
      reduceChunksKernel<D>
          <<<blocksFor(s.outputs), kThreads, 0, l.stream>>>(partial, y, s, p.chunks, 1, s.outputs);
      return cudaGetLastError();
    }
    }
    return cudaErrorInvalidValue;
  });
}

cudaError_t maxPool2d(const Launch &l, DType t, const void *x, void *y, const PoolShape &s) {
  int64_t n = s.planes * s.outH * s.outW;
  if (n == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    maxPoolKernel<decltype(tag)::value><<<blocksFor(n), kThreads, 0, l.stream>>>(x, y, s);
    return cudaGetLastError();
  });
}

cudaError_t avgPool2d(const Launch &l, DType t, const void *x, void *y, const PoolShape &s) {
  int64_t n = s.planes * s.outH * s.outW;
  if (n == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    avgPoolKernel<decltype(tag)::value><<<blocksFor(n), kThreads, 0, l.stream>>>(x, y, s);
    return cudaGetLastError();
  });
}

cudaError_t maxPool2dGrad(const Launch &l, DType t, const void *dy, const void *x, void *dx,
                          const PoolShape &s) {
  int64_t n = s.planes * s.inH * s.inW;
  if (n == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    maxPoolGradKernel<decltype(tag)::value><<<blocksFor(n), kThreads, 0, l.stream>>>(dy, x, dx, s);
    return cudaGetLastError();
  });
}

cudaError_t avgPool2dGrad(const Launch &l, DType t, const void *dy, void *dx, const PoolShape &s) {
  int64_t n = s.planes * s.inH * s.inW;
  if (n == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    avgPoolGradKernel<decltype(tag)::value><<<blocksFor(n), kThreads, 0, l.stream>>>(dy, dx, s);
    return cudaGetLastError();
  });
}

cudaError_t globalAvgPool(const Launch &l, DType t, const void *x, void *y, int64_t planes,
                          int64_t planeSize) {
  if (planes == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    globalAvgPoolKernel<decltype(tag)::value>
        <<<blocksFor(planes), kThreads, 0, l.stream>>>(x, y, planes, planeSize);
    return cudaGetLastError();
  });
}

cudaError_t globalAvgPoolGrad(const Launch &l, DType t, const void *dy, void *dx, int64_t planes,
                              int64_t planeSize) {
  int64_t n = planes * planeSize;
  if (n == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    globalAvgPoolGradKernel<decltype(tag)::value>
        <<<blocksFor(n), kThreads, 0, l.stream>>>(dy, dx, planes, planeSize);
    return cudaGetLastError();
  });
}

size_t layerNormScratchBytes(int64_t rows) {
  return static_cast<size_t>(rows) * 2 * sizeof(double);
}

cudaError_t layerNorm(const Launch &l, DType t, const void *x, Tensor weight, Tensor bias, void *y,
                      int64_t rows, int64_t size, double eps) {
  if (rows == 0 || size == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    layerNormKernel<D><<<blocksFor(rows), kThreads, 0, l.stream>>>(x, weight, bias, y, rows, size,
                                                                   static_cast<ComputeT<D>>(eps));
    return cudaGetLastError();
  });
}

cudaError_t layerNormGrad(const Launch &l, DType t, const void *dy, const void *x, Tensor weight,
                          void *dx, MutableTensor dWeight, MutableTensor dBias, int64_t rows,
                          int64_t size, double eps, void *scratch) {
  if (size == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    auto *stats = static_cast<double *>(scratch);
    if (rows > 0) {
      layerNormGradRowsKernel<D><<<blocksFor(rows), kThreads, 0, l.stream>>>(
          dy, x, weight, dx, rows, size, static_cast<ComputeT<D>>(eps), stats);
      cudaError_t err = cudaGetLastError();
      if (err != cudaSuccess)
        return err;
    }
    layerNormGradParamsKernel<D>
        <<<blocksFor(size), kThreads, 0, l.stream>>>(dy, x, dWeight, dBias, rows, size, stats);
    return cudaGetLastError();
  });
}

namespace {
/// The MSE sum's parts: at least kRowChunk elements each, at most kMseParts of them.
constexpr int64_t kMseParts = 4096;
int64_t mseChunk(int64_t n) {
  int64_t chunk = (n + kMseParts - 1) / kMseParts;
  return chunk > kRowChunk ? chunk : kRowChunk;
}
int64_t mseParts(int64_t n) { return n == 0 ? 1 : (n + mseChunk(n) - 1) / mseChunk(n); }
} // namespace

size_t mseLossScratchBytes(DType t, int64_t n) {
  return static_cast<size_t>(mseParts(n)) * (t == DType::F64 ? sizeof(double) : sizeof(float));
}

cudaError_t mseLoss(const Launch &l, DType t, const void *input, const void *target, void *out,
                    int64_t n, void *scratch) {
  return withFloat(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    auto *partial = static_cast<ComputeT<D> *>(scratch);
    int64_t parts = mseParts(n);
    mseLossPartialKernel<D><<<static_cast<unsigned>(parts), kThreads, 0, l.stream>>>(
        input, target, partial, n, mseChunk(n));
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      return err;
    mseLossTotalKernel<D><<<1, kThreads, 0, l.stream>>>(partial, parts, out, n);
    return cudaGetLastError();
  });
}

cudaError_t mseLossGrad(const Launch &l, DType t, const void *dy, const void *input,
                        const void *target, void *dx, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    mseLossGradKernel<decltype(tag)::value>
        <<<blocksFor(n), kThreads, 0, l.stream>>>(dy, input, target, dx, n);
    return cudaGetLastError();
  });
}

cudaError_t crossEntropy(const Launch &l, DType t, const void *logits, const void *labels,
                         void *out, const CrossEntropyShape &s) {
  return withFloat(t, [&](auto tag) {
    crossEntropyKernel<decltype(tag)::value><<<1, kThreads, 0, l.stream>>>(logits, labels, out, s);
    return cudaGetLastError();
  });
}

cudaError_t crossEntropyGrad(const Launch &l, DType t, const void *dy, const void *logits,
                             const void *labels, void *dx, const CrossEntropyShape &s,
                             void *scratch) {
  auto *counts = static_cast<long long *>(scratch);
  countLabelsKernel<<<1, kThreads, 0, l.stream>>>(labels, s, counts);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || s.rows == 0)
    return err;
  return withFloat(t, [&](auto tag) {
    crossEntropyGradKernel<decltype(tag)::value>
        <<<blocksFor(s.rows), kThreads, 0, l.stream>>>(dy, logits, labels, dx, s, counts);
    return cudaGetLastError();
  });
}

} // namespace ampc::kernels::cuda
