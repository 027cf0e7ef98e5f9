//===- SyncBatchNorm.h - Batch statistics across the ranks ------*- C++ -*-===//
#ifndef AMPC_PASSES_SYNCBATCHNORM_H
#define AMPC_PASSES_SYNCBATCHNORM_H

#include "passes/Pass.h"

namespace ampc {

/// SyncBatchNorm for data-parallel training (docs/distributed.md), right
/// after assign-precision (which has kept batchnorm's parameters in f32
/// under keep_batchnorm_fp32 and given the input its dtype), when the meta asks for it
/// (`train.sync_batchnorm`, from the model file or --sync-batchnorm) and for more than one rank
/// (`dist.ranks`). Every training-mode batchnorm2d becomes its arithmetic
/// over the statistics of the global batch, two passes as one process
/// computes them:
///
///   mean = all_reduce(reduce_sum(x)) / M           (M = N H W x ranks)
///   var  = all_reduce(reduce_sum((x - mean)^2)) / M
///   y    = (x - mean) (var + eps)^-0.5 weight + bias
///   running_mean, running_var: as batchnorm2d (var unbiased: M / (M - 1))
///
/// in f32 whatever the opt level (a half input is cast to f32 and the
/// result back; the nodes carry an fp32 precision override, so that a
/// later precision pass leaves them so). all_reduce's gradient is the all-reduce
/// of the gradients, so autodiff then gives the backward its two reductions
/// across the ranks too. Eval-mode batchnorm (the evaluation graph) is left
/// alone: the running statistics are the same on every rank.
class SyncBatchNormPass : public Pass {
public:
  llvm::StringRef name() const override { return "sync-batchnorm"; }
  llvm::StringRef description() const override {
    return "batchnorm over the global batch's statistics in a data-parallel job "
           "(train.sync_batchnorm)";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
