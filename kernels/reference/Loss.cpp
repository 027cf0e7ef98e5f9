//===- Loss.cpp - Reference mse_loss, cross_entropy, binary_cross_entropy ---===//
//
// Every loss is a mean (PyTorch's reduction="mean") and a rank-0 result.
// Terms and sums are computed in the compute type (f32 for half inputs: f32
// accumulation) and the mean is rounded once on store. Element math is in
// kernels/common/LossMath.h and, for log-softmax, ActivationMath.h.
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

/// mean over i of term(input[i], target[i]).
template <class TermFn> void pairwiseMean(const KernelArgs &a, TermFn term) {
  const TensorArg &input = a.in(0), &target = a.in(1), &out = a.out();
  bool handled = dispatchFloat(input.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = ComputeT<D>;
    T sum = T(0);
    int64_t n = input.numElements();
    for (int64_t i = 0; i < n; ++i)
      sum += term(load<D>(input.data, i), load<D>(target.data, i));
    // An empty input gives 0/0 = NaN, as torch's mean of nothing.
    store<D>(out.data, 0, sum / T(n));
  });
  assert(handled && "loss on a non-floating dtype");
  (void)handled;
}

} // namespace

void mseLoss(const KernelArgs &a) {
  pairwiseMean(a, [](auto x, auto y) { return squaredErrorTerm(x, y); });
}

void binaryCrossEntropy(const KernelArgs &a) {
  pairwiseMean(a, [](auto x, auto y) { return binaryCrossEntropyTerm(x, y); });
}

// loss = (1 - eps) * mean_i(-log p[i, y_i]) + eps / C * mean_i(-sum_c log p[i, c])
// with both means over the rows whose label is not ignore_index (so if every
// row is ignored the result is 0/0 = NaN, as in PyTorch). A label outside
// [0, C) that is not ignore_index makes the loss NaN: label values are data,
// not checked when the graph is compiled, and must not read out of bounds.
void crossEntropy(const KernelArgs &a) {
  const TensorArg &logits = a.in(0), &labels = a.in(1), &out = a.out();
  int64_t ignoreIndex = attrs::CrossEntropy(*a.node).ignore_index();
  double labelSmoothing = attrs::CrossEntropy(*a.node).label_smoothing();
  int64_t rows = logits.dims()[0], classes = logits.dims()[1];
  bool handled = dispatchFloat(logits.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = ComputeT<D>;
    T nllSum = T(0), smoothSum = T(0);
    int64_t counted = 0;
    bool badLabel = false;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t label = loadIndex(labels.dtype(), labels.data, r);
      if (label == ignoreIndex)
        continue;
      if (label < 0 || label >= classes) {
        badLabel = true;
        continue;
      }
      ++counted;
      auto x = [&](int64_t c) { return load<D>(logits.data, r * classes + c); };
      T rowMax = x(0);
      for (int64_t c = 1; c < classes; ++c)
        rowMax = softmaxMaxStep(rowMax, x(c));
      T sumExp = T(0);
      for (int64_t c = 0; c < classes; ++c)
        sumExp += softmaxExpTerm(x(c), rowMax);
      nllSum -= logSoftmaxOutput(x(label), rowMax, sumExp);
      if (labelSmoothing != 0)
        for (int64_t c = 0; c < classes; ++c)
          smoothSum -= logSoftmaxOutput(x(c), rowMax, sumExp);
    }
    T count = T(counted);
    T loss = crossEntropyCombine(nllSum / count, smoothSum / count, labelSmoothing, classes);
    store<D>(out.data, 0, badLabel ? std::numeric_limits<T>::quiet_NaN() : loss);
  });
  assert(handled && "cross_entropy on a non-floating dtype");
  (void)handled;
}

} // namespace ampc::kernels::ref
