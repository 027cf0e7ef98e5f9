//===- DataParallel.h - All-reduce the gradients across ranks ---*- C++ -*-===//
#ifndef AMPC_PASSES_DATAPARALLEL_H
#define AMPC_PASSES_DATAPARALLEL_H

#include "passes/Pass.h"

namespace ampc {

/// Data-parallel training (docs/distributed.md), after the optimizer and
/// master-weights passes and before loss-scale, when the graph's meta asks
/// for more than one rank (`dist.ranks`, which `mpirun -np N ampc` sets):
/// the gradients the optimizer updates read are averaged across the ranks
///
///   %g1.avg, %g2.avg = all_reduce(%g1, %g2) {ranks = 2, dtype = f32, ...}
///
/// and every reader after it (the updates, clipping's global norm) reads
/// the averages. The gradients go into buckets of at most `dist.bucket_bytes`
/// (default 25 MiB, as DistributedDataParallel) in the order the backward
/// produces them, and each bucket's all_reduce sits right after the node
/// that completes it, so it is issued while the rest of the backward is
/// still to run. `dist.allreduce_dtype`: "f32" (default; half gradients
/// widened for the reduction and rounded once) or "half" (half gradients
/// travel and are summed in their own type; f32 ones stay f32). With
/// gradient accumulation the all-reduces act on the accumulated gradients,
/// once per optimizer step. The loss-scale pass then checks the averaged
/// gradients: they have the same bits on every rank, so every rank agrees
/// on a skip without another collective. One rank: nothing changes.
class DataParallelPass : public Pass {
public:
  llvm::StringRef name() const override { return "data-parallel"; }
  llvm::StringRef description() const override {
    return "average the gradients across the ranks of a data-parallel job (dist.ranks)";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
