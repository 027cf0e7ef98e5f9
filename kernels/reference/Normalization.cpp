//===- Normalization.cpp - Reference batchnorm2d and layernorm ------------===//
//
// Statistics are computed in two passes (mean, then mean squared deviation)
// in ComputeT<D>: f32 for half inputs, as cuDNN and PyTorch accumulate.
// batchnorm's per-channel operands may be f32 under a half input
// (keep_batchnorm_fp32), and layernorm's affine parameters may be too, so
// those are loaded by their own dtype.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/NormMath.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include <vector>

namespace ampc::kernels::ref {
namespace {

/// Element i of a parameter that may be f32 or the input's dtype, in the
/// input's compute type (exact: f32 and half values are doubles exactly, and
/// the compute type of a half input is f32).
template <DType D> ComputeT<D> loadParam(const TensorArg &t, int64_t i) {
  return static_cast<ComputeT<D>>(loadAsDouble(t.dtype(), t.data, i));
}

template <DType D> void batchNorm2dImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &x = args.in(0), &weight = args.in(1), &bias = args.in(2),
                  &runningMean = args.in(3), &runningVar = args.in(4), &y = args.out(0);
  bool training = attrs::BatchNorm2d(*args.node).training();
  T eps = static_cast<T>(attrs::BatchNorm2d(*args.node).eps());
  T momentum = static_cast<T>(attrs::BatchNorm2d(*args.node).momentum());
  int64_t batch = x.dims()[0], channels = x.dims()[1], planeSize = x.dims()[2] * x.dims()[3];
  int64_t count = batch * planeSize;
  auto index = [&](int64_t n, int64_t c, int64_t e) { return (n * channels + c) * planeSize + e; };

  for (int64_t c = 0; c < channels; ++c) {
    T mean, variance;
    if (training) {
      T sum = 0;
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t e = 0; e < planeSize; ++e)
          sum += load<D>(x.data, index(n, c, e));
      T m0 = sum / static_cast<T>(count);
      T deviations = 0, squares = 0;
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t e = 0; e < planeSize; ++e) {
          T deviation = load<D>(x.data, index(n, c, e)) - m0;
          deviations += deviation;
          squares += deviation * deviation;
        }
      correctedMoments(m0, deviations, squares, count, mean, variance);
      const TensorArg &newMean = args.out(1), &newVar = args.out(2);
      T updatedMean = runningStatUpdate(loadParam<D>(runningMean, c), mean, momentum);
      T updatedVar = runningStatUpdate(loadParam<D>(runningVar, c),
                                       unbiasedVariance(variance, count), momentum);
      storeFromDouble(newMean.dtype(), newMean.data, c, updatedMean);
      storeFromDouble(newVar.dtype(), newVar.data, c, updatedVar);
    } else {
      mean = loadParam<D>(runningMean, c);
      variance = loadParam<D>(runningVar, c);
    }
    T invStdDev = inverseStdDev(variance, eps);
    T w = loadParam<D>(weight, c), b = loadParam<D>(bias, c);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t e = 0; e < planeSize; ++e)
        store<D>(y.data, index(n, c, e),
                 normalizeAffine(load<D>(x.data, index(n, c, e)), mean, invStdDev, w, b));
  }
}

template <DType D> void layerNormImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &x = args.in(0), &weight = args.in(1), &bias = args.in(2), &y = args.out();
  T eps = static_cast<T>(attrs::LayerNorm(*args.node).eps());
  int64_t normalizedSize = weight.numElements();
  if (normalizedSize == 0)
    return;
  int64_t rows = x.numElements() / normalizedSize;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = r * normalizedSize;
    T sum = 0;
    for (int64_t e = 0; e < normalizedSize; ++e)
      sum += load<D>(x.data, base + e);
    T m0 = sum / static_cast<T>(normalizedSize);
    T deviations = 0, squares = 0;
    for (int64_t e = 0; e < normalizedSize; ++e) {
      T deviation = load<D>(x.data, base + e) - m0;
      deviations += deviation;
      squares += deviation * deviation;
    }
    T mean, variance;
    correctedMoments(m0, deviations, squares, normalizedSize, mean, variance);
    T invStdDev = inverseStdDev(variance, eps);
    for (int64_t e = 0; e < normalizedSize; ++e)
      store<D>(y.data, base + e,
               normalizeAffine(load<D>(x.data, base + e), mean, invStdDev, loadParam<D>(weight, e),
                               loadParam<D>(bias, e)));
  }
}

/// Mean and 1/sqrt(biased variance + eps) of `count` values, two passes as
/// the forward computes them, so both see the same statistics.
template <DType D, class IndexFn>
void statistics(const void *x, int64_t count, IndexFn index, ComputeT<D> eps, ComputeT<D> &mean,
                ComputeT<D> &invStdDev) {
  using T = ComputeT<D>;
  T sum = 0;
  for (int64_t i = 0; i < count; ++i)
    sum += load<D>(x, index(i));
  T m0 = sum / static_cast<T>(count);
  T deviations = 0, squares = 0;
  for (int64_t i = 0; i < count; ++i) {
    T deviation = load<D>(x, index(i)) - m0;
    deviations += deviation;
    squares += deviation * deviation;
  }
  T variance;
  correctedMoments(m0, deviations, squares, count, mean, variance);
  invStdDev = inverseStdDev(variance, eps);
}

// Per channel: grad_bias = sum dy, grad_weight = sum dy * xhat, and
//   training: dx = normalizeBackward(weight * dy, ...) through the batch
//             statistics;
//   eval:     dx = weight * invStdDev * dy (the running statistics are constants).
template <DType D> void batchNorm2dGradImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dy = args.in(0), &x = args.in(1), &weight = args.in(2),
                  &runningMean = args.in(3), &runningVar = args.in(4);
  const TensorArg &dx = args.out(0), &dWeight = args.out(1), &dBias = args.out(2);
  bool training = attrs::BatchNorm2d(*args.node).training();
  T eps = static_cast<T>(attrs::BatchNorm2d(*args.node).eps());
  int64_t batch = x.dims()[0], channels = x.dims()[1], planeSize = x.dims()[2] * x.dims()[3];
  int64_t count = batch * planeSize;
  for (int64_t c = 0; c < channels; ++c) {
    // The i-th of the channel's `count` elements.
    auto index = [&](int64_t i) {
      return ((i / planeSize) * channels + c) * planeSize + i % planeSize;
    };
    T mean, invStdDev;
    if (training) {
      statistics<D>(x.data, count, index, eps, mean, invStdDev);
    } else {
      mean = loadParam<D>(runningMean, c);
      invStdDev = inverseStdDev(loadParam<D>(runningVar, c), eps);
    }
    // The parameter gradients' sums in f64, as PyTorch's CPU batchnorm
    // accumulates them: a bias gradient is often a sum that nearly cancels,
    // and Adam's first steps divide it by its own small magnitude, so f32
    // sums' rounding showed in the weights (tests/pytorch/check_gan.py).
    double sumDy = 0, sumDevDy = 0;
    for (int64_t i = 0; i < count; ++i) {
      T g = load<D>(dy.data, index(i));
      T deviation = load<D>(x.data, index(i)) - mean;
      sumDy += static_cast<double>(g);
      sumDevDy += static_cast<double>(g) * static_cast<double>(deviation);
    }
    double sumDyXhat = sumDevDy * static_cast<double>(invStdDev);
    T w = loadParam<D>(weight, c);
    T meanG = w * static_cast<T>(sumDy) / static_cast<T>(count);
    T meanGXhat = w * static_cast<T>(sumDyXhat) / static_cast<T>(count);
    for (int64_t i = 0; i < count; ++i) {
      T g = w * load<D>(dy.data, index(i));
      if (!training) {
        store<D>(dx.data, index(i), g * invStdDev);
        continue;
      }
      T xhat = (load<D>(x.data, index(i)) - mean) * invStdDev;
      store<D>(dx.data, index(i), normalizeBackward(g, xhat, meanG, meanGXhat, invStdDev));
    }
    storeFromDouble(dWeight.dtype(), dWeight.data, c, sumDyXhat);
    storeFromDouble(dBias.dtype(), dBias.data, c, sumDy);
  }
}

// Per row of the normalized dims: dx = normalizeBackward(weight * dy, ...);
// grad_weight and grad_bias sum dy * xhat and dy over the rows, accumulated
// in ComputeT<D> and rounded once.
template <DType D> void layerNormGradImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dy = args.in(0), &x = args.in(1), &weight = args.in(2);
  const TensorArg &dx = args.out(0), &dWeight = args.out(1), &dBias = args.out(2);
  T eps = static_cast<T>(attrs::LayerNorm(*args.node).eps());
  int64_t normalizedSize = weight.numElements();
  if (normalizedSize == 0)
    return;
  int64_t rows = x.numElements() / normalizedSize;
  std::vector<T> sumDyXhat(normalizedSize, T(0)), sumDy(normalizedSize, T(0));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = r * normalizedSize;
    T mean, invStdDev;
    statistics<D>(
        x.data, normalizedSize, [&](int64_t e) { return base + e; }, eps, mean, invStdDev);
    T sumG = 0, sumGXhat = 0;
    for (int64_t e = 0; e < normalizedSize; ++e) {
      T d = load<D>(dy.data, base + e);
      T xhat = (load<D>(x.data, base + e) - mean) * invStdDev;
      T g = loadParam<D>(weight, e) * d;
      sumG += g;
      sumGXhat += g * xhat;
      sumDyXhat[e] += d * xhat;
      sumDy[e] += d;
    }
    T meanG = sumG / static_cast<T>(normalizedSize);
    T meanGXhat = sumGXhat / static_cast<T>(normalizedSize);
    for (int64_t e = 0; e < normalizedSize; ++e) {
      T g = loadParam<D>(weight, e) * load<D>(dy.data, base + e);
      T xhat = (load<D>(x.data, base + e) - mean) * invStdDev;
      store<D>(dx.data, base + e, normalizeBackward(g, xhat, meanG, meanGXhat, invStdDev));
    }
  }
  for (int64_t e = 0; e < normalizedSize; ++e) {
    storeFromDouble(dWeight.dtype(), dWeight.data, e, sumDyXhat[e]);
    storeFromDouble(dBias.dtype(), dBias.data, e, sumDy[e]);
  }
}

} // namespace

void batchNorm2d(const KernelArgs &a) {
  dispatchFloat(a.in(0).dtype(), [&](auto tag) { batchNorm2dImpl<decltype(tag)::value>(a); });
}

void layerNorm(const KernelArgs &a) {
  dispatchFloat(a.in(0).dtype(), [&](auto tag) { layerNormImpl<decltype(tag)::value>(a); });
}

void batchNorm2dGrad(const KernelArgs &a) {
  dispatchFloat(a.in(1).dtype(), [&](auto tag) { batchNorm2dGradImpl<decltype(tag)::value>(a); });
}

void layerNormGrad(const KernelArgs &a) {
  dispatchFloat(a.in(1).dtype(), [&](auto tag) { layerNormGradImpl<decltype(tag)::value>(a); });
}

} // namespace ampc::kernels::ref
