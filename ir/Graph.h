//===- Graph.h - SSA graph: values, nodes, state ---------------------------===//
//
// A Graph is a list of Nodes in a valid execution order. Every Value has one
// producer: a graph input, a state tensor (parameters, buffers, optimizer
// moments, master weights, loss-scaler state), or a node result. Values keep
// their use lists. State is first-class: "what a checkpoint must hold" is
// Graph::state(). A state tensor's new value after a step is recorded as a
// StateUpdate (e.g. batchnorm running statistics, optimizer writes).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_GRAPH_H
#define AMPC_IR_GRAPH_H

#include "ir/Attribute.h"
#include "ir/Location.h"
#include "ir/OpRegistry.h"
#include "ir/TensorType.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/ilist.h"
#include "llvm/ADT/ilist_node.h"
#include "llvm/Support/Allocator.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampc {

class Graph;
class Node;

/// What a node is part of in a training step.
enum class NodeRole : uint8_t { Forward, Loss, Backward, Optimizer, LossScale };
llvm::StringRef roleName(NodeRole r);
std::optional<NodeRole> parseRole(llvm::StringRef s);

/// What a state tensor holds (what a checkpoint must save).
enum class StateKind : uint8_t { Parameter, Buffer, OptimizerState, MasterWeight, ScalerState };
/// Textual IR keywords: param, buffer, optstate, master, scaler.
llvm::StringRef stateKindKeyword(StateKind k);
std::optional<StateKind> parseStateKind(llvm::StringRef s);

/// A per-node precision request from the user (a layer's `precision:` key).
enum class PrecisionOverride : uint8_t { None, Fp32, Half };
llvm::StringRef precisionOverrideName(PrecisionOverride p);

/// How a state tensor gets its first value.
struct InitSpec {
  enum class Kind : uint8_t { None, Zeros, Ones, Constant, Uniform, Normal, File, Data };
  Kind kind = Kind::None;
  double a = 0;     ///< Constant: value; Uniform: low; Normal: mean
  double b = 0;     ///< Uniform: high; Normal: std
  std::string path; ///< File: an .npy file, or a container of named tensors
  /// File: the tensor's name in a container file (an ONNX model's
  /// initializer); empty for an .npy file. See ir/support/TensorFile.h.
  std::string key;
  /// Data: every element, in row-major order. A constant a frontend computed
  /// (an ONNX mask or index tensor folded at import) has no file to come
  /// from; it travels with the graph. Shared: copies of a graph share it.
  std::shared_ptr<const std::vector<double>> data;
  /// "zeros", "uniform(-0.1, 0.1)", "normal(0.0, 1.0)", "file(\"w.npy\")",
  /// "file(\"m.onnx\", \"fc.weight\")", "data(0.0, 1.0 x 3)" (a run of
  /// equal elements is written once with its length).
  std::string str() const;
  friend bool operator==(const InitSpec &x, const InitSpec &y) {
    return x.kind == y.kind && x.a == y.a && x.b == y.b && x.path == y.path && x.key == y.key &&
           (x.data == y.data || (x.data && y.data && equalBits(*x.data, *y.data)));
  }

private:
  /// Element-wise equality that also holds for NaN elements (a graph
  /// compares equal to its printed and parsed copy).
  static bool equalBits(const std::vector<double> &x, const std::vector<double> &y);
};

enum class ValueKind : uint8_t { Input, State, Result };

struct Use {
  Node *user;
  unsigned operandIndex;
};

class Value {
public:
  ValueKind kind() const { return kind_; }
  bool isInput() const { return kind_ == ValueKind::Input; }
  bool isState() const { return kind_ == ValueKind::State; }
  bool isResult() const { return kind_ == ValueKind::Result; }

  const TensorType &type() const { return type_; }
  DType dtype() const { return type_.dtype(); }
  void setType(TensorType t) { type_ = std::move(t); }

  /// Unique within the graph; the textual IR prints it as %name.
  llvm::StringRef name() const { return name_; }

  /// The producing node and result index (results only).
  Node *definingNode() const { return def_; }
  unsigned resultIndex() const { return resultIndex_; }

  /// In the order the uses were made (a use re-made by setOperand moves to
  /// the end).
  llvm::ArrayRef<Use> uses() const {
    if (deadUses_)
      compactUses();
    return uses_;
  }
  bool hasUses() const { return uses_.size() != deadUses_; }
  /// Point every use of this value at `other` instead.
  void replaceAllUsesWith(Value *other);

  // State tensors only.
  StateKind stateKind() const { return decl_ ? decl_->stateKind : StateKind::Parameter; }
  const InitSpec &init() const;
  void setInit(InitSpec s) { declaration().init = std::move(s); }
  /// False for frozen parameters (no gradient, no optimizer state).
  bool trainable() const { return decl_ ? decl_->trainable : true; }
  void setTrainable(bool t) { declaration().trainable = t; }

  /// Inputs and state: where they were declared. Results: their node's location.
  const Location &loc() const;

  /// Creation order; stable, so sorting by it is deterministic.
  uint64_t id() const { return id_; }

private:
  friend class Graph;
  friend class Node;
  Value(ValueKind k, TensorType t, uint64_t id) : kind_(k), id_(id), type_(std::move(t)) {}
  void addUse(Node *user, unsigned operandIndex);
  void removeUse(Node *user, unsigned operandIndex);
  void compactUses() const;

  /// What only inputs and state carry. Results, most of a training graph's
  /// values, leave it null and take their node's location: a result is 80
  /// bytes smaller for it.
  struct Declaration {
    StateKind stateKind = StateKind::Parameter;
    bool trainable = true;
    InitSpec init;
    Location loc;
  };
  Declaration &declaration();

  // The fields a pass's walk reads of every value (its kind, id, producer
  // and whether it has uses) come first, in the value's first 64 bytes: on
  // a graph far bigger than the caches each line a walk touches is a read
  // from memory (the 200k-node pipeline benchmark walks its graph about 13 times).
  ValueKind kind_;
  unsigned resultIndex_ = 0;
  uint64_t id_;
  Node *def_ = nullptr;
  mutable size_t deadUses_ = 0;
  // Removing a use leaves a hole (user null) instead of shifting the rest,
  // so dropping one use of a value with many (the learning rate, the loss
  // scale) costs O(1), not O(uses): passes that rebuild every optimizer
  // update would otherwise be quadratic. The holes are squeezed out, order
  // kept, before anyone reads the list and whenever they are the majority.
  mutable llvm::SmallVector<Use, 2> uses_;
  TensorType type_;
  /// Kept by the graph: the key of the value's entry in its name table, or
  /// for a fresh numeric name chars of its own (Graph::claimFreshName).
  llvm::StringRef name_;
  std::unique_ptr<Declaration> decl_;
};

/// Owns a Value that lives in its graph's arena: destroys it and leaves the
/// memory to the arena.
struct DestroyInArena {
  void operator()(Value *v) const;
};
using ArenaValuePtr = std::unique_ptr<Value, DestroyInArena>;

class Node : public llvm::ilist_node<Node> {
public:
  ~Node();
  Node(const Node &) = delete;
  Node &operator=(const Node &) = delete;

  const OpInfo &op() const { return *op_; }
  OpKind kind() const { return op_->kind; }
  llvm::StringRef opName() const { return op_->name; }

  llvm::ArrayRef<Value *> operands() const { return operands_; }
  Value *operand(unsigned i) const { return operands_[i]; }
  unsigned numOperands() const { return operands_.size(); }
  void setOperand(unsigned i, Value *v);
  /// Replaces every operand, the use of each re-made in operand order (as a
  /// node built afresh with these operands would make them).
  void setOperands(llvm::ArrayRef<Value *> operands);

  unsigned numResults() const { return results_.size(); }
  Value *result(unsigned i = 0) const { return results_[i].get(); }
  llvm::SmallVector<Value *, 2> results() const;

  const AttrMap &attrs() const { return attrs_; }
  const Attribute *findAttr(llvm::StringRef n) const;
  /// Attribute value or the op's default. Asserts the op declares it.
  const Attribute &attr(llvm::StringRef n) const;
  void setAttr(llvm::StringRef n, Attribute a) { attrs_.insert_or_assign(n, std::move(a)); }

  const Location &loc() const { return loc_; }
  void setLoc(Location l) { loc_ = std::move(l); }
  NodeRole role() const { return role_; }
  void setRole(NodeRole r) { role_ = r; }
  PrecisionOverride precisionOverride() const { return precision_; }
  void setPrecisionOverride(PrecisionOverride p) { precision_ = p; }

  Graph *graph() const { return graph_; }
  uint64_t id() const { return id_; }

private:
  friend class Graph;
  friend class Value;
  Node(Graph *g, const OpInfo *op, uint64_t id) : op_(op), id_(id), graph_(g) {}

  // After the list links, the fields that walks over every node read (its
  // op, id, role and first result) fill the node's first 64 bytes; the
  // arena keeps nodes 64-byte aligned (Graph::createNode). See Value.
  const OpInfo *op_;
  uint64_t id_;
  NodeRole role_ = NodeRole::Forward;
  PrecisionOverride precision_ = PrecisionOverride::None;
  llvm::SmallVector<ArenaValuePtr, 1> results_;
  Graph *graph_;
  llvm::SmallVector<Value *, 4> operands_;
  /// Per operand: where its use sits in the operand's use list.
  llvm::SmallVector<unsigned, 4> useSlots_;
  AttrMap attrs_;
  Location loc_;
};

} // namespace ampc

/// Nodes live in their graph's arena (Graph::arena_): erasing one from the
/// list destroys it and leaves the memory to the arena.
template <> struct llvm::ilist_alloc_traits<ampc::Node> {
  static void deleteNode(ampc::Node *n) { n->~Node(); }
};

namespace ampc {

/// After a step, `state` holds the value of `newValue`.
struct StateUpdate {
  Value *state;
  Value *newValue;
};

class Graph {
public:
  using NodeList = llvm::iplist<Node>;

  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  ~Graph();
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  // --- Declarations ------------------------------------------------------
  /// A graph input (data fed each step). The name must be free (see isNameFree).
  Value *addInput(llvm::StringRef name, TensorType type, Location loc = {});
  Value *addState(llvm::StringRef name, TensorType type, StateKind kind, InitSpec init = {},
                  Location loc = {});

  // --- Nodes --------------------------------------------------------------
  /// Creates a node with the given result types and names (empty name: a
  /// fresh numeric one) and inserts it before `before` (end by default).
  /// Does no checking: use buildNode (ir/Builder.h) to infer and validate.
  Node *createNode(const OpInfo &op, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                   llvm::ArrayRef<TensorType> resultTypes, llvm::ArrayRef<std::string> names,
                   Location loc, Node *before = nullptr);
  /// Removes a node whose results have no uses.
  void eraseNode(Node *n);
  /// Appends a result to `n` (empty name: a fresh numeric one, else it must
  /// be free).
  Value *addResult(Node *n, TensorType type, llvm::StringRef name);
  /// Moves `n` to just before `before` (the end when null).
  void moveNode(Node *n, Node *before);

  NodeList &nodes() { return nodes_; }
  const NodeList &nodes() const { return nodes_; }
  /// O(1): counted as nodes are created and erased (simple_ilist::size walks the list).
  size_t numNodes() const { return nodeCount_; }

  // --- Values -------------------------------------------------------------
  llvm::ArrayRef<Value *> inputs() const { return inputs_; }
  /// Every state tensor, in declaration order.
  llvm::ArrayRef<Value *> state() const { return state_; }
  /// State tensors of one kind, in declaration order.
  std::vector<Value *> state(StateKind k) const;

  llvm::ArrayRef<Value *> outputs() const { return outputs_; }
  void addOutput(Value *v) { outputs_.push_back(v); }
  void setOutputs(std::vector<Value *> v) { outputs_ = std::move(v); }

  llvm::ArrayRef<StateUpdate> stateUpdates() const { return updates_; }
  void addStateUpdate(Value *state, Value *newValue) { updates_.push_back({state, newValue}); }
  void setStateUpdates(std::vector<StateUpdate> u) { updates_ = std::move(u); }

  Value *lookup(llvm::StringRef name) const;
  /// Gives v a new name, which must be free.
  void renameValue(Value *v, llvm::StringRef newName);
  /// Gives a the name of b and b the name of a.
  void swapNames(Value *a, Value *b);
  bool isNameFree(llvm::StringRef name) const;
  /// `base` if free, else base_1, base_2, ...
  std::string uniqueName(llvm::StringRef base) const;

  /// Graph-level metadata that is not ops (model name, batch, loss kind,
  /// optimizer and training settings), printed in the textual IR's meta block.
  AttrMap &meta() { return meta_; }
  const AttrMap &meta() const { return meta_; }
  /// Where a meta key was written (the model file's or the IR's position),
  /// for errors about it found later (the precision policy); unknown when
  /// the key came from elsewhere (a command-line override, a pass).
  Location metaLocation(llvm::StringRef key) const {
    auto it = metaLocations_.find(key);
    return it == metaLocations_.end() ? Location() : it->second;
  }
  void setMetaLocation(llvm::StringRef key, Location loc) { metaLocations_[key] = std::move(loc); }
  const llvm::StringMap<Location> &metaLocations() const { return metaLocations_; }

  /// Where the graph was defined (the model file, the IR's first line), for
  /// errors about the graph as a whole ("the graph has no loss").
  const Location &loc() const { return loc_; }
  void setLoc(Location loc) { loc_ = std::move(loc); }

  /// One past the largest value or node id so far: the size an IdMap needs
  /// for every key the graph has now.
  uint64_t idBound() const { return nextId_; }

  /// Fresh numeric value name (used for unnamed results).
  std::string freshName();

private:
  /// Names a declared value and takes ownership of it.
  Value *registerValue(ArenaValuePtr v, llvm::StringRef name);
  /// A new, unnamed Value in the value arena.
  ArenaValuePtr makeValue(ValueKind k, TensorType t);
  /// Enters `v` in the name table under `name`, which must be free.
  void claimName(Value *v, llvm::StringRef name);
  /// Gives `v` the next free numeric name, recorded in freshNamed_.
  void claimFreshName(Value *v);

  std::string name_;
  /// Where nodes and values live: nodes in one arena, values in another.
  /// Graphs grow to hundreds of thousands of nodes, which passes walk over
  /// and over: one allocation per node and value spread them over the heap,
  /// and the walks then miss the caches at every step. Nodes made one after
  /// another sit one after another, 192 bytes apart, so a walk of the node
  /// list reads memory in order and the prefetcher keeps up (a walk over
  /// 200k nodes: 18 ms with nodes and values interleaved in one arena,
  /// 3.3 ms apart). An erased node's memory is reused only when the graph
  /// goes (a pass erases a small share of what it builds). Declared before
  /// the lists so that they outlive their destruction.
  llvm::BumpPtrAllocator nodeArena_;
  llvm::BumpPtrAllocator valueArena_;
  NodeList nodes_;
  size_t nodeCount_ = 0;
  std::vector<ArenaValuePtr> declared_; // inputs and state (owned)
  std::vector<Value *> inputs_;
  std::vector<Value *> state_;
  std::vector<Value *> outputs_;
  std::vector<StateUpdate> updates_;
  /// Name entries in an arena of their own, for the same reason. A value's
  /// name is its entry's key (claimName).
  llvm::StringMap<Value *, llvm::BumpPtrAllocator> names_;
  /// The values that hold fresh numeric names, by number (null where the
  /// number is unused or was freed). Most of a training graph's values are
  /// results named so; in the hash table each would cost a probe at a
  /// random slot of a table of millions (a miss in every cache at 200k
  /// nodes), here it is the next slot of an array. Their chars lie in
  /// freshNameChars_, in order. Names given explicitly, numeric ones
  /// included (the textual IR's), go to names_.
  std::vector<Value *> freshNamed_;
  llvm::BumpPtrAllocator freshNameChars_;
  /// Whether names_ may hold a numeric name, which a fresh one must avoid.
  bool numericNamesInTable_ = false;
  AttrMap meta_;
  llvm::StringMap<Location> metaLocations_;
  Location loc_;
  uint64_t nextId_ = 0;
  uint64_t nextFreshName_ = 0;

  friend class Node;
  /// Frees v's name if v holds it.
  void forgetName(const Value *v);
  /// The slot of freshNamed_ that holds `name`, when it is a fresh numeric
  /// name in use; else null.
  Value *const *freshSlot(llvm::StringRef name) const;
  Value **freshSlot(llvm::StringRef name) {
    return const_cast<Value **>(static_cast<const Graph *>(this)->freshSlot(name));
  }
  /// What records which value holds v's name: its slot of freshNamed_ or
  /// its entry's value in names_.
  Value *&nameHolder(const Value *v);
  /// Unlinks a name's entry from the table without destroying it, so that
  /// the value's name (the entry's key) stays readable: a StringRef to a
  /// name read before a rename or an erase never dangles, and nothing is
  /// handed back to the arena (whose Deallocate would poison it under
  /// AddressSanitizer). The memory goes with the graph.
  void unlinkName(llvm::StringMapEntry<Value *> &entry) { names_.remove(&entry); }
};

/// A list of losses (`loss: [...]` in a model file) is weighted and summed by
/// loss-role nodes that read only loss results: they combine losses. The
/// terms under them read the model's predictions (their operand 0).
bool combinesLosses(const Node &n);

/// The terms the loss `total` sums: the operands of its tree of loss-role
/// `add` nodes, left to right (a weighted term is its `scale` node). A loss
/// that is no sum is its own single term.
std::vector<Value *> lossTerms(Value *total);

} // namespace ampc

#endif
