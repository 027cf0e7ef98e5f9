//===- Activation.cpp - Reference softmax, log_softmax, dropout ----------===//
//
// Naive loops over the element math of kernels/common/ActivationMath.h. Each
// kernel runs in the compute type of its input's dtype (f32 for half types,
// rounded once on store). The pointwise activations (relu, gelu, ...) are
// Elementwise.cpp's generic loops.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/ActivationMath.h"
#include "kernels/common/Random.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include <cassert>

namespace ampc::kernels::ref {

namespace {

/// The input viewed as [outer, size, inner] around dim `dim`.
struct AxisView {
  int64_t outer = 1, size = 1, inner = 1;
};

AxisView viewAround(llvm::ArrayRef<int64_t> dims, int64_t dim) {
  int64_t rank = dims.size();
  unsigned axis = static_cast<unsigned>(dim < 0 ? dim + rank : dim);
  AxisView v;
  for (unsigned d = 0; d < dims.size(); ++d) {
    if (d < axis)
      v.outer *= dims[d];
    else if (d == axis)
      v.size = dims[d];
    else
      v.inner *= dims[d];
  }
  return v;
}

/// softmax (log = false) or log_softmax (log = true) along attr `dim`.
void softmaxImpl(const KernelArgs &a, bool log) {
  const TensorArg &in = a.in(0), &out = a.out();
  AxisView v = viewAround(in.dims(), attrs::Softmax(*a.node).dim());
  if (v.size == 0) // no elements, and no row to take a maximum of
    return;
  bool handled = dispatchFloat(in.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = ComputeT<D>;
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t inner = 0; inner < v.inner; ++inner) {
        auto index = [&](int64_t k) { return (o * v.size + k) * v.inner + inner; };
        T rowMax = load<D>(in.data, index(0));
        for (int64_t k = 1; k < v.size; ++k)
          rowMax = softmaxMaxStep(rowMax, load<D>(in.data, index(k)));
        T sumExp = T(0);
        for (int64_t k = 0; k < v.size; ++k)
          sumExp += softmaxExpTerm(load<D>(in.data, index(k)), rowMax);
        for (int64_t k = 0; k < v.size; ++k) {
          T x = load<D>(in.data, index(k));
          store<D>(out.data, index(k),
                   log ? logSoftmaxOutput(x, rowMax, sumExp) : softmaxOutput(x, rowMax, sumExp));
        }
      }
  });
  assert(handled && "softmax on a non-floating dtype");
  (void)handled;
}

/// softmax_grad (log = false) or log_softmax_grad (log = true) along attr
/// `dim`, from the incoming gradient (input 0) and the forward output (input 1).
void softmaxGradImpl(const KernelArgs &a, bool log) {
  const TensorArg &dy = a.in(0), &y = a.in(1), &out = a.out();
  AxisView v = viewAround(out.dims(), attrs::Softmax(*a.node).dim());
  bool handled = dispatchFloat(out.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = ComputeT<D>;
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t inner = 0; inner < v.inner; ++inner) {
        auto index = [&](int64_t k) { return (o * v.size + k) * v.inner + inner; };
        // The row's reduction, accumulated in the compute type.
        T rowSum = T(0);
        for (int64_t k = 0; k < v.size; ++k) {
          T g = load<D>(dy.data, index(k));
          rowSum += log ? g : softmaxGradDotTerm(g, load<D>(y.data, index(k)));
        }
        for (int64_t k = 0; k < v.size; ++k) {
          T g = load<D>(dy.data, index(k)), yk = load<D>(y.data, index(k));
          store<D>(out.data, index(k),
                   log ? logSoftmaxGradOp(g, yk, rowSum) : softmaxGradOp(g, yk, rowSum));
        }
      }
  });
  assert(handled && "softmax gradient on a non-floating dtype");
  (void)handled;
}

} // namespace

void softmax(const KernelArgs &a) { softmaxImpl(a, /*log=*/false); }

void logSoftmax(const KernelArgs &a) { softmaxImpl(a, /*log=*/true); }

// Element i of step s is kept when dropoutKeep(seed, s, i, p): the mask is a
// pure function of (seed, step, index), so the backward pass regenerates it
// and every backend draws the same one. training=false (and p=0) is identity.
void dropout(const KernelArgs &a) {
  double p = attrs::Dropout(*a.node).p();
  bool training = attrs::Dropout(*a.node).training();
  uint64_t seed = opSeed(a.runSeed, static_cast<uint64_t>(attrs::Dropout(*a.node).seed()));
  const TensorArg &in = a.in(0), &out = a.out();
  bool handled = dispatchFloat(in.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = ComputeT<D>;
    if (!training || p == 0) {
      for (int64_t i = 0, n = in.numElements(); i < n; ++i)
        store<D>(out.data, i, load<D>(in.data, i));
      return;
    }
    T scale = dropoutScale<T>(p);
    for (int64_t i = 0, n = in.numElements(); i < n; ++i) {
      bool keep = dropoutKeep(seed, a.step, static_cast<uint64_t>(i), static_cast<float>(p));
      store<D>(out.data, i, dropoutOp(load<D>(in.data, i), keep, scale));
    }
  });
  assert(handled && "dropout on a non-floating dtype");
  (void)handled;
}

void softmaxGrad(const KernelArgs &a) { softmaxGradImpl(a, /*log=*/false); }

void logSoftmaxGrad(const KernelArgs &a) { softmaxGradImpl(a, /*log=*/true); }

} // namespace ampc::kernels::ref
