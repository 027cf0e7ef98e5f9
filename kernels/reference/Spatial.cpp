//===- Spatial.cpp - Reference pad, resize and their backward ops ---------===//
//
// Index maps from kernels/common/ResampleMath.h. pad moves element bytes
// (any dtype); the backward ops add each gradient element into the input
// elements its output read, in output order, accumulating in ComputeT<D>
// and rounding once.
//
//===----------------------------------------------------------------------===//
#include "kernels/common/ResampleAttrs.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include "llvm/ADT/SmallVector.h"

#include <cstring>
#include <vector>

namespace ampc::kernels::ref {
namespace {

/// Calls visit(outIndex, inIndex) for every element of a pad's output
/// `out`, inIndex being the element of `in` it reads, or -1 for the
/// constant.
template <class F>
void forEachPadded(const Node &n, llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out,
                   F &&visit) {
  attrs::Pad a(n);
  const std::vector<int64_t> &pads = a.pads();
  PadKind kind = padKindOf(a.mode());
  size_t rank = out.size();
  int64_t total = 1;
  for (int64_t d : out)
    total *= d;
  if (total == 0)
    return;
  llvm::SmallVector<int64_t, 6> position(rank, 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t source = 0;
    for (size_t d = 0; d < rank && source >= 0; ++d) {
      int64_t i = padSource(position[d], pads[d], in[d], kind);
      source = i < 0 ? -1 : source * in[d] + i;
    }
    visit(o, source);
    for (size_t d = rank; d-- > 0;) {
      if (++position[d] < out[d])
        break;
      position[d] = 0;
    }
  }
}

template <DType D> void padGradImpl(const KernelArgs &a) {
  using T = ComputeT<D>;
  const TensorArg &dy = a.in(0), &dx = a.out();
  std::vector<T> acc(dx.numElements(), T(0));
  forEachPadded(*a.node, dx.dims(), dy.dims(), [&](int64_t o, int64_t i) {
    if (i >= 0)
      acc[i] += load<D>(dy.data, o);
  });
  for (int64_t e = 0; e < dx.numElements(); ++e)
    store<D>(dx.data, e, acc[e]);
}

/// Calls visit(plane, oh, ow, outIndex) for each output element of a resize
/// to `out` ([N, C, H', W']).
template <class F> void forEachResized(llvm::ArrayRef<int64_t> out, F &&visit) {
  int64_t planes = out[0] * out[1];
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < out[2]; ++oh)
      for (int64_t ow = 0; ow < out[3]; ++ow)
        visit(p, oh, ow, (p * out[2] + oh) * out[3] + ow);
}

// Linear: PyTorch's order, h0 (w0 x00 + w1 x01) + h1 (w0 x10 + w1 x11).
// Cubic: PyTorch's too, each of the four rows interpolated along W, then
// those four along H.
template <DType D> void resizeImpl(const KernelArgs &a) {
  using T = ComputeT<D>;
  const TensorArg &x = a.in(0), &y = a.out();
  llvm::ArrayRef<int64_t> in = x.dims();
  std::array<ResizeAxis, 2> axes = resizeAxesOf(*a.node, in);
  int64_t inPlane = in[2] * in[3], inW = in[3];
  ResizeMode mode = attrs::Resize(*a.node).mode();
  if (mode == ResizeMode::Nearest) {
    forEachResized(y.dims(), [&](int64_t p, int64_t oh, int64_t ow, int64_t o) {
      int64_t h = resizeNearest<T>(oh, axes[0]), w = resizeNearest<T>(ow, axes[1]);
      store<D>(y.data, o, load<D>(x.data, p * inPlane + h * inW + w));
    });
    return;
  }
  if (mode == ResizeMode::Cubic) {
    forEachResized(y.dims(), [&](int64_t p, int64_t oh, int64_t ow, int64_t o) {
      CubicTaps<T> r = resizeCubic<T>(oh, axes[0]), c = resizeCubic<T>(ow, axes[1]);
      T across[4];
      for (int i = 0; i < 4; ++i) {
        auto at = [&](int j) -> T { return load<D>(x.data, p * inPlane + r.i[i] * inW + c.i[j]); };
        across[i] = c.w[0] * at(0) + c.w[1] * at(1) + c.w[2] * at(2) + c.w[3] * at(3);
      }
      store<D>(y.data, o,
               r.w[0] * across[0] + r.w[1] * across[1] + r.w[2] * across[2] + r.w[3] * across[3]);
    });
    return;
  }
  forEachResized(y.dims(), [&](int64_t p, int64_t oh, int64_t ow, int64_t o) {
    LinearTaps<T> r = resizeLinear<T>(oh, axes[0]), c = resizeLinear<T>(ow, axes[1]);
    auto at = [&](int64_t h, int64_t w) -> T { return load<D>(x.data, p * inPlane + h * inW + w); };
    T top = c.w0 * at(r.i0, c.i0) + c.w1 * at(r.i0, c.i1);
    T bottom = c.w0 * at(r.i1, c.i0) + c.w1 * at(r.i1, c.i1);
    store<D>(y.data, o, r.w0 * top + r.w1 * bottom);
  });
}

template <DType D> void resizeGradImpl(const KernelArgs &a) {
  using T = ComputeT<D>;
  const TensorArg &dy = a.in(0), &dx = a.out();
  llvm::ArrayRef<int64_t> in = dx.dims();
  std::array<ResizeAxis, 2> axes = resizeAxesOf(*a.node, in);
  int64_t inPlane = in[2] * in[3], inW = in[3];
  std::vector<T> acc(dx.numElements(), T(0));
  ResizeMode mode = attrs::Resize(*a.node).mode();
  if (mode == ResizeMode::Nearest) {
    forEachResized(dy.dims(), [&](int64_t p, int64_t oh, int64_t ow, int64_t o) {
      int64_t h = resizeNearest<T>(oh, axes[0]), w = resizeNearest<T>(ow, axes[1]);
      acc[p * inPlane + h * inW + w] += load<D>(dy.data, o);
    });
  } else if (mode == ResizeMode::Cubic) {
    // Clamped taps repeat an edge index, so one input element can take
    // several of the 16 products: each is added on its own.
    forEachResized(dy.dims(), [&](int64_t p, int64_t oh, int64_t ow, int64_t o) {
      CubicTaps<T> r = resizeCubic<T>(oh, axes[0]), c = resizeCubic<T>(ow, axes[1]);
      T g = load<D>(dy.data, o);
      T *plane = acc.data() + p * inPlane;
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          plane[r.i[i] * inW + c.i[j]] += r.w[i] * c.w[j] * g;
    });
  } else {
    forEachResized(dy.dims(), [&](int64_t p, int64_t oh, int64_t ow, int64_t o) {
      LinearTaps<T> r = resizeLinear<T>(oh, axes[0]), c = resizeLinear<T>(ow, axes[1]);
      T g = load<D>(dy.data, o);
      T *plane = acc.data() + p * inPlane;
      plane[r.i0 * inW + c.i0] += r.w0 * c.w0 * g;
      plane[r.i0 * inW + c.i1] += r.w0 * c.w1 * g;
      plane[r.i1 * inW + c.i0] += r.w1 * c.w0 * g;
      plane[r.i1 * inW + c.i1] += r.w1 * c.w1 * g;
    });
  }
  for (int64_t e = 0; e < dx.numElements(); ++e)
    store<D>(dx.data, e, acc[e]);
}

} // namespace

// The constant is stored once in the result's dtype, then copied like the
// elements.
void pad(const KernelArgs &a) {
  const TensorArg &x = a.in(0), &y = a.out();
  size_t size = dtypeSize(y.dtype());
  char constant[16] = {};
  storeFromDouble(y.dtype(), constant, 0, attrs::Pad(*a.node).value());
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(y.data);
  forEachPadded(*a.node, x.dims(), y.dims(), [&](int64_t o, int64_t i) {
    std::memcpy(dst + o * size, i < 0 ? constant : src + i * size, size);
  });
}

void padGrad(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { padGradImpl<decltype(tag)::value>(a); });
}

void resize(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { resizeImpl<decltype(tag)::value>(a); });
}

void resizeGrad(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { resizeGradImpl<decltype(tag)::value>(a); });
}

} // namespace ampc::kernels::ref
