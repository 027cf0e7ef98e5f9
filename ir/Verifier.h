//===- Verifier.h - Structural and type checks of a graph ------------------===//
#ifndef AMPC_IR_VERIFIER_H
#define AMPC_IR_VERIFIER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

namespace ampc {

/// Checks a graph and reports every problem at the offending node's location:
/// dangling or foreign operands, values used before they are defined, cycles,
/// operand counts, attribute names and types, result types against the op's
/// inference (shape and dtype mismatches), outputs and state updates, and
/// element counts that overflow. Returns true when the graph is valid.
bool verifyGraph(const Graph &g, DiagnosticEngine &diag);

} // namespace ampc

#endif
