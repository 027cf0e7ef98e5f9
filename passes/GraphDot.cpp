//===- GraphDot.cpp - Graphviz DOT of a graph -------------------------------===//
//
// Layers and blocks are not in the IR; they are read back from what the
// frontend leaves on every node and value: the location of the model-file
// entry it came from, and a name that a block instance prefixes with its
// own ("layer0.q", "c1.conv2d_0"). A dotted prefix whose ops come from two
// or more locations is a block instance: a plain layer's other nodes
// ("fc1.weight", "fc1.weight.bf16") are state and casts, so it is never
// mistaken for a block. The items with one (innermost block,
// location) pair are one layer. Backward, optimizer and loss-scaling nodes
// keep their forward node's location but mostly have numbered names, so
// they are drawn in their role's cluster without layers.
//
// The layout is Graphviz's `dot`, whose cost is the length of the edges it
// must route through the ranks. Three rules keep training graphs compact
// (and their layout seconds rather than minutes):
//  - a state tensor (and so an op fed by state alone, a weight's cast) is
//    ranked below the other inputs of its first reader: a source would sit
//    as high as its reader allows, in ranks of the previous layer, and push
//    each layer's box to the right of the last;
//  - backward edges are laid out against their direction (drawn with the
//    arrow as computed), so the backward pass climbs back up beside the
//    forward pass and each gradient sits next to the activations it reads;
//  - a scalar read by many nodes (the learning rate, the loss scale's
//    inverse, the skip flag) gets no edges: they would cross the whole
//    drawing (its readers' tooltips name it, and the view lists it).
//
//===----------------------------------------------------------------------===//
#include "passes/GraphDot.h"

#include "ir/OpAttrs.h"
#include "ir/support/Utf8.h"
#include "passes/PrecisionReport.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <memory>

namespace ampc {

std::string dotOpId(unsigned index) { return "op_" + std::to_string(index); }
std::string dotInputId(unsigned index) { return "in_" + std::to_string(index); }
std::string dotStateId(unsigned index) { return "st_" + std::to_string(index); }

llvm::StringRef dotDTypeClass(llvm::StringRef dtype) {
  if (dtype == "f32" || dtype == "bf16" || dtype == "f16")
    return dtype;
  return "other";
}

namespace {

/// Text inside a DOT quoted string. Quotes and backslashes are escaped (in
/// a label Graphviz reads `\n`, `\l`, `\N` as line breaks and names, so a
/// backslash in a name must stay one), a line break becomes DOT's `\n`,
/// other control characters '?', and invalid UTF-8 U+FFFD (Graphviz
/// refuses it).
std::string esc(llvm::StringRef s) {
  std::string out;
  for (char c : validUtf8(s)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out;
}

std::string quote(llvm::StringRef s) { return "\"" + esc(s) + "\""; }

const char *fillOf(llvm::StringRef dtypeClass) {
  if (dtypeClass == "f32")
    return "#cfe2ff";
  if (dtypeClass == "bf16")
    return "#c9ecc9";
  if (dtypeClass == "f16")
    return "#ffd8a8";
  return "#e9ecef";
}

/// Edges take a darker shade of the colour of the dtype they carry.
const char *strokeOf(llvm::StringRef dtypeClass) {
  if (dtypeClass == "f32")
    return "#3d6fb4";
  if (dtypeClass == "bf16")
    return "#2e8b3e";
  if (dtypeClass == "f16")
    return "#d9822b";
  return "#8a8a8a";
}

/// CSS class names: "loss_scale" as the textual IR spells the role.
std::string roleClass(NodeRole r) { return ("r-" + roleName(r)).str(); }

/// The role's name in words: as roleName() spells it, but "loss scaling".
llvm::StringRef roleLabel(NodeRole r) {
  return r == NodeRole::LossScale ? "loss scaling" : roleName(r);
}

/// Cluster backgrounds: the forward pass plain, the parts a reader may
/// want out of the way tinted.
llvm::StringRef roleStyle(NodeRole r) {
  switch (r) {
  case NodeRole::Forward:
    return "style=\"rounded\", color=\"#6c757d\"";
  case NodeRole::Loss:
    return "style=\"rounded,filled\", color=\"#6c757d\", fillcolor=\"#f1efff\"";
  case NodeRole::Backward:
    return "style=\"rounded,filled\", color=\"#6c757d\", fillcolor=\"#f5f5f5\"";
  case NodeRole::Optimizer:
    return "style=\"rounded,filled\", color=\"#6c757d\", fillcolor=\"#fff8e1\"";
  case NodeRole::LossScale:
    return "style=\"rounded,filled\", color=\"#6c757d\", fillcolor=\"#fdeef0\"";
  }
  return "";
}

/// Where a graph input or state tensor is drawn: beside the layer that
/// reads it (parameters, buffers, inputs) or with the part that keeps it.
NodeRole placementOf(const Value &v) {
  if (v.isInput())
    return NodeRole::Forward;
  switch (v.stateKind()) {
  case StateKind::Parameter:
  case StateKind::Buffer:
    return NodeRole::Forward;
  case StateKind::OptimizerState:
  case StateKind::MasterWeight:
    return NodeRole::Optimizer;
  case StateKind::ScalerState:
    return NodeRole::LossScale;
  }
  return NodeRole::Forward;
}

/// One drawn node: an op, a graph input or a state tensor.
struct Item {
  const Node *node = nullptr;   ///< ops
  const Value *value = nullptr; ///< inputs and state
  NodeRole role = NodeRole::Forward;
  std::string dotName; ///< unique, quoted
  std::string name;    ///< the value name ("" for an op without results)
  Location loc;
  unsigned listIndex = 0; ///< in the graph's nodes, inputs or state
};

/// A role, a block instance or a layer. Entries keep first-appearance
/// order, so the output is deterministic and follows the model file.
struct Cluster {
  std::string label, cls, style;
  /// A layer is named after its first op that is not a cast ("fc1", not
  /// "fc1.weight.bf16"), else its first input or state tensor ("x", not
  /// "x.bf16"), else its first item: the rank of what named it so far.
  int namedBy = -1;
  struct Entry {
    int item = -1;
    Cluster *child = nullptr;
  };
  std::vector<Entry> entries;
  std::vector<std::unique_ptr<Cluster>> owned;
  llvm::StringMap<Cluster *> byKey;

  Cluster *child(llvm::StringRef key, llvm::StringRef label, llvm::StringRef cls,
                 llvm::StringRef style) {
    Cluster *&c = byKey[key];
    if (!c) {
      owned.push_back(std::make_unique<Cluster>());
      c = owned.back().get();
      c->label = label.str();
      c->cls = cls.str();
      c->style = style.str();
      entries.push_back({-1, c});
    }
    return c;
  }
};

bool isNumbered(llvm::StringRef name) { return name.empty() || llvm::all_of(name, llvm::isDigit); }

/// The proper dotted prefixes of `name` ("a.b.c" -> "a", "a.b").
llvm::SmallVector<llvm::StringRef, 4> prefixesOf(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef, 4> out;
  if (isNumbered(name))
    return out;
  for (size_t dot = name.find('.'); dot != llvm::StringRef::npos; dot = name.find('.', dot + 1))
    if (dot > 0)
      out.push_back(name.take_front(dot));
  return out;
}

class DotWriter {
public:
  DotWriter(const Graph &g, llvm::raw_ostream &os) : g_(g), os_(os) {}
  void print();

private:
  void collectItems();
  void buildClusters();
  void placeLayered(NodeRole role, Cluster &roleCluster, llvm::ArrayRef<unsigned> members);
  void printCluster(const Cluster &c, unsigned depth);
  void printItem(unsigned i, unsigned depth);
  void printEdges();
  void findFeeders();
  void printFeederEdges();
  bool isBroadcast(const Value *v) const;

  const Graph &g_;
  llvm::raw_ostream &os_;
  std::vector<Item> items_;
  std::vector<NodePrecision> precision_; ///< per op, in node order
  llvm::DenseMap<const Value *, unsigned> itemOfValue_;
  std::vector<std::unique_ptr<Cluster>> roles_;
  unsigned clusterCount_ = 0;
  /// Per item: whether it is fed by state alone, and the first reader that
  /// is not, which it is laid out with (see the file comment), or -1.
  std::vector<bool> feeder_;
  std::vector<int> anchor_;
};

void DotWriter::collectItems() {
  precision_ = explainPrecision(g_);
  unsigned i = 0;
  for (const Node &n : g_.nodes()) {
    Item it;
    it.node = &n;
    it.listIndex = i;
    it.role = n.role();
    it.loc = n.loc();
    if (n.numResults()) {
      it.name = n.result(0)->name().str();
      it.dotName = quote("op:" + it.name);
    } else {
      it.dotName = quote("op#" + std::to_string(i));
    }
    for (unsigned r = 0; r < n.numResults(); ++r)
      itemOfValue_[n.result(r)] = items_.size();
    items_.push_back(std::move(it));
    ++i;
  }
  auto addValue = [&](const Value *v, llvm::StringRef kind, unsigned k) {
    Item it;
    it.value = v;
    it.listIndex = k;
    it.role = placementOf(*v);
    it.loc = v->loc();
    it.name = v->name().str();
    it.dotName = quote(kind.str() + ":" + it.name);
    itemOfValue_[v] = items_.size();
    items_.push_back(std::move(it));
  };
  for (unsigned k = 0; k < g_.inputs().size(); ++k)
    addValue(g_.inputs()[k], "input", k);
  for (unsigned k = 0; k < g_.state().size(); ++k)
    addValue(g_.state()[k], "state", k);
}

void DotWriter::placeLayered(NodeRole role, Cluster &roleCluster,
                             llvm::ArrayRef<unsigned> members) {
  // Prefixes and the locations of their ops. Casts and state do not count:
  // an ONNX file gives each initializer a location of its own, which would
  // make "conv" (conv.weight, conv.bias and their casts) a block.
  llvm::StringMap<llvm::StringSet<>> locationsOf;
  for (unsigned i : members) {
    const Item &it = items_[i];
    if (it.node && it.node->kind() != OpKind::Cast && it.loc.known())
      for (llvm::StringRef p : prefixesOf(it.name))
        locationsOf[p].insert(it.loc.str());
  }
  auto isBlock = [&](llvm::StringRef p) {
    auto it = locationsOf.find(p);
    return it != locationsOf.end() && it->second.size() >= 2;
  };
  // Each item's innermost block and layer key; a layer of one item needs
  // no box of its own.
  struct Placement {
    llvm::SmallVector<llvm::StringRef, 4> blocks;
    std::string layerKey;
  };
  std::vector<Placement> placed;
  llvm::StringMap<unsigned> layerSize;
  for (unsigned i : members) {
    Placement p;
    for (llvm::StringRef prefix : prefixesOf(items_[i].name))
      if (isBlock(prefix))
        p.blocks.push_back(prefix);
    if (items_[i].loc.known()) {
      p.layerKey = (p.blocks.empty() ? "" : p.blocks.back().str()) + "\n" + items_[i].loc.str();
      ++layerSize[p.layerKey];
    }
    placed.push_back(std::move(p));
  }
  for (size_t k = 0; k < members.size(); ++k) {
    const Item &it = items_[members[k]];
    const Placement &p = placed[k];
    Cluster *c = &roleCluster;
    llvm::StringRef parent;
    for (llvm::StringRef block : p.blocks) {
      llvm::StringRef label = parent.empty() ? block : block.drop_front(parent.size() + 1);
      c = c->child("block\n" + block.str(), label, "block " + roleClass(role),
                   "style=\"rounded,bold\", color=\"#7a7a7a\"");
      parent = block;
    }
    if (!p.layerKey.empty() && layerSize[p.layerKey] >= 2) {
      // Relative to its block: "q" in block "layer0".
      llvm::StringRef label = it.name;
      if (!parent.empty() && label.startswith(parent.str() + "."))
        label = label.drop_front(parent.size() + 1);
      c = c->child("layer\n" + p.layerKey, label, "layer " + roleClass(role),
                   "style=\"rounded,dashed\", color=\"#9a9a9a\"");
      int rank = !it.node ? 1 : it.node->kind() == OpKind::Cast ? 0 : 2;
      if (rank > c->namedBy) {
        c->label = label.str();
        c->namedBy = rank;
      }
    }
    c->entries.push_back({static_cast<int>(members[k]), nullptr});
  }
}

void DotWriter::buildClusters() {
  const NodeRole order[] = {NodeRole::Forward, NodeRole::Loss, NodeRole::Backward,
                            NodeRole::Optimizer, NodeRole::LossScale};
  for (NodeRole role : order) {
    std::vector<unsigned> members;
    for (unsigned i = 0; i < items_.size(); ++i)
      if (items_[i].role == role)
        members.push_back(i);
    if (members.empty())
      continue;
    auto c = std::make_unique<Cluster>();
    c->label = roleLabel(role).str();
    c->cls = "role " + roleClass(role);
    c->style = roleStyle(role).str();
    if (role == NodeRole::Forward || role == NodeRole::Loss) {
      placeLayered(role, *c, members);
    } else {
      for (unsigned i : members)
        c->entries.push_back({static_cast<int>(i), nullptr});
    }
    roles_.push_back(std::move(c));
  }
}

void DotWriter::printCluster(const Cluster &c, unsigned depth) {
  std::string indent(2 * depth, ' ');
  unsigned id = clusterCount_++;
  os_ << indent << "subgraph \"cluster_" << id << "\" {\n";
  os_ << indent << "  graph [label=" << quote(c.label) << ", class=" << quote(c.cls) << ", "
      << c.style << "];\n";
  for (const Cluster::Entry &e : c.entries) {
    if (e.child)
      printCluster(*e.child, depth + 1);
    else
      printItem(static_cast<unsigned>(e.item), depth + 1);
  }
  os_ << indent << "}\n";
}

void DotWriter::printItem(unsigned i, unsigned depth) {
  const Item &it = items_[i];
  std::string indent(2 * depth, ' ');
  os_ << indent << it.dotName << " [";
  if (it.node) {
    const Node &n = *it.node;
    unsigned index = it.listIndex;
    const NodePrecision &p = precision_[index];
    llvm::StringRef dt = dotDTypeClass(p.precision);
    bool cast = n.kind() == OpKind::Cast;
    bool cacheable = cast && attrs::Cast(n).cacheable();
    bool isOutput = false;
    for (unsigned r = 0; r < n.numResults(); ++r)
      isOutput |= llvm::is_contained(g_.outputs(), n.result(r));
    std::string cls = "op " + roleClass(n.role()) + " dt-" + dt.str();
    if (cast)
      cls += cacheable ? " cast cacheable" : " cast";
    if (isOutput)
      cls += " output";
    // The label: what it is, what it is called, what it makes.
    std::string label;
    if (cast)
      label = esc(
          ("cast " + dtypeName(n.operand(0)->dtype()) + "\u2192" + dtypeName(n.result(0)->dtype()))
              .str());
    else
      label = esc(n.opName());
    if (n.numResults()) {
      label += "\\n" + esc("%" + it.name) + "\\n" + esc(n.result(0)->type().str());
      if (n.numResults() > 1)
        label += esc(" +" + std::to_string(n.numResults() - 1));
    }
    std::string tooltip = (n.numResults() ? "%" + it.name + " = " : std::string()) +
                          n.opName().str() + "\n" + p.precision + ": " + p.reason;
    if (n.loc().known())
      tooltip += "\n" + n.loc().str();
    llvm::SmallVector<const Value *, 4> scalars;
    for (const Value *v : n.operands())
      if (v && isBroadcast(v) && !llvm::is_contained(scalars, v))
        scalars.push_back(v);
    for (size_t k = 0; k < scalars.size(); ++k)
      tooltip += (k ? ", %" : "\nalso reads %") + scalars[k]->name().str();
    if (!scalars.empty())
      tooltip += " (edges not drawn)";
    os_ << "id=\"" << dotOpId(index) << "\", class=" << quote(cls) << ", label=\"" << label
        << "\", tooltip=" << quote(tooltip) << ", fillcolor=\"" << fillOf(dt) << "\"";
    if (cast)
      os_ << ", shape=hexagon, color=\"#c0392b\", penwidth=2"
          << (cacheable ? ", style=\"filled,dashed\"" : ", style=\"filled\"");
    else if (isOutput)
      os_ << ", penwidth=2.5";
  } else {
    const Value &v = *it.value;
    llvm::StringRef dt = dotDTypeClass(dtypeName(v.dtype()));
    bool input = v.isInput();
    unsigned k = it.listIndex;
    std::string kind = input ? "input" : stateKindKeyword(v.stateKind()).str();
    std::string cls = std::string(input ? "value input " : "value state ") + roleClass(it.role) +
                      " dt-" + dt.str();
    std::string tooltip = kind + " %" + it.name + " : " + v.type().str();
    if (v.loc().known())
      tooltip += "\n" + v.loc().str();
    os_ << "id=\"" << (input ? dotInputId(k) : dotStateId(k)) << "\", class=" << quote(cls)
        << ", shape=" << (input ? "invhouse" : "cylinder") << ", style=\"filled\", label=\""
        << esc("%" + it.name) << "\\n"
        << esc(kind + " " + v.type().str()) << "\", tooltip=" << quote(tooltip) << ", fillcolor=\""
        << fillOf(dt) << "\", fontsize=9";
  }
  os_ << "];\n";
}

void DotWriter::findFeeders() {
  // The first op reading each value, in execution order.
  llvm::DenseMap<const Value *, unsigned> firstReader;
  for (unsigned i = 0; i < items_.size(); ++i)
    if (const Node *n = items_[i].node)
      for (const Value *v : n->operands())
        if (v)
          firstReader.try_emplace(v, i);
  // Fed by state alone: state tensors, and ops (in execution order, so
  // their operands are decided first) all of whose operands are.
  std::vector<bool> &feeder = feeder_;
  feeder.assign(items_.size(), false);
  for (unsigned i = 0; i < items_.size(); ++i)
    if (items_[i].value)
      feeder[i] = items_[i].value->isState();
  for (unsigned i = 0; i < items_.size(); ++i) {
    const Item &it = items_[i];
    if (!it.node)
      continue;
    bool all = it.node->numOperands() > 0;
    for (const Value *v : it.node->operands()) {
      auto from = v ? itemOfValue_.find(v) : itemOfValue_.end();
      all = all && from != itemOfValue_.end() && feeder[from->second];
    }
    feeder[i] = all;
  }
  // Follow first readers to the first one that is not fed by state alone.
  anchor_.assign(items_.size(), -1);
  auto firstReaderOf = [&](unsigned i) -> int {
    const Item &it = items_[i];
    int best = -1;
    auto consider = [&](const Value *v) {
      auto r = firstReader.find(v);
      if (r != firstReader.end() && (best < 0 || static_cast<int>(r->second) < best))
        best = static_cast<int>(r->second);
    };
    if (it.value)
      consider(it.value);
    else
      for (unsigned r = 0; r < it.node->numResults(); ++r)
        consider(it.node->result(r));
    return best;
  };
  for (unsigned i = 0; i < items_.size(); ++i) {
    if (!feeder[i])
      continue;
    int at = firstReaderOf(i);
    while (at >= 0 && feeder[at])
      at = firstReaderOf(static_cast<unsigned>(at));
    anchor_[i] = at;
  }
}

bool DotWriter::isBroadcast(const Value *v) const {
  return v->type().rank() == 0 && v->uses().size() >= 3;
}

void DotWriter::printFeederEdges() {
  // A state tensor goes below what its anchor computes on: an invisible
  // edge from each of the anchor's other inputs (not from broadcast
  // scalars, nor along a backward edge, which is laid out reversed).
  for (unsigned i = 0; i < items_.size(); ++i) {
    if (anchor_[i] < 0 || !items_[i].value)
      continue;
    const Node &a = *items_[anchor_[i]].node;
    llvm::SmallVector<unsigned, 4> done;
    for (const Value *v : a.operands()) {
      auto from = v ? itemOfValue_.find(v) : itemOfValue_.end();
      if (from == itemOfValue_.end() || feeder_[from->second] || isBroadcast(v))
        continue;
      const Item &p = items_[from->second];
      if (p.node && p.node->role() == NodeRole::Backward && a.role() == NodeRole::Backward)
        continue;
      // A reader of the tensor itself would make a cycle.
      if (p.node && llvm::is_contained(p.node->operands(), items_[i].value))
        continue;
      if (llvm::is_contained(done, from->second))
        continue;
      done.push_back(from->second);
      os_ << "  " << p.dotName << " -> " << items_[i].dotName << " [style=invis, weight=0];\n";
    }
  }
}

void DotWriter::printEdges() {
  for (unsigned i = 0; i < items_.size(); ++i) {
    const Node *n = items_[i].node;
    if (!n)
      continue;
    llvm::SmallVector<const Value *, 4> seen;
    for (const Value *v : n->operands()) {
      if (!v || llvm::is_contained(seen, v))
        continue;
      seen.push_back(v);
      auto from = itemOfValue_.find(v);
      if (from == itemOfValue_.end())
        continue;
      const Item &src = items_[from->second];
      std::string cls = roleClass(src.role);
      if (src.role != n->role())
        cls += " " + roleClass(n->role());
      bool backward =
          src.node && src.node->role() == NodeRole::Backward && n->role() == NodeRole::Backward;
      if (isBroadcast(v))
        continue;
      const std::string &tail = backward ? items_[i].dotName : src.dotName;
      const std::string &head = backward ? src.dotName : items_[i].dotName;
      os_ << "  " << tail << " -> " << head << " [class=\"" << cls << "\", color=\""
          << strokeOf(dotDTypeClass(dtypeName(v->dtype()))) << "\"";
      if (backward)
        os_ << ", dir=back";
      os_ << "];\n";
    }
  }
}

void DotWriter::print() {
  collectItems();
  buildClusters();
  findFeeders();
  std::string title = g_.name();
  auto level = g_.meta().find("amp.opt_level");
  if (level != g_.meta().end() && level->second.is(AttrType::String))
    title += " (" + level->second.getString() + ")";
  os_ << "digraph " << quote(g_.name()) << " {\n";
  os_ << "  graph [label=" << quote(title)
      << ", labelloc=t, fontname=\"Helvetica\", fontsize=14, rankdir=TB, newrank=true, "
         "nodesep=0.25, ranksep=0.35];\n";
  os_ << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, "
         "color=\"#555555\", fillcolor=\"#e9ecef\", margin=\"0.08,0.03\"];\n";
  os_ << "  edge [arrowsize=0.6, color=\"#8a8a8a\"];\n";
  for (const std::unique_ptr<Cluster> &c : roles_)
    printCluster(*c, 1);
  printEdges();
  printFeederEdges();
  os_ << "}\n";
}

} // namespace

void printDot(const Graph &g, llvm::raw_ostream &os) { DotWriter(g, os).print(); }

} // namespace ampc
