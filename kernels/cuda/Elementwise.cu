//===- Elementwise.cu - Casts, fills, permutes, activations, arithmetic ---===//
//
// One thread per element (grid-stride loops). The element math is
// kernels/common's, so these give the reference's bits: loads widen exactly,
// the compute type is f32 for halves, and each result is rounded once.
//
//===----------------------------------------------------------------------===//
#include "kernels/common/ActivationMath.h"
#include "kernels/common/CastMath.h"
#include "kernels/common/ElementwiseMath.h"
#include "kernels/common/Random.h"
#include "kernels/common/UnaryMath.h"
#include "kernels/cuda/Common.cuh"

namespace ampc::kernels::cuda {
namespace {

template <DType From, DType To> __global__ void castKernel(const void *x, void *y, int64_t n) {
  AMPC_GRID_STRIDE(i, n) castElement<From, To>(x, y, i);
}

__global__ void fillKernel(DType t, void *y, int64_t n, double value) {
  AMPC_GRID_STRIDE(i, n) storeFromDouble(t, y, i, value);
}

__global__ void broadcastChannelsKernel(DType t, const void *v, void *y, int64_t n,
                                        int64_t channels, int64_t inner) {
  AMPC_GRID_STRIDE(i, n) {
    int64_t c = (i / inner) % channels;
    switch (dtypeSizeOnDevice(t)) {
    case 2:
      static_cast<uint16_t *>(y)[i] = static_cast<const uint16_t *>(v)[c];
      break;
    case 4:
      static_cast<uint32_t *>(y)[i] = static_cast<const uint32_t *>(v)[c];
      break;
    case 8:
      static_cast<uint64_t *>(y)[i] = static_cast<const uint64_t *>(v)[c];
      break;
    default:
      static_cast<uint8_t *>(y)[i] = static_cast<const uint8_t *>(v)[c];
      break;
    }
  }
}

template <class E> __global__ void permuteKernel(const E *x, E *y, int64_t n, PermuteShape s) {
  AMPC_GRID_STRIDE(i, n) {
    int64_t rest = i, offset = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      offset += (rest % s.outDims[d]) * s.inStrides[d];
      rest /= s.outDims[d];
    }
    y[i] = x[offset];
  }
}

// The element functors are kernels/common's (ir/Pointwise.def): plain
// structs, since device lambdas would need --extended-lambda.

template <DType D, class F> __global__ void unaryKernel(const void *x, void *y, int64_t n, F f) {
  AMPC_GRID_STRIDE(i, n) store<D>(y, i, f(load<D>(x, i)));
}

template <DType D, class F>
__global__ void pairKernel(const void *a, const void *b, void *y, int64_t n, F f) {
  AMPC_GRID_STRIDE(i, n) store<D>(y, i, f(load<D>(a, i), load<D>(b, i)));
}

template <DType D, class F>
__global__ void broadcastKernel(const void *a, const void *b, void *y, int64_t n, BroadcastShape s,
                                F f) {
  AMPC_GRID_STRIDE(i, n) {
    int64_t rest = i, ai = 0, bi = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      int64_t coord = rest % s.outDims[d];
      rest /= s.outDims[d];
      ai += coord * s.lhsStrides[d];
      bi += coord * s.rhsStrides[d];
    }
    store<D>(y, i, f(load<D>(a, ai), load<D>(b, bi)));
  }
}

template <DType D>
__global__ void dropoutKernel(const void *x, void *y, int64_t n, float p, ComputeT<D> scale,
                              uint64_t seed, const uint64_t *step) {
  uint64_t s = *step;
  AMPC_GRID_STRIDE(i, n) {
    bool keep = dropoutKeep(seed, s, static_cast<uint64_t>(i), p);
    store<D>(y, i, dropoutOp(load<D>(x, i), keep, scale));
  }
}

template <DType D> __global__ void copyComputeKernel(const void *x, void *y, int64_t n) {
  AMPC_GRID_STRIDE(i, n) store<D>(y, i, load<D>(x, i));
}

template <class F>
cudaError_t launchUnary(const Launch &l, DType t, const void *x, void *y, int64_t n, F f) {
  return withFloat(t, [&](auto tag) {
    unaryKernel<decltype(tag)::value><<<blocksFor(n), kThreads, 0, l.stream>>>(x, y, n, f);
    return cudaGetLastError();
  });
}

template <class F>
cudaError_t launchPair(const Launch &l, DType t, const void *a, const void *b, void *y, int64_t n,
                       F f) {
  return withFloat(t, [&](auto tag) {
    pairKernel<decltype(tag)::value><<<blocksFor(n), kThreads, 0, l.stream>>>(a, b, y, n, f);
    return cudaGetLastError();
  });
}

template <class F>
cudaError_t launchBinary(const Launch &l, DType t, const void *a, const void *b, void *y, int64_t n,
                         const BroadcastShape &s, F f) {
  // Same shapes (no broadcast): the plain pairwise kernel.
  bool plain = true;
  int64_t stride = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    plain = plain && s.lhsStrides[d] == stride && s.rhsStrides[d] == stride;
    stride *= s.outDims[d];
  }
  if (plain)
    return launchPair(l, t, a, b, y, n, f);
  return withFloat(t, [&](auto tag) {
    broadcastKernel<decltype(tag)::value>
        <<<blocksFor(n), kThreads, 0, l.stream>>>(a, b, y, n, s, f);
    return cudaGetLastError();
  });
}

} // namespace

cudaError_t cast(const Launch &l, Tensor x, MutableTensor y) {
  if (x.n == 0)
    return cudaSuccess;
  return withAny(x.dtype, [&](auto from) {
    return withAny(y.dtype, [&](auto to) {
      castKernel<decltype(from)::value, decltype(to)::value>
          <<<blocksFor(x.n), kThreads, 0, l.stream>>>(x.data, y.data, x.n);
      return cudaGetLastError();
    });
  });
}

cudaError_t fill(const Launch &l, MutableTensor y, double value) {
  if (y.n == 0)
    return cudaSuccess;
  fillKernel<<<blocksFor(y.n), kThreads, 0, l.stream>>>(y.dtype, y.data, y.n, value);
  return cudaGetLastError();
}

cudaError_t broadcastChannels(const Launch &l, DType t, const void *v, void *y, int64_t outer,
                              int64_t channels, int64_t inner) {
  int64_t n = outer * channels * inner;
  if (n == 0)
    return cudaSuccess;
  broadcastChannelsKernel<<<blocksFor(n), kThreads, 0, l.stream>>>(t, v, y, n, channels, inner);
  return cudaGetLastError();
}

cudaError_t permute(const Launch &l, unsigned elementSize, const void *x, void *y, int64_t n,
                    const PermuteShape &s) {
  if (n == 0)
    return cudaSuccess;
  switch (elementSize) {
  case 1:
    permuteKernel<<<blocksFor(n), kThreads, 0, l.stream>>>(static_cast<const uint8_t *>(x),
                                                           static_cast<uint8_t *>(y), n, s);
    break;
  case 2:
    permuteKernel<<<blocksFor(n), kThreads, 0, l.stream>>>(static_cast<const uint16_t *>(x),
                                                           static_cast<uint16_t *>(y), n, s);
    break;
  case 4:
    permuteKernel<<<blocksFor(n), kThreads, 0, l.stream>>>(static_cast<const uint32_t *>(x),
                                                           static_cast<uint32_t *>(y), n, s);
    break;
  case 8:
    permuteKernel<<<blocksFor(n), kThreads, 0, l.stream>>>(static_cast<const uint64_t *>(x),
                                                           static_cast<uint64_t *>(y), n, s);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <class Fn>
cudaError_t unary(const Launch &l, Fn f, DType t, const void *x, void *y, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  return launchUnary(l, t, x, y, n, f);
}

template <class Fn>
cudaError_t unaryGrad(const Launch &l, Fn f, DType t, const void *dy, const void *saved, void *dx,
                      int64_t n) {
  if (n == 0)
    return cudaSuccess;
  return launchPair(l, t, dy, saved, dx, n, GradOf<Fn>{f});
}

template <class Fn>
cudaError_t binary(const Launch &l, Fn f, DType t, const void *a, const void *b, void *y, int64_t n,
                   const BroadcastShape &s) {
  if (n == 0)
    return cudaSuccess;
  return launchBinary(l, t, a, b, y, n, s, f);
}

#define AMPC_POINTWISE_UNARY(Op, Fn)                                                               \
  template cudaError_t unary<Fn>(const Launch &, Fn, DType, const void *, void *, int64_t);
#define AMPC_POINTWISE_GRAD(Op, GradOp, Fn, Saved)                                                 \
  template cudaError_t unaryGrad<Fn>(const Launch &, Fn, DType, const void *, const void *,        \
                                     void *, int64_t);
#define AMPC_POINTWISE_BINARY(Op, Fn)                                                              \
  template cudaError_t binary<Fn>(const Launch &, Fn, DType, const void *, const void *, void *,   \
                                  int64_t, const BroadcastShape &);
#include "ir/Pointwise.def"

cudaError_t dropout(const Launch &l, DType t, const void *x, void *y, int64_t n, double p,
                    bool training, uint64_t seed) {
  if (n == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = ComputeT<D>;
    if (!training || p == 0)
      copyComputeKernel<D><<<blocksFor(n), kThreads, 0, l.stream>>>(x, y, n);
    else
      dropoutKernel<D><<<blocksFor(n), kThreads, 0, l.stream>>>(x, y, n, static_cast<float>(p),
                                                                dropoutScale<T>(p), seed, l.step);
    return cudaGetLastError();
  });
}

} // namespace ampc::kernels::cuda
