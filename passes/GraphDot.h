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

#include <memory>
#include <string>
#include <utility>
#include <vector>

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

/// The id of box k of a folded drawing ("blk_<k>").
std::string dotBoxId(unsigned index);

/// What a drawing would give Graphviz to lay out: its cost grows with the
/// nodes and, faster, with the length of the edges it routes through the
/// ranks (a long edge is a chain of hidden nodes, one a rank).
struct DotSize {
  size_t nodes = 0; ///< drawn ops, inputs, state tensors and boxes
  size_t boxes = 0; ///< of which boxes
  size_t edges = 0; ///< drawn edges (not the hidden ones that only rank)
  /// The ranks all edges cross, hidden ones included, as a longest-path
  /// ranking puts them: an estimate of the hidden nodes Graphviz adds.
  size_t span = 0;
};

/// One box of a folded drawing: what one block instance does in one role.
struct DotBox {
  std::string id;    ///< dotBoxId: the SVG element's id
  std::string block; ///< the instance as its nodes' names spell it
  std::string label; ///< its name inside the block around it ("denselayer8")
  NodeRole role = NodeRole::Forward;
  std::string dtype; ///< the dtype class most of its ops compute in
  /// What it draws as one: nodes in execution order, graph inputs and
  /// state tensors, by their index in the graph's lists (dotOpId, ...).
  std::vector<unsigned> ops, inputs, state;
  /// Its ops by dtype ("bf16", 12) and by kind ("conv2d", 2), most first,
  /// and its casts by conversion ("f32→bf16", 3).
  std::vector<std::pair<std::string, unsigned>> dtypes, kinds, casts;
};

/// The graph, read once, ready to print as DOT with every node or folded.
/// Folding at depth d draws each block instance d levels deep (inside d-1
/// others), and each shallower one with no blocks inside, as one box with
/// what it holds; the other shallower ones stay clusters around their nodes
/// and boxes. A backward, optimizer or loss-scaling node goes with the
/// instance of the forward node whose location it keeps (for an optimizer
/// update, its parameter's), in its own role's box; a state tensor (and its
/// casts) with the node that first reads it. The edges between two drawn
/// nodes are one; edges that would cross the whole drawing are left out
/// (a box's state read by other forward boxes, the many edges into a node
/// that reads another role's boxes from all over: the loss-scaling check).
class DotDrawing {
public:
  explicit DotDrawing(const Graph &g);
  ~DotDrawing();
  DotDrawing(const DotDrawing &) = delete;
  DotDrawing &operator=(const DotDrawing &) = delete;

  /// The deepest block instance's depth: folding at 1..maxFoldDepth()
  /// draws boxes; 0 when the graph has no blocks.
  unsigned maxFoldDepth() const;
  /// What print(os, foldDepth) would draw.
  DotSize size(unsigned foldDepth) const;
  /// The boxes of the drawing at foldDepth (none at 0), in drawing order.
  std::vector<DotBox> boxes(unsigned foldDepth) const;
  /// Prints the drawing at foldDepth (0: every node) as one digraph.
  void print(llvm::raw_ostream &os, unsigned foldDepth = 0) const;

private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// Prints g as one DOT digraph: a node per op (filled by the dtype it
/// computes in, casts drawn as red-bordered hexagons), a node per graph
/// input and state tensor, an edge per operand. Each role present
/// (forward, loss, backward, optimizer, loss scaling) is a cluster; inside
/// the forward and loss clusters, the nodes of one model-file layer are a
/// cluster, and those of one block instance a cluster around its layers.
/// Every element has an SVG class naming its role ("r-backward"), so a
/// page can hide a role, and op nodes a tooltip with --explain's reason
/// and the source location. DotDrawing(g).print(os).
void printDot(const Graph &g, llvm::raw_ostream &os);

} // namespace ampc

#endif
