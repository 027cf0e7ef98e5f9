//===- Elementwise.cpp - add, sub, mul, div, max, min, power, scale -------===//
#include "ir/GradientBuilder.h"
#include "ir/OpAttrs.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

// Binary arithmetic with numpy broadcasting. The dtypes must already agree:
// mixing them is the precision pass's job (it inserts casts to the widest).
static bool inferBinary(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireFloat(ctx, 1) || !requireSameDType(ctx, 0, 1))
    return false;
  llvm::SmallVector<int64_t, 4> dims;
  if (!broadcastShapes(ctx, ctx.operand(0).dims(), ctx.operand(1).dims(), dims))
    return false;
  results.push_back(TensorType(ctx.operand(0).dtype(), dims));
  return true;
}

//===----------------------------------------------------------------------===//
// Gradient rules. The result has the broadcast shape; each operand's gradient
// is summed back to the operand's own shape (GradientBuilder::sumToShape).
//===----------------------------------------------------------------------===//

static llvm::ArrayRef<int64_t> dimsOf(const Node &fwd, unsigned i) {
  return fwd.operand(i)->type().dims();
}

static void gradAdd(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                    llvm::MutableArrayRef<Value *> dxs) {
  for (unsigned i = 0; i < 2; ++i)
    if (gb.needsGradient(i))
      dxs[i] = gb.sumToShape(dys[0], dimsOf(fwd, i));
}

static void gradSub(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                    llvm::MutableArrayRef<Value *> dxs) {
  if (gb.needsGradient(0))
    dxs[0] = gb.sumToShape(dys[0], dimsOf(fwd, 0));
  // Negate after summing: fewer elements when b was broadcast.
  if (gb.needsGradient(1))
    dxs[1] = gb.scale(gb.sumToShape(dys[0], dimsOf(fwd, 1)), -1.0);
}

// d(a b) = dy b da + dy a db.
static void gradMul(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                    llvm::MutableArrayRef<Value *> dxs) {
  Value *a = fwd.operand(0), *b = fwd.operand(1);
  if (gb.needsGradient(0))
    dxs[0] = gb.sumToShape(gb.build1(OpKind::Mul, {dys[0], b}), a->type().dims());
  if (gb.needsGradient(1))
    dxs[1] = gb.sumToShape(gb.build1(OpKind::Mul, {dys[0], a}), b->type().dims());
}

// y = a / b: da = dy / b, db = -dy a / b^2 = -(dy y) / b, which reuses the
// forward result instead of squaring b.
static void gradDiv(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                    llvm::MutableArrayRef<Value *> dxs) {
  Value *b = fwd.operand(1);
  if (gb.needsGradient(0))
    dxs[0] = gb.sumToShape(gb.build1(OpKind::Div, {dys[0], b}), dimsOf(fwd, 0));
  if (gb.needsGradient(1)) {
    Value *dyTimesY = gb.build1(OpKind::Mul, {dys[0], fwd.result()});
    Value *quotient = dyTimesY ? gb.build1(OpKind::Div, {dyTimesY, b}) : nullptr;
    dxs[1] = gb.scale(gb.sumToShape(quotient, dimsOf(fwd, 1)), -1.0);
  }
}

// max(a, b): each operand gets dy times its share, greater_share(a, b) for
// a and greater_share(b, a) for b (1 where it is the larger, 1/2 on ties, as
// torch.maximum's backward), summed back to its shape; min(a, b) swaps the
// operands of the shares.
static void gradMaxMin(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                       llvm::MutableArrayRef<Value *> dxs, bool isMax) {
  for (unsigned i = 0; i < 2; ++i) {
    if (!gb.needsGradient(i))
      continue;
    Value *self = fwd.operand(i), *other = fwd.operand(1 - i);
    Value *share = isMax ? gb.build1(OpKind::GreaterShare, {self, other})
                         : gb.build1(OpKind::GreaterShare, {other, self});
    dxs[i] = gb.sumToShape(gb.build1(OpKind::Mul, {dys[0], share}), dimsOf(fwd, i));
  }
}

static void gradMax(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                    llvm::MutableArrayRef<Value *> dxs) {
  gradMaxMin(gb, fwd, dys, dxs, /*isMax=*/true);
}

static void gradMin(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                    llvm::MutableArrayRef<Value *> dxs) {
  gradMaxMin(gb, fwd, dys, dxs, /*isMax=*/false);
}

// power(a, b) = a^b: da = dy power_grad_base(a, b), db = dy
// power_grad_exponent(a, b), each summed back to its operand's shape.
static void gradPower(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                      llvm::MutableArrayRef<Value *> dxs) {
  Value *a = fwd.operand(0), *b = fwd.operand(1);
  const OpKind derivative[2] = {OpKind::PowerGradBase, OpKind::PowerGradExponent};
  for (unsigned i = 0; i < 2; ++i)
    if (gb.needsGradient(i))
      dxs[i] = gb.sumToShape(gb.build1(OpKind::Mul, {dys[0], gb.build1(derivative[i], {a, b})}),
                             dimsOf(fwd, i));
}

// mod(a, b) and fmod(a, b): da = dy; db = dy times the derivative by the
// divisor (-floor(a / b) or -trunc(a / b)); each summed back to its shape.
static void gradRemainder(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                          llvm::MutableArrayRef<Value *> dxs, OpKind divisorDerivative) {
  Value *a = fwd.operand(0), *b = fwd.operand(1);
  if (gb.needsGradient(0))
    dxs[0] = gb.sumToShape(dys[0], dimsOf(fwd, 0));
  if (gb.needsGradient(1))
    dxs[1] = gb.sumToShape(gb.build1(OpKind::Mul, {dys[0], gb.build1(divisorDerivative, {a, b})}),
                           dimsOf(fwd, 1));
}

static void gradMod(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                    llvm::MutableArrayRef<Value *> dxs) {
  gradRemainder(gb, fwd, dys, dxs, OpKind::ModGradDivisor);
}

static void gradFmod(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                     llvm::MutableArrayRef<Value *> dxs) {
  gradRemainder(gb, fwd, dys, dxs, OpKind::FmodGradDivisor);
}

static void gradScale(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                      llvm::MutableArrayRef<Value *> dxs) {
  dxs[0] = gb.scale(dys[0], attrs::Scale(fwd).factor());
}

void registerElementwiseOps(OpRegistry &r) {
  OpRow(r.define(OpKind::Add))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .gradient(gradAdd)
      .elementwise();
  OpRow(r.define(OpKind::Sub))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .gradient(gradSub)
      .elementwise();
  OpRow(r.define(OpKind::Mul))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .gradient(gradMul)
      .elementwise();
  OpRow(r.define(OpKind::Div))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .gradient(gradDiv)
      .elementwise();
  // Elementwise max and min (ONNX's Max and Min of two inputs), and their
  // backward's shares (not differentiated again).
  OpRow(r.define(OpKind::Max))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .gradient(gradMax)
      .elementwise();
  OpRow(r.define(OpKind::Min))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .gradient(gradMin)
      .elementwise();
  OpRow(r.define(OpKind::GreaterShare)).operand("a").operand("b").infer(inferBinary).elementwise();
  // power(a, b) = a^b with numpy broadcasting (ONNX Pow with a tensor of
  // exponents), and its derivatives (not differentiated again).
  OpRow(r.define(OpKind::Power))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .gradient(gradPower)
      .elementwise();
  OpRow(r.define(OpKind::PowerGradBase)).operand("a").operand("b").infer(inferBinary).elementwise();
  OpRow(r.define(OpKind::PowerGradExponent))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .elementwise();
  // Remainders (ONNX Mod at run time), and their derivatives by the divisor.
  OpRow(r.define(OpKind::Mod))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .gradient(gradMod)
      .elementwise();
  OpRow(r.define(OpKind::Fmod))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .gradient(gradFmod)
      .elementwise();
  OpRow(r.define(OpKind::ModGradDivisor))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .elementwise();
  OpRow(r.define(OpKind::FmodGradDivisor))
      .operand("a")
      .operand("b")
      .infer(inferBinary)
      .elementwise();
  // scale(x) = x * factor, a constant known when the graph is built.
  OpRow(r.define(OpKind::Scale))
      .operand("input")
      .infer(inferUnaryFloat)
      .gradient(gradScale)
      .elementwise();
}

} // namespace ampc
