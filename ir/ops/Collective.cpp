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
// loss scaler's check of the reduced gradients agrees everywhere.
//
//===----------------------------------------------------------------------===//
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

} // namespace

void registerCollectiveOps(OpRegistry &r) {
  OpRow(r.define(OpKind::AllReduce)).variadicOperand("x").collective().infer(inferAllReduce);
}

} // namespace ampc
