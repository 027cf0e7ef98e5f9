//===- Pipeline.cpp - The passes an opt level runs ------------------------===//
#include "tools/ampc/Driver.h"

#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/PrecisionReport.h"
#include "passes/StandardPipeline.h"

#include "llvm/Support/raw_ostream.h"

namespace ampc::cli {

bool runPipeline(Graph &g, const Options &opts, GraphStage stage, DiagnosticEngine &diag) {
  PassManager pm;
  pm.setVerifyEach(opts.verifyEach);
  pm.setTimePasses(opts.timePasses);
  if (!opts.printAfter.empty())
    pm.setPrintAfter({opts.printAfter});
  // The precision passes ask the target which ops it runs in half.
  std::string unavailable;
  std::unique_ptr<Backend> target = createBackend(opts.device, unavailable);
  pm.setTarget(target.get());
  if (!addStandardPipeline(
          pm, stage == GraphStage::Train ? PipelineStage::Train : PipelineStage::Forward, diag))
    return false;
  return pm.run(g, diag);
}

std::string optLevelOf(const Graph &g) {
  auto it = g.meta().find("amp.opt_level");
  return it != g.meta().end() && it->second.is(AttrType::String) ? it->second.getString()
                                                                 : std::string("O0");
}

bool resolveAndShowPolicy(const Graph &g, bool print, DiagnosticEngine &diag) {
  std::optional<PrecisionPolicy> policy = resolvePolicy(g.meta(), diag);
  if (!policy)
    return false;
  if (print) {
    warnPolicy(*policy, diag);
    llvm::outs() << "precision policy:\n";
    printPolicy(*policy, llvm::outs());
  }
  return true;
}

void showPolicy(const Graph &g, const Backend *backend) {
  DiagnosticEngine diag;
  resolveAndShowPolicy(g, /*print=*/true, diag);
  diag.print(llvm::errs());
  // CPUs have no f16 arithmetic: it runs exactly, through f32, but slower
  // than bf16. Say so once, where the policy is shown.
  std::optional<PrecisionPolicy> policy = resolvePolicy(g.meta(), diag);
  if (policy && backend && policy->mixed() && policy->halfType == DType::F16 &&
      backend->name().startswith("cpu"))
    llvm::outs() << "note: f16 on the CPU runs by conversion to f32 (exact, but slower than "
                    "bf16; --half-type bf16 is the CPU's fast half type)\n";
}

void printPrecisionFooter(const Graph &g, const Program *program, llvm::raw_ostream &os) {
  printPrecisionSummary(summarizePrecision(g), os);
  // Nothing to report when no cast of state ran (O0, O2/O3 without casts of state).
  if (program && program->castCacheStats().hits + program->castCacheStats().misses > 0)
    program->castCacheStats().print(os);
}

} // namespace ampc::cli
