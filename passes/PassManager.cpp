//===- PassManager.cpp ------------------------------------------------------===//
#include "passes/PassManager.h"

#include "passes/AssignPrecision.h"
#include "passes/Autodiff.h"
#include "passes/CastOptimize.h"
#include "passes/DataParallel.h"
#include "passes/DeadCodeElimination.h"
#include "passes/Ema.h"
#include "passes/EvalMode.h"
#include "passes/FoldPermutes.h"
#include "passes/InferTypes.h"
#include "passes/LossScale.h"
#include "passes/MasterWeights.h"
#include "passes/Optimizer.h"
#include "passes/Recompute.h"
#include "passes/SyncBatchNorm.h"
#include "passes/WidenToF64.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Format.h"

#include <chrono>

namespace ampc {

std::unique_ptr<Pass> createPass(llvm::StringRef name) {
#define AMPC_PASS(Class, Name)                                                                     \
  if (name == Name)                                                                                \
    return std::make_unique<Class>();
#include "passes/Passes.def"
  return nullptr;
}

std::vector<std::string> registeredPassNames() {
  std::vector<std::string> names;
#define AMPC_PASS(Class, Name) names.push_back(Name);
#include "passes/Passes.def"
  return names;
}

bool PassManager::addByNames(llvm::StringRef commaList, DiagnosticEngine &diag) {
  llvm::SmallVector<llvm::StringRef, 8> names;
  commaList.split(names, ',', -1, /*KeepEmpty=*/false);
  bool ok = true;
  for (llvm::StringRef n : names) {
    n = n.trim();
    if (auto p = createPass(n)) {
      add(std::move(p));
      continue;
    }
    std::string known;
    for (const std::string &k : registeredPassNames())
      known += (known.empty() ? "" : ", ") + k;
    diag.error(Location(), "unknown pass '" + n + "' (known passes: " + known + ")");
    ok = false;
  }
  return ok;
}

bool PassManager::run(Graph &g, DiagnosticEngine &diag) {
  PassContext ctx{diag, target_};
  int count = 0;
  for (auto &pass : passes_) {
    if (stopAfter_ >= 0 && count >= stopAfter_)
      break;
    ++count;
    auto start = std::chrono::steady_clock::now();
    PassResult result = pass->run(g, ctx);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (timePasses_)
      *debugOS_ << llvm::format("pass %-28s %10.3f ms  %s\n", pass->name().str().c_str(), ms,
                                result == PassResult::Changed ? "changed" : "unchanged");
    if (result == PassResult::Failed)
      return false;
    if (printAfter_.count("all") || printAfter_.count(pass->name().str())) {
      *debugOS_ << "// ----- IR after " << pass->name() << " -----\n";
      printGraph(g, *debugOS_);
    }
    if (afterPass_)
      afterPass_(pass->name(), g);
    if (verifyEach_ && !verifyGraph(g, diag)) {
      diag.error(g.loc(), "the graph is invalid after pass '" + pass->name() + "'");
      return false;
    }
  }
  return true;
}

} // namespace ampc
