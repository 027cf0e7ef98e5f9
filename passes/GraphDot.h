//===- GraphDot.h - The graph as Graphviz DOT (ampc --emit dot) ------------===//
//
// A printer, beside the textual IR's: it reads the graph and the precision
// report (explainPrecision, what --explain prints) and changes nothing.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PASSES_GRAPHDOT_H
#define AMPC_PASSES_GRAPHDOT_H

#include "ir/Graph.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace ampc {

/// The `id` each drawn element carries in the DOT, which Graphviz's SVG
/// keeps as the element's id (docs/inspect.md): node i in execution order
/// is "op_<i>", graph input k "in_<k>", state tensor k "st_<k>". The HTML
/// view finds its nodes in the SVG by them.
std::string dotOpId(unsigned index);
std::string dotInputId(unsigned index);
std::string dotStateId(unsigned index);

/// The colour class of a dtype name as explainPrecision spells it: "f32",
/// "bf16", "f16", or "other" (integers, f64, "-").
llvm::StringRef dotDTypeClass(llvm::StringRef dtype);

/// Prints g as one DOT digraph: a node per op (filled by the dtype it
/// computes in, casts drawn as red-bordered hexagons), a node per graph
/// input and state tensor, an edge per operand. Each role present
/// (forward, loss, backward, optimizer, loss scaling) is a cluster; inside
/// the forward and loss clusters, the nodes of one model-file layer are a
/// cluster, and those of one block instance a cluster around its layers.
/// Every element has an SVG class naming its role ("r-backward"), so a
/// page can hide a role, and op nodes a tooltip with --explain's reason
/// and the source location.
void printDot(const Graph &g, llvm::raw_ostream &os);

} // namespace ampc

#endif
