//===- Optimizer.cpp - Optimizer ops: updates, schedules, clipping ---------===//
//
// The ops the optimizer pass (passes/Optimizer.cpp) emits to turn a graph
// with gradients into a training step. None is differentiated.
//
// Every parameter update op has one operand layout:
//
//   (param, grad, <state tensors...>, [step_count], lr, grad_scale?, skip?,
//    model_param?)
//     -> (new param, <new state tensors...>, [new model_param])
//
// - state tensors have the parameter's shape (momentum buffer, Adam moments);
// - step_count (f32[]) is the optimizer's step count *after* this step's
//   increment (step_counter's result), as PyTorch's state['step'] is when the
//   update reads it;
// - lr (f32[]) is learning_rate's result;
// - grad_scale (f32[], optional) multiplies the gradient before anything
//   else: the clip coefficient, later times 1/loss_scale;
// - skip (rank 0, optional; nonzero = skip) leaves everything unchanged, for
//   non-finite gradients under loss scaling. skip needs grad_scale before it
//   (pass 1.0 when there is nothing to scale);
// - model_param (optional; needs grad_scale and skip before it, 0 when
//   nothing skips) is the half model weight of a parameter trained through
//   an f32 master copy (O2's master weights, passes/MasterWeights.cpp): then
//   `param` is the master, and the op also returns the new master rounded to
//   model_param's dtype -- the model weight refreshed in the same pass over
//   the elements, not in a separate one. A step that does not apply returns
//   model_param itself.
//
// With gradient accumulation (attr `accumulate` = k > 1) an update applies
// only on the last micro-step of each group of k (KernelArgs::step % k ==
// k - 1); on the others every result is a copy of its state operand.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

namespace {

bool requireScalar(InferContext &ctx, unsigned i) { return requireRank(ctx, i, 0); }

bool requireFloatScalar(InferContext &ctx, unsigned i) {
  return requireFloat(ctx, i) && requireScalar(ctx, i);
}

bool requireAccumulate(InferContext &ctx) {
  if (ctx.getInt("accumulate") >= 1)
    return true;
  return ctx.error("accumulate must be >= 1, got " + llvm::Twine(ctx.getInt("accumulate")));
}

bool requireNonNegative(InferContext &ctx, llvm::StringRef attr) {
  double v = ctx.getFloat(attr);
  if (v >= 0)
    return true;
  return ctx.error(attr + " must be >= 0, got " + formatDouble(v));
}

bool isScalarOperand(llvm::StringRef name) {
  return name == "step_count" || name == "lr" || name == "grad_scale" || name == "skip" ||
         name == "grad_norm";
}

/// The shared layout of the update ops (see the file comment), read from the
/// operand names of the row: results are the parameter's type, then one per
/// state tensor, then model_param's type when it is there.
bool inferUpdateLayout(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireAccumulate(ctx) || !requireFloat(ctx, 0) || !requireFloat(ctx, 1) ||
      !requireSameShape(ctx, 0, 1))
    return false;
  results.push_back(ctx.operand(0));
  for (unsigned i = 2; i < ctx.numOperands(); ++i) {
    llvm::StringRef name = ctx.op().operandSpec(i)->name;
    if (name == "skip") {
      if (!requireScalar(ctx, i))
        return false;
      continue;
    }
    if (!requireFloat(ctx, i))
      return false;
    if (isScalarOperand(name)) {
      if (!requireScalar(ctx, i))
        return false;
      continue;
    }
    if (!requireSameShape(ctx, i, 0))
      return false;
    results.push_back(ctx.operand(i));
  }
  return true;
}

bool inferSgdUpdate(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  return requireNonNegative(ctx, "weight_decay") && inferUpdateLayout(ctx, results);
}

bool inferSgdMomentumUpdate(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireNonNegative(ctx, "weight_decay") || !requireNonNegative(ctx, "dampening"))
    return false;
  if (!(ctx.getFloat("momentum") > 0))
    return ctx.error("momentum must be > 0, got " + formatDouble(ctx.getFloat("momentum")));
  if (ctx.getBool("nesterov") && ctx.getFloat("dampening") != 0)
    return ctx.error("nesterov momentum needs dampening 0");
  return inferUpdateLayout(ctx, results);
}

bool inferAdamUpdate(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  for (llvm::StringRef beta : {"beta1", "beta2"}) {
    double b = ctx.getFloat(beta);
    if (!(b >= 0 && b < 1))
      return ctx.error(beta + " must be in [0, 1), got " + formatDouble(b));
  }
  if (!(ctx.getFloat("eps") > 0))
    return ctx.error("eps must be > 0, got " + formatDouble(ctx.getFloat("eps")));
  return requireNonNegative(ctx, "weight_decay") && inferUpdateLayout(ctx, results);
}

bool inferLambUpdate(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!(ctx.getFloat("max_grad_norm") > 0))
    return ctx.error("max_grad_norm must be > 0, got " +
                     formatDouble(ctx.getFloat("max_grad_norm")));
  return inferAdamUpdate(ctx, results);
}

// ema_update(average, param, count, [skip]) -> the new average, in the
// average's type (passes/Ema.cpp).
bool inferEmaUpdate(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  double decay = ctx.getFloat("decay");
  if (!(decay >= 0 && decay < 1))
    return ctx.error("decay must be in [0, 1), got " + formatDouble(decay));
  if (!requireAccumulate(ctx) || !requireFloat(ctx, 0) || !requireFloat(ctx, 1) ||
      !requireSameShape(ctx, 0, 1) || !requireFloatScalar(ctx, 2))
    return false;
  if (ctx.numOperands() > 3 && !requireScalar(ctx, 3))
    return false;
  results.push_back(ctx.operand(0));
  return true;
}

// learning_rate() -> f32[]: the schedule's value at the optimizer step
// floor(step / accumulate).
bool inferLearningRate(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  attrs::LearningRate a(ctx.attrs());
  const std::string &spelling = a.scheduleAttr().getString();
  std::optional<LrScheduleKind> schedule = attrs::parseEnum<LrScheduleKind>(spelling);
  if (!schedule)
    return ctx.error("unknown schedule '" + spelling + "'; expected constant, step or cosine");
  if (!(ctx.getFloat("lr") > 0))
    return ctx.error("lr must be > 0, got " + formatDouble(ctx.getFloat("lr")));
  if (ctx.getInt("warmup_steps") < 0)
    return ctx.error("warmup_steps must be >= 0, got " + llvm::Twine(ctx.getInt("warmup_steps")));
  if (*schedule == LrScheduleKind::Step && ctx.getInt("step_size") < 1)
    return ctx.error("step_size must be >= 1, got " + llvm::Twine(ctx.getInt("step_size")));
  if (*schedule == LrScheduleKind::Step && !(ctx.getFloat("gamma") > 0))
    return ctx.error("gamma must be > 0, got " + formatDouble(ctx.getFloat("gamma")));
  if (*schedule == LrScheduleKind::Cosine) {
    if (ctx.getInt("total_steps") <= ctx.getInt("warmup_steps"))
      return ctx.error("total_steps (" + llvm::Twine(ctx.getInt("total_steps")) +
                       ") must be greater than warmup_steps (" +
                       llvm::Twine(ctx.getInt("warmup_steps")) + ")");
    double minLr = ctx.getFloat("min_lr");
    if (!(minLr >= 0 && minLr <= ctx.getFloat("lr")))
      return ctx.error("min_lr must be in [0, lr], got " + formatDouble(minLr));
  }
  if (!requireAccumulate(ctx))
    return false;
  results.push_back(TensorType(DType::F32, {}));
  return true;
}

// step_counter(count, skip?) -> count + 1 on the last micro-step of a group
// (unless skipped), else count.
bool inferStepCounter(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireAccumulate(ctx) || !requireFloatScalar(ctx, 0))
    return false;
  if (ctx.numOperands() > 1 && !requireScalar(ctx, 1))
    return false;
  results.push_back(ctx.operand(0));
  return true;
}

// turn_skip() -> f32[]: 1 on the optimizer steps that are not one of an
// optimizer's turns in train.schedule, else 0 (its updates' skip operand).
bool inferTurnSkip(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  attrs::TurnSkip a(ctx.attrs());
  int64_t period = a.period();
  if (period < 1 || period > 64)
    return ctx.error("period must be in [1, 64], got " + llvm::Twine(period));
  if (a.turns().empty())
    return ctx.error("turns must name at least one step of the period");
  for (int64_t t : a.turns())
    if (t < 0 || t >= period)
      return ctx.error("turn " + llvm::Twine(t) + " is outside the period [0, " +
                       llvm::Twine(period) + ")");
  if (!requireAccumulate(ctx))
    return false;
  results.push_back(TensorType(DType::F32, {}));
  return true;
}

// accumulate_grad(acc, grad) -> the running sum (the mean on the last
// micro-step), in the accumulator's type.
bool inferAccumulateGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireAccumulate(ctx) || !requireFloat(ctx, 0) || !requireFloat(ctx, 1) ||
      !requireSameShape(ctx, 0, 1))
    return false;
  results.push_back(ctx.operand(0));
  return true;
}

// global_norm(grads...) -> f32[]: the 2-norm of all elements of all operands.
bool inferGlobalNorm(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  for (unsigned i = 0; i < ctx.numOperands(); ++i)
    if (!requireFloat(ctx, i))
      return false;
  results.push_back(TensorType(DType::F32, {}));
  return true;
}

// clip_coefficient(norm, grad_scale?) -> f32[]: min(1, max_norm / (norm * s +
// 1e-6)) * s, with s = grad_scale (1 when absent): the factor for the update
// ops' grad_scale operand.
bool inferClipCoefficient(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!(ctx.getFloat("max_norm") > 0))
    return ctx.error("max_norm must be > 0, got " + formatDouble(ctx.getFloat("max_norm")));
  for (unsigned i = 0; i < ctx.numOperands(); ++i)
    if (!requireFloatScalar(ctx, i))
      return false;
  results.push_back(TensorType(DType::F32, {}));
  return true;
}

} // namespace

void registerOptimizerOps(OpRegistry &r) {
  OpRow(r.define(OpKind::LearningRate)).infer(inferLearningRate);
  OpRow(r.define(OpKind::TurnSkip)).infer(inferTurnSkip);
  OpRow(r.define(OpKind::StepCounter))
      .fp32Operand("count")
      .optionalOperand("skip")
      .updatesStateInPlace()
      .infer(inferStepCounter);
  OpRow(r.define(OpKind::AccumulateGrad))
      .fp32Operand("acc")
      .operand("grad")
      .updatesStateInPlace()
      .infer(inferAccumulateGrad);
  OpRow(r.define(OpKind::GlobalNorm)).variadicOperand("grads").infer(inferGlobalNorm);
  OpRow(r.define(OpKind::ClipCoefficient))
      .fp32Operand("norm")
      .optionalOperand("grad_scale")
      .infer(inferClipCoefficient);

  OpRow(r.define(OpKind::SgdUpdate))
      .operand("param")
      .operand("grad")
      .fp32Operand("lr")
      .optionalOperand("grad_scale")
      .optionalOperand("skip")
      .optionalOperand("model_param")
      .updatesStateInPlace()
      .infer(inferSgdUpdate);
  OpRow(r.define(OpKind::SgdMomentumUpdate))
      .operand("param")
      .operand("grad")
      .fp32Operand("momentum_buffer")
      .fp32Operand("step_count")
      .fp32Operand("lr")
      .optionalOperand("grad_scale")
      .optionalOperand("skip")
      .optionalOperand("model_param")
      .updatesStateInPlace()
      .infer(inferSgdMomentumUpdate);
  OpRow(r.define(OpKind::AdamUpdate))
      .operand("param")
      .operand("grad")
      .fp32Operand("exp_avg")
      .fp32Operand("exp_avg_sq")
      .fp32Operand("step_count")
      .fp32Operand("lr")
      .optionalOperand("grad_scale")
      .optionalOperand("skip")
      .optionalOperand("model_param")
      .updatesStateInPlace()
      .infer(inferAdamUpdate);
  // FusedLAMB: Adam's moments of the gradient clipped by the global norm
  // (grad_norm, of every gradient), then a per-tensor trust ratio.
  OpRow(r.define(OpKind::LambUpdate))
      .operand("param")
      .operand("grad")
      .fp32Operand("exp_avg")
      .fp32Operand("exp_avg_sq")
      .fp32Operand("step_count")
      .fp32Operand("grad_norm")
      .fp32Operand("lr")
      .optionalOperand("grad_scale")
      .optionalOperand("skip")
      .optionalOperand("model_param")
      .updatesStateInPlace()
      .infer(inferLambUpdate);
  // The average of a parameter over the optimizer steps, after the update:
  // count is the number of averaged steps including this one (1: the
  // average starts as the parameter, as AveragedModel's first update).
  OpRow(r.define(OpKind::EmaUpdate))
      .fp32Operand("average")
      .operand("param")
      .fp32Operand("count")
      .optionalOperand("skip")
      .updatesStateInPlace()
      .infer(inferEmaUpdate);
}

} // namespace ampc
