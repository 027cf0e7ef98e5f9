//===- LoopPooling.cpp - maxpool2d, avgpool2d and their gradients ---------===//
//
// NCHW pooling in f32, bf16 and f16 with the reference's bits: the window
// bounds come from kernels/common/PoolMath.h (worked out once per node, when
// the program is compiled, so ceil mode and padding per side need nothing
// more here; a dilated max pooling runs the reference), each window is
// reduced in the reference's order with its comparison (maxPoolTakes: the
// first maximum, or a NaN, wins) and each gradient element is accumulated
// in f32 in the reference's order (windows in output order) and rounded
// once. Planes (n, c) are independent, so they are split over the threads
// and a plane's windows never race.
//
// Why our loops and not oneDNN's pooling primitives: ours give the
// reference's bits (its tie rule -- the first maximum gets the gradient --
// and its NaN rule, neither documented for oneDNN), and max_pool2d_grad gets
// only (dy, x), so oneDNN's backward would need its forward rerun for a
// workspace. The price, measured on [32, 64, 56, 56], 3x3 stride 2 padding
// 1, one thread, f32: maxpool2d 23.6 ms here, 2.7 ms oneDNN (jit:avx512_core,
// plain NCHW), 112 ms the reference; maxpool2d_grad 30.9 / 16.0 (with the
// forward) / 120 ms; avgpool2d 9.9 / 4.0 / 15.9 ms; avgpool2d_grad 23.4 /
// 7.3 / 44.7 ms. The strided (gathered) loads of the interior windows are
// what costs; none of the examples pools with a window yet.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/PoolAttrs.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <algorithm>
#include <array>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

/// A pooling node's shapes and windows, from its attributes.
struct PoolGeometry {
  int64_t planes = 0, inH = 0, inW = 0, outH = 0, outW = 0;
  std::vector<PoolWindow> rows, cols; ///< per output row / column
  bool countIncludePad = true;
  int64_t kernelW = 1, strideW = 1, padW = 0;
  int64_t interiorBegin = 0, interiorEnd = 0;

  PoolGeometry(const Node &n, llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> y) {
    std::array<PoolAxis, 2> axes = poolAxesOf(n);
    planes = x[0] * x[1];
    inH = x[2];
    inW = x[3];
    outH = y[2];
    outW = y[3];
    for (int64_t oh = 0; oh < outH; ++oh)
      rows.push_back(poolWindow(oh, inH, axes[0]));
    for (int64_t ow = 0; ow < outW; ++ow)
      cols.push_back(poolWindow(ow, inW, axes[1]));
    if (n.kind() == OpKind::AvgPool2d || n.kind() == OpKind::AvgPool2dGrad)
      countIncludePad = attrs::AvgPool2d(n).count_include_pad();
    kernelW = axes[1].kernel;
    strideW = axes[1].stride;
    padW = axes[1].padBegin;
    // The output columns whose windows lie wholly inside the input's
    // columns: [interiorBegin, interiorEnd).
    interiorBegin = outW;
    interiorEnd = outW;
    for (int64_t ow = 0; ow < outW; ++ow) {
      bool inside =
          cols[ow].begin == ow * strideW - padW && cols[ow].end - cols[ow].begin == kernelW;
      if (inside && interiorBegin == outW)
        interiorBegin = ow;
      if (inside)
        interiorEnd = ow + 1;
    }
  }

  int64_t inPlane() const { return inH * inW; }
  int64_t outPlane() const { return outH * outW; }
  /// Planes per thread below which the loop stays on one thread.
  int64_t planeGrain() const {
    return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inPlane() + outPlane(), 1));
  }
};

class PoolLoopKernel final : public LoopKernel {
public:
  using Fn = void (*)(const KernelArgs &, const PoolGeometry &);
  PoolLoopKernel(Fn fn, PoolGeometry geometry) : fn_(fn), geometry_(std::move(geometry)) {}
  void run(const KernelArgs &args) override { fn_(args, geometry_); }

private:
  Fn fn_;
  PoolGeometry geometry_;
};

/// A plane of f32 accumulators for the calling thread (grows, stays).
float *planeScratch(int64_t n) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(n))
    scratch.resize(static_cast<size_t>(n));
  return scratch.data();
}

/// Output columns reduced together by the vector loops.
constexpr int64_t kColumnBlock = 64;

// The forward loops take each output row in two parts. Columns whose window
// is clipped by the input's edges (at most a few on each side) run one
// window at a time. The interior ones run kColumnBlock at a time, one
// vector lane per output column: for each window position (h, j) in the
// reference's order, every lane takes its element (ow * stride - padding +
// j), so each output sees the reference's sequence of candidates and gets
// its bits.

/// reduce(ow, r, c) for every column of output row `oh` outside the
/// interior.
template <class Reduce>
AMPC_LOOP_BODY inline void forEdgeColumn(const PoolGeometry &g, int64_t oh, const Reduce &reduce) {
  for (int64_t ow = 0; ow < g.outW; ++ow) {
    if (ow == g.interiorBegin)
      ow = g.interiorEnd;
    if (ow >= g.outW)
      break;
    reduce(ow, g.rows[oh], g.cols[ow]);
  }
}

template <DType D> void maxPool2dLoop(const KernelArgs &a, const PoolGeometry &g) {
  const void *x = a.in(0).data;
  void *y = a.out().data;
  const PoolGeometry *geometry = &g;
  parallelFor(g.planes, g.planeGrain(), [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    const PoolGeometry &g = *geometry;
    int64_t inW = g.inW, outW = g.outW, stride = g.strideW, kernelW = g.kernelW;
    float best[kColumnBlock];
    for (int64_t p = begin; p < end; ++p) {
      int64_t plane = p * g.inPlane(), out = p * g.outPlane();
      for (int64_t oh = 0; oh < g.outH; ++oh) {
        PoolWindow r = g.rows[oh];
        // Padding narrower than the kernel (checked by the op row) and no
        // dilation: every window holds a real element to start from.
        forEdgeColumn(g, oh, [&](int64_t ow, PoolWindow r, PoolWindow c) AMPC_LOOP_BODY {
          float m = load<D>(x, plane + r.begin * inW + c.begin);
          for (int64_t h = r.begin; h < r.end; ++h)
            for (int64_t w = c.begin; w < c.end; ++w)
              m = maxPoolCombine(m, float(load<D>(x, plane + h * inW + w)));
          store<D>(y, out + oh * outW + ow, m);
        });
        for (int64_t first = g.interiorBegin; first < g.interiorEnd; first += kColumnBlock) {
          int64_t width = std::min(kColumnBlock, g.interiorEnd - first);
          int64_t origin = plane + first * stride - g.padW;
#pragma omp simd
          for (int64_t l = 0; l < width; ++l)
            best[l] = load<D>(x, origin + r.begin * inW + l * stride);
          for (int64_t h = r.begin; h < r.end; ++h)
            for (int64_t j = 0; j < kernelW; ++j) {
#pragma omp simd
              for (int64_t l = 0; l < width; ++l)
                best[l] =
                    maxPoolCombine(best[l], float(load<D>(x, origin + h * inW + l * stride + j)));
            }
#pragma omp simd
          for (int64_t l = 0; l < width; ++l)
            store<D>(y, out + oh * outW + first + l, best[l]);
        }
      }
    }
  });
}

template <DType D> void avgPool2dLoop(const KernelArgs &a, const PoolGeometry &g) {
  const void *x = a.in(0).data;
  void *y = a.out().data;
  const PoolGeometry *geometry = &g;
  parallelFor(g.planes, g.planeGrain(), [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    const PoolGeometry &g = *geometry;
    int64_t inW = g.inW, outW = g.outW, stride = g.strideW, kernelW = g.kernelW;
    bool countIncludePad = g.countIncludePad;
    float sum[kColumnBlock];
    for (int64_t p = begin; p < end; ++p) {
      int64_t plane = p * g.inPlane(), out = p * g.outPlane();
      for (int64_t oh = 0; oh < g.outH; ++oh) {
        PoolWindow r = g.rows[oh];
        forEdgeColumn(g, oh, [&](int64_t ow, PoolWindow r, PoolWindow c) AMPC_LOOP_BODY {
          float s = 0;
          for (int64_t h = r.begin; h < r.end; ++h)
            for (int64_t w = c.begin; w < c.end; ++w)
              s += load<D>(x, plane + h * inW + w);
          store<D>(y, out + oh * outW + ow,
                   s / static_cast<float>(avgPoolDivisor(r, c, countIncludePad)));
        });
        if (g.interiorBegin >= g.interiorEnd)
          continue;
        // Every interior window of the row has the same divisor.
        PoolWindow c = g.cols[g.interiorBegin];
        float divisor = static_cast<float>(avgPoolDivisor(r, c, countIncludePad));
        for (int64_t first = g.interiorBegin; first < g.interiorEnd; first += kColumnBlock) {
          int64_t width = std::min(kColumnBlock, g.interiorEnd - first);
          int64_t origin = plane + first * stride - g.padW;
#pragma omp simd
          for (int64_t l = 0; l < width; ++l)
            sum[l] = 0;
          for (int64_t h = r.begin; h < r.end; ++h)
            for (int64_t j = 0; j < kernelW; ++j) {
#pragma omp simd
              for (int64_t l = 0; l < width; ++l)
                sum[l] += load<D>(x, origin + h * inW + l * stride + j);
            }
#pragma omp simd
          for (int64_t l = 0; l < width; ++l)
            store<D>(y, out + oh * outW + first + l, sum[l] / divisor);
        }
      }
    }
  });
}

/// (dy, x) -> dx: each window's gradient goes to the element its maximum
/// picked, found again by the forward's comparison (vectorized like the
/// forward), then added to that element in the reference's (output) order.
template <DType D> void maxPool2dGradLoop(const KernelArgs &a, const PoolGeometry &g) {
  const void *dy = a.in(0).data, *x = a.in(1).data;
  void *dx = a.out().data;
  const PoolGeometry *geometry = &g;
  parallelFor(g.planes, g.planeGrain(), [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    const PoolGeometry &g = *geometry;
    int64_t inW = g.inW, outW = g.outW, stride = g.strideW, kernelW = g.kernelW;
    int64_t inPlane = g.inPlane();
    float *acc = planeScratch(inPlane);
    float bestValue[kColumnBlock];
    int64_t bestIndex[kColumnBlock];
    for (int64_t p = begin; p < end; ++p) {
      int64_t plane = p * inPlane, out = p * g.outPlane();
#pragma omp simd
      for (int64_t e = 0; e < inPlane; ++e)
        acc[e] = 0;
      for (int64_t oh = 0; oh < g.outH; ++oh) {
        PoolWindow r = g.rows[oh];
        auto edge = [&](int64_t ow, PoolWindow r, PoolWindow c) AMPC_LOOP_BODY {
          int64_t best = r.begin * inW + c.begin;
          float value = load<D>(x, plane + best);
          for (int64_t h = r.begin; h < r.end; ++h)
            for (int64_t w = c.begin; w < c.end; ++w) {
              float candidate = load<D>(x, plane + h * inW + w);
              if (maxPoolTakes(value, candidate)) {
                best = h * inW + w;
                value = candidate;
              }
            }
          acc[best] += load<D>(dy, out + oh * outW + ow);
        };
        // In output order: the left edge, the interior, the right edge.
        for (int64_t ow = 0; ow < std::min(g.interiorBegin, outW); ++ow)
          edge(ow, r, g.cols[ow]);
        for (int64_t first = g.interiorBegin; first < g.interiorEnd; first += kColumnBlock) {
          int64_t width = std::min(kColumnBlock, g.interiorEnd - first);
          int64_t origin = first * stride - g.padW;
#pragma omp simd
          for (int64_t l = 0; l < width; ++l) {
            bestIndex[l] = origin + r.begin * inW + l * stride;
            bestValue[l] = load<D>(x, plane + bestIndex[l]);
          }
          for (int64_t h = r.begin; h < r.end; ++h)
            for (int64_t j = 0; j < kernelW; ++j) {
#pragma omp simd
              for (int64_t l = 0; l < width; ++l) {
                int64_t index = origin + h * inW + l * stride + j;
                float candidate = load<D>(x, plane + index);
                bool takes = maxPoolTakes(bestValue[l], candidate);
                bestValue[l] = takes ? candidate : bestValue[l];
                bestIndex[l] = takes ? index : bestIndex[l];
              }
            }
          for (int64_t l = 0; l < width; ++l)
            acc[bestIndex[l]] += load<D>(dy, out + oh * outW + first + l);
        }
        for (int64_t ow = std::max(g.interiorEnd, g.interiorBegin); ow < outW; ++ow)
          edge(ow, r, g.cols[ow]);
      }
#pragma omp simd
      for (int64_t e = 0; e < inPlane; ++e)
        store<D>(dx, plane + e, acc[e]);
    }
  });
}

/// (dy) -> dx: each window spreads dy / divisor over its real elements.
template <DType D> void avgPool2dGradLoop(const KernelArgs &a, const PoolGeometry &g) {
  const void *dy = a.in(0).data;
  void *dx = a.out().data;
  const PoolWindow *rows = g.rows.data(), *cols = g.cols.data();
  int64_t inW = g.inW, outH = g.outH, outW = g.outW, inPlane = g.inPlane();
  bool countIncludePad = g.countIncludePad;
  parallelFor(g.planes, g.planeGrain(), [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    float *acc = planeScratch(inPlane);
    for (int64_t p = begin; p < end; ++p) {
      int64_t plane = p * inPlane, out = p * outH * outW;
#pragma omp simd
      for (int64_t e = 0; e < inPlane; ++e)
        acc[e] = 0;
      for (int64_t oh = 0; oh < outH; ++oh) {
        PoolWindow r = rows[oh];
        for (int64_t ow = 0; ow < outW; ++ow) {
          PoolWindow c = cols[ow];
          float share = load<D>(dy, out + oh * outW + ow) /
                        static_cast<float>(avgPoolDivisor(r, c, countIncludePad));
          for (int64_t h = r.begin; h < r.end; ++h) {
#pragma omp simd
            for (int64_t w = c.begin; w < c.end; ++w)
              acc[h * inW + w] += share;
          }
        }
      }
#pragma omp simd
      for (int64_t e = 0; e < inPlane; ++e)
        store<D>(dx, plane + e, acc[e]);
    }
  });
}

/// The kernel for a pooling node whose floating tensors all have one dtype,
/// x being the (forward) input's dims and y the output's.
template <template <DType> class Loop>
std::unique_ptr<NodeKernel> preparePool(const Node &n, llvm::ArrayRef<int64_t> x,
                                        llvm::ArrayRef<int64_t> y) {
  DType t = n.result()->dtype();
  for (const Value *v : n.operands())
    if (v->dtype() != t)
      return nullptr;
  if (x.size() != 4 || y.size() != 4 || n.result()->type().numElements() == 0)
    return nullptr;
  // The loops read windows of adjacent taps; a dilated max pooling (rare)
  // runs the reference kernel.
  for (const PoolAxis &a : poolAxesOf(n))
    if (a.dilation != 1)
      return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    return std::unique_ptr<NodeKernel>(
        std::make_unique<PoolLoopKernel>(&Loop<D>::run, PoolGeometry(n, x, y)));
  });
}

template <DType D> struct MaxPool {
  static void run(const KernelArgs &a, const PoolGeometry &g) { maxPool2dLoop<D>(a, g); }
};
template <DType D> struct AvgPool {
  static void run(const KernelArgs &a, const PoolGeometry &g) { avgPool2dLoop<D>(a, g); }
};
template <DType D> struct MaxPoolGrad {
  static void run(const KernelArgs &a, const PoolGeometry &g) { maxPool2dGradLoop<D>(a, g); }
};
template <DType D> struct AvgPoolGrad {
  static void run(const KernelArgs &a, const PoolGeometry &g) { avgPool2dGradLoop<D>(a, g); }
};

} // namespace

std::unique_ptr<NodeKernel> prepareLoopMaxPool2d(const Node &n) {
  return preparePool<MaxPool>(n, n.operand(0)->type().dims(), n.result()->type().dims());
}
std::unique_ptr<NodeKernel> prepareLoopAvgPool2d(const Node &n) {
  return preparePool<AvgPool>(n, n.operand(0)->type().dims(), n.result()->type().dims());
}
std::unique_ptr<NodeKernel> prepareLoopMaxPool2dGrad(const Node &n) {
  // (dy, x) -> dx
  return preparePool<MaxPoolGrad>(n, n.result()->type().dims(), n.operand(0)->type().dims());
}
std::unique_ptr<NodeKernel> prepareLoopAvgPool2dGrad(const Node &n) {
  // (dy) -> dx
  return preparePool<AvgPoolGrad>(n, n.result()->type().dims(), n.operand(0)->type().dims());
}

} // namespace ampc::kernels::cpu
