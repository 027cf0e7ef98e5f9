//===- Resample.cu - pad and resize ----------------------------------------===//
//
// One thread per output element; the index maps are ResampleMath.h's, the
// reference kernels' (kernels/reference/Spatial.cpp), so pad copies the
// same elements and resize reads the same ones with the same weights in
// the same order: the reference's bits. Their backward ops run on the
// host fallback.
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/Common.cuh"

namespace ampc::kernels::cuda {

namespace {

template <class E> __global__ void padKernel(const E *x, E *y, int64_t n, PadShape s) {
  E constant;
  memcpy(&constant, &s.constantBits, sizeof(E));
  AMPC_GRID_STRIDE(i, n) {
    // Output position, last dim first; the source offset, first dim first.
    int64_t rest = i, position[kMaxRank];
    for (int d = s.rank - 1; d >= 0; --d) {
      position[d] = rest % s.outDims[d];
      rest /= s.outDims[d];
    }
    int64_t source = 0;
    for (int d = 0; d < s.rank && source >= 0; ++d) {
      int64_t k = padSource(position[d], s.begin[d], s.inDims[d], s.kind);
      source = k < 0 ? -1 : source * s.inDims[d] + k;
    }
    y[i] = source < 0 ? constant : x[source];
  }
}

template <DType D> __global__ void resizeKernel(const void *x, void *y, ResizeShape s) {
  using T = ComputeT<D>;
  int64_t inH = s.axis[0].inSize, inW = s.axis[1].inSize;
  int64_t outH = s.axis[0].outSize, outW = s.axis[1].outSize;
  AMPC_GRID_STRIDE(i, s.planes * outH * outW) {
    int64_t ow = i % outW, oh = i / outW % outH, p = i / (outW * outH);
    int64_t plane = p * inH * inW;
    if (s.interp == ResizeInterp::Nearest) {
      int64_t h = resizeNearest<T>(oh, s.axis[0]), w = resizeNearest<T>(ow, s.axis[1]);
      store<D>(y, i, load<D>(x, plane + h * inW + w));
      continue;
    }
    if (s.interp == ResizeInterp::Cubic) {
      // The reference's order: each row along W, then the rows along H.
      CubicTaps<T> r = resizeCubic<T>(oh, s.axis[0]), c = resizeCubic<T>(ow, s.axis[1]);
      T across[4];
      for (int k = 0; k < 4; ++k) {
        int64_t row = plane + r.i[k] * inW;
        across[k] = c.w[0] * T(load<D>(x, row + c.i[0])) + c.w[1] * T(load<D>(x, row + c.i[1])) +
                    c.w[2] * T(load<D>(x, row + c.i[2])) + c.w[3] * T(load<D>(x, row + c.i[3]));
      }
      store<D>(y, i,
               r.w[0] * across[0] + r.w[1] * across[1] + r.w[2] * across[2] + r.w[3] * across[3]);
      continue;
    }
    LinearTaps<T> r = resizeLinear<T>(oh, s.axis[0]), c = resizeLinear<T>(ow, s.axis[1]);
    T top =
        c.w0 * load<D>(x, plane + r.i0 * inW + c.i0) + c.w1 * load<D>(x, plane + r.i0 * inW + c.i1);
    T bottom =
        c.w0 * load<D>(x, plane + r.i1 * inW + c.i0) + c.w1 * load<D>(x, plane + r.i1 * inW + c.i1);
    store<D>(y, i, r.w0 * top + r.w1 * bottom);
  }
}

} // namespace

cudaError_t pad(const Launch &l, unsigned elementSize, const void *x, void *y, int64_t n,
                const PadShape &s) {
  if (n == 0)
    return cudaSuccess;
  switch (elementSize) {
  case 1:
    padKernel<<<blocksFor(n), kThreads, 0, l.stream>>>(static_cast<const uint8_t *>(x),
                                                       static_cast<uint8_t *>(y), n, s);
    break;
  case 2:
    padKernel<<<blocksFor(n), kThreads, 0, l.stream>>>(static_cast<const uint16_t *>(x),
                                                       static_cast<uint16_t *>(y), n, s);
    break;
  case 4:
    padKernel<<<blocksFor(n), kThreads, 0, l.stream>>>(static_cast<const uint32_t *>(x),
                                                       static_cast<uint32_t *>(y), n, s);
    break;
  case 8:
    padKernel<<<blocksFor(n), kThreads, 0, l.stream>>>(static_cast<const uint64_t *>(x),
                                                       static_cast<uint64_t *>(y), n, s);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t resize(const Launch &l, DType t, const void *x, void *y, const ResizeShape &s) {
  int64_t n = s.planes * s.axis[0].outSize * s.axis[1].outSize;
  if (n == 0)
    return cudaSuccess;
  return withFloat(t, [&](auto tag) {
    resizeKernel<decltype(tag)::value><<<blocksFor(n), kThreads, 0, l.stream>>>(x, y, s);
    return cudaGetLastError();
  });
}

} // namespace ampc::kernels::cuda
