//===- CudaKernels.h - Our CUDA kernels, called by the CUDA backend -------===//
//
// Launchers for the kernels of kernels/cuda/*.cu. Plain C++17 (nvcc compiles
// the .cu files at C++17; the backend in runtime/cuda, at C++20, calls these):
// raw device pointers, dtypes and sizes, no graph types. The per-element math
// is kernels/common (AMPC_HD), the same functions the reference and CPU
// kernels call, so elementwise results match the reference bit for bit where
// the summation order is the same.
//
// Every launcher enqueues on `l.stream` and returns cudaGetLastError() (or
// the first failing call's error); an empty tensor launches nothing. Kernels
// that depend on the step read it from the device (`l.step`), so a captured
// CUDA graph replays with the current step.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CUDA_CUDAKERNELS_H
#define AMPC_KERNELS_CUDA_CUDAKERNELS_H

#include "ir/DType.h"
#include "kernels/common/OptimizerMath.h"
#include "kernels/common/PoolMath.h"
#include "kernels/common/ResampleMath.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ampc::kernels::cuda {

struct Launch {
  cudaStream_t stream = nullptr;
  /// The current step (device memory; the backend writes it before a step).
  const uint64_t *step = nullptr;
};

constexpr int kMaxRank = 8;

/// A raw tensor: device pointer, dtype, element count.
struct Tensor {
  const void *data = nullptr;
  DType dtype = DType::F32;
  int64_t n = 0;
};
struct MutableTensor {
  void *data = nullptr;
  DType dtype = DType::F32;
  int64_t n = 0;
};

// --- Casts, copies, fills ------------------------------------------------

/// y[i] = cast(x[i]) between any two dtypes (kernels/common/CastMath.h).
cudaError_t cast(const Launch &l, Tensor x, MutableTensor y);
/// y = value in y's dtype (storeFromDouble).
cudaError_t fill(const Launch &l, MutableTensor y, double value);
/// y[(o * channels + c) * inner + e] = v[c], elements copied as they are
/// (the bias a GEMM or convolution then accumulates onto with beta = 1).
cudaError_t broadcastChannels(const Launch &l, DType t, const void *v, void *y, int64_t outer,
                              int64_t channels, int64_t inner);

/// out dim d is in dim perm[d]: `inStrides` are the input's strides taken in
/// output-dim order; any element size.
struct PermuteShape {
  int rank = 0;
  int64_t outDims[kMaxRank] = {};
  int64_t inStrides[kMaxRank] = {};
};
cudaError_t permute(const Launch &l, unsigned elementSize, const void *x, void *y, int64_t n,
                    const PermuteShape &s);

// --- Collectives (Collective.cu; the all-reduce itself is NCCL's) ---------

/// y[i] = x[i] / divisor in f32, stored in y's dtype: an all-reduce's
/// result from the sums `x` holds in its wire dtype (f32, f16 or bf16; y
/// f32, f16 or bf16), divisor the number of ranks for a mean and 1 for a
/// sum (kernels/common/CollectiveMath.h).
cudaError_t unpackReduced(const Launch &l, Tensor x, float divisor, MutableTensor y);

// --- Elementwise ------------------------------------------------------------

// The pointwise ops of ir/Pointwise.def, one launcher per shape, instantiated
// (Elementwise.cu) for each row's element functor (kernels/common).

/// y = f(x) in x's compute type.
template <class Fn>
cudaError_t unary(const Launch &l, Fn f, DType t, const void *x, void *y, int64_t n);

/// dx = f.grad(dy, saved): saved is the forward input or output, as the
/// activation's row says and the reference backward ops take them.
template <class Fn>
cudaError_t unaryGrad(const Launch &l, Fn f, DType t, const void *dy, const void *saved, void *dx,
                      int64_t n);

/// Numpy broadcasting: per output dim, each operand's stride (0 where it
/// repeats).
struct BroadcastShape {
  int rank = 0;
  int64_t outDims[kMaxRank] = {};
  int64_t lhsStrides[kMaxRank] = {};
  int64_t rhsStrides[kMaxRank] = {};
};
/// y = f(a, b) with numpy broadcasting.
template <class Fn>
cudaError_t binary(const Launch &l, Fn f, DType t, const void *a, const void *b, void *y, int64_t n,
                   const BroadcastShape &s);

/// Dropout with the counter-based mask of kernels/common/Random.h (the same
/// mask as every backend); the step comes from l.step.
cudaError_t dropout(const Launch &l, DType t, const void *x, void *y, int64_t n, double p,
                    bool training, uint64_t seed);

/// The input viewed as [outer, size, inner] around the softmax dim.
struct AxisShape {
  int64_t outer = 1, size = 1, inner = 1;
};
cudaError_t softmax(const Launch &l, DType t, const void *x, void *y, AxisShape s, bool log);
cudaError_t softmaxGrad(const Launch &l, DType t, const void *dy, const void *y, void *dx,
                        AxisShape s, bool log);

// --- Reductions ---------------------------------------------------------------

/// reduce_sum: per output element, the input offsets of the kept dims, then
/// the reduced dims (row-major), each with its input stride. reduce_mean is
/// the same with `mean` set: each sum is divided by reducedCount.
struct ReduceShape {
  int keptRank = 0, reducedRank = 0;
  int64_t keptDims[kMaxRank] = {}, keptStrides[kMaxRank] = {};
  int64_t reducedDims[kMaxRank] = {}, reducedStrides[kMaxRank] = {};
  int64_t outputs = 1, reducedCount = 1;
  bool mean = false;
};
/// reduce_sum or reduce_mean. Partial sums per chunk of the reduced elements go to `scratch`
/// (reduceSumScratchBytes) when the reduction is long; then the chunks are
/// added in order. Short reductions add in the reference's order.
size_t reduceSumScratchBytes(DType t, const ReduceShape &s);
cudaError_t reduceSum(const Launch &l, DType t, const void *x, void *y, const ReduceShape &s,
                      void *scratch);

// --- Pooling (NCHW) -------------------------------------------------------------

/// Windows of adjacent taps (dilation 1): the table sends dilated max
/// pooling to the host.
struct PoolShape {
  int64_t planes = 0, inH = 0, inW = 0, outH = 0, outW = 0;
  PoolAxis axis[2] = {}; ///< H, W
  bool countIncludePad = true;
};
cudaError_t maxPool2d(const Launch &l, DType t, const void *x, void *y, const PoolShape &s);
cudaError_t avgPool2d(const Launch &l, DType t, const void *x, void *y, const PoolShape &s);
cudaError_t maxPool2dGrad(const Launch &l, DType t, const void *dy, const void *x, void *dx,
                          const PoolShape &s);
cudaError_t avgPool2dGrad(const Launch &l, DType t, const void *dy, void *dx, const PoolShape &s);
cudaError_t globalAvgPool(const Launch &l, DType t, const void *x, void *y, int64_t planes,
                          int64_t planeSize);
cudaError_t globalAvgPoolGrad(const Launch &l, DType t, const void *dy, void *dx, int64_t planes,
                              int64_t planeSize);

// --- Padding and resizing (Resample.cu) ---------------------------------------------

/// pad: the dims, the pads before each dim, and the constant as the bytes
/// of one element of the tensor's dtype.
struct PadShape {
  int rank = 0;
  int64_t inDims[kMaxRank] = {}, outDims[kMaxRank] = {}, begin[kMaxRank] = {};
  PadKind kind = PadKind::Constant;
  uint64_t constantBits = 0;
};
cudaError_t pad(const Launch &l, unsigned elementSize, const void *x, void *y, int64_t n,
                const PadShape &s);

/// resize of [N, C, H, W]: planes = N * C, the H and W axes, the
/// interpolation (ir's ResizeMode, which device code cannot include).
enum class ResizeInterp : uint8_t { Nearest, Linear, Cubic };
struct ResizeShape {
  int64_t planes = 0;
  ResizeAxis axis[2] = {};
  ResizeInterp interp = ResizeInterp::Nearest;
};
cudaError_t resize(const Launch &l, DType t, const void *x, void *y, const ResizeShape &s);

// --- Batch normalization (NCHW; BatchNorm.cu) -------------------------------------
/// The shapes and attributes of batchnorm2d / batchnorm2d_grad.
struct BatchNormShape {
  int64_t batch = 0, channels = 0, plane = 0;
  double eps = 1e-5, momentum = 0.1;
  bool training = true;
};
/// The per-channel tensors, each in its own dtype (f32 under a half input
/// with keep_batchnorm_fp32, else the input's): weight, bias and the running
/// statistics; newMean/newVar (forward, training; null data: not written)
/// and dWeight/dBias (backward).
struct BatchNormParams {
  Tensor weight, bias, runningMean, runningVar;
  MutableTensor newMean, newVar, dWeight, dBias;
};
/// Scratch for either direction: four doubles per channel.
size_t batchNormScratchBytes(int64_t channels);
/// y = normalizeAffine(x) with the batch statistics (training, updating the
/// running ones into newMean/newVar) or the running statistics (eval).
cudaError_t batchNorm(const Launch &l, DType t, const void *x, const BatchNormParams &p, void *y,
                      const BatchNormShape &s, void *scratch);
/// dx (through the batch statistics when training), dWeight = sum dy * xhat,
/// dBias = sum dy; the statistics recomputed from x.
cudaError_t batchNormGrad(const Launch &l, DType t, const void *dy, const void *x,
                          const BatchNormParams &p, void *dx, const BatchNormShape &s,
                          void *scratch);
// --- Layer normalization ----------------------------------------------------------

/// Scratch for layerNormGrad: per-row statistics.
size_t layerNormScratchBytes(int64_t rows);
cudaError_t layerNorm(const Launch &l, DType t, const void *x, Tensor weight, Tensor bias, void *y,
                      int64_t rows, int64_t size, double eps);
cudaError_t layerNormGrad(const Launch &l, DType t, const void *dy, const void *x, Tensor weight,
                          void *dx, MutableTensor dWeight, MutableTensor dBias, int64_t rows,
                          int64_t size, double eps, void *scratch);

// --- Losses -------------------------------------------------------------------------

/// mean of (input - target)^2: blocks sum fixed parts by a tree into
/// `scratch` (mseLossScratchBytes), one block adds the parts (deterministic).
size_t mseLossScratchBytes(DType t, int64_t n);
cudaError_t mseLoss(const Launch &l, DType t, const void *input, const void *target, void *out,
                    int64_t n, void *scratch);
/// dx = 2 (input - target) * dy / n.
cudaError_t mseLossGrad(const Launch &l, DType t, const void *dy, const void *input,
                        const void *target, void *dx, int64_t n);
struct CrossEntropyShape {
  int64_t rows = 0, classes = 0, ignoreIndex = -100;
  double labelSmoothing = 0;
  DType labelType = DType::I64;
};
cudaError_t crossEntropy(const Launch &l, DType t, const void *logits, const void *labels,
                         void *out, const CrossEntropyShape &s);
/// `scratch`: 16 bytes (the counted rows and whether a label was bad).
cudaError_t crossEntropyGrad(const Launch &l, DType t, const void *dy, const void *logits,
                             const void *labels, void *dx, const CrossEntropyShape &s,
                             void *scratch);

// --- Optimizer and loss scaling (scalars stay on the device) ----------------------

/// One scalar operand: a rank-0 tensor on the device, or absent.
struct Scalar {
  const void *data = nullptr;
  DType dtype = DType::F32;
};

cudaError_t learningRate(const Launch &l, MutableTensor out, const LrScheduleParams &p,
                         int64_t accumulate);
/// out = 1 when the optimizer step is not one of the turns in turnMask
/// (kernels::offTurn), else 0.
cudaError_t turnSkip(const Launch &l, MutableTensor out, int64_t period, uint64_t turnMask,
                     int64_t accumulate);
/// out = count + 1 on the last micro-step of a group unless skip != 0.
cudaError_t stepCounter(const Launch &l, Scalar count, Scalar skip, MutableTensor out,
                        int64_t accumulate);
cudaError_t accumulateGrad(const Launch &l, Tensor acc, Tensor grad, MutableTensor out,
                           int64_t accumulate);
cudaError_t clipCoefficient(const Launch &l, Scalar norm, Scalar scale, MutableTensor out,
                            double maxNorm);
/// out = the average after the parameter's update (OptimizerMath.h's
/// emaAverage) on the last micro-step of a group unless skip != 0, else the
/// average as it was.
cudaError_t emaUpdate(const Launch &l, Tensor average, Tensor param, Scalar count, Scalar skip,
                      MutableTensor out, double decay, int64_t accumulate);

enum class UpdateKind { Sgd, SgdMomentum, Adam };
/// An update op's operands and results as ir/ops/Optimizer.cpp lays them
/// out: the parameter (the f32 master under master weights), its gradient,
/// up to two state tensors (momentum buffer; Adam's moments), the step
/// count, lr, and the optional grad_scale, skip flag and half model weight
/// whose refreshed copy the same pass writes. When the step is not applied
/// (mid-accumulation, or skip != 0 on the device) results are copies of
/// their operands (nothing is written where they share a buffer).
struct UpdateArgs {
  UpdateKind kind = UpdateKind::Sgd;
  Tensor param, grad, state[2], modelParam;
  Scalar stepCount, lr, gradScale, skip;
  MutableTensor paramOut, stateOut[2], modelOut;
  int numState = 0;
  int64_t accumulate = 1;
  double weightDecay = 0, momentum = 0, dampening = 0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool decoupledWeightDecay = false;
};
cudaError_t optimizerUpdate(const Launch &l, const UpdateArgs &a);

/// unscale_check over all gradients in a few read-only launches (lists of
/// up to kMaxListTensors per launch): one device flag set when any
/// grad[g] / scale is inf or NaN; then skipped = flag on the last micro-step
/// of a group, the scale passes through and invScaleOut = 1 / scale (the
/// updates' grad_scale). No host sync. `scratch`: 4 bytes.
constexpr int kMaxListTensors = 32;
cudaError_t unscaleCheck(const Launch &l, Scalar scale, const Tensor *grads, int count,
                         MutableTensor skipped, MutableTensor scaleOut, MutableTensor invScaleOut,
                         int64_t accumulate, void *scratch);
struct LossScaleParamsArg {
  double growthFactor, backoffFactor, minScale, maxScale;
  int64_t growthInterval;
};
cudaError_t updateLossScale(const Launch &l, Scalar scale, Scalar tracker, Scalar foundInf,
                            MutableTensor scaleOut, MutableTensor trackerOut,
                            const LossScaleParamsArg &p, int64_t accumulate);

} // namespace ampc::kernels::cuda

#endif
