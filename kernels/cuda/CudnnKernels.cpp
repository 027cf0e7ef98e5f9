//===- CudnnKernels.cpp - conv2d and batchnorm2d on cuDNN 9 ---------------===//
//
// cuDNN's legacy (v7-style) API, still in cuDNN 9 (libcudnn_cnn, _ops):
// descriptors and algorithms are fixed per node at compile time, so a step
// only calls
//   cudnnConvolutionForward        conv2d (bias broadcast into y first,
//                                  beta = 1: added before the one rounding)
//   cudnnConvolutionBackwardData   conv2d_grad_input
//   cudnnConvolutionBackwardFilter conv2d_grad_weight
//   cudnnBatchNormalizationForwardTraining / ForwardInference  batchnorm2d
//   cudnnBatchNormalizationBackward                            batchnorm2d_grad
// Algorithms come from cudnnGet*Algorithm_v7 (heuristics, nothing runs at
// compile time), preferring deterministic ones; their workspace is the
// backend's shared one, grown at compile time. f16/bf16 convolutions use
// tensor cores with f32 compute; f32 uses CUDNN_FMA_MATH (no TF32) unless
// AMPC_CUDA_TF32=1. We chose the legacy API over the graph (frontend) API:
// it needs no plan cache or engine configuration, and every shape here is
// static.
//
// Batchnorm needs f32 statistics and affine parameters (keep_batchnorm_fp32,
// the O1/O2 default) and an x of f32 or f16; eval-mode backward, half
// parameters (O3 without keep_batchnorm_fp32) and eps below
// CUDNN_BN_MIN_EPSILON run on the host fallback.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/cuda/CudaContext.h"

#include "llvm/Support/raw_ostream.h"

#include <vector>

namespace ampc::cuda {

using kernels::KernelArgs;

namespace {

bool cudnnType(DType t, cudnnDataType_t &out) {
  switch (t) {
  case DType::F32:
    out = CUDNN_DATA_FLOAT;
    return true;
  case DType::F16:
    out = CUDNN_DATA_HALF;
    return true;
  case DType::BF16:
    out = CUDNN_DATA_BFLOAT16;
    return true;
  case DType::F64:
    out = CUDNN_DATA_DOUBLE;
    return true;
  case DType::I64:
  case DType::I32:
  case DType::Bool:
    return false;
  }
  return false;
}

/// Reports a cuDNN failure at compile time; the node then gets the fallback.
bool ok(cudnnStatus_t s, const char *what, const Node &n) {
  if (s == CUDNN_STATUS_SUCCESS)
    return true;
  llvm::errs() << "warning: cuda: " << what << " failed on " << n.opName() << ": " << errorText(s)
               << "; using the host fallback\n";
  return false;
}

/// Scaling factors: double for double data, float otherwise (cuDNN's rule).
struct Blend {
  float f[2];
  double d[2];
  bool isDouble;
  Blend(DType t, double alpha, double beta)
      : f{static_cast<float>(alpha), static_cast<float>(beta)}, d{alpha, beta},
        isDouble(t == DType::F64) {}
  const void *alpha() const { return isDouble ? static_cast<const void *>(&d[0]) : &f[0]; }
  const void *beta() const { return isDouble ? static_cast<const void *>(&d[1]) : &f[1]; }
};

class ConvKernel final : public kernels::NodeKernel {
public:
  enum class Kind { Forward, BackwardData, BackwardFilter };

  ConvKernel(CudaContext &ctx, Kind kind) : ctx_(ctx), kind_(kind) {}
  ~ConvKernel() override {
    if (x_)
      cudnnDestroyTensorDescriptor(x_);
    if (y_)
      cudnnDestroyTensorDescriptor(y_);
    if (w_)
      cudnnDestroyFilterDescriptor(w_);
    if (conv_)
      cudnnDestroyConvolutionDescriptor(conv_);
  }

  /// x, w, y: the forward's shapes (for the backward ops too).
  bool init(const Node &n, DType t, llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> w,
            llvm::ArrayRef<int64_t> y, bool bias) {
    dtype_ = t;
    bias_ = bias;
    outChannels_ = y[1];
    outPlane_ = y[2] * y[3];
    batch_ = y[0];
    cudnnDataType_t data;
    if (!cudnnType(t, data))
      return false;
    const std::vector<int64_t> &stride = attrs::Conv2d(n).stride();
    const std::vector<int64_t> &padding = attrs::Conv2d(n).padding();
    const std::vector<int64_t> &dilation = attrs::Conv2d(n).dilation();
    int64_t groups = attrs::Conv2d(n).groups();
    if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2)
      return false;
    for (int64_t d : {x[0], x[1], x[2], x[3], w[0], w[1], w[2], w[3], y[0], y[1], y[2], y[3]})
      if (d <= 0 || d > 0x7fffffff)
        return false;
    auto i = [](int64_t v) { return static_cast<int>(v); };
    if (!ok(cudnnCreateTensorDescriptor(&x_), "cudnnCreateTensorDescriptor", n) ||
        !ok(cudnnCreateTensorDescriptor(&y_), "cudnnCreateTensorDescriptor", n) ||
        !ok(cudnnCreateFilterDescriptor(&w_), "cudnnCreateFilterDescriptor", n) ||
        !ok(cudnnCreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor", n))
      return false;
    if (!ok(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, data, i(x[0]), i(x[1]), i(x[2]),
                                       i(x[3])),
            "cudnnSetTensor4dDescriptor (x)", n) ||
        !ok(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, data, i(y[0]), i(y[1]), i(y[2]),
                                       i(y[3])),
            "cudnnSetTensor4dDescriptor (y)", n) ||
        !ok(cudnnSetFilter4dDescriptor(w_, data, CUDNN_TENSOR_NCHW, i(w[0]), i(w[1]), i(w[2]),
                                       i(w[3])),
            "cudnnSetFilter4dDescriptor", n))
      return false;
    cudnnDataType_t compute = t == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    if (!ok(cudnnSetConvolution2dDescriptor(conv_, i(padding[0]), i(padding[1]), i(stride[0]),
                                            i(stride[1]), i(dilation[0]), i(dilation[1]),
                                            CUDNN_CROSS_CORRELATION, compute),
            "cudnnSetConvolution2dDescriptor", n) ||
        !ok(cudnnSetConvolutionGroupCount(conv_, i(groups)), "cudnnSetConvolutionGroupCount", n))
      return false;
    cudnnMathType_t math = CUDNN_FMA_MATH;
    if (isHalfType(t) || (t == DType::F32 && ctx_.allowTf32))
      math = CUDNN_TENSOR_OP_MATH;
    if (!ok(cudnnSetConvolutionMathType(conv_, math), "cudnnSetConvolutionMathType", n))
      return false;
    // The graph's output shape must be cuDNN's.
    int on, oc, oh, ow;
    if (!ok(cudnnGetConvolution2dForwardOutputDim(conv_, x_, w_, &on, &oc, &oh, &ow),
            "cudnnGetConvolution2dForwardOutputDim", n))
      return false;
    if (on != y[0] || oc != y[1] || oh != y[2] || ow != y[3]) {
      llvm::errs() << "warning: cuda: cuDNN computes another output shape for " << n.opName()
                   << "; using the host fallback\n";
      return false;
    }
    return chooseAlgorithm(n);
  }

  void run(const KernelArgs &a) override {
    const Node *node = a.node;
    Blend blend(dtype_, 1.0, 0.0);
    switch (kind_) {
    case Kind::Forward: {
      Blend withBias(dtype_, 1.0, bias_ ? 1.0 : 0.0);
      if (bias_)
        check(kernels::cuda::broadcastChannels(ctx_.launch(), dtype_, a.in(2).data, a.out().data,
                                               batch_, outChannels_, outPlane_),
              "launch of the bias broadcast", node);
      check(cudnnConvolutionForward(ctx_.cudnn, withBias.alpha(), x_, a.in(0).data, w_,
                                    a.in(1).data, conv_, forwardAlgo_, ctx_.workspace,
                                    workspaceBytes_, withBias.beta(), y_, a.out().data),
            "cudnnConvolutionForward", node);
      return;
    }
    case Kind::BackwardData:
      check(cudnnConvolutionBackwardData(ctx_.cudnn, blend.alpha(), w_, a.in(1).data, y_,
                                         a.in(0).data, conv_, dataAlgo_, ctx_.workspace,
                                         workspaceBytes_, blend.beta(), x_, a.out().data),
            "cudnnConvolutionBackwardData", node);
      return;
    case Kind::BackwardFilter:
      check(cudnnConvolutionBackwardFilter(ctx_.cudnn, blend.alpha(), x_, a.in(1).data, y_,
                                           a.in(0).data, conv_, filterAlgo_, ctx_.workspace,
                                           workspaceBytes_, blend.beta(), w_, a.out().data),
            "cudnnConvolutionBackwardFilter", node);
      return;
    }
  }

private:
  /// Whether an algorithm's math type keeps this convolution's precision:
  /// f32 without AMPC_CUDA_TF32 must not round operands to TF32 (tensor-op
  /// math on f32 data does, and ALLOW_CONVERSION rounds f32 to half).
  bool mathAllowed(cudnnMathType_t math) const {
    if (dtype_ == DType::F64 || (dtype_ == DType::F32 && !ctx_.allowTf32))
      return math == CUDNN_DEFAULT_MATH || math == CUDNN_FMA_MATH;
    return math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || isHalfType(dtype_);
  }

  /// The first successful result whose math type is allowed, preferring
  /// deterministic algorithms.
  template <class Perf> const Perf *pick(const Perf *results, int count) const {
    const Perf *any = nullptr;
    for (int r = 0; r < count; ++r) {
      if (results[r].status != CUDNN_STATUS_SUCCESS || !mathAllowed(results[r].mathType))
        continue;
      if (results[r].determinism == CUDNN_DETERMINISTIC)
        return &results[r];
      if (!any)
        any = &results[r];
    }
    return any;
  }

  /// The descriptor runs with the math type its algorithm was chosen for
  /// (cuDNN's heuristics report one per algorithm; a descriptor left at
  /// another may select a different kernel or fail).
  bool setMath(cudnnMathType_t math, const Node &n) {
    return ok(cudnnSetConvolutionMathType(conv_, math), "cudnnSetConvolutionMathType", n);
  }

  bool chooseAlgorithm(const Node &n) {
    constexpr int kMax = 16;
    int count = 0;
    size_t bytes = 0;
    switch (kind_) {
    case Kind::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      if (!ok(cudnnGetConvolutionForwardAlgorithm_v7(ctx_.cudnn, x_, w_, conv_, y_, kMax, &count,
                                                     perf),
              "cudnnGetConvolutionForwardAlgorithm_v7", n))
        return false;
      const cudnnConvolutionFwdAlgoPerf_t *best = pick(perf, count);
      if (!best)
        return false;
      forwardAlgo_ = best->algo;
      if (!setMath(best->mathType, n))
        return false;
      if (!ok(cudnnGetConvolutionForwardWorkspaceSize(ctx_.cudnn, x_, w_, conv_, y_, forwardAlgo_,
                                                      &bytes),
              "cudnnGetConvolutionForwardWorkspaceSize", n))
        return false;
      break;
    }
    case Kind::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      if (!ok(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx_.cudnn, w_, y_, conv_, x_, kMax,
                                                          &count, perf),
              "cudnnGetConvolutionBackwardDataAlgorithm_v7", n))
        return false;
      const cudnnConvolutionBwdDataAlgoPerf_t *best = pick(perf, count);
      if (!best)
        return false;
      dataAlgo_ = best->algo;
      if (!setMath(best->mathType, n))
        return false;
      if (!ok(cudnnGetConvolutionBackwardDataWorkspaceSize(ctx_.cudnn, w_, y_, conv_, x_, dataAlgo_,
                                                           &bytes),
              "cudnnGetConvolutionBackwardDataWorkspaceSize", n))
        return false;
      break;
    }
    case Kind::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
      if (!ok(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx_.cudnn, x_, y_, conv_, w_, kMax,
                                                            &count, perf),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7", n))
        return false;
      const cudnnConvolutionBwdFilterAlgoPerf_t *best = pick(perf, count);
      if (!best)
        return false;
      filterAlgo_ = best->algo;
      if (!setMath(best->mathType, n))
        return false;
      if (!ok(cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx_.cudnn, x_, y_, conv_, w_,
                                                             filterAlgo_, &bytes),
              "cudnnGetConvolutionBackwardFilterWorkspaceSize", n))
        return false;
      break;
    }
    }
    std::string err;
    if (!ctx_.reserveWorkspace(bytes, err)) {
      llvm::errs() << "warning: cuda: " << err << "; " << n.opName() << " uses the host fallback\n";
      return false;
    }
    workspaceBytes_ = bytes;
    return true;
  }

  CudaContext &ctx_;
  Kind kind_;
  DType dtype_ = DType::F32;
  bool bias_ = false;
  int64_t batch_ = 0, outChannels_ = 0, outPlane_ = 0;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t forwardAlgo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t dataAlgo_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  cudnnConvolutionBwdFilterAlgo_t filterAlgo_ = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  size_t workspaceBytes_ = 0;
};

class BatchNormKernel final : public kernels::NodeKernel {
public:
  BatchNormKernel(CudaContext &ctx, bool backward, bool training, double eps, double momentum)
      : ctx_(ctx), backward_(backward), training_(training), eps_(eps), momentum_(momentum) {}
  ~BatchNormKernel() override {
    if (x_)
      cudnnDestroyTensorDescriptor(x_);
    if (bn_)
      cudnnDestroyTensorDescriptor(bn_);
  }

  bool init(const Node &n, DType t, llvm::ArrayRef<int64_t> x) {
    cudnnDataType_t data;
    if (!cudnnType(t, data) || x.size() != 4)
      return false;
    for (int64_t d : x)
      if (d <= 0 || d > 0x7fffffff)
        return false;
    if (!ok(cudnnCreateTensorDescriptor(&x_), "cudnnCreateTensorDescriptor", n) ||
        !ok(cudnnCreateTensorDescriptor(&bn_), "cudnnCreateTensorDescriptor", n) ||
        !ok(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, data, static_cast<int>(x[0]),
                                       static_cast<int>(x[1]), static_cast<int>(x[2]),
                                       static_cast<int>(x[3])),
            "cudnnSetTensor4dDescriptor", n) ||
        !ok(cudnnDeriveBNTensorDescriptor(bn_, x_, CUDNN_BATCHNORM_SPATIAL),
            "cudnnDeriveBNTensorDescriptor", n))
      return false;
    channelBytes_ = static_cast<size_t>(x[1]) * sizeof(float);
    return true;
  }

  void run(const KernelArgs &a) override {
    const Node *node = a.node;
    float one = 1, zero = 0;
    if (backward_) {
      // dy, x, weight, running_mean, running_var -> dx, dweight, dbias;
      // statistics recomputed from x (no saved mean / inverse variance).
      check(cudnnBatchNormalizationBackward(ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one,
                                            &zero, x_, a.in(1).data, x_, a.in(0).data, x_,
                                            a.out(0).data, bn_, a.in(2).data, a.out(1).data,
                                            a.out(2).data, eps_, nullptr, nullptr),
            "cudnnBatchNormalizationBackward", node);
      return;
    }
    // x, weight, bias, running_mean, running_var -> y (, new_mean, new_var)
    if (!training_) {
      check(cudnnBatchNormalizationForwardInference(
                ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x_, a.in(0).data, x_,
                a.out(0).data, bn_, a.in(1).data, a.in(2).data, a.in(3).data, a.in(4).data, eps_),
            "cudnnBatchNormalizationForwardInference", node);
      return;
    }
    // cuDNN updates the running statistics in place: start the results from
    // the old values (unless they are the same buffers).
    for (unsigned s = 0; s < 2; ++s)
      if (a.out(1 + s).data != a.in(3 + s).data)
        check(cudaMemcpyAsync(a.out(1 + s).data, a.in(3 + s).data, channelBytes_,
                              cudaMemcpyDeviceToDevice, ctx_.stream),
              "cudaMemcpyAsync (running statistics)", node);
    check(cudnnBatchNormalizationForwardTraining(
              ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x_, a.in(0).data, x_, a.out(0).data,
              bn_, a.in(1).data, a.in(2).data, momentum_, a.out(1).data, a.out(2).data, eps_,
              nullptr, nullptr),
          "cudnnBatchNormalizationForwardTraining", node);
  }

private:
  CudaContext &ctx_;
  bool backward_, training_;
  double eps_, momentum_;
  size_t channelBytes_ = 0;
  cudnnTensorDescriptor_t x_ = nullptr, bn_ = nullptr;
};

} // namespace

std::unique_ptr<kernels::NodeKernel> prepareCudnnKernel(CudaContext &ctx, const Node &n) {
  auto dims = [](const Value *v) { return v->type().dims(); };
  switch (n.kind()) {
  case OpKind::Conv2d:
  case OpKind::Conv2dGradInput:
  case OpKind::Conv2dGradWeight: {
    DType t = n.result()->dtype();
    for (const Value *v : n.operands())
      if (v->dtype() != t)
        return nullptr;
    using Kind = ConvKernel::Kind;
    Kind kind = n.kind() == OpKind::Conv2d            ? Kind::Forward
                : n.kind() == OpKind::Conv2dGradInput ? Kind::BackwardData
                                                      : Kind::BackwardFilter;
    llvm::ArrayRef<int64_t> x, w, y;
    switch (kind) {
    case Kind::Forward: // (x, w[, bias]) -> y
      x = dims(n.operand(0)), w = dims(n.operand(1)), y = dims(n.result());
      break;
    case Kind::BackwardData: // (dy, w) -> dx
      x = dims(n.result()), w = dims(n.operand(1)), y = dims(n.operand(0));
      break;
    case Kind::BackwardFilter: // (dy, x) -> dw
      x = dims(n.operand(1)), w = dims(n.result()), y = dims(n.operand(0));
      break;
    }
    if (x.size() != 4 || w.size() != 4 || y.size() != 4)
      return nullptr;
    auto k = std::make_unique<ConvKernel>(ctx, kind);
    if (!k->init(n, t, x, w, y, kind == Kind::Forward && n.numOperands() > 2))
      return nullptr;
    return k;
  }
  case OpKind::BatchNorm2d:
  case OpKind::BatchNorm2dGrad: {
    bool backward = n.kind() == OpKind::BatchNorm2dGrad;
    const Value *x = n.operand(backward ? 1 : 0);
    DType t = x->dtype();
    if (t != DType::F32 && t != DType::F16)
      return nullptr;
    if (backward && n.operand(0)->dtype() != t)
      return nullptr;
    // Per-channel operands and results in f32.
    for (unsigned i = backward ? 2 : 1; i < n.numOperands(); ++i)
      if (n.operand(i)->dtype() != DType::F32)
        return nullptr;
    for (unsigned r = 1; r < n.numResults(); ++r)
      if (n.result(r)->dtype() != DType::F32)
        return nullptr;
    bool training = attrs::BatchNorm2d(n).training();
    double eps = attrs::BatchNorm2d(n).eps();
    double momentum = backward ? 0 : attrs::BatchNorm2d(n).momentum();
    if (eps < CUDNN_BN_MIN_EPSILON || (backward && !training) ||
        (!backward && training && n.numResults() < 3) || (backward && n.numResults() < 3))
      return nullptr;
    auto k = std::make_unique<BatchNormKernel>(ctx, backward, training, eps, momentum);
    if (!k->init(n, t, x->type().dims()))
      return nullptr;
    return k;
  }
  default:
    return nullptr;
  }
}

} // namespace ampc::cuda
