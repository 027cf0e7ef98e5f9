//===- Activation.cpp - Activations, softmax, dropout, unary math ---------===//
//
// relu, gelu, sigmoid, tanh, silu, softmax, log_softmax, dropout, and the
// unary math ops of ir/Pointwise.def (clamp, sqrt, erf, pow, exp): their
// gradient rules come from the same generated activation rules.
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
  OpRow(r.define(OpKind::Softmax)).operand("input").infer(inferSoftmax).gradient(gradSoftmax);
  OpRow(r.define(OpKind::LogSoftmax)).operand("input").infer(inferSoftmax).gradient(gradLogSoftmax);
  OpRow(r.define(OpKind::Dropout)).operand("input").infer(inferDropout).gradient(gradDropout);

  // Backward ops (not differentiated again).
  OpRow(r.define(OpKind::SoftmaxGrad)).operand("grad").operand("output").infer(inferSoftmaxGrad);
  OpRow(r.define(OpKind::LogSoftmaxGrad)).operand("grad").operand("output").infer(inferSoftmaxGrad);

  definePointwiseBackwards(r);
}

} // namespace ampc
