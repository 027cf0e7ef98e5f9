//===- Optimizer.cpp - Reference optimizer kernels -------------------------===//
//
// learning_rate, step_counter, accumulate_grad, global_norm,
// clip_coefficient, sgd_update, sgd_momentum_update, adam_update,
// lamb_update, ema_update. The
// element math is in kernels/common/OptimizerMath.h; the operand layout of
// the update ops is described in ir/ops/Optimizer.cpp. The update math runs
// in the parameter's compute type (double for f64, float otherwise); each
// operand is read in its own storage dtype, since parameters, gradients and
// optimizer state may differ (half parameters with f32 moments).
// Under master weights the parameter operand is the f32 master and the
// model_param operand the half model weight: the new master is also stored,
// rounded, as the new model weight in the same loop.
//
//===----------------------------------------------------------------------===//
#include "kernels/EmaRule.h"
#include "kernels/common/OptimizerAttrs.h"
#include "kernels/common/OptimizerMath.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace ampc::kernels::ref {

namespace {

template <class T> T loadAs(const TensorArg &t, int64_t i) {
  return static_cast<T>(loadAsDouble(t.dtype(), t.data, i));
}

template <class T> void storeAs(const TensorArg &t, int64_t i, T v) {
  storeFromDouble(t.dtype(), t.data, i, static_cast<double>(v));
}

void copyTensor(const TensorArg &from, const TensorArg &to) {
  if (from.data != to.data) // the same buffer when the update runs in place
    std::memcpy(to.data, from.data, from.type->sizeInBytes());
}

/// What every update op reads besides its tensors: whether this micro-step
/// updates, the learning rate and the optional gradient factor.
struct UpdateControl {
  bool apply = false;
  double lr = 0;
  bool hasGradScale = false;
  double gradScale = 1;
  /// Master weights: the half model weight (operand) and its refreshed copy
  /// (the last result); null otherwise.
  const TensorArg *modelParam = nullptr;
  const TensorArg *modelCopy = nullptr;
};

/// `lrIndex`: the position of lr; grad_scale, skip and model_param follow it
/// when present.
UpdateControl readControl(const KernelArgs &a, unsigned lrIndex) {
  UpdateControl c;
  c.apply = endsAccumulation(a.step, attrs::StepCounter(*a.node).accumulate());
  unsigned n = a.inputs.size();
  if (n > lrIndex + 2 && loadAsDouble(a.in(lrIndex + 2).dtype(), a.in(lrIndex + 2).data, 0) != 0)
    c.apply = false;
  c.lr = loadAsDouble(a.in(lrIndex).dtype(), a.in(lrIndex).data, 0);
  if (n > lrIndex + 1) {
    c.hasGradScale = true;
    c.gradScale = loadAsDouble(a.in(lrIndex + 1).dtype(), a.in(lrIndex + 1).data, 0);
  }
  if (n > lrIndex + 3) {
    c.modelParam = &a.in(lrIndex + 3);
    c.modelCopy = &a.out(a.outputs.size() - 1);
  }
  return c;
}

/// Leaves the parameter and its state unchanged: results 0..numState are
/// copies of operands 0 and 2..numState+1 (and the model copy one of
/// model_param), and the runtime is told so (it then keeps the state as it
/// is, and casts of it cached).
void passThrough(const KernelArgs &a, unsigned numState, const UpdateControl &c) {
  copyTensor(a.in(0), a.out(0));
  for (unsigned s = 0; s < numState; ++s)
    copyTensor(a.in(2 + s), a.out(1 + s));
  if (c.modelParam)
    copyTensor(*c.modelParam, *c.modelCopy);
  a.reportStateUnchanged();
}

/// Stores one new parameter element, and its rounding to the model weight's
/// half type under master weights (the epilogue that refreshes the model).
template <class T>
void storeParam(const KernelArgs &a, const UpdateControl &c, int64_t i, T param) {
  storeAs<T>(a.out(0), i, param);
  if (c.modelCopy)
    storeAs<T>(*c.modelCopy, i, param);
}

template <class T> T scaledGrad(const KernelArgs &a, const UpdateControl &c, int64_t i) {
  T g = loadAs<T>(a.in(1), i);
  return c.hasGradScale ? g * static_cast<T>(c.gradScale) : g;
}

/// double for f64 parameters, float for the rest.
template <class F> void withComputeType(DType param, F &&f) {
  if (param == DType::F64)
    f(double(0));
  else
    f(float(0));
}

double readScalar(const TensorArg &t) { return loadAsDouble(t.dtype(), t.data, 0); }

} // namespace

void learningRate(const KernelArgs &a) {
  LrScheduleParams p;
  p.kind = lrScheduleOf(attrs::LearningRate(*a.node).schedule());
  p.lr = attrs::LearningRate(*a.node).lr();
  p.warmupSteps = attrs::LearningRate(*a.node).warmup_steps();
  p.stepSize = attrs::LearningRate(*a.node).step_size();
  p.gamma = attrs::LearningRate(*a.node).gamma();
  p.totalSteps = attrs::LearningRate(*a.node).total_steps();
  p.minLr = attrs::LearningRate(*a.node).min_lr();
  uint64_t optimizerStep = optimizerStepOf(a.step, attrs::StepCounter(*a.node).accumulate());
  storeFromDouble(a.out().dtype(), a.out().data, 0, scheduledLearningRate(p, optimizerStep));
}

void turnSkip(const KernelArgs &a) {
  attrs::TurnSkip t(*a.node);
  uint64_t mask = 0;
  for (int64_t turn : t.turns())
    mask |= uint64_t(1) << turn;
  bool off = offTurn(optimizerStepOf(a.step, t.accumulate()), t.period(), mask);
  storeFromDouble(a.out().dtype(), a.out().data, 0, off ? 1.0 : 0.0);
}

void stepCounter(const KernelArgs &a) {
  bool apply = endsAccumulation(a.step, attrs::StepCounter(*a.node).accumulate());
  if (a.inputs.size() > 1 && readScalar(a.in(1)) != 0)
    apply = false;
  storeFromDouble(a.out().dtype(), a.out().data, 0, readScalar(a.in(0)) + (apply ? 1 : 0));
  if (!apply)
    a.reportStateUnchanged();
}

void accumulateGrad(const KernelArgs &a) {
  int64_t k = attrs::StepCounter(*a.node).accumulate();
  uint64_t index = a.step % static_cast<uint64_t>(k);
  withComputeType(a.in(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0, n = a.out().numElements(); i < n; ++i)
      storeAs<T>(a.out(), i,
                 accumulateGradient<T>(loadAs<T>(a.in(0), i), loadAs<T>(a.in(1), i), index, k));
  });
}

void emaUpdate(const KernelArgs &a) {
  if (!emaApplies(a)) {
    copyTensor(a.in(0), a.out());
    a.reportStateUnchanged();
    return;
  }
  withComputeType(a.in(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    EmaScalars<T> s = emaScalars<T>(attrs::EmaUpdate(*a.node).decay(), readScalar(a.in(2)));
    for (int64_t i = 0, n = a.out().numElements(); i < n; ++i)
      storeAs<T>(a.out(), i, emaAverage<T>(loadAs<T>(a.in(0), i), loadAs<T>(a.in(1), i), s));
  });
}

void globalNorm(const KernelArgs &a) {
  // Summed in double: at least as accurate as PyTorch's norm of per-tensor
  // norms, and independent of the operand order.
  double sumSquares = 0;
  for (const TensorArg &g : a.inputs)
    for (int64_t i = 0, n = g.numElements(); i < n; ++i) {
      double v = loadAsDouble(g.dtype(), g.data, i);
      sumSquares += v * v;
    }
  storeFromDouble(a.out().dtype(), a.out().data, 0, std::sqrt(sumSquares));
}

void clipCoefficient(const KernelArgs &a) {
  float scale = a.inputs.size() > 1 ? static_cast<float>(readScalar(a.in(1))) : 1.0f;
  float norm = static_cast<float>(readScalar(a.in(0)));
  float coef = kernels::clipCoefficient(norm * scale, attrs::ClipCoefficient(*a.node).max_norm());
  storeFromDouble(a.out().dtype(), a.out().data, 0, coef * scale);
}

void sgdUpdate(const KernelArgs &a) {
  UpdateControl c = readControl(a, /*lrIndex=*/2);
  if (!c.apply)
    return passThrough(a, 0, c);
  withComputeType(a.in(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    SgdScalars<T> s =
        makeSgdScalars<T>(c.lr, attrs::SgdUpdate(*a.node).weight_decay(), 0, 0, false);
    for (int64_t i = 0, n = a.out().numElements(); i < n; ++i)
      storeParam<T>(a, c, i, sgdStep<T>(loadAs<T>(a.in(0), i), scaledGrad<T>(a, c, i), s));
  });
}

void sgdMomentumUpdate(const KernelArgs &a) {
  UpdateControl c = readControl(a, /*lrIndex=*/4);
  if (!c.apply)
    return passThrough(a, 1, c);
  // PyTorch creates the buffer (as a copy of d_p) on the first step taken.
  bool firstStep = readScalar(a.in(3)) <= 1;
  withComputeType(a.in(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    SgdScalars<T> s = makeSgdScalars<T>(c.lr, attrs::SgdUpdate(*a.node).weight_decay(),
                                        attrs::SgdMomentumUpdate(*a.node).momentum(),
                                        attrs::SgdMomentumUpdate(*a.node).dampening(),
                                        attrs::SgdMomentumUpdate(*a.node).nesterov());
    for (int64_t i = 0, n = a.out().numElements(); i < n; ++i) {
      T buf = loadAs<T>(a.in(2), i);
      T param =
          sgdMomentumStep<T>(loadAs<T>(a.in(0), i), scaledGrad<T>(a, c, i), buf, firstStep, s);
      storeParam<T>(a, c, i, param);
      storeAs<T>(a.out(1), i, buf);
    }
  });
}

void adamUpdate(const KernelArgs &a) {
  UpdateControl c = readControl(a, /*lrIndex=*/5);
  if (!c.apply)
    return passThrough(a, 2, c);
  double stepCount = readScalar(a.in(4));
  withComputeType(a.in(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    AdamScalars<T> s = makeAdamScalars<T>(
        c.lr, attrs::AdamUpdate(*a.node).beta1(), attrs::AdamUpdate(*a.node).beta2(),
        attrs::AdamUpdate(*a.node).eps(), attrs::AdamUpdate(*a.node).weight_decay(),
        attrs::AdamUpdate(*a.node).decoupled_weight_decay(), stepCount);
    for (int64_t i = 0, n = a.out().numElements(); i < n; ++i) {
      T expAvg = loadAs<T>(a.in(2), i), expAvgSq = loadAs<T>(a.in(3), i);
      T param = adamStep<T>(loadAs<T>(a.in(0), i), scaledGrad<T>(a, c, i), expAvg, expAvgSq, s);
      storeParam<T>(a, c, i, param);
      storeAs<T>(a.out(1), i, expAvg);
      storeAs<T>(a.out(2), i, expAvgSq);
    }
  });
}

void lambUpdate(const KernelArgs &a) {
  UpdateControl c = readControl(a, /*lrIndex=*/6);
  if (!c.apply)
    return passThrough(a, 2, c);
  attrs::LambUpdate at(*a.node);
  double stepCount = readScalar(a.in(4)), gradNorm = readScalar(a.in(5));
  withComputeType(a.in(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    LambScalars<T> s = makeLambScalars<T>(
        at.beta1(), at.beta2(), at.eps(), at.weight_decay(), at.decoupled_weight_decay(),
        at.grad_averaging(), at.bias_correction(), at.max_grad_norm(), gradNorm, stepCount);
    // Stage 1: the moments and the update direction, with both norms
    // summed block by block (kLambNormBlock).
    int64_t n = a.out().numElements();
    std::vector<T> update(static_cast<size_t>(n));
    double paramSq = 0, updateSq = 0;
    for (int64_t begin = 0; begin < n; begin += kLambNormBlock) {
      double blockParamSq = 0, blockUpdateSq = 0;
      for (int64_t i = begin, end = std::min(n, begin + kLambNormBlock); i < end; ++i) {
        T param = loadAs<T>(a.in(0), i);
        T expAvg = loadAs<T>(a.in(2), i), expAvgSq = loadAs<T>(a.in(3), i);
        update[i] = lambDirection<T>(param, scaledGrad<T>(a, c, i), expAvg, expAvgSq, s);
        storeAs<T>(a.out(1), i, expAvg);
        storeAs<T>(a.out(2), i, expAvgSq);
        blockParamSq += double(param) * double(param);
        blockUpdateSq += double(update[i]) * double(update[i]);
      }
      paramSq += blockParamSq;
      updateSq += blockUpdateSq;
    }
    // Stage 2: the trust ratio scales the whole tensor's step.
    T step = static_cast<T>(lambStepSize(c.lr, std::sqrt(paramSq), std::sqrt(updateSq),
                                         at.weight_decay(), at.use_nvlamb()));
    for (int64_t i = 0; i < n; ++i)
      storeParam<T>(a, c, i, loadAs<T>(a.in(0), i) - step * update[i]);
  });
}

} // namespace ampc::kernels::ref
