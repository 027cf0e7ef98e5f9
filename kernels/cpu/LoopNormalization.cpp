//===- LoopNormalization.cpp - batchnorm2d and layernorm loop kernels -----===//
//
// batchnorm2d (training and eval) and batchnorm2d_grad on NCHW f32, bf16 and
// f16 inputs, and layernorm and layernorm_grad, with per-channel (per-feature)
// operands in f32 or the input's dtype (as keep_batchnorm_fp32 leaves them).
// The threads split the channels (rows); statistics are computed as the
// reference does (two passes, f32, kernels/common/NormMath.h) except for the
// order of the sums, which is fixed by the shape (lanes, LoopSupport.h).
// Given the statistics, every element is the reference's expression.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/NormMath.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <algorithm>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

/// A per-channel operand's element in f32 (the compute type of every dtype
/// the loops take; exact, as the reference's loadParam).
float loadChannelValue(const TensorArg &t, int64_t c) {
  return static_cast<float>(loadAsDouble(t.dtype(), t.data, c));
}

/// [N, C, H, W] as the loops see it.
struct NchwView {
  int64_t batch, channels, planeSize;
  explicit NchwView(llvm::ArrayRef<int64_t> dims)
      : batch(dims[0]), channels(dims[1]), planeSize(dims[2] * dims[3]) {}
  int64_t count() const { return batch * planeSize; }
  /// The first element of channel c's plane in image n.
  int64_t plane(int64_t n, int64_t c) const { return (n * channels + c) * planeSize; }
};

/// Channels per task: enough elements that a task outweighs waking a thread.
int64_t channelGrain(const NchwView &v) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(v.count(), 1));
}

/// Mean and biased variance of channel c, two passes as the reference.
template <DType D>
AMPC_LOOP_BODY inline void channelStatistics(const void *x, const NchwView &v, int64_t c,
                                             float &mean, float &variance) {
  LaneSum sum;
  for (int64_t n = 0; n < v.batch; ++n)
    sum.add(v.plane(n, c), v.plane(n, c) + v.planeSize,
            [=](int64_t i) AMPC_LOOP_BODY { return load<D>(x, i); });
  float m = sum.total() / static_cast<float>(v.count());
  LaneSum2 moments;
  for (int64_t n = 0; n < v.batch; ++n)
    moments.add(v.plane(n, c), v.plane(n, c) + v.planeSize, [=](int64_t i) AMPC_LOOP_BODY {
      float deviation = load<D>(x, i) - m;
      return std::pair<float, float>(deviation, deviation * deviation);
    });
  auto [deviations, squares] = moments.totals();
  correctedMoments(m, deviations, squares, v.count(), mean, variance);
}

template <DType D> void batchNorm2dLoop(const KernelArgs &a, const LoopPlan &) {
  const TensorArg &weight = a.in(1), &bias = a.in(2), &runningMean = a.in(3), &runningVar = a.in(4);
  const void *x = a.in(0).data;
  void *y = a.out(0).data;
  NchwView v(a.in(0).dims());
  bool training = attrs::BatchNorm2d(*a.node).training();
  float eps = static_cast<float>(attrs::BatchNorm2d(*a.node).eps());
  float momentum = static_cast<float>(attrs::BatchNorm2d(*a.node).momentum());
  const TensorArg *newMean = training ? &a.out(1) : nullptr;
  const TensorArg *newVar = training ? &a.out(2) : nullptr;
  parallelFor(v.channels, channelGrain(v), [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    for (int64_t c = begin; c < end; ++c) {
      float mean, variance;
      if (training) {
        channelStatistics<D>(x, v, c, mean, variance);
        float updatedMean = runningStatUpdate(loadChannelValue(runningMean, c), mean, momentum);
        float updatedVar = runningStatUpdate(loadChannelValue(runningVar, c),
                                             unbiasedVariance(variance, v.count()), momentum);
        storeFromDouble(newMean->dtype(), newMean->data, c, updatedMean);
        storeFromDouble(newVar->dtype(), newVar->data, c, updatedVar);
      } else {
        mean = loadChannelValue(runningMean, c);
        variance = loadChannelValue(runningVar, c);
      }
      float invStdDev = inverseStdDev(variance, eps);
      float w = loadChannelValue(weight, c), b = loadChannelValue(bias, c);
      for (int64_t n = 0; n < v.batch; ++n) {
        int64_t base = v.plane(n, c);
#pragma omp simd
        for (int64_t e = 0; e < v.planeSize; ++e)
          store<D>(y, base + e, normalizeAffine(load<D>(x, base + e), mean, invStdDev, w, b));
      }
    }
  });
}

// Per channel: grad_bias = sum dy, grad_weight = sum dy * xhat, and dx
// through the batch statistics (training) or the running ones (eval), as
// the reference's batchNorm2dGradImpl.
template <DType D> void batchNorm2dGradLoop(const KernelArgs &a, const LoopPlan &) {
  const TensorArg &weight = a.in(2), &runningMean = a.in(3), &runningVar = a.in(4);
  const TensorArg &dWeight = a.out(1), &dBias = a.out(2);
  const void *dy = a.in(0).data, *x = a.in(1).data;
  void *dx = a.out(0).data;
  NchwView v(a.in(1).dims());
  bool training = attrs::BatchNorm2d(*a.node).training();
  float eps = static_cast<float>(attrs::BatchNorm2d(*a.node).eps());
  parallelFor(v.channels, channelGrain(v), [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    for (int64_t c = begin; c < end; ++c) {
      float mean, invStdDev;
      if (training) {
        float variance;
        channelStatistics<D>(x, v, c, mean, variance);
        invStdDev = inverseStdDev(variance, eps);
      } else {
        mean = loadChannelValue(runningMean, c);
        invStdDev = inverseStdDev(loadChannelValue(runningVar, c), eps);
      }
      // In f64, as the reference's (its comment says why).
      float m = mean, s = invStdDev;
      double sumDy = 0, sumDevDy = 0;
      for (int64_t n = 0; n < v.batch; ++n) {
        int64_t base = v.plane(n, c);
#pragma omp simd reduction(+ : sumDy, sumDevDy)
        for (int64_t e = 0; e < v.planeSize; ++e) {
          float g = load<D>(dy, base + e);
          float deviation = load<D>(x, base + e) - m;
          sumDy += static_cast<double>(g);
          sumDevDy += static_cast<double>(g) * static_cast<double>(deviation);
        }
      }
      double sumDyXhat = sumDevDy * static_cast<double>(s);
      float w = loadChannelValue(weight, c);
      float meanG = w * static_cast<float>(sumDy) / static_cast<float>(v.count());
      float meanGXhat = w * static_cast<float>(sumDyXhat) / static_cast<float>(v.count());
      for (int64_t n = 0; n < v.batch; ++n) {
        int64_t base = v.plane(n, c);
        if (!training) {
#pragma omp simd
          for (int64_t e = 0; e < v.planeSize; ++e)
            store<D>(dx, base + e, w * load<D>(dy, base + e) * s);
          continue;
        }
#pragma omp simd
        for (int64_t e = 0; e < v.planeSize; ++e) {
          float g = w * load<D>(dy, base + e);
          float xhat = (load<D>(x, base + e) - m) * s;
          store<D>(dx, base + e, normalizeBackward(g, xhat, meanG, meanGXhat, s));
        }
      }
      storeFromDouble(dWeight.dtype(), dWeight.data, c, sumDyXhat);
      storeFromDouble(dBias.dtype(), dBias.data, c, sumDy);
    }
  });
}

//===----------------------------------------------------------------------===//
// layernorm
//===----------------------------------------------------------------------===//

/// A per-feature operand (weight, bias) as f32, converted once per run so
/// the row loops read one layout whatever its dtype.
std::vector<float> featureValues(const TensorArg &t) {
  std::vector<float> v(t.numElements());
  for (int64_t e = 0; e < t.numElements(); ++e)
    v[e] = loadChannelValue(t, e);
  return v;
}

/// Mean and 1/sqrt(biased variance + eps) of row [base, base + size), two
/// passes as the reference's statistics().
template <DType D>
AMPC_LOOP_BODY inline void rowStatistics(const void *x, int64_t base, int64_t size, float eps,
                                         float &mean, float &invStdDev) {
  LaneSum sum;
  sum.add(base, base + size, [=](int64_t i) AMPC_LOOP_BODY { return load<D>(x, i); });
  float m = sum.total() / static_cast<float>(size);
  LaneSum2 moments;
  moments.add(base, base + size, [=](int64_t i) AMPC_LOOP_BODY {
    float deviation = load<D>(x, i) - m;
    return std::pair<float, float>(deviation, deviation * deviation);
  });
  auto [deviations, squares] = moments.totals();
  float variance;
  correctedMoments(m, deviations, squares, size, mean, variance);
  invStdDev = inverseStdDev(variance, eps);
}

/// Rows per task, and per partial sum of the parameter gradients: fixed, so
/// the gradients' summation order does not depend on the threads.
constexpr int64_t kRowBlock = 16;

template <DType D> void layerNormLoop(const KernelArgs &a, const LoopPlan &) {
  int64_t size = a.in(1).numElements();
  if (size == 0)
    return;
  const void *x = a.in(0).data;
  void *y = a.out().data;
  std::vector<float> weights = featureValues(a.in(1)), biases = featureValues(a.in(2));
  const float *w = weights.data(), *b = biases.data();
  float eps = static_cast<float>(attrs::LayerNorm(*a.node).eps());
  int64_t rows = a.in(0).numElements() / size;
  parallelFor(rows, std::max<int64_t>(1, kElementwiseGrain / size),
              [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                for (int64_t r = begin; r < end; ++r) {
                  int64_t base = r * size;
                  float mean, invStdDev;
                  rowStatistics<D>(x, base, size, eps, mean, invStdDev);
#pragma omp simd
                  for (int64_t e = 0; e < size; ++e)
                    store<D>(y, base + e,
                             normalizeAffine(load<D>(x, base + e), mean, invStdDev, w[e], b[e]));
                }
              });
}

// Per row: dx = normalizeBackward(weight * dy, ...) as the reference; the
// parameter gradients sum dy * xhat and dy over the rows, in blocks of
// kRowBlock rows whose partial sums are added in block order.
template <DType D> void layerNormGradLoop(const KernelArgs &a, const LoopPlan &) {
  const TensorArg &dWeight = a.out(1), &dBias = a.out(2);
  int64_t size = a.in(2).numElements();
  if (size == 0)
    return;
  const void *dy = a.in(0).data, *x = a.in(1).data;
  void *dx = a.out(0).data;
  std::vector<float> weights = featureValues(a.in(2));
  const float *w = weights.data();
  float eps = static_cast<float>(attrs::LayerNorm(*a.node).eps());
  int64_t rows = a.in(1).numElements() / size;
  int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  // Per block: size partial sums of dy * xhat, then size of dy.
  std::vector<float> partial(static_cast<size_t>(std::max<int64_t>(blocks, 1) * 2 * size), 0.0f);
  float *partials = partial.data();
  parallelChunks(rows, kRowBlock, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    float *sumDyXhat = partials + begin / kRowBlock * 2 * size;
    float *sumDy = sumDyXhat + size;
    for (int64_t r = begin; r < end; ++r) {
      int64_t base = r * size;
      float mean, invStdDev;
      rowStatistics<D>(x, base, size, eps, mean, invStdDev);
      float m = mean, s = invStdDev;
      LaneSum2 sums;
      sums.add(0, size, [=](int64_t e) AMPC_LOOP_BODY {
        float g = w[e] * load<D>(dy, base + e);
        float xhat = (load<D>(x, base + e) - m) * s;
        return std::pair<float, float>(g, g * xhat);
      });
      auto [sumG, sumGXhat] = sums.totals();
      float meanG = sumG / static_cast<float>(size);
      float meanGXhat = sumGXhat / static_cast<float>(size);
#pragma omp simd
      for (int64_t e = 0; e < size; ++e) {
        float d = load<D>(dy, base + e);
        float xhat = (load<D>(x, base + e) - m) * s;
        sumDyXhat[e] += d * xhat;
        sumDy[e] += d;
        float g = w[e] * d;
        store<D>(dx, base + e, normalizeBackward(g, xhat, meanG, meanGXhat, s));
      }
    }
  });
  for (int64_t e = 0; e < size; ++e) {
    float totalDyXhat = 0, totalDy = 0;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      totalDyXhat += partials[blk * 2 * size + e];
      totalDy += partials[blk * 2 * size + size + e];
    }
    storeFromDouble(dWeight.dtype(), dWeight.data, e, totalDyXhat);
    storeFromDouble(dBias.dtype(), dBias.data, e, totalDy);
  }
}

/// The per-channel operands the loops read: f32 or the input's dtype.
bool channelOperandsOk(const Node &n, llvm::ArrayRef<unsigned> operands, DType input) {
  for (unsigned i : operands) {
    DType t = n.operand(i)->dtype();
    if (t != DType::F32 && t != input)
      return false;
  }
  return true;
}

} // namespace

std::unique_ptr<NodeKernel> prepareLoopBatchNorm2d(const Node &n) {
  DType t = n.operand(0)->dtype();
  if (n.result(0)->dtype() != t || n.operand(0)->type().rank() != 4 ||
      !channelOperandsOk(n, {1, 2, 3, 4}, t))
    return nullptr;
  for (unsigned r = 1; r < n.numResults(); ++r)
    if (!isLoopFloat(n.result(r)->dtype()))
      return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [](auto tag) {
    return makeLoopKernel(&batchNorm2dLoop<decltype(tag)::value>);
  });
}

std::unique_ptr<NodeKernel> prepareLoopLayerNorm(const Node &n) {
  DType t = n.operand(0)->dtype();
  if (n.result()->dtype() != t || !channelOperandsOk(n, {1, 2}, t))
    return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [](auto tag) {
    return makeLoopKernel(&layerNormLoop<decltype(tag)::value>);
  });
}

std::unique_ptr<NodeKernel> prepareLoopLayerNormGrad(const Node &n) {
  // The reference reads dy and writes dx in x's dtype.
  DType t = n.operand(1)->dtype();
  if (n.operand(0)->dtype() != t || n.result(0)->dtype() != t || !channelOperandsOk(n, {2}, t) ||
      !isLoopFloat(n.result(1)->dtype()) || !isLoopFloat(n.result(2)->dtype()))
    return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [](auto tag) {
    return makeLoopKernel(&layerNormGradLoop<decltype(tag)::value>);
  });
}

std::unique_ptr<NodeKernel> prepareLoopBatchNorm2dGrad(const Node &n) {
  // The reference reads dy and writes dx in x's dtype.
  DType t = n.operand(1)->dtype();
  if (n.operand(0)->dtype() != t || n.result(0)->dtype() != t || n.operand(1)->type().rank() != 4 ||
      !channelOperandsOk(n, {2, 3, 4}, t) || !isLoopFloat(n.result(1)->dtype()) ||
      !isLoopFloat(n.result(2)->dtype()))
    return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [](auto tag) {
    return makeLoopKernel(&batchNorm2dGradLoop<decltype(tag)::value>);
  });
}

} // namespace ampc::kernels::cpu
