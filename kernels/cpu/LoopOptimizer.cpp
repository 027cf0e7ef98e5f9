//===- LoopOptimizer.cpp - Optimizer and loss-scale loop kernels of the cpu backend ===//
//
// sgd_update, sgd_momentum_update, adam_update and lamb_update (f32 or bf16 parameters
// and gradients, f32 optimizer state, with or without the master-weights
// epilogue that also writes the new master rounded to the half model
// weight), accumulate_grad, ema_update, and unscale_check (the fused unscale + non-finite
// check of all gradients). The operand layout and the skip / accumulation
// rules are the reference's (kernels/reference/Optimizer.cpp and
// LossScale.cpp, ir/ops/Optimizer.cpp): a step that does not apply copies
// the state through and reports it unchanged, exactly where the reference
// does. The element math is kernels/common/OptimizerMath.h and
// LossScaleMath.h, so every result is the reference's bits (the unscale
// check's flag is an OR, in any order).
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/EmaRule.h"
#include "kernels/common/LossScaleMath.h"
#include "kernels/common/OptimizerMath.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

double readScalar(const TensorArg &t) { return loadAsDouble(t.dtype(), t.data, 0); }

void copyTensor(const TensorArg &from, const TensorArg &to) {
  copyInParallel(from.data, to.data, from.type->sizeInBytes());
}

/// What every update op reads besides its tensors (the reference's
/// readControl): whether this micro-step updates, the learning rate and the
/// gradient factor.
struct UpdateControl {
  bool apply = false;
  double lr = 0;
  /// The factor on every gradient element: grad_scale, or 1 without one (x *
  /// 1 is x, so that is the reference's unscaled gradient).
  float gradScale = 1;
  /// Master weights: the half model weight (operand) and its refreshed copy
  /// (the last result); null otherwise.
  const TensorArg *modelParam = nullptr;
  const TensorArg *modelCopy = nullptr;
};

UpdateControl readControl(const KernelArgs &a, unsigned lrIndex) {
  UpdateControl c;
  c.apply = endsAccumulation(a.step, attrs::StepCounter(*a.node).accumulate());
  unsigned n = a.inputs.size();
  if (n > lrIndex + 2 && readScalar(a.in(lrIndex + 2)) != 0)
    c.apply = false;
  c.lr = readScalar(a.in(lrIndex));
  if (n > lrIndex + 1)
    c.gradScale = static_cast<float>(readScalar(a.in(lrIndex + 1)));
  if (n > lrIndex + 3) {
    c.modelParam = &a.in(lrIndex + 3);
    c.modelCopy = &a.out(a.outputs.size() - 1);
  }
  return c;
}

/// The step does not apply: results 0..numState are copies of operands 0 and
/// 2..numState+1 (and the model copy one of model_param), and the runtime is
/// told so.
void passThrough(const KernelArgs &a, unsigned numState, const UpdateControl &c) {
  copyTensor(a.in(0), a.out(0));
  for (unsigned s = 0; s < numState; ++s)
    copyTensor(a.in(2 + s), a.out(1 + s));
  if (c.modelParam)
    copyTensor(*c.modelParam, *c.modelCopy);
  a.reportStateUnchanged();
}

/// One element's new parameter and optimizer state.
template <int NumState> struct ParamAndState {
  float param;
  float state[NumState];
};

// The element steps of OptimizerMath.h update the state through references.
// Called through these helpers, those references are to the helpers' own
// locals, which become registers once inlined; a local declared in the
// `omp simd` loop itself with its address taken would become a per-lane
// array in memory, which keeps the loop from vectorizing.

AMPC_LOOP_BODY inline ParamAndState<1> momentumElement(float param, float grad, float buffer,
                                                       bool firstStep, const SgdScalars<float> &s) {
  float p = sgdMomentumStep<float>(param, grad, buffer, firstStep, s);
  return {p, {buffer}};
}

AMPC_LOOP_BODY inline ParamAndState<2> adamElement(float param, float grad, float expAvg,
                                                   float expAvgSq, const AdamScalars<float> &s) {
  float p = adamStep<float>(param, grad, expAvg, expAvgSq, s);
  return {p, {expAvg, expAvgSq}};
}

/// An update reads and writes four to seven tensors per element, so fewer
/// elements are worth a thread than for a plain map.
constexpr int64_t kUpdateGrain = kElementwiseGrain / 2;

// The update kernels, by parameter dtype P, gradient dtype G and, with the
// master-weights epilogue (HasModel), the model weight's dtype M.

template <DType P, DType G, DType M, bool HasModel>
void sgdLoop(const KernelArgs &a, const LoopPlan &) {
  UpdateControl c = readControl(a, /*lrIndex=*/2);
  if (!c.apply)
    return passThrough(a, 0, c);
  SgdScalars<float> s =
      makeSgdScalars<float>(c.lr, attrs::SgdUpdate(*a.node).weight_decay(), 0, 0, false);
  const void *param = a.in(0).data, *grad = a.in(1).data;
  void *newParam = a.out(0).data, *model = HasModel ? c.modelCopy->data : nullptr;
  float gradScale = c.gradScale;
  parallelForElements(
      a.out(0).numElements(), kUpdateGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
          float p = sgdStep<float>(load<P>(param, i), load<G>(grad, i) * gradScale, s);
          store<P>(newParam, i, p);
          if constexpr (HasModel)
            store<M>(model, i, p);
        }
      });
}

template <DType P, DType G, DType M, bool HasModel>
void sgdMomentumLoop(const KernelArgs &a, const LoopPlan &) {
  UpdateControl c = readControl(a, /*lrIndex=*/4);
  if (!c.apply)
    return passThrough(a, 1, c);
  // PyTorch creates the buffer (as a copy of d_p) on the first step taken.
  bool firstStep = readScalar(a.in(3)) <= 1;
  SgdScalars<float> s = makeSgdScalars<float>(
      c.lr, attrs::SgdUpdate(*a.node).weight_decay(), attrs::SgdMomentumUpdate(*a.node).momentum(),
      attrs::SgdMomentumUpdate(*a.node).dampening(), attrs::SgdMomentumUpdate(*a.node).nesterov());
  const void *param = a.in(0).data, *grad = a.in(1).data;
  const float *buffer = a.in(2).as<float>();
  void *newParam = a.out(0).data, *model = HasModel ? c.modelCopy->data : nullptr;
  float *newBuffer = a.out(1).as<float>();
  float gradScale = c.gradScale;
  parallelForElements(
      a.out(0).numElements(), kUpdateGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
          ParamAndState<1> r = momentumElement(load<P>(param, i), load<G>(grad, i) * gradScale,
                                               buffer[i], firstStep, s);
          store<P>(newParam, i, r.param);
          if constexpr (HasModel)
            store<M>(model, i, r.param);
          newBuffer[i] = r.state[0];
        }
      });
}

template <DType P, DType G, DType M, bool HasModel>
void adamLoop(const KernelArgs &a, const LoopPlan &) {
  UpdateControl c = readControl(a, /*lrIndex=*/5);
  if (!c.apply)
    return passThrough(a, 2, c);
  AdamScalars<float> s = makeAdamScalars<float>(
      c.lr, attrs::AdamUpdate(*a.node).beta1(), attrs::AdamUpdate(*a.node).beta2(),
      attrs::AdamUpdate(*a.node).eps(), attrs::AdamUpdate(*a.node).weight_decay(),
      attrs::AdamUpdate(*a.node).decoupled_weight_decay(), readScalar(a.in(4)));
  const void *param = a.in(0).data, *grad = a.in(1).data;
  const float *expAvg = a.in(2).as<float>(), *expAvgSq = a.in(3).as<float>();
  void *newParam = a.out(0).data, *model = HasModel ? c.modelCopy->data : nullptr;
  float *newExpAvg = a.out(1).as<float>(), *newExpAvgSq = a.out(2).as<float>();
  float gradScale = c.gradScale;
  parallelForElements(
      a.out(0).numElements(), kUpdateGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
          ParamAndState<2> r = adamElement(load<P>(param, i), load<G>(grad, i) * gradScale,
                                           expAvg[i], expAvgSq[i], s);
          store<P>(newParam, i, r.param);
          if constexpr (HasModel)
            store<M>(model, i, r.param);
          newExpAvg[i] = r.state[0];
          newExpAvgSq[i] = r.state[1];
        }
      });
}

template <DType P, DType G, DType M, bool HasModel>
void lambLoop(const KernelArgs &a, const LoopPlan &) {
  UpdateControl c = readControl(a, /*lrIndex=*/6);
  if (!c.apply)
    return passThrough(a, 2, c);
  attrs::LambUpdate at(*a.node);
  LambScalars<float> s =
      makeLambScalars<float>(at.beta1(), at.beta2(), at.eps(), at.weight_decay(),
                             at.decoupled_weight_decay(), at.grad_averaging(), at.bias_correction(),
                             at.max_grad_norm(), readScalar(a.in(5)), readScalar(a.in(4)));
  const void *param = a.in(0).data, *grad = a.in(1).data;
  const float *expAvg = a.in(2).as<float>(), *expAvgSq = a.in(3).as<float>();
  void *newParam = a.out(0).data, *model = HasModel ? c.modelCopy->data : nullptr;
  float *newExpAvg = a.out(1).as<float>(), *newExpAvgSq = a.out(2).as<float>();
  float gradScale = c.gradScale;
  // Stage 1, a block of kLambNormBlock elements per task: the moments, the
  // update direction and each block's sums of squares, added in block
  // order afterwards (the reference's order).
  int64_t n = a.out(0).numElements(), blocks = (n + kLambNormBlock - 1) / kLambNormBlock;
  // The directions wait for the norms; the buffers are the calling
  // thread's, kept between steps (a fresh one per step would fault in its
  // pages every time).
  thread_local std::vector<float> update;
  thread_local std::vector<double> paramSq, updateSq;
  update.resize(static_cast<size_t>(n));
  paramSq.resize(static_cast<size_t>(blocks));
  updateSq.resize(static_cast<size_t>(blocks));
  float *u = update.data();
  double *ps = paramSq.data(), *us = updateSq.data();
  parallelFor(blocks, 1, [=](int64_t firstBlock, int64_t lastBlock) {
    for (int64_t b = firstBlock; b < lastBlock; ++b) {
      double blockParamSq = 0, blockUpdateSq = 0;
      for (int64_t i = b * kLambNormBlock, end = std::min(n, i + kLambNormBlock); i < end; ++i) {
        float p = load<P>(param, i), m = expAvg[i], v = expAvgSq[i];
        u[i] = lambDirection<float>(p, load<G>(grad, i) * gradScale, m, v, s);
        newExpAvg[i] = m;
        newExpAvgSq[i] = v;
        blockParamSq += double(p) * double(p);
        blockUpdateSq += double(u[i]) * double(u[i]);
      }
      ps[b] = blockParamSq;
      us[b] = blockUpdateSq;
    }
  });
  double paramNorm = 0, updateNorm = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    paramNorm += ps[b];
    updateNorm += us[b];
  }
  // Stage 2: the trust ratio scales the tensor's step.
  float step = static_cast<float>(lambStepSize(c.lr, std::sqrt(paramNorm), std::sqrt(updateNorm),
                                               at.weight_decay(), at.use_nvlamb()));
  parallelForElements(n, kUpdateGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      float p = load<P>(param, i) - step * u[i];
      store<P>(newParam, i, p);
      if constexpr (HasModel)
        store<M>(model, i, p);
    }
  });
}

/// The update kernels of one op as a class, so one dispatcher picks the
/// instance for any of them.
#define AMPC_UPDATE_KERNELS(Name, fn)                                                              \
  struct Name {                                                                                    \
    template <DType P, DType G, DType M, bool HasModel> static LoopFn get() {                      \
      return &fn<P, G, M, HasModel>;                                                               \
    }                                                                                              \
  };
AMPC_UPDATE_KERNELS(SgdKernels, sgdLoop)
AMPC_UPDATE_KERNELS(SgdMomentumKernels, sgdMomentumLoop)
AMPC_UPDATE_KERNELS(AdamKernels, adamLoop)
AMPC_UPDATE_KERNELS(LambKernels, lambLoop)
#undef AMPC_UPDATE_KERNELS

/// Calls f(DTypeTag<D>{}) for f32 and bf16: the parameter and gradient
/// dtypes the update loops take (f16 ones stay with the reference; under
/// f16 master weights the parameter is the f32 master).
template <class F> std::unique_ptr<NodeKernel> dispatchF32OrBf16(DType t, F &&f) {
  if (t == DType::F32)
    return f(DTypeTag<DType::F32>{});
  if (t == DType::BF16)
    return f(DTypeTag<DType::BF16>{});
  return nullptr;
}

/// The kernel of an update op with `numState` f32 state tensors after the
/// gradient and the learning rate at `lrIndex`, or null for dtypes the loops
/// do not take.
template <class Kernels>
std::unique_ptr<NodeKernel> prepareUpdate(const Node &n, unsigned lrIndex, unsigned numState) {
  for (unsigned s = 0; s < numState; ++s)
    if (n.operand(2 + s)->dtype() != DType::F32)
      return nullptr;
  bool hasModel = n.numOperands() > lrIndex + 3;
  DType model = hasModel ? n.operand(lrIndex + 3)->dtype() : DType::F32;
  return dispatchF32OrBf16(n.operand(0)->dtype(), [&](auto paramTag) {
    return dispatchF32OrBf16(n.operand(1)->dtype(), [&](auto gradTag) {
      constexpr DType P = decltype(paramTag)::value, G = decltype(gradTag)::value;
      if (!hasModel)
        return makeLoopKernel(Kernels::template get<P, G, DType::F32, false>());
      if (model == DType::BF16)
        return makeLoopKernel(Kernels::template get<P, G, DType::BF16, true>());
      if (model == DType::F16)
        return makeLoopKernel(Kernels::template get<P, G, DType::F16, true>());
      return std::unique_ptr<NodeKernel>();
    });
  });
}

//===----------------------------------------------------------------------===//
// accumulate_grad
//===----------------------------------------------------------------------===//

template <DType A, DType G> void accumulateGradLoop(const KernelArgs &a, const LoopPlan &) {
  int64_t k = attrs::StepCounter(*a.node).accumulate();
  uint64_t index = a.step % static_cast<uint64_t>(k);
  const void *acc = a.in(0).data, *grad = a.in(1).data;
  void *out = a.out().data;
  parallelForElements(
      a.out().numElements(), kElementwiseGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i)
          store<A>(out, i, accumulateGradient<float>(load<A>(acc, i), load<G>(grad, i), index, k));
      });
}

//===----------------------------------------------------------------------===//
// ema_update
//===----------------------------------------------------------------------===//

/// The f32 average of a parameter stored as P (the f32 master under master
/// weights, else the parameter itself).
template <DType P> void emaLoop(const KernelArgs &a, const LoopPlan &) {
  if (!emaApplies(a)) {
    copyTensor(a.in(0), a.out());
    a.reportStateUnchanged();
    return;
  }
  EmaScalars<float> s = emaScalars<float>(attrs::EmaUpdate(*a.node).decay(), readScalar(a.in(2)));
  const float *average = a.in(0).as<float>();
  const void *param = a.in(1).data;
  float *out = a.out().as<float>();
  parallelForElements(a.out().numElements(), kElementwiseGrain,
                      [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
                        for (int64_t i = begin; i < end; ++i)
                          out[i] = emaAverage<float>(average[i], load<P>(param, i), s);
                      });
}

//===----------------------------------------------------------------------===//
// unscale_check
//===----------------------------------------------------------------------===//

/// Whether any element of grad[begin, end), unscaled in f32, is inf or NaN.
using CheckFn = bool (*)(const void *grad, int64_t begin, int64_t end, float invScale);

template <DType G> bool checkRange(const void *grad, int64_t begin, int64_t end, float invScale) {
  unsigned nonFinite = 0;
  unsigned *result = &nonFinite;
  runVectorized(
      [=](int64_t first, int64_t last) AMPC_LOOP_BODY {
        unsigned found = 0;
#pragma omp simd reduction(| : found)
        for (int64_t i = first; i < last; ++i)
          found |= isNonFinite(unscaleGradient<float>(load<G>(grad, i), invScale)) ? 1u : 0u;
        *result |= found;
      },
      begin, end);
  return nonFinite != 0;
}

/// All gradients in one parallel loop over pieces of a fixed size, so many
/// small gradients (a convnet's biases) share the threads.
class UnscaleCheckKernel final : public LoopKernel {
public:
  struct Piece {
    unsigned gradient; ///< operand index
    int64_t begin, end;
  };

  UnscaleCheckKernel(llvm::SmallVector<CheckFn, 8> fns, const Node &n) : fns_(std::move(fns)) {
    constexpr int64_t kPiece = 1 << 16;
    for (unsigned g = 1; g < n.numOperands(); ++g) {
      int64_t size = n.operand(g)->type().numElements();
      totalElements_ += size;
      for (int64_t begin = 0; begin < size; begin += kPiece)
        pieces_.push_back({g, begin, std::min(size, begin + kPiece)});
    }
  }

  void run(const KernelArgs &a) override {
    // As the reference: checked only on the last micro-step of a group (the
    // gradients the optimizer applies).
    bool checks = endsAccumulation(a.step, attrs::StepCounter(*a.node).accumulate());
    float scale = static_cast<float>(readScalar(a.in(0)));
    float invScale = inverseLossScale(scale);
    int64_t numPieces = checks ? static_cast<int64_t>(pieces_.size()) : 0;
    bool foundInf = false;
    auto runPiece = [&](int64_t p) {
      const Piece &piece = pieces_[p];
      return fns_[piece.gradient - 1](a.in(piece.gradient).data, piece.begin, piece.end, invScale);
    };
    if (totalElements_ < 2 * kElementwiseGrain) {
      for (int64_t p = 0; p < numPieces; ++p)
        foundInf |= runPiece(p);
    } else {
#pragma omp parallel for schedule(dynamic, 1) reduction(|| : foundInf)
      for (int64_t p = 0; p < numPieces; ++p)
        foundInf = runPiece(p) || foundInf;
    }
    storeFromDouble(a.out(0).dtype(), a.out(0).data, 0, foundInf ? 1.0 : 0.0);
    storeFromDouble(a.out(1).dtype(), a.out(1).data, 0, scale);
    storeFromDouble(a.out(2).dtype(), a.out(2).data, 0, invScale);
  }

private:
  llvm::SmallVector<CheckFn, 8> fns_;
  std::vector<Piece> pieces_;
  int64_t totalElements_ = 0;
};

} // namespace

std::unique_ptr<NodeKernel> prepareLoopSgdUpdate(const Node &n) {
  return prepareUpdate<SgdKernels>(n, /*lrIndex=*/2, /*numState=*/0);
}

std::unique_ptr<NodeKernel> prepareLoopSgdMomentumUpdate(const Node &n) {
  return prepareUpdate<SgdMomentumKernels>(n, /*lrIndex=*/4, /*numState=*/1);
}

std::unique_ptr<NodeKernel> prepareLoopAdamUpdate(const Node &n) {
  return prepareUpdate<AdamKernels>(n, /*lrIndex=*/5, /*numState=*/2);
}

std::unique_ptr<NodeKernel> prepareLoopLambUpdate(const Node &n) {
  return prepareUpdate<LambKernels>(n, /*lrIndex=*/6, /*numState=*/2);
}

std::unique_ptr<NodeKernel> prepareLoopAccumulateGrad(const Node &n) {
  // The accumulator's dtype is the result's.
  if (n.result()->dtype() != n.operand(0)->dtype())
    return nullptr;
  return dispatchF32OrBf16(n.operand(0)->dtype(), [&](auto accTag) {
    return dispatchLoopFloat(
        n.operand(1)->dtype(), std::unique_ptr<NodeKernel>(), [&](auto gradTag) {
          return makeLoopKernel(
              &accumulateGradLoop<decltype(accTag)::value, decltype(gradTag)::value>);
        });
  });
}

std::unique_ptr<NodeKernel> prepareLoopEmaUpdate(const Node &n) {
  // An f32 average (f64 parameters average in f64: the reference runs them).
  if (n.operand(0)->dtype() != DType::F32 || n.result()->dtype() != DType::F32)
    return nullptr;
  return dispatchLoopFloat(n.operand(1)->dtype(), std::unique_ptr<NodeKernel>(), [&](auto tag) {
    return makeLoopKernel(&emaLoop<decltype(tag)::value>);
  });
}

std::unique_ptr<NodeKernel> prepareLoopUnscaleCheck(const Node &n) {
  llvm::SmallVector<CheckFn, 8> fns;
  for (unsigned g = 1; g < n.numOperands(); ++g) {
    CheckFn fn = dispatchLoopFloat(n.operand(g)->dtype(), CheckFn(), [&](auto gradTag) {
      return &checkRange<decltype(gradTag)::value>;
    });
    if (!fn)
      return nullptr;
    fns.push_back(fn);
  }
  return std::make_unique<UnscaleCheckKernel>(std::move(fns), n);
}

} // namespace ampc::kernels::cpu
