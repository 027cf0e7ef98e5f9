//===- Optimizer.cu - Fused optimizer updates and loss scaling ------------===//
//
// Everything a step decides stays on the device: the skip flag unscale_check
// writes, the learning rate, the step count and the loss scale are device
// scalars that the kernels read, so a training step never waits for the host
// (and a captured CUDA graph replays it as it is).
//
// optimizerUpdate is one pass per parameter: it reads the f32 master (or
// the parameter), the gradient and the optimizer state, writes the new
// master and state and, under master weights, the rounded half model weight
// in the same loop. When the step is skipped it copies operands to results
// (nothing where they share a buffer, the in-place case). unscaleCheck reads
// all gradients in a few launches (lists of tensors in the kernel
// parameters) and raises one device flag on inf/NaN; it writes no unscaled
// copies: the updates multiply each gradient by inv_scale as they read it.
//
//===----------------------------------------------------------------------===//
#include "kernels/common/LossScaleMath.h"
#include "kernels/common/OptimizerMath.h"
#include "kernels/cuda/Common.cuh"

namespace ampc::kernels::cuda {
namespace {

template <class T> __device__ T loadAs(const Tensor &t, int64_t i) {
  return static_cast<T>(loadAsDouble(t.dtype, t.data, i));
}

template <class T> __device__ void storeAs(const MutableTensor &t, int64_t i, T v) {
  storeFromDouble(t.dtype, t.data, i, static_cast<double>(v));
}

__device__ inline void copyThrough(const Tensor &from, const MutableTensor &to, int64_t i) {
  if (from.data && from.data != to.data)
    copyElement(from.dtype, from.data, to.data, i);
}

/// How updateKernel reads and writes its operands. AnyTypes reads each
/// operand's dtype per element (any combination); F32Master<G, M> is the
/// common case fixed at compile time: f32 parameter and state, gradients
/// in G, the model weight written in M (M = Bool: no model weight). Both
/// give the same values; the typed one spends no instructions on dtypes.
struct AnyTypes {
  template <class T> static __device__ T param(const UpdateArgs &a, int64_t i) {
    return loadAs<T>(a.param, i);
  }
  template <class T> static __device__ T grad(const UpdateArgs &a, int64_t i) {
    return loadAs<T>(a.grad, i);
  }
  template <class T> static __device__ T state(const UpdateArgs &a, int s, int64_t i) {
    return loadAs<T>(a.state[s], i);
  }
  template <class T> static __device__ void storeParam(const UpdateArgs &a, int64_t i, T v) {
    storeAs<T>(a.paramOut, i, v);
    if (a.modelParam.data)
      storeAs<T>(a.modelOut, i, v);
  }
  template <class T> static __device__ void storeState(const UpdateArgs &a, int s, int64_t i, T v) {
    storeAs<T>(a.stateOut[s], i, v);
  }
};

template <DType G, DType M> struct F32Master {
  template <class T> static __device__ T param(const UpdateArgs &a, int64_t i) {
    return load<DType::F32>(a.param.data, i);
  }
  template <class T> static __device__ T grad(const UpdateArgs &a, int64_t i) {
    return load<G>(a.grad.data, i);
  }
  template <class T> static __device__ T state(const UpdateArgs &a, int s, int64_t i) {
    return load<DType::F32>(a.state[s].data, i);
  }
  template <class T> static __device__ void storeParam(const UpdateArgs &a, int64_t i, T v) {
    store<DType::F32>(a.paramOut.data, i, v);
    if constexpr (M != DType::Bool)
      store<M>(a.modelOut.data, i, v);
  }
  template <class T> static __device__ void storeState(const UpdateArgs &a, int s, int64_t i, T v) {
    store<DType::F32>(a.stateOut[s].data, i, v);
  }
};

template <class T, class Access>
__global__ void updateKernel(UpdateArgs a, const uint64_t *stepPtr) {
  bool apply = endsAccumulation(*stepPtr, a.accumulate);
  if (a.skip.data && readScalar(a.skip) != 0)
    apply = false;
  int64_t n = a.paramOut.n;
  if (!apply) {
    AMPC_GRID_STRIDE(i, n) {
      copyThrough(a.param, a.paramOut, i);
      for (int s = 0; s < a.numState; ++s)
        copyThrough(a.state[s], a.stateOut[s], i);
      if (a.modelParam.data)
        copyThrough(a.modelParam, a.modelOut, i);
    }
    return;
  }
  double lr = readScalar(a.lr);
  bool hasGradScale = a.gradScale.data != nullptr;
  T gradScale = static_cast<T>(hasGradScale ? readScalar(a.gradScale) : 1.0);
  auto grad = [&](int64_t i) {
    T g = Access::template grad<T>(a, i);
    return hasGradScale ? g * gradScale : g;
  };
  auto storeParam = [&](int64_t i, T param) { Access::template storeParam<T>(a, i, param); };
  switch (a.kind) {
  case UpdateKind::Sgd: {
    SgdScalars<T> s = makeSgdScalars<T>(lr, a.weightDecay, 0, 0, false);
    AMPC_GRID_STRIDE(i, n) storeParam(i, sgdStep<T>(Access::template param<T>(a, i), grad(i), s));
    return;
  }
  case UpdateKind::SgdMomentum: {
    bool firstStep = readScalar(a.stepCount) <= 1;
    SgdScalars<T> s = makeSgdScalars<T>(lr, a.weightDecay, a.momentum, a.dampening, a.nesterov);
    AMPC_GRID_STRIDE(i, n) {
      T buf = Access::template state<T>(a, 0, i);
      T param = sgdMomentumStep<T>(Access::template param<T>(a, i), grad(i), buf, firstStep, s);
      storeParam(i, param);
      Access::template storeState<T>(a, 0, i, buf);
    }
    return;
  }
  case UpdateKind::Adam: {
    AdamScalars<T> s = makeAdamScalars<T>(lr, a.beta1, a.beta2, a.eps, a.weightDecay,
                                          a.decoupledWeightDecay, readScalar(a.stepCount));
    AMPC_GRID_STRIDE(i, n) {
      T expAvg = Access::template state<T>(a, 0, i), expAvgSq = Access::template state<T>(a, 1, i);
      T param = adamStep<T>(Access::template param<T>(a, i), grad(i), expAvg, expAvgSq, s);
      storeParam(i, param);
      Access::template storeState<T>(a, 0, i, expAvg);
      Access::template storeState<T>(a, 1, i, expAvgSq);
    }
    return;
  }
  }
}

__global__ void learningRateKernel(MutableTensor out, LrScheduleParams p, int64_t accumulate,
                                   const uint64_t *step) {
  storeFromDouble(out.dtype, out.data, 0,
                  scheduledLearningRate(p, optimizerStepOf(*step, accumulate)));
}

__global__ void turnSkipKernel(MutableTensor out, int64_t period, uint64_t turnMask,
                               int64_t accumulate, const uint64_t *step) {
  bool off = offTurn(optimizerStepOf(*step, accumulate), period, turnMask);
  storeFromDouble(out.dtype, out.data, 0, off ? 1.0 : 0.0);
}

__global__ void stepCounterKernel(Scalar count, Scalar skip, MutableTensor out, int64_t accumulate,
                                  const uint64_t *step) {
  bool apply = endsAccumulation(*step, accumulate);
  if (skip.data && readScalar(skip) != 0)
    apply = false;
  storeFromDouble(out.dtype, out.data, 0, readScalar(count) + (apply ? 1 : 0));
}

template <class T>
__global__ void accumulateGradKernel(Tensor acc, Tensor grad, MutableTensor out, int64_t accumulate,
                                     const uint64_t *step) {
  uint64_t index = *step % static_cast<uint64_t>(accumulate);
  AMPC_GRID_STRIDE(i, out.n)
  storeAs<T>(out, i,
             accumulateGradient<T>(loadAs<T>(acc, i), loadAs<T>(grad, i), index, accumulate));
}

/// The average of a parameter after its update (train.ema): every thread
/// reads the count and the skip flag, device scalars, so nothing waits for
/// the host; a micro-step that does not update copies the average through.
template <class T>
__global__ void emaUpdateKernel(Tensor average, Tensor param, Scalar count, Scalar skip,
                                MutableTensor out, double decay, int64_t accumulate,
                                const uint64_t *step) {
  bool apply = endsAccumulation(*step, accumulate) && !(skip.data && readScalar(skip) != 0);
  EmaScalars<T> s = emaScalars<T>(decay, readScalar(count));
  AMPC_GRID_STRIDE(i, out.n) {
    if (!apply) {
      copyThrough(average, out, i);
      continue;
    }
    storeAs<T>(out, i, emaAverage<T>(loadAs<T>(average, i), loadAs<T>(param, i), s));
  }
}

__global__ void clipCoefficientKernel(Scalar norm, Scalar scale, MutableTensor out,
                                      double maxNorm) {
  float s = scale.data ? static_cast<float>(readScalar(scale)) : 1.0f;
  float coef = ampc::kernels::clipCoefficient(static_cast<float>(readScalar(norm)) * s, maxNorm);
  storeFromDouble(out.dtype, out.data, 0, coef * s);
}

struct UnscaleList {
  int count = 0;
  Tensor in[kMaxListTensors];
};

/// Raises `found` when any element of a listed gradient, unscaled in f32
/// (f64 for f64 gradients), is inf or NaN. Reads only: the updates unscale
/// as they read each gradient (their grad_scale is inv_scale).
__global__ void unscaleCheckKernel(Scalar scale, UnscaleList list, int *found) {
  const Tensor &in = list.in[blockIdx.y];
  float invScale = inverseLossScale(static_cast<float>(readScalar(scale)));
  bool nonFinite = false;
  if (in.dtype == DType::F64) {
    double inv = invScale;
    AMPC_GRID_STRIDE(i, in.n)
    nonFinite |= isNonFinite(unscaleGradient<double>(loadAsDouble(in.dtype, in.data, i), inv));
  } else {
    AMPC_GRID_STRIDE(i, in.n)
    nonFinite |= isNonFinite(
        unscaleGradient<float>(static_cast<float>(loadAsDouble(in.dtype, in.data, i)), invScale));
  }
  if (nonFinite)
    *found = 1; // every writer writes 1: no atomics needed
}

__global__ void unscaleFinishKernel(Scalar scale, const int *found, MutableTensor skipped,
                                    MutableTensor scaleOut, MutableTensor invScaleOut,
                                    int64_t accumulate, const uint64_t *step) {
  bool checks = endsAccumulation(*step, accumulate);
  float s = static_cast<float>(readScalar(scale));
  storeFromDouble(skipped.dtype, skipped.data, 0, checks && *found ? 1.0 : 0.0);
  storeFromDouble(scaleOut.dtype, scaleOut.data, 0, static_cast<double>(s));
  storeFromDouble(invScaleOut.dtype, invScaleOut.data, 0, static_cast<double>(inverseLossScale(s)));
}

__global__ void updateLossScaleKernel(Scalar scale, Scalar tracker, Scalar foundInf,
                                      MutableTensor scaleOut, MutableTensor trackerOut,
                                      LossScaleParamsArg arg, int64_t accumulate,
                                      const uint64_t *step) {
  float s = static_cast<float>(readScalar(scale));
  float t = static_cast<float>(readScalar(tracker));
  if (endsAccumulation(*step, accumulate)) {
    LossScaleParams p;
    p.growthFactor = arg.growthFactor;
    p.backoffFactor = arg.backoffFactor;
    p.growthInterval = arg.growthInterval;
    p.minScale = arg.minScale;
    p.maxScale = arg.maxScale;
    ampc::kernels::updateLossScale(s, t, readScalar(foundInf) != 0, p);
  }
  storeFromDouble(scaleOut.dtype, scaleOut.data, 0, s);
  storeFromDouble(trackerOut.dtype, trackerOut.data, 0, t);
}

} // namespace

cudaError_t learningRate(const Launch &l, MutableTensor out, const LrScheduleParams &p,
                         int64_t accumulate) {
  learningRateKernel<<<1, 1, 0, l.stream>>>(out, p, accumulate, l.step);
  return cudaGetLastError();
}

cudaError_t turnSkip(const Launch &l, MutableTensor out, int64_t period, uint64_t turnMask,
                     int64_t accumulate) {
  turnSkipKernel<<<1, 1, 0, l.stream>>>(out, period, turnMask, accumulate, l.step);
  return cudaGetLastError();
}

cudaError_t stepCounter(const Launch &l, Scalar count, Scalar skip, MutableTensor out,
                        int64_t accumulate) {
  stepCounterKernel<<<1, 1, 0, l.stream>>>(count, skip, out, accumulate, l.step);
  return cudaGetLastError();
}

cudaError_t accumulateGrad(const Launch &l, Tensor acc, Tensor grad, MutableTensor out,
                           int64_t accumulate) {
  if (out.n == 0)
    return cudaSuccess;
  if (acc.dtype == DType::F64)
    accumulateGradKernel<double>
        <<<blocksFor(out.n), kThreads, 0, l.stream>>>(acc, grad, out, accumulate, l.step);
  else
    accumulateGradKernel<float>
        <<<blocksFor(out.n), kThreads, 0, l.stream>>>(acc, grad, out, accumulate, l.step);
  return cudaGetLastError();
}

cudaError_t emaUpdate(const Launch &l, Tensor average, Tensor param, Scalar count, Scalar skip,
                      MutableTensor out, double decay, int64_t accumulate) {
  if (out.n == 0)
    return cudaSuccess;
  if (average.dtype == DType::F64)
    emaUpdateKernel<double><<<blocksFor(out.n), kThreads, 0, l.stream>>>(
        average, param, count, skip, out, decay, accumulate, l.step);
  else
    emaUpdateKernel<float><<<blocksFor(out.n), kThreads, 0, l.stream>>>(
        average, param, count, skip, out, decay, accumulate, l.step);
  return cudaGetLastError();
}

cudaError_t clipCoefficient(const Launch &l, Scalar norm, Scalar scale, MutableTensor out,
                            double maxNorm) {
  clipCoefficientKernel<<<1, 1, 0, l.stream>>>(norm, scale, out, maxNorm);
  return cudaGetLastError();
}

cudaError_t optimizerUpdate(const Launch &l, const UpdateArgs &a) {
  int64_t n = a.paramOut.n;
  if (n == 0)
    return cudaSuccess;
  unsigned blocks = blocksFor(n);
  if (a.param.dtype == DType::F64) {
    updateKernel<double, AnyTypes><<<blocks, kThreads, 0, l.stream>>>(a, l.step);
    return cudaGetLastError();
  }
  // The typed kernels: f32 parameter and state, a float gradient, a half
  // (or no) model weight; anything else reads dtypes per element.
  bool f32Master = a.param.dtype == DType::F32 && a.paramOut.dtype == DType::F32;
  for (int s = 0; s < a.numState; ++s)
    f32Master = f32Master && a.state[s].dtype == DType::F32 && a.stateOut[s].dtype == DType::F32;
  DType model = a.modelParam.data ? a.modelOut.dtype : DType::Bool;
  auto launch = [&](auto gradTag, auto modelTag) {
    constexpr DType G = decltype(gradTag)::value, M = decltype(modelTag)::value;
    updateKernel<float, F32Master<G, M>><<<blocks, kThreads, 0, l.stream>>>(a, l.step);
    return cudaGetLastError();
  };
  auto withModel = [&](auto gradTag) {
    switch (model) {
    case DType::Bool:
      return launch(gradTag, DTypeTag<DType::Bool>{});
    case DType::F16:
      return launch(gradTag, DTypeTag<DType::F16>{});
    case DType::BF16:
      return launch(gradTag, DTypeTag<DType::BF16>{});
    default:
      updateKernel<float, AnyTypes><<<blocks, kThreads, 0, l.stream>>>(a, l.step);
      return cudaGetLastError();
    }
  };
  if (f32Master) {
    switch (a.grad.dtype) {
    case DType::F32:
      return withModel(DTypeTag<DType::F32>{});
    case DType::F16:
      return withModel(DTypeTag<DType::F16>{});
    case DType::BF16:
      return withModel(DTypeTag<DType::BF16>{});
    default:
      break;
    }
  }
  updateKernel<float, AnyTypes><<<blocks, kThreads, 0, l.stream>>>(a, l.step);
  return cudaGetLastError();
}

cudaError_t unscaleCheck(const Launch &l, Scalar scale, const Tensor *grads, int count,
                         MutableTensor skipped, MutableTensor scaleOut, MutableTensor invScaleOut,
                         int64_t accumulate, void *scratch) {
  int *found = static_cast<int *>(scratch);
  cudaError_t err = cudaMemsetAsync(found, 0, sizeof(int), l.stream);
  if (err != cudaSuccess)
    return err;
  for (int first = 0; first < count; first += kMaxListTensors) {
    UnscaleList list;
    int64_t longest = 0;
    for (int g = first; g < count && list.count < kMaxListTensors; ++g, ++list.count) {
      list.in[list.count] = grads[g];
      longest = grads[g].n > longest ? grads[g].n : longest;
    }
    unsigned blocks = blocksFor(longest);
    dim3 grid(blocks < 1024 ? blocks : 1024, static_cast<unsigned>(list.count));
    unscaleCheckKernel<<<grid, kThreads, 0, l.stream>>>(scale, list, found);
    if ((err = cudaGetLastError()) != cudaSuccess)
      return err;
  }
  unscaleFinishKernel<<<1, 1, 0, l.stream>>>(scale, found, skipped, scaleOut, invScaleOut,
                                             accumulate, l.step);
  return cudaGetLastError();
}

cudaError_t updateLossScale(const Launch &l, Scalar scale, Scalar tracker, Scalar foundInf,
                            MutableTensor scaleOut, MutableTensor trackerOut,
                            const LossScaleParamsArg &p, int64_t accumulate) {
  updateLossScaleKernel<<<1, 1, 0, l.stream>>>(scale, tracker, foundInf, scaleOut, trackerOut, p,
                                               accumulate, l.step);
  return cudaGetLastError();
}

} // namespace ampc::kernels::cuda
