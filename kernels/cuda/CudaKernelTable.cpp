//===- CudaKernelTable.cpp - OpKind -> CUDA node kernel --------------------===//
//
// Per node, at compile time: the shapes and attributes each launcher of
// kernels/cuda needs, captured once; run() only launches. GEMMs go to
// GemmKernels.cpp (cuBLAS), convolutions and batchnorm to CudnnKernels.cpp
// (cuDNN). An op listed as "host fallback" below returns nullptr and the
// backend runs its reference kernel on host copies (docs/cuda.md lists them).
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/OptimizerAttrs.h"
#include "kernels/common/PoolAttrs.h"
#include "kernels/common/ResampleAttrs.h"
#include "kernels/common/Storage.h"
#include "kernels/cuda/CudaContext.h"

#include "kernels/Pointwise.h"
#include "kernels/common/OptimizerMath.h"
#include "kernels/common/Random.h"

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ampc::cuda {

namespace kc = kernels::cuda;
using kernels::KernelArgs;

namespace {

/// A node kernel from a launcher closure; a failing launch is fatal with
/// the op's name.
class LaunchKernel final : public kernels::NodeKernel {
public:
  using Fn = std::function<cudaError_t(const KernelArgs &, const kc::Launch &)>;
  LaunchKernel(CudaContext &ctx, std::string what, Fn fn)
      : ctx_(ctx), what_(std::move(what)), fn_(std::move(fn)) {}
  void run(const KernelArgs &a) override { check(fn_(a, ctx_.launch()), what_.c_str(), a.node); }

private:
  CudaContext &ctx_;
  std::string what_;
  Fn fn_;
};

std::unique_ptr<kernels::NodeKernel> make(CudaContext &ctx, const Node &n, LaunchKernel::Fn fn) {
  return std::make_unique<LaunchKernel>(ctx, "launch of the " + n.opName().str() + " kernel",
                                        std::move(fn));
}

bool floating(DType t) { return isFloating(t); }

unsigned normalizeDim(int64_t dim, size_t rank) {
  return static_cast<unsigned>(dim < 0 ? dim + static_cast<int64_t>(rank) : dim);
}

kc::AxisShape axisShape(llvm::ArrayRef<int64_t> dims, int64_t dim) {
  unsigned axis = normalizeDim(dim, dims.size());
  kc::AxisShape s;
  for (unsigned d = 0; d < dims.size(); ++d) {
    if (d < axis)
      s.outer *= dims[d];
    else if (d == axis)
      s.size = dims[d];
    else
      s.inner *= dims[d];
  }
  return s;
}

/// Numpy broadcasting strides of `dims` against `outDims`; false when the
/// rank is beyond what the kernels take.
bool broadcastShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                    llvm::ArrayRef<int64_t> out, kc::BroadcastShape &s) {
  if (out.size() > static_cast<size_t>(kc::kMaxRank))
    return false;
  s.rank = static_cast<int>(out.size());
  auto strides = [&](llvm::ArrayRef<int64_t> dims, int64_t *result) {
    size_t offset = out.size() - dims.size();
    int64_t stride = 1;
    for (size_t d = 0; d < out.size(); ++d)
      result[d] = 0;
    for (size_t d = dims.size(); d-- > 0;) {
      result[d + offset] = dims[d] == 1 && out[d + offset] != 1 ? 0 : stride;
      stride *= dims[d];
    }
  };
  for (size_t d = 0; d < out.size(); ++d)
    s.outDims[d] = out[d];
  strides(lhs, s.lhsStrides);
  strides(rhs, s.rhsStrides);
  return true;
}

bool permuteShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<unsigned> perm, kc::PermuteShape &s) {
  if (in.size() > static_cast<size_t>(kc::kMaxRank))
    return false;
  std::vector<int64_t> inStrides(in.size(), 1);
  for (size_t d = in.size(); d-- > 1;)
    inStrides[d - 1] = inStrides[d] * in[d];
  s.rank = static_cast<int>(in.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    s.outDims[d] = in[perm[d]];
    s.inStrides[d] = inStrides[perm[d]];
  }
  return true;
}

bool reduceShape(const Node &n, kc::ReduceShape &s) {
  llvm::ArrayRef<int64_t> dims = n.operand(0)->type().dims();
  if (dims.size() > static_cast<size_t>(kc::kMaxRank))
    return false;
  const std::vector<int64_t> &axes = attrs::Permute(n).dims();
  std::vector<bool> reduced(dims.size(), axes.empty());
  for (int64_t d : axes)
    reduced[normalizeDim(d, dims.size())] = true;
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;)
    strides[d - 1] = strides[d] * dims[d];
  // Neighbouring dimensions on the same side merge into one (the input is
  // dense, so they are contiguous), and size-1 ones drop: same offsets in the
  // same order, with fewer divisions per element on the device.
  int lastSide = -1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1)
      continue;
    int side = reduced[d] ? 1 : 0;
    int &rank = side ? s.reducedRank : s.keptRank;
    int64_t *sideDims = side ? s.reducedDims : s.keptDims;
    int64_t *sideStrides = side ? s.reducedStrides : s.keptStrides;
    if (side == lastSide) {
      sideDims[rank - 1] *= dims[d];
      sideStrides[rank - 1] = strides[d];
    } else {
      sideDims[rank] = dims[d];
      sideStrides[rank++] = strides[d];
    }
    (side ? s.reducedCount : s.outputs) *= dims[d];
    lastSide = side;
  }
  return true;
}

bool poolShape(const Node &n, llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> y,
               kc::PoolShape &s) {
  if (x.size() != 4 || y.size() != 4)
    return false;
  std::array<kernels::PoolAxis, 2> axes = kernels::poolAxesOf(n);
  // The kernels walk windows of adjacent taps: dilated max pooling runs on
  // the host (the reference kernel), never on a wrong window.
  if (axes[0].dilation != 1 || axes[1].dilation != 1)
    return false;
  s.planes = x[0] * x[1];
  s.inH = x[2];
  s.inW = x[3];
  s.outH = y[2];
  s.outW = y[3];
  s.axis[0] = axes[0];
  s.axis[1] = axes[1];
  if (n.kind() == OpKind::AvgPool2d || n.kind() == OpKind::AvgPool2dGrad)
    s.countIncludePad = attrs::AvgPool2d(n).count_include_pad();
  return true;
}

/// The pointwise ops of ir/Pointwise.def, each with its row's functor.
template <class Fn>
std::unique_ptr<kernels::NodeKernel> unaryKernel(CudaContext &ctx, const Node &n) {
  DType t = n.operand(0)->dtype();
  if (!floating(t))
    return nullptr;
  Fn f = kernels::makeElementFn<Fn>(n);
  return make(ctx, n, [f, t](const KernelArgs &a, const kc::Launch &l) {
    return kc::unary(l, f, t, a.in(0).data, a.out().data, a.out().numElements());
  });
}

template <class Fn>
std::unique_ptr<kernels::NodeKernel> gradKernel(CudaContext &ctx, const Node &n) {
  DType t = n.result()->dtype();
  if (!floating(t) || n.operand(0)->dtype() != t || n.operand(1)->dtype() != t)
    return nullptr;
  Fn f = kernels::makeElementFn<Fn>(n);
  return make(ctx, n, [f, t](const KernelArgs &a, const kc::Launch &l) {
    return kc::unaryGrad(l, f, t, a.in(0).data, a.in(1).data, a.out().data, a.out().numElements());
  });
}

template <class Fn>
std::unique_ptr<kernels::NodeKernel> binaryKernel(CudaContext &ctx, const Node &n) {
  DType t = n.result()->dtype();
  kc::BroadcastShape s;
  if (!floating(t) || n.operand(0)->dtype() != t || n.operand(1)->dtype() != t ||
      !broadcastShape(n.operand(0)->type().dims(), n.operand(1)->type().dims(),
                      n.result()->type().dims(), s))
    return nullptr;
  Fn f = kernels::makeElementFn<Fn>(n);
  return make(ctx, n, [f, t, s](const KernelArgs &a, const kc::Launch &l) {
    return kc::binary(l, f, t, a.in(0).data, a.in(1).data, a.out().data, a.out().numElements(), s);
  });
}

std::unique_ptr<kernels::NodeKernel> copyKernel(CudaContext &ctx, const Node &n) {
  return make(ctx, n, [](const KernelArgs &a, const kc::Launch &l) {
    size_t bytes = static_cast<size_t>(a.out().type->sizeInBytes());
    if (bytes == 0 || a.in(0).data == a.out().data)
      return cudaSuccess;
    return cudaMemcpyAsync(a.out().data, a.in(0).data, bytes, cudaMemcpyDeviceToDevice, l.stream);
  });
}

std::unique_ptr<kernels::NodeKernel> permuteKernel(CudaContext &ctx, const Node &n,
                                                   llvm::ArrayRef<unsigned> perm) {
  kc::PermuteShape s;
  if (!permuteShape(n.operand(0)->type().dims(), perm, s))
    return nullptr;
  unsigned size = dtypeSize(n.operand(0)->dtype());
  return make(ctx, n, [s, size](const KernelArgs &a, const kc::Launch &l) {
    return kc::permute(l, size, a.in(0).data, a.out().data, a.out().numElements(), s);
  });
}

/// sgd_update / sgd_momentum_update / adam_update (operand layout:
/// ir/ops/Optimizer.cpp, as the reference reads it).
std::unique_ptr<kernels::NodeKernel> updateKernel(CudaContext &ctx, const Node &n,
                                                  kc::UpdateKind kind) {
  unsigned numState = kind == kc::UpdateKind::Sgd ? 0 : kind == kc::UpdateKind::SgdMomentum ? 1 : 2;
  unsigned lrIndex = kind == kc::UpdateKind::Sgd ? 2 : kind == kc::UpdateKind::SgdMomentum ? 4 : 5;
  kc::UpdateArgs base;
  base.kind = kind;
  base.numState = static_cast<int>(numState);
  base.accumulate = attrs::StepCounter(n).accumulate();
  base.weightDecay = attrs::SgdUpdate(n).weight_decay();
  if (kind == kc::UpdateKind::SgdMomentum) {
    base.momentum = attrs::SgdMomentumUpdate(n).momentum();
    base.dampening = attrs::SgdMomentumUpdate(n).dampening();
    base.nesterov = attrs::SgdMomentumUpdate(n).nesterov();
  }
  if (kind == kc::UpdateKind::Adam) {
    base.beta1 = attrs::AdamUpdate(n).beta1();
    base.beta2 = attrs::AdamUpdate(n).beta2();
    base.eps = attrs::AdamUpdate(n).eps();
    base.decoupledWeightDecay = attrs::AdamUpdate(n).decoupled_weight_decay();
  }
  unsigned numOperands = n.numOperands();
  return make(ctx, n,
              [base, numState, lrIndex, numOperands](const KernelArgs &a, const kc::Launch &l) {
                kc::UpdateArgs u = base;
                u.param = tensorOf(a.in(0));
                u.grad = tensorOf(a.in(1));
                u.paramOut = mutableOf(a.out(0));
                for (unsigned s = 0; s < numState; ++s) {
                  u.state[s] = tensorOf(a.in(2 + s));
                  u.stateOut[s] = mutableOf(a.out(1 + s));
                }
                if (numState > 0)
                  u.stepCount = scalarOf(a.in(lrIndex - 1));
                u.lr = scalarOf(a.in(lrIndex));
                if (numOperands > lrIndex + 1)
                  u.gradScale = scalarOf(a.in(lrIndex + 1));
                if (numOperands > lrIndex + 2)
                  u.skip = scalarOf(a.in(lrIndex + 2));
                if (numOperands > lrIndex + 3) {
                  u.modelParam = tensorOf(a.in(lrIndex + 3));
                  u.modelOut = mutableOf(a.outputs.back());
                }
                return kc::optimizerUpdate(l, u);
              });
}

/// batchnorm2d (x, weight, bias, running_mean, running_var -> y[, new_mean,
/// new_var]) and batchnorm2d_grad (dy, x, weight, running_mean, running_var
/// -> dx, dweight, dbias) on our kernels.
std::unique_ptr<kernels::NodeKernel> batchNormKernel(CudaContext &ctx, const Node &n) {
  bool backward = n.kind() == OpKind::BatchNorm2dGrad;
  const TensorType &x = n.operand(backward ? 1 : 0)->type();
  DType t = x.dtype();
  if (!floating(t) || x.rank() != 4 || (backward && n.operand(0)->dtype() != t) ||
      n.result(0)->dtype() != t || n.numResults() < (backward ? 3u : 1u))
    return nullptr;
  for (const Value *v : n.operands().drop_front(backward ? 2 : 1))
    if (!floating(v->dtype()))
      return nullptr;
  kc::BatchNormShape s;
  s.batch = x.dims()[0];
  s.channels = x.dims()[1];
  s.plane = x.dims()[2] * x.dims()[3];
  s.eps = attrs::BatchNorm2d(n).eps();
  s.momentum = backward ? 0 : attrs::BatchNorm2d(n).momentum();
  s.training = attrs::BatchNorm2d(n).training();
  bool updatesRunning = !backward && s.training && n.numResults() >= 3;
  auto scratch = std::make_shared<DeviceScratch>(kc::batchNormScratchBytes(s.channels), n);
  if (backward)
    return make(ctx, n, [t, s, scratch](const KernelArgs &a, const kc::Launch &l) {
      kc::BatchNormParams p;
      p.weight = tensorOf(a.in(2));
      p.runningMean = tensorOf(a.in(3));
      p.runningVar = tensorOf(a.in(4));
      p.dWeight = mutableOf(a.out(1));
      p.dBias = mutableOf(a.out(2));
      return kc::batchNormGrad(l, t, a.in(0).data, a.in(1).data, p, a.out(0).data, s, scratch->ptr);
    });
  return make(ctx, n, [t, s, scratch, updatesRunning](const KernelArgs &a, const kc::Launch &l) {
    kc::BatchNormParams p;
    p.weight = tensorOf(a.in(1));
    p.bias = tensorOf(a.in(2));
    p.runningMean = tensorOf(a.in(3));
    p.runningVar = tensorOf(a.in(4));
    if (updatesRunning) {
      p.newMean = mutableOf(a.out(1));
      p.newVar = mutableOf(a.out(2));
    }
    return kc::batchNorm(l, t, a.in(0).data, p, a.out(0).data, s, scratch->ptr);
  });
}

} // namespace

std::unique_ptr<kernels::NodeKernel> prepareCudaKernel(CudaContext &ctx, const Node &n) {
  auto inType = [&](unsigned i) -> const TensorType & { return n.operand(i)->type(); };
  auto outType = [&](unsigned i) -> const TensorType & { return n.result(i)->type(); };
  switch (n.kind()) {
    // The pointwise ops.
#define AMPC_POINTWISE_UNARY(Op, Fn)                                                               \
  case OpKind::Op:                                                                                 \
    return unaryKernel<kernels::Fn>(ctx, n);
#define AMPC_POINTWISE_GRAD(Op, GradOp, Fn, Saved)                                                 \
  case OpKind::GradOp:                                                                             \
    return gradKernel<kernels::Fn>(ctx, n);
#define AMPC_POINTWISE_BINARY(Op, Fn)                                                              \
  case OpKind::Op:                                                                                 \
    return binaryKernel<kernels::Fn>(ctx, n);
#include "ir/Pointwise.def"

  // cuBLAS.
  case OpKind::Linear:
  case OpKind::MatMul:
  case OpKind::BatchMatMul:
    return prepareGemmKernel(ctx, n);
  // cuDNN.
  case OpKind::Conv2d:
  case OpKind::Conv2dGradInput:
  case OpKind::Conv2dGradWeight:
    return prepareCudnnKernel(ctx, n);
  // cuDNN where its legacy API takes the dtypes (f32/f16 x, f32
  // statistics), else ours (BatchNorm.cu): bf16, half parameters, eval-mode
  // backward, small eps.
  case OpKind::BatchNorm2d:
  case OpKind::BatchNorm2dGrad:
    if (std::unique_ptr<kernels::NodeKernel> k = prepareCudnnKernel(ctx, n))
      return k;
    return batchNormKernel(ctx, n);

  case OpKind::LayerNorm: {
    DType t = inType(0).dtype();
    int64_t size = inType(1).numElements();
    if (!floating(t) || size == 0)
      return nullptr;
    int64_t rows = inType(0).numElements() / size;
    double eps = attrs::LayerNorm(n).eps();
    return make(ctx, n, [t, rows, size, eps](const KernelArgs &a, const kc::Launch &l) {
      return kc::layerNorm(l, t, a.in(0).data, tensorOf(a.in(1)), tensorOf(a.in(2)), a.out().data,
                           rows, size, eps);
    });
  }
  case OpKind::LayerNormGrad: {
    DType t = inType(1).dtype();
    int64_t size = inType(2).numElements();
    if (!floating(t) || size == 0 || inType(0).dtype() != t)
      return nullptr;
    int64_t rows = inType(1).numElements() / size;
    double eps = attrs::LayerNorm(n).eps();
    auto scratch = std::make_shared<DeviceScratch>(kc::layerNormScratchBytes(rows), n);
    return make(ctx, n, [t, rows, size, eps, scratch](const KernelArgs &a, const kc::Launch &l) {
      return kc::layerNormGrad(l, t, a.in(0).data, a.in(1).data, tensorOf(a.in(2)), a.out(0).data,
                               mutableOf(a.out(1)), mutableOf(a.out(2)), rows, size, eps,
                               scratch->ptr);
    });
  }

  // Activations.
  case OpKind::Softmax:
  case OpKind::LogSoftmax: {
    DType t = inType(0).dtype();
    if (!floating(t))
      return nullptr;
    kc::AxisShape s = axisShape(inType(0).dims(), attrs::Softmax(n).dim());
    bool log = n.kind() == OpKind::LogSoftmax;
    return make(ctx, n, [t, s, log](const KernelArgs &a, const kc::Launch &l) {
      return kc::softmax(l, t, a.in(0).data, a.out().data, s, log);
    });
  }
  case OpKind::Dropout: {
    DType t = inType(0).dtype();
    if (!floating(t))
      return nullptr;
    double p = attrs::Dropout(n).p();
    bool training = attrs::Dropout(n).training();
    int64_t attrSeed = attrs::Dropout(n).seed();
    return make(ctx, n, [t, p, training, attrSeed](const KernelArgs &a, const kc::Launch &l) {
      uint64_t seed = kernels::opSeed(a.runSeed, static_cast<uint64_t>(attrSeed));
      return kc::dropout(l, t, a.in(0).data, a.out().data, a.out().numElements(), p, training,
                         seed);
    });
  }

  // Pooling.
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d: {
    DType t = inType(0).dtype();
    kc::PoolShape s;
    if (!floating(t) || !poolShape(n, inType(0).dims(), outType(0).dims(), s))
      return nullptr;
    bool max = n.kind() == OpKind::MaxPool2d;
    return make(ctx, n, [t, s, max](const KernelArgs &a, const kc::Launch &l) {
      return max ? kc::maxPool2d(l, t, a.in(0).data, a.out().data, s)
                 : kc::avgPool2d(l, t, a.in(0).data, a.out().data, s);
    });
  }
  case OpKind::MaxPool2dGrad: {
    DType t = outType(0).dtype();
    kc::PoolShape s;
    if (!floating(t) || !poolShape(n, outType(0).dims(), inType(0).dims(), s))
      return nullptr;
    return make(ctx, n, [t, s](const KernelArgs &a, const kc::Launch &l) {
      return kc::maxPool2dGrad(l, t, a.in(0).data, a.in(1).data, a.out().data, s);
    });
  }
  case OpKind::AvgPool2dGrad: {
    DType t = outType(0).dtype();
    kc::PoolShape s;
    if (!floating(t) || !poolShape(n, outType(0).dims(), inType(0).dims(), s))
      return nullptr;
    return make(ctx, n, [t, s](const KernelArgs &a, const kc::Launch &l) {
      return kc::avgPool2dGrad(l, t, a.in(0).data, a.out().data, s);
    });
  }
  case OpKind::GlobalAvgPool:
  case OpKind::GlobalAvgPoolGrad: {
    bool grad = n.kind() == OpKind::GlobalAvgPoolGrad;
    const TensorType &x = grad ? outType(0) : inType(0);
    DType t = x.dtype();
    if (!floating(t) || x.dims().size() != 4)
      return nullptr;
    int64_t planes = x.dims()[0] * x.dims()[1], planeSize = x.dims()[2] * x.dims()[3];
    return make(ctx, n, [t, planes, planeSize, grad](const KernelArgs &a, const kc::Launch &l) {
      return grad ? kc::globalAvgPoolGrad(l, t, a.in(0).data, a.out().data, planes, planeSize)
                  : kc::globalAvgPool(l, t, a.in(0).data, a.out().data, planes, planeSize);
    });
  }

  // Padding and resizing (Resample.cu).
  case OpKind::Pad: {
    llvm::ArrayRef<int64_t> in = inType(0).dims(), out = outType(0).dims();
    if (in.size() > static_cast<size_t>(kc::kMaxRank))
      return nullptr;
    attrs::Pad a(n);
    kc::PadShape s;
    s.rank = static_cast<int>(in.size());
    for (size_t d = 0; d < in.size(); ++d) {
      s.inDims[d] = in[d];
      s.outDims[d] = out[d];
      s.begin[d] = a.pads()[d];
    }
    s.kind = kernels::padKindOf(a.mode());
    kernels::storeFromDouble(outType(0).dtype(), &s.constantBits, 0, a.value());
    unsigned size = dtypeSize(outType(0).dtype());
    return make(ctx, n, [s, size](const KernelArgs &a, const kc::Launch &l) {
      return kc::pad(l, size, a.in(0).data, a.out().data, a.out().numElements(), s);
    });
  }
  case OpKind::Resize: {
    DType t = inType(0).dtype();
    llvm::ArrayRef<int64_t> in = inType(0).dims();
    if (!floating(t) || in.size() != 4)
      return nullptr;
    kc::ResizeShape s;
    s.planes = in[0] * in[1];
    std::array<kernels::ResizeAxis, 2> axes = kernels::resizeAxesOf(n, in);
    s.axis[0] = axes[0];
    s.axis[1] = axes[1];
    switch (attrs::Resize(n).mode()) {
    case ResizeMode::Nearest:
      s.interp = kc::ResizeInterp::Nearest;
      break;
    case ResizeMode::Linear:
      s.interp = kc::ResizeInterp::Linear;
      break;
    case ResizeMode::Cubic:
      s.interp = kc::ResizeInterp::Cubic;
      break;
    }
    return make(ctx, n, [t, s](const KernelArgs &a, const kc::Launch &l) {
      return kc::resize(l, t, a.in(0).data, a.out().data, s);
    });
  }

  // Shape and data movement.
  case OpKind::Flatten:
  case OpKind::Reshape:
    return copyKernel(ctx, n);
  case OpKind::Transpose: {
    size_t rank = inType(0).dims().size();
    std::vector<unsigned> perm;
    for (unsigned d = 0; d < rank; ++d)
      perm.push_back(d);
    std::swap(perm[normalizeDim(attrs::Transpose(n).dim0(), rank)],
              perm[normalizeDim(attrs::Transpose(n).dim1(), rank)]);
    return permuteKernel(ctx, n, perm);
  }
  case OpKind::Permute: {
    size_t rank = inType(0).dims().size();
    std::vector<unsigned> perm;
    for (int64_t d : attrs::Permute(n).dims())
      perm.push_back(normalizeDim(d, rank));
    return permuteKernel(ctx, n, perm);
  }
  case OpKind::Cast:
    return make(ctx, n, [](const KernelArgs &a, const kc::Launch &l) {
      return kc::cast(l, tensorOf(a.in(0)), mutableOf(a.out()));
    });

  // Losses.
  case OpKind::MseLoss: {
    DType t = inType(0).dtype();
    if (!floating(t) || inType(1).dtype() != t)
      return nullptr;
    auto scratch =
        std::make_shared<DeviceScratch>(kc::mseLossScratchBytes(t, inType(0).numElements()), n);
    return make(ctx, n, [t, scratch](const KernelArgs &a, const kc::Launch &l) {
      return kc::mseLoss(l, t, a.in(0).data, a.in(1).data, a.out().data, a.in(0).numElements(),
                         scratch->ptr);
    });
  }
  case OpKind::MseLossGrad: {
    DType t = outType(0).dtype();
    if (!floating(t) || inType(0).dtype() != t || inType(1).dtype() != t || inType(2).dtype() != t)
      return nullptr;
    return make(ctx, n, [t](const KernelArgs &a, const kc::Launch &l) {
      return kc::mseLossGrad(l, t, a.in(0).data, a.in(1).data, a.in(2).data, a.out().data,
                             a.out().numElements());
    });
  }
  case OpKind::CrossEntropy:
  case OpKind::CrossEntropyGrad: {
    bool grad = n.kind() == OpKind::CrossEntropyGrad;
    const TensorType &logits = inType(grad ? 1 : 0), &labels = inType(grad ? 2 : 1);
    DType t = logits.dtype();
    if (!floating(t) || logits.dims().size() != 2 || isFloating(labels.dtype()) ||
        labels.dtype() == DType::Bool || (grad && inType(0).dtype() != t))
      return nullptr;
    kc::CrossEntropyShape s;
    s.rows = logits.dims()[0];
    s.classes = logits.dims()[1];
    s.ignoreIndex = attrs::CrossEntropy(n).ignore_index();
    s.labelSmoothing = attrs::CrossEntropy(n).label_smoothing();
    s.labelType = labels.dtype();
    if (!grad)
      return make(ctx, n, [t, s](const KernelArgs &a, const kc::Launch &l) {
        return kc::crossEntropy(l, t, a.in(0).data, a.in(1).data, a.out().data, s);
      });
    auto scratch = std::make_shared<DeviceScratch>(16, n);
    return make(ctx, n, [t, s, scratch](const KernelArgs &a, const kc::Launch &l) {
      return kc::crossEntropyGrad(l, t, a.in(0).data, a.in(1).data, a.in(2).data, a.out().data, s,
                                  scratch->ptr);
    });
  }

  // Reductions and constants.
  case OpKind::ReduceSum:
  case OpKind::ReduceMean: {
    DType t = inType(0).dtype();
    kc::ReduceShape s;
    if (!floating(t) || !reduceShape(n, s))
      return nullptr;
    s.mean = n.kind() == OpKind::ReduceMean;
    auto scratch = std::make_shared<DeviceScratch>(kc::reduceSumScratchBytes(t, s), n);
    return make(ctx, n, [t, s, scratch](const KernelArgs &a, const kc::Launch &l) {
      return kc::reduceSum(l, t, a.in(0).data, a.out().data, s, scratch->ptr);
    });
  }
  case OpKind::Fill: {
    double value = attrs::Fill(n).value();
    return make(ctx, n, [value](const KernelArgs &a, const kc::Launch &l) {
      return kc::fill(l, mutableOf(a.out()), value);
    });
  }

  // Activation backward ops.
  case OpKind::SoftmaxGrad:
  case OpKind::LogSoftmaxGrad: {
    DType t = outType(0).dtype();
    if (!floating(t) || inType(0).dtype() != t || inType(1).dtype() != t)
      return nullptr;
    kc::AxisShape s = axisShape(outType(0).dims(), attrs::Softmax(n).dim());
    bool log = n.kind() == OpKind::LogSoftmaxGrad;
    return make(ctx, n, [t, s, log](const KernelArgs &a, const kc::Launch &l) {
      return kc::softmaxGrad(l, t, a.in(0).data, a.in(1).data, a.out().data, s, log);
    });
  }

  // Optimizer ops.
  case OpKind::LearningRate: {
    using kernels::LrSchedule;
    kernels::LrScheduleParams p;
    p.kind = kernels::lrScheduleOf(attrs::LearningRate(n).schedule());
    p.lr = attrs::LearningRate(n).lr();
    p.warmupSteps = attrs::LearningRate(n).warmup_steps();
    p.stepSize = attrs::LearningRate(n).step_size();
    p.gamma = attrs::LearningRate(n).gamma();
    p.totalSteps = attrs::LearningRate(n).total_steps();
    p.minLr = attrs::LearningRate(n).min_lr();
    int64_t accumulate = attrs::StepCounter(n).accumulate();
    return make(ctx, n, [p, accumulate](const KernelArgs &a, const kc::Launch &l) {
      return kc::learningRate(l, mutableOf(a.out()), p, accumulate);
    });
  }
  case OpKind::TurnSkip: {
    attrs::TurnSkip t(n);
    uint64_t mask = 0;
    for (int64_t turn : t.turns())
      mask |= uint64_t(1) << turn;
    int64_t period = t.period(), accumulate = t.accumulate();
    return make(ctx, n, [period, mask, accumulate](const KernelArgs &a, const kc::Launch &l) {
      return kc::turnSkip(l, mutableOf(a.out()), period, mask, accumulate);
    });
  }
  case OpKind::StepCounter: {
    int64_t accumulate = attrs::StepCounter(n).accumulate();
    return make(ctx, n, [accumulate](const KernelArgs &a, const kc::Launch &l) {
      kc::Scalar skip = a.inputs.size() > 1 ? scalarOf(a.in(1)) : kc::Scalar{};
      return kc::stepCounter(l, scalarOf(a.in(0)), skip, mutableOf(a.out()), accumulate);
    });
  }
  case OpKind::AccumulateGrad: {
    int64_t accumulate = attrs::StepCounter(n).accumulate();
    return make(ctx, n, [accumulate](const KernelArgs &a, const kc::Launch &l) {
      return kc::accumulateGrad(l, tensorOf(a.in(0)), tensorOf(a.in(1)), mutableOf(a.out()),
                                accumulate);
    });
  }
  case OpKind::ClipCoefficient: {
    double maxNorm = attrs::ClipCoefficient(n).max_norm();
    return make(ctx, n, [maxNorm](const KernelArgs &a, const kc::Launch &l) {
      kc::Scalar scale = a.inputs.size() > 1 ? scalarOf(a.in(1)) : kc::Scalar{};
      return kc::clipCoefficient(l, scalarOf(a.in(0)), scale, mutableOf(a.out()), maxNorm);
    });
  }
  case OpKind::SgdUpdate:
    return updateKernel(ctx, n, kc::UpdateKind::Sgd);
  case OpKind::SgdMomentumUpdate:
    return updateKernel(ctx, n, kc::UpdateKind::SgdMomentum);
  case OpKind::AdamUpdate:
    return updateKernel(ctx, n, kc::UpdateKind::Adam);
  case OpKind::LambUpdate:
    return nullptr; // no device kernel yet: the host fallback runs it
  case OpKind::EmaUpdate: {
    attrs::EmaUpdate at(n);
    double decay = at.decay();
    int64_t accumulate = at.accumulate();
    return make(ctx, n, [decay, accumulate](const KernelArgs &a, const kc::Launch &l) {
      kc::Scalar skip = a.inputs.size() > 3 ? scalarOf(a.in(3)) : kc::Scalar{};
      return kc::emaUpdate(l, tensorOf(a.in(0)), tensorOf(a.in(1)), scalarOf(a.in(2)), skip,
                           mutableOf(a.out()), decay, accumulate);
    });
  }

  // Loss scaling.
  case OpKind::UnscaleCheck: {
    int64_t accumulate = attrs::StepCounter(n).accumulate();
    auto scratch = std::make_shared<DeviceScratch>(sizeof(int), n);
    return make(ctx, n, [accumulate, scratch](const KernelArgs &a, const kc::Launch &l) {
      std::vector<kc::Tensor> grads;
      for (size_t g = 1; g < a.inputs.size(); ++g)
        grads.push_back(tensorOf(a.in(g)));
      return kc::unscaleCheck(l, scalarOf(a.in(0)), grads.data(), static_cast<int>(grads.size()),
                              mutableOf(a.out(0)), mutableOf(a.out(1)), mutableOf(a.out(2)),
                              accumulate, scratch->ptr);
    });
  }
  case OpKind::UpdateLossScale: {
    kc::LossScaleParamsArg p;
    p.growthFactor = attrs::UpdateLossScale(n).growth_factor();
    p.backoffFactor = attrs::UpdateLossScale(n).backoff_factor();
    p.growthInterval = attrs::UpdateLossScale(n).growth_interval();
    p.minScale = attrs::UpdateLossScale(n).min_scale();
    p.maxScale = attrs::UpdateLossScale(n).max_scale();
    int64_t accumulate = attrs::StepCounter(n).accumulate();
    return make(ctx, n, [p, accumulate](const KernelArgs &a, const kc::Launch &l) {
      return kc::updateLossScale(l, scalarOf(a.in(0)), scalarOf(a.in(1)), scalarOf(a.in(2)),
                                 mutableOf(a.out(0)), mutableOf(a.out(1)), p, accumulate);
    });
  }

  // Host fallback (docs/cuda.md): rare here, or no CUDA kernel yet.
  case OpKind::ScaledDotProductAttention:
  case OpKind::ScaledDotProductAttentionGrad:
  case OpKind::Concat:
  case OpKind::Embedding:
  case OpKind::EmbeddingGrad:
  case OpKind::Slice:
  case OpKind::BroadcastTo:
  case OpKind::BinaryCrossEntropy:
  case OpKind::BinaryCrossEntropyGradInput:
  case OpKind::BinaryCrossEntropyGradTarget:
  case OpKind::GlobalNorm:
  // Masks and extremum reductions of imported models (issue 39).
  case OpKind::Compare:
  case OpKind::Logical:
  case OpKind::LogicalNot:
  case OpKind::Where:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::ReduceSelectGrad:
  case OpKind::ArgMax:
  case OpKind::AllReduce: // Backend::deviceCollective: NcclKernels.cpp
  case OpKind::Custom:
    return nullptr;
  // Padding and resizing: their backward ops (scatters) on the host.
  case OpKind::PadGrad:
  case OpKind::ResizeGrad:
    return nullptr;
  }
  return nullptr;
}

} // namespace ampc::cuda
