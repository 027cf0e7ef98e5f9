//===- ampc/Graph.h - Reading (and, in host passes, editing) a graph -*- C++ -*-===//
//
// Views are small non-owning handles into a Model's graph: copy them freely.
// A view stays valid while its Model lives and until the next pass runs on
// it (passes create and erase nodes); take fresh views after a rewrite.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_GRAPH_H
#define AMPC_PUBLIC_GRAPH_H

#include "ampc/Export.h"
#include "ampc/Status.h"
#include "ampc/Types.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ampc {
// The internal IR; opaque here, so the public headers need none of it.
class Graph;
class Node;
class Value;
} // namespace ampc

namespace ampc::api {

class NodeView;

/// A tensor of the graph: an input, a state tensor or a node's result.
class AMPC_API ValueView {
public:
  ValueView() = default;
  bool valid() const { return v_ != nullptr; }
  explicit operator bool() const { return valid(); }

  /// Unique in the graph (the textual IR prints it as %name).
  std::string name() const;
  DType dtype() const;
  std::vector<int64_t> shape() const;
  TensorInfo info() const;
  /// "bf16[256, 1024]".
  std::string typeStr() const;

  bool isInput() const;
  bool isState() const;
  bool isResult() const;
  /// State tensors only.
  std::optional<StateKind> stateKind() const;
  /// False for frozen parameters.
  bool trainable() const;

  /// The node that computes it (an invalid view for inputs and state).
  NodeView producer() const;
  /// The nodes that read it, in graph order, each once.
  std::vector<NodeView> users() const;

  friend bool operator==(const ValueView &a, const ValueView &b) { return a.v_ == b.v_; }

private:
  friend struct Access;
  explicit ValueView(const ampc::Value *v) : v_(v) {}
  const ampc::Value *v_ = nullptr;
};

/// One op application.
class AMPC_API NodeView {
public:
  NodeView() = default;
  bool valid() const { return n_ != nullptr; }
  explicit operator bool() const { return valid(); }

  /// The op's name ("linear", "cast", or a custom op's name).
  std::string op() const;
  bool isCustomOp() const;
  bool isCast() const;
  /// The op's precision category (its registry row).
  Category category() const;
  NodeRole role() const;

  std::vector<ValueView> inputs() const;
  std::vector<ValueView> outputs() const;
  ValueView output(unsigned i = 0) const;

  /// The dtype assign-precision decided the node computes in (the
  /// `amp.precision` annotation of forward nodes), if it decided.
  std::optional<DType> precision() const;
  /// The rule behind it (`amp.reason`: "category: half", "neighbour: as its
  /// input", "amp.fp32_ops", ...); "" when undecided.
  std::string reason() const;
  /// "file:line:col" of the model-file entry it came from; "" when unknown.
  std::string location() const;

  /// Attributes set on the node (annotations included), by name.
  std::vector<std::string> attrNames() const;
  /// An attribute's value, or its declared default; nullopt when the op has
  /// no such attribute.
  std::optional<AttrValue> attr(std::string_view name) const;

  friend bool operator==(const NodeView &a, const NodeView &b) { return a.n_ == b.n_; }

private:
  friend struct Access;
  explicit NodeView(const ampc::Node *n) : n_(n) {}
  const ampc::Node *n_ = nullptr;
};

/// What `ampc` prints after compiling: "N of M ops in half, K casts".
struct PrecisionStats {
  unsigned ops = 0;     ///< nodes computing on floating data, casts excluded
  unsigned halfOps = 0; ///< of those, computing in f16/bf16
  unsigned casts = 0;
  uint64_t castBytes = 0; ///< bytes the casts write per step
  unsigned cacheableCasts = 0;
  uint64_t cacheableCastBytes = 0;
  std::string str;
};

/// A read-only view of a whole graph.
class AMPC_API GraphView {
public:
  GraphView() = default;
  bool valid() const { return g_ != nullptr; }

  std::string name() const;
  /// Every node, in execution order.
  std::vector<NodeView> nodes() const;
  size_t numNodes() const;
  std::vector<ValueView> inputs() const;
  std::vector<ValueView> outputs() const;
  /// Every state tensor, in declaration order.
  std::vector<ValueView> state() const;
  /// A value by name; an invalid view when there is none.
  ValueView findValue(std::string_view name) const;
  /// The cast nodes, in execution order.
  std::vector<NodeView> casts() const;
  /// Every value's structural key, by value name: what computes it (its
  /// op, the op's attributes but dtypes, its operands' keys; a cast's result
  /// keys as what it casts; the loss scaler's additions are looked through;
  /// each key is one value's: docs/inspect.md). Values of two opt levels of
  /// one model with equal keys hold the same quantity, gradients up to the
  /// loss scale (`ampc diff`, `ampc compare`).
  std::unordered_map<std::string, uint64_t> structuralKeys() const;

  /// The textual IR (docs/textual-ir.md); exactly what `ampc --emit ir` prints.
  std::string printIR() const;
  /// The graph as a model file (`ampc --emit yaml`).
  std::string toYaml() const;
  /// The graph as Graphviz DOT (`ampc --emit dot`; docs/inspect.md): nodes
  /// filled by compute dtype, casts drawn apart, a cluster per role and per
  /// model-file layer and block.
  std::string toDot() const;
  /// One line per node: its precision and the rule that chose it (`ampc --explain`).
  std::string explain() const;
  /// A data-parallel training graph's all-reduces, per rank and step:
  /// "data-parallel: 2 ranks, 3 all-reduce buckets, 12595200 bytes of
  /// gradients per optimizer step (f32)" (and SyncBatchNorm's statistics);
  /// "" for a graph of one rank (docs/distributed.md).
  std::string collectives() const;
  /// The optimizer's parameter groups (`groups:` in the model file), one
  /// line for the optimizer's own settings and one per group: its globs,
  /// the settings it changes and the parameters it holds (`ampc
  /// --explain`); "" for a model without groups.
  std::string parameterGroups() const;
  /// The forward values the backward computes again (train.recompute),
  /// one line; "" when none.
  std::string recomputed() const;
  PrecisionStats precisionStats() const;
  /// A graph-level setting (the textual IR's meta block: "amp.opt_level",
  /// "optimizer.lr", ...) as the textual IR spells it; nullopt when absent.
  std::optional<std::string> meta(std::string_view key) const;
  /// An integer setting ("train.steps", "train.log_every", ...); nullopt when
  /// absent or not an integer.
  std::optional<int64_t> metaInt(std::string_view key) const;
  /// Runs the verifier.
  Status verify() const;

protected:
  friend struct Access;
  explicit GraphView(const ampc::Graph *g) : g_(g) {}
  const ampc::Graph *g_ = nullptr;
};

/// What a host pass gets: the graph, and the edits a pass may make. Each
/// edit is checked as the built-in passes' edits are (operand counts and
/// types, attribute types, names); a failed edit leaves the graph as it was.
class AMPC_API GraphEditor : public GraphView {
public:
  /// Sets (or replaces) an attribute; the op must declare it, with that type.
  /// Names starting "amp." are annotations and are always accepted.
  Status setAttr(NodeView node, std::string_view name, AttrValue value);
  /// Pins a forward node's precision, as a layer's `precision:` key does:
  /// "fp32", "half" or "none". Takes effect in assign-precision, so insert
  /// the pass before it.
  Status setPrecisionOverride(NodeView node, std::string_view precision);
  /// Builds a node of `op` (built-in or custom) on `operands`, inserted
  /// before `before` (at the end when invalid); returns its results.
  Result<std::vector<ValueView>> insertNode(std::string_view op, std::vector<ValueView> operands,
                                            std::map<std::string, AttrValue> attrs = {},
                                            NodeView before = {});
  /// A cast of `value` to `to`, inserted right before `before`.
  Result<ValueView> insertCast(ValueView value, DType to, NodeView before);
  /// Points every reader of `from` (and the graph's outputs) at `to`, which
  /// must have the same type.
  Status replaceAllUses(ValueView from, ValueView to);
  /// Removes a node none of whose results is read.
  Status eraseNode(NodeView node);
  /// Whether any edit succeeded (the pass then reports "changed").
  bool changed() const { return changed_; }

private:
  friend struct Access;
  explicit GraphEditor(ampc::Graph *g) : GraphView(g), mg_(g) {}
  ampc::Graph *mg_ = nullptr;
  bool changed_ = false;
};

/// Writes `text` to `path` atomically (a temporary file in the same folder,
/// renamed over it), so a reader never sees half a file: for printIR() and
/// toYaml() output, as `ampc --emit ir -o FILE` writes it.
AMPC_API Status writeFileAtomically(const std::string &path, std::string_view text,
                                    bool writeThrough = false);

/// Checks, before any work, that `path` can be written as an output file:
/// not a directory, in an existing directory where a file can be created,
/// and not a symlink, device or FIFO unless `writeThrough` (which follows a
/// symlink to its target and writes into a device or FIFO in place). Also
/// removes temporary files a killed writer of `path` left behind.
AMPC_API Status checkOutputPath(const std::string &path, bool writeThrough = false);

} // namespace ampc::api

#endif
