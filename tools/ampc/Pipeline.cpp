//===- Pipeline.cpp - The passes an opt level runs ------------------------===//
#include "tools/ampc/Driver.h"

#include "passes/PassManager.h"

#include "llvm/Support/raw_ostream.h"

namespace ampc::cli {

bool runPipeline(Graph &g, const Options &opts, GraphStage stage, DiagnosticEngine &diag) {
  PassManager pm;
  pm.setVerifyEach(opts.verifyEach);
  pm.setTimePasses(opts.timePasses);
  if (!opts.printAfter.empty())
    pm.setPrintAfter({opts.printAfter});
  // The precision passes (O1-O3) go first, when they land.
  if (stage == GraphStage::Train && !pm.addByNames("autodiff,optimizer", diag))
    return false;
  return pm.run(g, diag);
}

} // namespace ampc::cli
