//===- Printer.h - Textual IR output ---------------------------------------===//
#ifndef AMPC_IR_PRINTER_H
#define AMPC_IR_PRINTER_H

#include "ir/Graph.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace ampc {

struct PrintOptions {
  /// Print loc("file":line:col) on declarations and nodes with a known location.
  bool locations = true;
};

/// Prints the graph in the textual IR (docs/textual-ir.md). Deterministic:
/// the same graph always prints the same text, and parseGraph reads it back
/// to a graph that prints identically.
void printGraph(const Graph &g, llvm::raw_ostream &os, const PrintOptions &opts = {});
std::string printGraphToString(const Graph &g, const PrintOptions &opts = {});

} // namespace ampc

#endif
