//===- Pooling.cpp - Reference maxpool2d, avgpool2d, global_avgpool -------===//
//
// NCHW, PyTorch's window rules (kernels/common/PoolMath.h): floor or ceil
// mode (the result's shape), padding per side, max pooling's dilation.
// Window sums accumulate in ComputeT<D> (f32 for half inputs) and are
// rounded once when stored.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/PoolAttrs.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include "llvm/ADT/ArrayRef.h"

#include <array>
#include <limits>
#include <vector>

namespace ampc::kernels::ref {
namespace {

/// Calls reduceWindow(plane, rows, cols, outIndex) for every output element,
/// where plane is the element offset of the (n, c) input plane, for pooling
/// an input of shape x ([N, C, H, W]) to y ([N, C, H', W']).
template <class F>
void forEachWindow(const KernelArgs &args, llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> y,
                   F &&reduceWindow) {
  std::array<PoolAxis, 2> axes = poolAxesOf(*args.node);
  int64_t planes = x[0] * x[1], inH = x[2], inW = x[3];
  int64_t outH = y[2], outW = y[3];
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t oh = 0; oh < outH; ++oh) {
      PoolWindow rows = poolWindow(oh, inH, axes[0]);
      for (int64_t ow = 0; ow < outW; ++ow) {
        PoolWindow cols = poolWindow(ow, inW, axes[1]);
        reduceWindow(plane * inH * inW, rows, cols, (plane * outH + oh) * outW + ow);
      }
    }
}

template <DType D> void maxPool2dImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &x = args.in(0), &y = args.out();
  int64_t inW = x.dims()[3];
  forEachWindow(
      args, x.dims(), y.dims(),
      [&](int64_t plane, const PoolWindow &rows, const PoolWindow &cols, int64_t outIndex) {
        // A dilated window may fall wholly into the padding (PyTorch: -inf);
        // without dilation the op row ensures every window has an element.
        T best = -std::numeric_limits<T>::infinity();
        if (rows.begin < rows.end && cols.begin < cols.end)
          best = load<D>(x.data, plane + rows.begin * inW + cols.begin);
        for (int64_t h = rows.begin; h < rows.end; h += rows.step)
          for (int64_t w = cols.begin; w < cols.end; w += cols.step)
            best = maxPoolCombine(best, load<D>(x.data, plane + h * inW + w));
        store<D>(y.data, outIndex, best);
      });
}

template <DType D> void avgPool2dImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &x = args.in(0), &y = args.out();
  int64_t inW = x.dims()[3];
  bool countIncludePad = attrs::AvgPool2d(*args.node).count_include_pad();
  forEachWindow(
      args, x.dims(), y.dims(),
      [&](int64_t plane, const PoolWindow &rows, const PoolWindow &cols, int64_t outIndex) {
        T sum = 0;
        for (int64_t h = rows.begin; h < rows.end; ++h)
          for (int64_t w = cols.begin; w < cols.end; ++w)
            sum += load<D>(x.data, plane + h * inW + w);
        store<D>(y.data, outIndex,
                 sum / static_cast<T>(avgPoolDivisor(rows, cols, countIncludePad)));
      });
}

template <DType D> void globalAvgPoolImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &x = args.in(0), &y = args.out();
  int64_t planes = x.dims()[0] * x.dims()[1], planeSize = x.dims()[2] * x.dims()[3];
  for (int64_t plane = 0; plane < planes; ++plane) {
    T sum = 0;
    for (int64_t e = 0; e < planeSize; ++e)
      sum += load<D>(x.data, plane * planeSize + e);
    store<D>(y.data, plane, sum / static_cast<T>(planeSize));
  }
}

// The whole gradient of each window goes to the element the forward's
// maximum picked (the first maximum, or a NaN), found again by the same
// comparison. Windows overlap when stride < kernel, so the input gradient
// accumulates in ComputeT<D> and is rounded once.
template <DType D> void maxPool2dGradImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dy = args.in(0), &x = args.in(1), &dx = args.out();
  int64_t inW = x.dims()[3];
  std::vector<T> acc(dx.numElements(), T(0));
  forEachWindow(
      args, x.dims(), dy.dims(),
      [&](int64_t plane, const PoolWindow &rows, const PoolWindow &cols, int64_t outIndex) {
        if (rows.begin == rows.end || cols.begin == cols.end)
          return; // all padding: the maximum is -inf, no input's
        int64_t best = plane + rows.begin * inW + cols.begin;
        T bestValue = load<D>(x.data, best);
        for (int64_t h = rows.begin; h < rows.end; h += rows.step)
          for (int64_t w = cols.begin; w < cols.end; w += cols.step) {
            int64_t index = plane + h * inW + w;
            T value = load<D>(x.data, index);
            if (maxPoolTakes(bestValue, value)) {
              best = index;
              bestValue = value;
            }
          }
        acc[best] += load<D>(dy.data, outIndex);
      });
  for (int64_t e = 0; e < dx.numElements(); ++e)
    store<D>(dx.data, e, acc[e]);
}

// Each window spreads its gradient evenly over the real elements it covers,
// divided by the forward's divisor.
template <DType D> void avgPool2dGradImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dy = args.in(0), &dx = args.out();
  int64_t inW = dx.dims()[3];
  bool countIncludePad = attrs::AvgPool2d(*args.node).count_include_pad();
  std::vector<T> acc(dx.numElements(), T(0));
  forEachWindow(
      args, dx.dims(), dy.dims(),
      [&](int64_t plane, const PoolWindow &rows, const PoolWindow &cols, int64_t outIndex) {
        T share = load<D>(dy.data, outIndex) /
                  static_cast<T>(avgPoolDivisor(rows, cols, countIncludePad));
        for (int64_t h = rows.begin; h < rows.end; ++h)
          for (int64_t w = cols.begin; w < cols.end; ++w)
            acc[plane + h * inW + w] += share;
      });
  for (int64_t e = 0; e < dx.numElements(); ++e)
    store<D>(dx.data, e, acc[e]);
}

template <DType D> void globalAvgPoolGradImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dy = args.in(0), &dx = args.out();
  int64_t planes = dx.dims()[0] * dx.dims()[1], planeSize = dx.dims()[2] * dx.dims()[3];
  for (int64_t plane = 0; plane < planes; ++plane) {
    T share = load<D>(dy.data, plane) / static_cast<T>(planeSize);
    for (int64_t e = 0; e < planeSize; ++e)
      store<D>(dx.data, plane * planeSize + e, share);
  }
}

} // namespace

void maxPool2d(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { maxPool2dImpl<decltype(tag)::value>(a); });
}

void avgPool2d(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { avgPool2dImpl<decltype(tag)::value>(a); });
}

void globalAvgPool(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { globalAvgPoolImpl<decltype(tag)::value>(a); });
}

void maxPool2dGrad(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { maxPool2dGradImpl<decltype(tag)::value>(a); });
}

void avgPool2dGrad(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { avgPool2dGradImpl<decltype(tag)::value>(a); });
}

void globalAvgPoolGrad(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { globalAvgPoolGradImpl<decltype(tag)::value>(a); });
}

} // namespace ampc::kernels::ref
