//===- StandardPipeline.h - The passes `ampc` runs, in order ---*- C++ -*-===//
//
// DESIGN.md's pipeline as pass names, for the CLI, tests and embedders:
//
//   forward:  assign-precision, cast-optimize
//   train:    assign-precision, autodiff, optimizer, master-weights,
//             loss-scale, cast-optimize, dce
//
// Every mixed-precision pass reads the policy from the graph's meta
// (amp.*) and leaves the graph alone when the level does not ask for it,
// so the same list runs at O0 to O3.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PASSES_STANDARDPIPELINE_H
#define AMPC_PASSES_STANDARDPIPELINE_H

#include "passes/PassManager.h"

namespace ampc {

enum class PipelineStage {
  Forward, ///< the forward graph after the precision passes (inference, --emit)
  Train,   ///< the whole training step: forward, backward, optimizer, loss scaling
};

/// The comma-separated pass names of `stage`.
llvm::StringRef standardPipeline(PipelineStage stage);

/// Adds the passes of `stage` to `pm`; false after reporting an error.
bool addStandardPipeline(PassManager &pm, PipelineStage stage, DiagnosticEngine &diag);

} // namespace ampc

#endif
