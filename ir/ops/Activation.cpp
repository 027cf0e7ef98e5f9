//===- Activation.cpp - relu, gelu, sigmoid, tanh, softmax, dropout ---------===//
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

// gelu(x) with approximate = "none" (erf) or "tanh", as torch.nn.functional.gelu.
static bool inferGelu(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  const std::string &approximate = ctx.getString("approximate");
  if (approximate != "none" && approximate != "tanh")
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

void registerActivationOps(OpRegistry &r) {
  OpRow(r.define(OpKind::Relu)).operand("input").infer(inferUnaryFloat);
  OpRow(r.define(OpKind::Gelu))
      .operand("input")
      .attr("approximate", AttrType::String, "none")
      .infer(inferGelu);
  OpRow(r.define(OpKind::Sigmoid)).operand("input").infer(inferUnaryFloat);
  OpRow(r.define(OpKind::Tanh)).operand("input").infer(inferUnaryFloat);
  OpRow(r.define(OpKind::Softmax))
      .operand("input")
      .attr("dim", AttrType::Int, -1)
      .infer(inferSoftmax);
  OpRow(r.define(OpKind::LogSoftmax))
      .operand("input")
      .attr("dim", AttrType::Int, -1)
      .infer(inferSoftmax);
  OpRow(r.define(OpKind::Dropout))
      .operand("input")
      .attr("p", AttrType::Float, 0.5)
      .attr("seed", AttrType::Int, 0)
      .attr("training", AttrType::Bool, true)
      .infer(inferDropout);
}

} // namespace ampc
