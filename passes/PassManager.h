//===- PassManager.h - Run a list of passes --------------------------------===//
#ifndef AMPC_PASSES_PASSMANAGER_H
#define AMPC_PASSES_PASSMANAGER_H

#include "passes/Pass.h"

#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace ampc {

/// Creates a pass from its registered name (Passes.def), or nullptr.
std::unique_ptr<Pass> createPass(llvm::StringRef name);
/// Every registered pass name, in Passes.def order.
std::vector<std::string> registeredPassNames();

class PassManager {
public:
  void add(std::unique_ptr<Pass> p) { passes_.push_back(std::move(p)); }
  /// Adds passes by name from a comma-separated list; reports unknown names.
  bool addByNames(llvm::StringRef commaList, DiagnosticEngine &diag);
  size_t size() const { return passes_.size(); }

  /// Run the verifier after every pass (tests and debug builds).
  void setVerifyEach(bool v) { verifyEach_ = v; }
  /// Print the graph after the named passes ("all" for every pass).
  void setPrintAfter(std::set<std::string> names) { printAfter_ = std::move(names); }
  /// Stop after this many passes (for bisecting a pipeline); -1 = run all.
  void setStopAfter(int n) { stopAfter_ = n; }
  /// The backend the graph is for (PassContext::target); null: unknown.
  void setTarget(const BackendCapabilities *target) { target_ = target; }
  /// Record and print each pass's wall time.
  void setTimePasses(bool t) { timePasses_ = t; }
  /// Where --print-after and --time-passes write (stderr by default).
  void setDebugStream(llvm::raw_ostream &os) { debugOS_ = &os; }
  /// Called after each pass with its name; for hosts that inspect the graph.
  void setAfterPassHook(std::function<void(llvm::StringRef, const Graph &)> h) {
    afterPass_ = std::move(h);
  }

  /// Runs the passes in order. Returns false if a pass failed or the verifier
  /// found a problem after a pass (diagnostics say which).
  bool run(Graph &g, DiagnosticEngine &diag);

private:
  std::vector<std::unique_ptr<Pass>> passes_;
  bool verifyEach_ = false;
  std::set<std::string> printAfter_;
  int stopAfter_ = -1;
  const BackendCapabilities *target_ = nullptr;
  bool timePasses_ = false;
  llvm::raw_ostream *debugOS_ = &llvm::errs();
  std::function<void(llvm::StringRef, const Graph &)> afterPass_;
};

} // namespace ampc

#endif
