//===- Pass.h - One graph-to-graph rewrite ---------------------------------===//
#ifndef AMPC_PASSES_PASS_H
#define AMPC_PASSES_PASS_H

#include "ir/BackendCapabilities.h"
#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"

namespace ampc {

/// What a pass may read besides the graph. Grows with the pipeline (the
/// precision policy, the target backend's capabilities).
struct PassContext {
  DiagnosticEngine &diag;
  /// The backend the graph is compiled for, when known: the precision passes
  /// ask it which ops it runs in half (null: assume every op can).
  const BackendCapabilities *target = nullptr;
};

/// A pass either changed the graph, left it alone, or failed on user input
/// (after reporting diagnostics).
enum class PassResult { Unchanged, Changed, Failed };

class Pass {
public:
  virtual ~Pass() = default;
  /// The name used by --passes= and --print-after=.
  virtual llvm::StringRef name() const = 0;
  virtual llvm::StringRef description() const = 0;
  virtual PassResult run(Graph &g, PassContext &ctx) = 0;
};

} // namespace ampc

#endif
