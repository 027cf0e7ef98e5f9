//===- Collective.cpp - Collectives across the ranks of a job ---------------===//
//
// all_reduce(x...) -> (y...): y_i is the reduction (mean or sum) of x_i over
// the `ranks` processes of a data-parallel job, in x_i's type and shape. One
// node reduces a bucket of tensors in one collective (the data-parallel
// pass, passes/DataParallel.cpp). Attributes:
//   ranks       the job's size the graph was rewritten for; the runtime
//               refuses to run it in a job of another size
//   reduce      mean (averaged gradients, as DistributedDataParallel) or sum
//   dtype       what travels and is summed: f32 (half operands widened on
//               each rank, the result rounded once) or the operands' half
//               type (half the bytes; each partial sum rounded to it)
//   accumulate  k > 1: reduces on the last micro-step of each group of k
//               only, when the accumulated gradients are complete; on the
//               others y_i = x_i
// Every rank ends with the same bits (runtime/dist/Communicator.h), so the
// loss scaler's check of the reduced gradients agrees everywhere. Its
// gradient is the same all-reduce of the gradients (SyncBatchNorm).
//
//===----------------------------------------------------------------------===//
#include "ir/GradientBuilder.h"
#include "ir/OpAttrs.h"
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

namespace {

bool inferAllReduce(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  attrs::AllReduce a(ctx.attrs());
  if (a.ranks() < 1)
    return ctx.error("ranks must be >= 1, got " + llvm::Twine(a.ranks()));
  if (a.accumulate() < 1)
    return ctx.error("accumulate must be >= 1, got " + llvm::Twine(a.accumulate()));
  DType wire = a.dtype();
  if (wire != DType::F32 && wire != DType::F16 && wire != DType::BF16)
    return ctx.error("dtype must be f32, f16 or bf16, got " + dtypeName(wire));
  for (unsigned i = 0; i < ctx.numOperands(); ++i) {
    if (!requireFloat(ctx, i))
      return false;
    DType t = ctx.operand(i).dtype();
    if (t == DType::F64)
      return ctx.error("operand " + llvm::Twine(i) + " is f64; all_reduce takes f32, f16, bf16");
    if (wire != DType::F32 && t != wire)
      return ctx.error("a " + dtypeName(wire) + " all-reduce takes " + dtypeName(wire) +
                       " operands only, operand " + llvm::Twine(i) + " is " + dtypeName(t));
    results.push_back(ctx.operand(i));
  }
  return true;
}

// Differentiating the sum of every rank's loss: y = reduce_r(x_r) on every
// rank, so each x_q's gradient is the same reduction of the ranks'
// gradients of y (SyncBatchNorm's backward, passes/SyncBatchNorm.cpp).
void gradAllReduce(GradientBuilder &gb, const Node &fwd, llvm::ArrayRef<Value *> dys,
                   llvm::MutableArrayRef<Value *> dxs) {
  AttrMap attrs = fwd.attrs();
  for (unsigned i = 0; i < dys.size(); ++i) {
    if (!dys[i] || !gb.needsGradient(i))
      continue;
    auto grads = gb.build(OpKind::AllReduce, {dys[i]}, attrs);
    if (!grads.empty())
      dxs[i] = grads[0];
  }
}

} // namespace

void registerCollectiveOps(OpRegistry &r) {
  OpRow(r.define(OpKind::AllReduce))
      .variadicOperand("x")
      .collective()
      .infer(inferAllReduce)
      .gradient(gradAllReduce);
}

} // namespace ampc
