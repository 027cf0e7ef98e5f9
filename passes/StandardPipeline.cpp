//===- StandardPipeline.cpp -------------------------------------------------===//
#include "passes/StandardPipeline.h"

namespace ampc {

llvm::StringRef standardPipeline(PipelineStage stage) {
  switch (stage) {
  case PipelineStage::Forward:
    return "fold-permutes,assign-precision,cast-optimize";
  case PipelineStage::Train:
    // Layout first (permutes that an op can read through are gone before
    // anything counts or casts them), precision next (autodiff then
    // derives the casts' backward), then
    // SyncBatchNorm's rewrite (nothing with one rank or without
    // train.sync_batchnorm; after precision, which keeps batchnorm's
    // parameters in f32 under keep_batchnorm_fp32), the
    // gradients' all-reduce (data-parallel; nothing with one rank) before
    // the loss scaling checks them, the loss scaling after the optimizer it
    // conditions, the weights' average (train.ema) after every update it
    // reads, the cast clean-up, then the recomputation of cheap values for
    // the backward (nothing without train.recompute), which sees every
    // backward reader the passes before it added.
    return "fold-permutes,assign-precision,sync-batchnorm,autodiff,optimizer,master-weights,"
           "data-parallel,loss-scale,ema,cast-optimize,recompute,dce";
  }
  return "";
}

bool addStandardPipeline(PassManager &pm, PipelineStage stage, DiagnosticEngine &diag) {
  return pm.addByNames(standardPipeline(stage), diag);
}

} // namespace ampc
