//===- StandardPipeline.cpp -------------------------------------------------===//
#include "passes/StandardPipeline.h"

namespace ampc {

llvm::StringRef standardPipeline(PipelineStage stage) {
  switch (stage) {
  case PipelineStage::Forward:
    return "assign-precision,cast-optimize";
  case PipelineStage::Train:
    // SyncBatchNorm's rewrite first (nothing with one rank or without
    // train.sync_batchnorm), precision next (autodiff then derives the
    // casts' backward), the
    // gradients' all-reduce (data-parallel; nothing with one rank) before
    // the loss scaling checks them, the loss scaling after the optimizer it
    // conditions, the cast clean-up last.
    return "sync-batchnorm,assign-precision,autodiff,optimizer,master-weights,data-parallel,"
           "loss-scale,cast-optimize,dce";
  }
  return "";
}

bool addStandardPipeline(PassManager &pm, PipelineStage stage, DiagnosticEngine &diag) {
  return pm.addByNames(standardPipeline(stage), diag);
}

} // namespace ampc
