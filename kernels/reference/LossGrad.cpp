//===- LossGrad.cpp - Reference backward ops of the losses -----------------===//
//
// Each loss is a mean, so every gradient element is the incoming (scalar)
// gradient divided by the number of terms, times the derivative of one term
// (kernels/common/LossMath.h). Computed in the compute type, rounded on store.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/ActivationMath.h"
#include "kernels/common/LossMath.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include <cassert>
#include <limits>

namespace ampc::kernels::ref {

namespace {

/// out[i] = term(input[i], target[i], dy / n) for the pairwise losses
/// (inputs: dy, input, target).
template <class TermFn> void pairwiseGrad(const KernelArgs &a, TermFn term) {
  const TensorArg &dy = a.in(0), &input = a.in(1), &target = a.in(2), &out = a.out();
  bool handled = dispatchFloat(out.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = ComputeT<D>;
    int64_t n = out.numElements();
    T scale = load<D>(dy.data, 0) / T(n);
    for (int64_t i = 0; i < n; ++i)
      store<D>(out.data, i, term(load<D>(input.data, i), load<D>(target.data, i), scale));
  });
  assert(handled && "loss gradient on a non-floating dtype");
  (void)handled;
}

} // namespace

void mseLossGrad(const KernelArgs &a) {
  pairwiseGrad(a, [](auto x, auto t, auto scale) { return squaredErrorGradTerm(x, t, scale); });
}

void binaryCrossEntropyGradInput(const KernelArgs &a) {
  pairwiseGrad(
      a, [](auto x, auto t, auto scale) { return binaryCrossEntropyGradInputTerm(x, t, scale); });
}

void binaryCrossEntropyGradTarget(const KernelArgs &a) {
  pairwiseGrad(a,
               [](auto x, auto, auto scale) { return binaryCrossEntropyGradTargetTerm(x, scale); });
}

// Rows whose label is ignore_index get a zero gradient; the others
// (softmax - smoothed one-hot) * dy / (number of counted rows). A label
// outside [0, C) made the forward loss NaN, so every gradient is NaN too.
void crossEntropyGrad(const KernelArgs &a) {
  const TensorArg &dy = a.in(0), &logits = a.in(1), &labels = a.in(2), &out = a.out();
  int64_t ignoreIndex = attrs::CrossEntropy(*a.node).ignore_index();
  double labelSmoothing = attrs::CrossEntropy(*a.node).label_smoothing();
  int64_t rows = logits.dims()[0], classes = logits.dims()[1];
  bool handled = dispatchFloat(out.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = ComputeT<D>;
    int64_t counted = 0;
    bool badLabel = false;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t label = loadIndex(labels.dtype(), labels.data, r);
      if (label == ignoreIndex)
        continue;
      if (label < 0 || label >= classes)
        badLabel = true;
      else
        ++counted;
    }
    T scale = load<D>(dy.data, 0) / T(counted);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t label = loadIndex(labels.dtype(), labels.data, r);
      auto x = [&](int64_t c) { return load<D>(logits.data, r * classes + c); };
      if (badLabel || label == ignoreIndex) {
        T fillValue = badLabel ? std::numeric_limits<T>::quiet_NaN() : T(0);
        for (int64_t c = 0; c < classes; ++c)
          store<D>(out.data, r * classes + c, fillValue);
        continue;
      }
      T rowMax = x(0);
      for (int64_t c = 1; c < classes; ++c)
        rowMax = softmaxMaxStep(rowMax, x(c));
      T sumExp = T(0);
      for (int64_t c = 0; c < classes; ++c)
        sumExp += softmaxExpTerm(x(c), rowMax);
      for (int64_t c = 0; c < classes; ++c)
        store<D>(out.data, r * classes + c,
                 crossEntropyGradTerm(softmaxOutput(x(c), rowMax, sumExp), c == label,
                                      labelSmoothing, classes, scale));
    }
  });
  assert(handled && "cross_entropy_grad on a non-floating dtype");
  (void)handled;
}

} // namespace ampc::kernels::ref
