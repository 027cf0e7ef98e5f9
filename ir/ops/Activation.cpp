//===- Activation.cpp - Activations, softmax, dropout, unary math ---------===//
//
// relu, gelu, sigmoid, tanh, silu, softmax, log_softmax, dropout, and the
// unary math ops of ir/Pointwise.def (clamp, sqrt, erf, pow, exp): their
// gradient rules come from the same generated activation rules. ONNX's
// other activations (hardsigmoid, hardswish, leaky_relu, elu, softplus,
// prelu) and abs, log, reciprocal and neg too; prelu (a binary op: its
// slope broadcasts) and neg have rules of their own.
//
//===----------------------------------------------------------------------===//
#include "ir/GradientBuilder.h"
#include "ir/OpAttrs.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

#include <cassert>
#include <cmath>
#include <limits>

namespace ampc {
using namespace infer;

// gelu(x) with approximate = "none" (erf) or "tanh", as torch.nn.functional.gelu.
static bool inferGelu(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const std::string &approximate = attrs::Gelu(ctx.attrs()).approximateAttr().getString();
  if (!attrs::parseEnum<GeluApproximate>(approximate))
    return ctx.error("approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
  return inferUnaryFloat(ctx, results);
}

// softmax / log_softmax over one dim (negative counts from the end).
static bool inferSoftmax(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0))
    return false;
  unsigned dim;
  if (!normalizeAxis(ctx, ctx.getInt("dim"), ctx.operand(0).rank(), dim))
    return false;
  results.push_back(ctx.operand(0));
  return true;
}

// dropout(x): the mask is regenerated from `seed` for the backward pass, so
// the op has a single result.
static bool inferDropout(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  double p = ctx.getFloat("p");
  if (!(p >= 0 && p < 1))
    return ctx.error("p must be in [0, 1), got " + formatDouble(p));
  return inferUnaryFloat(ctx, results);
}

// clamp(x) to [min, max]; an unset bound is infinite (torch.clamp's None).
// min > max is allowed and gives max everywhere, as torch.clamp does; a NaN
// bound is refused (it would make every element NaN).
static bool inferClamp(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  for (const char *bound : {"min", "max"})
    if (std::isnan(ctx.getFloat(bound)))
      return ctx.error(std::string(bound) + " must not be NaN");
  return inferUnaryFloat(ctx, results);
}

// hardsigmoid's clamp(alpha x + beta, 0, 1) is computed as clamp(x +
// beta/alpha, 0, 1/alpha) / (1/alpha) (kernels/common/ActivationMath.h: so
// PyTorch's constants give ATen's bits), which needs alpha > 0; ONNX allows
// any alpha, but no exporter we know of writes another.
static bool inferHardSigmoid(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  attrs::HardSigmoid a(ctx.attrs());
  if (!(a.alpha() > 0) || !std::isfinite(a.alpha()))
    return ctx.error("alpha must be positive and finite, got " + formatDouble(a.alpha()));
  if (!std::isfinite(a.beta()))
    return ctx.error("beta must be finite, got " + formatDouble(a.beta()));
  return inferUnaryFloat(ctx, results);
}

static bool inferLeakyRelu(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (std::isnan(attrs::LeakyRelu(ctx.attrs()).negative_slope()))
    return ctx.error("negative_slope must not be NaN");
  return inferUnaryFloat(ctx, results);
}

static bool inferElu(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (std::isnan(attrs::Elu(ctx.attrs()).alpha()))
    return ctx.error("alpha must not be NaN");
  return inferUnaryFloat(ctx, results);
}

// prelu(input, slope) and prelu_derivative(input, slope): the slope
// broadcasts to the input's shape (ONNX's unidirectional broadcasting: a
// [C, 1, 1] slope against [N, C, H, W], a [C] one against [N, C]); the
// result has the input's shape.
static bool inferPRelu(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireFloat(ctx, 1) || !requireSameDType(ctx, 0, 1))
    return false;
  llvm::ArrayRef<int64_t> x = ctx.operand(0).dims(), slope = ctx.operand(1).dims();
  bool fits = slope.size() <= x.size();
  for (size_t i = 0; fits && i < slope.size(); ++i) {
    int64_t s = slope[slope.size() - 1 - i];
    fits = s == 1 || s == x[x.size() - 1 - i];
  }
  if (!fits)
    return ctx.error(
        "slope " + typeStr(ctx.operand(1)) + " does not broadcast to the input " +
        typeStr(ctx.operand(0)) +
        " (dims align at the right: a per-channel slope of [N, C, H, W] is [C, 1, 1])");
  results.push_back(ctx.operand(0));
  return true;
}

//===----------------------------------------------------------------------===//
// Backward ops: (grad, saved) -> the input's gradient, where saved is the
// forward input (relu, gelu) or the forward output (sigmoid, tanh, softmax,
// log_softmax: their derivatives are cheapest from the output).
//===----------------------------------------------------------------------===//

static bool inferActivationGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireFloat(ctx, 1) || !requireSameDType(ctx, 0, 1) ||
      !requireSameShape(ctx, 0, 1))
    return false;
  results.push_back(ctx.operand(1));
  return true;
}

static bool inferSoftmaxGrad(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!inferActivationGrad(ctx, results))
    return false;
  unsigned dim;
  return normalizeAxis(ctx, ctx.getInt("dim"), ctx.operand(1).rank(), dim);
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

/// The backward of a softmax: one `kind` node of (dy, y) with the forward's
/// attributes.
static void gradFromOutput(GradientBuilder &gb, const Node &fwd, OpKind kind,
                           llvm::ArrayRef<Value *> dys, llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.build1(kind, {dys[0], fwd.result()}, fwd.attrs());
}

static void gradSoftmax(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                        llvm::MutableArrayRef<Value *> dxs) {
  gradFromOutput(gb, fwd, OpKind::SoftmaxGrad, dys, dxs);
}

static void gradLogSoftmax(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                           llvm::MutableArrayRef<Value *> dxs) {
  gradFromOutput(gb, fwd, OpKind::LogSoftmaxGrad, dys, dxs);
}

// prelu: dx = dy * prelu_derivative(x, slope) (dy where x > 0, else
// dy * slope); dslope = prelu_grad_slope(dy, x) (x * dy where x <= 0)
// summed back to the slope's shape.
static void gradPRelu(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                      llvm::MutableArrayRef<Value *> dxs) {
  Value *x = fwd.operand(0), *slope = fwd.operand(1);
  if (gb.needsGradient(0))
    dxs[0] = gb.build1(OpKind::Mul, {dys[0], gb.build1(OpKind::PReluDerivative, {x, slope})});
  if (gb.needsGradient(1))
    dxs[1] = gb.sumToShape(gb.build1(OpKind::PReluGradSlope, {dys[0], x}), slope->type().dims());
}

// neg: dx = -dy.
static void gradNeg(GradientBuilder &gb, const Node &, llvm::ArrayRef<Value *> dys,
                    llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.build1(OpKind::Neg, {dys[0]});
}

// floor and ceil are piecewise constant: a gradient of 0, as PyTorch's.
static void gradZero(GradientBuilder &gb, const Node &, llvm::ArrayRef<Value *> dys,
                     llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.scale(dys[0], 0.0);
}

// Dropout is linear with a mask that is a pure function of (seed, step,
// index): dropout of dy with the same p, seed and training flag applies the
// same mask and scale (and is the identity when training is false).
static void gradDropout(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                        llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.build1(OpKind::Dropout, {dys[0]}, fwd.attrs());
}

//===----------------------------------------------------------------------===//
// The activations of ir/Pointwise.def: each row's gradient rule and backward
// op are generated from the row, after the forward op's own row.
//===----------------------------------------------------------------------===//

enum class Saved { Input, Output };

/// The rule: one `GradKind` node of (dy, saved) with the forward's attributes.
template <OpKind GradKind, Saved S>
static void gradActivation(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                           llvm::MutableArrayRef<Value *> dxs) {
  Value *saved = S == Saved::Input ? fwd.operand(0) : fwd.result();
  dxs[0] = gb.build1(GradKind, {dys[0], saved}, fwd.attrs());
}

/// The backward op's row: (grad, input or output), the forward's attributes
/// (AMPC_ATTRS_ALIAS in ir/OpAttrs.def),
/// checked by the forward's own inference on the saved value's type.
static void defineActivationBackward(OpRegistry &r, OpKind forwardKind, OpKind gradKind,
                                     Saved saved, GradientFn rule) {
  OpInfo &forward = r.define(forwardKind);
  assert(forward.infer && "the forward row comes first");
  forward.gradient = std::move(rule);
  OpInfo &backward = r.define(gradKind);
  const OpInfo *forwardInfo = &forward;
  OpRow(backward)
      .operand("grad")
      .operand(saved == Saved::Input ? "input" : "output")
      .infer([forwardInfo](InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
        if (!inferActivationGrad(ctx, results))
          return false;
        if (forwardInfo->attrs.empty())
          return true;
        InferContext forwardCtx(*forwardInfo, ctx.operands().drop_front(), ctx.attrs());
        llvm::SmallVector<TensorType, 1> forwardResults;
        return forwardInfo->infer(forwardCtx, forwardResults) ||
               ctx.error(forwardCtx.errorMessage());
      })
      .elementwise();
}

static void definePointwiseBackwards(OpRegistry &r) {
#define AMPC_POINTWISE_GRAD(Op, GradOp, Fn, Saved_)                                                \
  defineActivationBackward(r, OpKind::Op, OpKind::GradOp, Saved::Saved_,                           \
                           gradActivation<OpKind::GradOp, Saved::Saved_>);
#include "ir/Pointwise.def"
}

void registerActivationOps(OpRegistry &r) {
  OpRow(r.define(OpKind::Relu)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::Gelu)).operand("input").infer(inferGelu).elementwise();
  OpRow(r.define(OpKind::Sigmoid)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::Tanh)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::Silu)).operand("input").infer(inferUnaryFloat).elementwise();

  // Unary math (ONNX Clip, Sqrt, Erf, Pow with a constant exponent, Exp).
  OpRow(r.define(OpKind::Clamp)).operand("input").infer(inferClamp).elementwise();
  OpRow(r.define(OpKind::Sqrt)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::Erf)).operand("input").infer(inferUnaryFloat).elementwise();
  // pow(x) = x^exponent; a tensor exponent is not supported (not needed yet).
  OpRow(r.define(OpKind::Pow)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::Exp)).operand("input").infer(inferUnaryFloat).elementwise();
  // ONNX's other activations and unary math.
  OpRow(r.define(OpKind::HardSigmoid)).operand("input").infer(inferHardSigmoid).elementwise();
  OpRow(r.define(OpKind::HardSwish)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::LeakyRelu)).operand("input").infer(inferLeakyRelu).elementwise();
  OpRow(r.define(OpKind::Elu)).operand("input").infer(inferElu).elementwise();
  OpRow(r.define(OpKind::Softplus)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::Abs)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::Log)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::Reciprocal)).operand("input").infer(inferUnaryFloat).elementwise();
  OpRow(r.define(OpKind::Neg))
      .operand("input")
      .infer(inferUnaryFloat)
      .gradient(gradNeg)
      .elementwise();
  for (OpKind rounding : {OpKind::Floor, OpKind::Ceil})
    OpRow(r.define(rounding))
        .operand("input")
        .infer(inferUnaryFloat)
        .gradient(gradZero)
        .elementwise();
  OpRow(r.define(OpKind::PRelu))
      .operand("input")
      .operand("slope")
      .infer(inferPRelu)
      .gradient(gradPRelu)
      .elementwise();
  OpRow(r.define(OpKind::Softmax)).operand("input").infer(inferSoftmax).gradient(gradSoftmax);
  OpRow(r.define(OpKind::LogSoftmax)).operand("input").infer(inferSoftmax).gradient(gradLogSoftmax);
  OpRow(r.define(OpKind::Dropout)).operand("input").infer(inferDropout).gradient(gradDropout);

  // Backward ops (not differentiated again).
  OpRow(r.define(OpKind::SoftmaxGrad)).operand("grad").operand("output").infer(inferSoftmaxGrad);
  OpRow(r.define(OpKind::LogSoftmaxGrad)).operand("grad").operand("output").infer(inferSoftmaxGrad);
  OpRow(r.define(OpKind::PReluDerivative))
      .operand("input")
      .operand("slope")
      .infer(inferPRelu)
      .elementwise();
  OpRow(r.define(OpKind::PReluGradSlope))
      .operand("grad")
      .operand("input")
      .infer(inferActivationGrad)
      .elementwise();

  definePointwiseBackwards(r);
}

} // namespace ampc
