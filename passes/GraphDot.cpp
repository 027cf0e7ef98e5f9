//===- GraphDot.cpp - Graphviz DOT of a graph -------------------------------===//
//
// Layers and blocks are not in the IR; they are read back from what the
// frontend leaves on every node and value: the location of the model-file
// entry it came from, and a name that a block instance prefixes with its
// own: dotted in a model file ("layer0.q", "c1.conv2d_0"), a path in an
// ONNX file exported by PyTorch ("/layer1/layer1.0/conv1/Conv_output_0").
// A prefix whose ops come from two or more locations is a block instance:
// a plain layer's other nodes ("fc1.weight", "fc1.weight.bf16") are state
// and casts, so it is never mistaken for a block. The items with one
// (innermost block, location) pair are one layer. Backward, optimizer and
// loss-scaling nodes keep their forward node's location but mostly have
// numbered names, so they are drawn in their role's cluster without layers.
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
// And `nslimit` bounds the network simplex that sets x coordinates, which
// otherwise ran for minutes on graphs of a thousand nodes (ResNet-50's
// training graph: 4.9 s unbounded, 1.5 s at 1, the same drawing size).
//
// Graphs of thousands of nodes still take minutes (DenseNet's
// concatenations make hundreds of thousands of hidden nodes), so a drawing
// can be folded (DotDrawing): each block instance one box. Backward nodes
// are folded with the instance of the forward node whose location they
// keep, which needs locations mapped to instances for every node: see
// findFoldChains.
//
//===----------------------------------------------------------------------===//
#include "passes/GraphDot.h"

#include "ir/OpAttrs.h"
#include "ir/support/Utf8.h"
#include "passes/PrecisionReport.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <map>
#include <memory>
#include <optional>

namespace ampc {

std::string dotOpId(unsigned index) { return "op_" + std::to_string(index); }
std::string dotInputId(unsigned index) { return "in_" + std::to_string(index); }
std::string dotStateId(unsigned index) { return "st_" + std::to_string(index); }
std::string dotBoxId(unsigned index) { return "blk_" + std::to_string(index); }

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

/// The block instances around a node, outermost first: prefixes of its
/// name ("layer0" for "layer0.q").
using Chain = llvm::SmallVector<llvm::StringRef, 4>;

/// One drawn node: an op, a graph input or a state tensor.
struct Item {
  const Node *node = nullptr;   ///< ops
  const Value *value = nullptr; ///< inputs and state
  NodeRole role = NodeRole::Forward;
  std::string dotName; ///< unique, quoted
  std::string name;    ///< the value name ("" for an op without results)
  Location loc;
  std::string locKey;     ///< loc.str(), "" when unknown
  unsigned listIndex = 0; ///< in the graph's nodes, inputs or state
  /// Forward and loss items: the block instances of their names, drawn as
  /// boxes around them.
  Chain blocks;
  /// Every item: the instances it is folded with (see DotDrawing).
  Chain folded;
};

/// What a folded drawing draws as one node: the items of one block
/// instance in one role.
struct Box {
  NodeRole role = NodeRole::Forward;
  Chain chain;                   ///< the instance (last) and the blocks around it
  std::vector<unsigned> members; ///< items, in order
};

/// Which items a drawing draws as boxes (none at depth 0).
struct Folding {
  unsigned depth = 0;
  std::vector<int> boxOf; ///< per item: its box, or -1 when drawn itself
  std::vector<Box> boxes;
};

/// One drawn edge, between drawn nodes: items are numbered as they are,
/// box k is items + k.
struct Edge {
  unsigned tail = 0, head = 0;
  std::string cls;
  llvm::StringRef color;
  bool backward = false; ///< laid out against its direction
  bool hidden = false;   ///< only ranks its head below its tail
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
    int box = -1;
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
      entries.push_back({-1, c, -1});
    }
    return c;
  }
};

bool isNumbered(llvm::StringRef name) { return name.empty() || llvm::all_of(name, llvm::isDigit); }

/// The proper prefixes of `name` that may name a block instance. A name
/// with a '/' is a path, as an ONNX file exported by PyTorch names values
/// ("/features/denseblock2/denselayer8/conv1/Conv_output_0": "/features",
/// "/features/denseblock2", ...; its module names may hold dots,
/// "/layer1/layer1.0/conv1"); any other is dotted ("a.b.c": "a", "a.b").
llvm::SmallVector<llvm::StringRef, 4> prefixesOf(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef, 4> out;
  if (isNumbered(name))
    return out;
  char sep = name.contains('/') ? '/' : '.';
  for (size_t at = name.find(sep); at != llvm::StringRef::npos; at = name.find(sep, at + 1))
    if (at > 0)
      out.push_back(name.take_front(at));
  return out;
}

/// `name` inside the block `parent` that holds it, as its box is labelled:
/// "q" in "layer0" for "layer0.q", "denselayer8" in "/features/denseblock2";
/// a path outside any block loses its leading '/'.
llvm::StringRef relativeName(llvm::StringRef name, llvm::StringRef parent) {
  if (!parent.empty() && name.size() > parent.size() + 1 && name.startswith(parent) &&
      (name[parent.size()] == '.' || name[parent.size()] == '/'))
    return name.drop_front(parent.size() + 1);
  if (parent.empty() && name.size() > 1 && name.front() == '/')
    return name.drop_front();
  return name;
}

/// The parts of a model file that layers and blocks are read from.
bool isLayered(NodeRole r) { return r == NodeRole::Forward || r == NodeRole::Loss; }

/// "f32 12, bf16 3": counts, most first (ties by name, so the text is
/// deterministic).
std::vector<std::pair<std::string, unsigned>> byCount(const std::map<std::string, unsigned> &m) {
  std::vector<std::pair<std::string, unsigned>> out(m.begin(), m.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto &a, const auto &b) { return a.second > b.second; });
  return out;
}

std::string countList(llvm::ArrayRef<std::pair<std::string, unsigned>> counts,
                      llvm::StringRef sep = ", ") {
  std::string out;
  for (const auto &[what, n] : counts)
    out += (out.empty() ? "" : sep.str()) + what + " " + std::to_string(n);
  return out;
}

} // namespace

class DotDrawing::Impl {
public:
  explicit Impl(const Graph &g);
  unsigned maxDepth() const { return maxDepth_; }
  Folding fold(unsigned depth) const;
  std::vector<Edge> edges(const Folding &f) const;
  DotSize size(const Folding &f) const;
  DotBox summary(const Folding &f, unsigned box) const;
  void print(llvm::raw_ostream &os, const Folding &f) const;

private:
  void collectItems();
  void findBlocks(llvm::ArrayRef<unsigned> members);
  void findFeeders();
  void findFoldChains();
  /// Per location, items there with different instances.
  using InstancesAt = llvm::StringMap<llvm::SmallVector<unsigned, 2>>;
  bool chainFromLocation(unsigned i, const InstancesAt &instancesAt, const Chain *recent);
  void chainsFromNeighbours();
  void place(NodeRole role, Cluster &roleCluster, llvm::ArrayRef<unsigned> members,
             const Folding &f) const;
  bool isBroadcast(const Value *v) const;
  unsigned drawnOf(const Folding &f, unsigned item) const {
    return f.boxOf[item] < 0 ? item : static_cast<unsigned>(items_.size() + f.boxOf[item]);
  }
  void addEdges(const Folding &f, std::vector<Edge> &out) const;
  bool isHub(const Folding &f, unsigned i) const;
  bool isSharedState(const Folding &f, unsigned src, unsigned reader) const;
  void addFeederEdges(const Folding &f, std::vector<Edge> &out) const;

  const Graph &g_;
  std::vector<Item> items_;
  std::vector<NodePrecision> precision_; ///< per op, in node order
  llvm::DenseMap<const Value *, unsigned> itemOfValue_;
  /// Per item: whether it is fed by state alone, and the first reader that
  /// is not, which it is laid out with (see the file comment), or -1.
  std::vector<bool> feeder_;
  std::vector<int> anchor_;
  unsigned maxDepth_ = 0;
};

namespace {

/// Prints one drawing: the clusters, the nodes and boxes, the edges.
class Printer {
public:
  Printer(const Graph &g, llvm::raw_ostream &os, const std::vector<Item> &items,
          const std::vector<NodePrecision> &precision,
          llvm::function_ref<bool(const Value *)> isBroadcast,
          llvm::function_ref<DotBox(unsigned)> summary)
      : g_(g), os_(os), items_(items), precision_(precision), isBroadcast_(isBroadcast),
        summary_(summary) {}
  void printCluster(const Cluster &c, unsigned depth);
  void printEdge(const Edge &e);
  std::string dotNameOf(unsigned drawn) const {
    return drawn < items_.size() ? items_[drawn].dotName : boxName(drawn - items_.size());
  }
  static std::string boxName(unsigned box) { return "\"box#" + std::to_string(box) + "\""; }

private:
  void printItem(unsigned i, unsigned depth);
  void printBox(unsigned box, unsigned depth);

  const Graph &g_;
  llvm::raw_ostream &os_;
  const std::vector<Item> &items_;
  const std::vector<NodePrecision> &precision_;
  llvm::function_ref<bool(const Value *)> isBroadcast_;
  llvm::function_ref<DotBox(unsigned)> summary_;
  unsigned clusterCount_ = 0;
};

void Printer::printCluster(const Cluster &c, unsigned depth) {
  std::string indent(2 * depth, ' ');
  unsigned id = clusterCount_++;
  os_ << indent << "subgraph \"cluster_" << id << "\" {\n";
  os_ << indent << "  graph [label=" << quote(c.label) << ", class=" << quote(c.cls) << ", "
      << c.style << "];\n";
  for (const Cluster::Entry &e : c.entries) {
    if (e.child)
      printCluster(*e.child, depth + 1);
    else if (e.box >= 0)
      printBox(static_cast<unsigned>(e.box), depth + 1);
    else
      printItem(static_cast<unsigned>(e.item), depth + 1);
  }
  os_ << indent << "}\n";
}

void Printer::printItem(unsigned i, unsigned depth) {
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
      if (v && isBroadcast_(v) && !llvm::is_contained(scalars, v))
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

/// A folded instance: its name, how many ops in which dtypes, filled by the
/// dtype most of them compute in; the tooltip counts them by kind.
void Printer::printBox(unsigned box, unsigned depth) {
  DotBox s = summary_(box);
  size_t ops = s.ops.size();
  unsigned casts = 0;
  for (const auto &c : s.casts)
    casts += c.second;
  std::string counts = std::to_string(ops) + (ops == 1 ? " op" : " ops");
  if (casts)
    counts += " (" + std::to_string(casts) + (casts == 1 ? " cast)" : " casts)");
  std::string role = isLayered(s.role) ? "" : " (" + roleLabel(s.role).str() + ")";
  std::string tooltip = s.block + role + "\n" + counts;
  if (!s.dtypes.empty())
    tooltip += "\ncomputes in " + countList(s.dtypes);
  if (!s.kinds.empty())
    tooltip += "\nops: " + countList(s.kinds);
  if (!s.casts.empty())
    tooltip += "\ncasts: " + countList(s.casts);
  if (!s.inputs.empty() || !s.state.empty())
    tooltip += "\nreads " + std::to_string(s.inputs.size() + s.state.size()) +
               " inputs and state tensors drawn inside";
  std::string indent(2 * depth, ' ');
  os_ << indent << boxName(box) << " [id=\"" << s.id << "\", class=\"fold " << roleClass(s.role)
      << " dt-" << s.dtype << "\", shape=box3d, style=\"filled\", penwidth=1.5, label=\""
      << esc(s.label) << "\\n"
      << esc(counts) << "\\n"
      << esc(countList(s.dtypes, " \u00b7 ")) << "\", tooltip=" << quote(tooltip)
      << ", fillcolor=\"" << fillOf(s.dtype) << "\"];\n";
}

void Printer::printEdge(const Edge &e) {
  os_ << "  " << dotNameOf(e.tail) << " -> " << dotNameOf(e.head);
  if (e.hidden) {
    os_ << " [style=invis, weight=0];\n";
    return;
  }
  os_ << " [class=\"" << e.cls << "\", color=\"" << e.color << "\"";
  if (e.backward)
    os_ << ", dir=back";
  os_ << "];\n";
}

} // namespace

DotDrawing::Impl::Impl(const Graph &g) : g_(g) {
  collectItems();
  for (NodeRole role : {NodeRole::Forward, NodeRole::Loss}) {
    std::vector<unsigned> members;
    for (unsigned i = 0; i < items_.size(); ++i)
      if (items_[i].role == role)
        members.push_back(i);
    findBlocks(members);
  }
  findFeeders();
  findFoldChains();
  for (const Item &it : items_)
    maxDepth_ = std::max<unsigned>(maxDepth_, it.folded.size());
}

void DotDrawing::Impl::collectItems() {
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
  for (Item &it : items_)
    if (it.loc.known())
      it.locKey = it.loc.str();
}

void DotDrawing::Impl::findBlocks(llvm::ArrayRef<unsigned> members) {
  // Prefixes and the locations of their ops. Casts and state do not count:
  // an ONNX file gives each initializer a location of its own, which would
  // make "conv" (conv.weight, conv.bias and their casts) a block.
  llvm::StringMap<llvm::StringSet<>> locationsOf;
  for (unsigned i : members) {
    const Item &it = items_[i];
    if (it.node && it.node->kind() != OpKind::Cast && it.loc.known())
      for (llvm::StringRef p : prefixesOf(it.name))
        locationsOf[p].insert(it.locKey);
  }
  for (unsigned i : members)
    for (llvm::StringRef prefix : prefixesOf(items_[i].name)) {
      auto at = locationsOf.find(prefix);
      if (at != locationsOf.end() && at->second.size() >= 2)
        items_[i].blocks.push_back(prefix);
    }
}

bool DotDrawing::Impl::chainFromLocation(unsigned i, const InstancesAt &instancesAt,
                                         const Chain *recent) {
  Item &it = items_[i];
  auto at = it.locKey.empty() ? instancesAt.end() : instancesAt.find(it.locKey);
  if (at == instancesAt.end())
    return false;
  const llvm::SmallVector<unsigned, 2> &owners = at->second;
  if (owners.size() == 1) {
    it.folded = items_[owners.front()].folded;
    return true;
  }
  // The instances of a model file's block share its layers' locations: an
  // op takes the instance of a forward value it reads, where that is one of
  // them (a backward op reads its forward node's activations or weights),
  // else that of the op before it in its role (the backward ops of one
  // forward node are built together), else that of a value of its own role
  // it reads.
  auto pick = [&](const Chain &c) {
    for (unsigned owner : owners)
      if (items_[owner].folded == c) {
        it.folded = c;
        return true;
      }
    return false;
  };
  auto fromOperands = [&](bool forward) {
    if (it.node)
      for (const Value *v : it.node->operands()) {
        auto from = v ? itemOfValue_.find(v) : itemOfValue_.end();
        if (from == itemOfValue_.end() || from->second == i ||
            isLayered(items_[from->second].role) != forward)
          continue;
        if (pick(items_[from->second].folded))
          return true;
      }
    return false;
  };
  if (fromOperands(true) || (recent && pick(*recent)) || fromOperands(false))
    return true;
  // Nothing to go by: the backward pass starts at the last instance.
  it.folded = items_[it.role == NodeRole::Backward ? owners.back() : owners.front()].folded;
  return true;
}

void DotDrawing::Impl::findFoldChains() {
  for (Item &it : items_)
    if (isLayered(it.role))
      it.folded = it.blocks;
  // A location's instances: those of the items there that have any.
  InstancesAt instancesAt;
  auto learn = [&] {
    for (unsigned i = 0; i < items_.size(); ++i) {
      const Item &it = items_[i];
      if (it.folded.empty() || it.locKey.empty())
        continue;
      llvm::SmallVector<unsigned, 2> &owners = instancesAt[it.locKey];
      if (llvm::none_of(owners, [&](unsigned o) { return items_[o].folded == it.folded; }))
        owners.push_back(i);
    }
  };
  auto spread = [&] {
    // Ops without blocks: forward ops with numbered names (a named one has
    // none), and the backward, optimizer and loss-scaling ops, which keep
    // their forward node's location. In execution order, each role's last
    // instance at hand.
    std::vector<const Chain *> recent(5, nullptr);
    for (unsigned i = 0; i < items_.size(); ++i) {
      Item &it = items_[i];
      if (!it.node)
        continue;
      const Chain *&last = recent[static_cast<unsigned>(it.role)];
      if (it.folded.empty() && !feeder_[i] && (!isLayered(it.role) || isNumbered(it.name)))
        chainFromLocation(i, instancesAt, last);
      if (!it.folded.empty())
        last = &it.folded;
    }
    // State tensors and their casts: with the node that first reads them.
    for (unsigned i = 0; i < items_.size(); ++i)
      if (items_[i].folded.empty() && feeder_[i] && anchor_[i] >= 0)
        items_[i].folded = items_[anchor_[i]].folded;
  };
  learn();
  spread();
  chainsFromNeighbours();
  // An optimizer update keeps its parameter's location (in an ONNX file,
  // the initializer's), known now through the parameter's first reader.
  learn();
  spread();
  chainsFromNeighbours();
}

void DotDrawing::Impl::chainsFromNeighbours() {
  // An importer's forward helper ops have numbered names and, where the
  // file's node that they implement lowers to numbered ops alone, no
  // location another op explains: such an op goes in the blocks that all
  // the ops it reads and feeds share (between two layers of one block, in
  // that block). Left out, it would sit outside the box of its block, and
  // the edges to and from that box would make a cycle.
  std::vector<llvm::SmallVector<unsigned, 2>> readers(items_.size());
  for (unsigned i = 0; i < items_.size(); ++i)
    if (const Node *n = items_[i].node)
      for (const Value *v : n->operands())
        if (auto from = v ? itemOfValue_.find(v) : itemOfValue_.end(); from != itemOfValue_.end())
          readers[from->second].push_back(i);
  // A neighbour's blocks count once decided: it has some, or a name of its
  // own says it has none.
  auto decided = [&](unsigned j) {
    return !items_[j].folded.empty() || !isNumbered(items_[j].name);
  };
  // In execution order, a run of helper ops settles in one pass; a few
  // more settle those that only their readers decide.
  for (unsigned pass = 0; pass < 4; ++pass) {
    bool changed = false;
    for (unsigned i = 0; i < items_.size(); ++i) {
      Item &it = items_[i];
      if (!it.node || !isLayered(it.role) || feeder_[i] || !it.folded.empty() ||
          !isNumbered(it.name))
        continue;
      std::optional<Chain> common;
      auto meet = [&](unsigned j) {
        if (j == i || feeder_[j] || items_[j].role != it.role || !decided(j))
          return;
        const Chain &c = items_[j].folded;
        if (!common) {
          common = c;
          return;
        }
        size_t k = 0;
        while (k < common->size() && k < c.size() && (*common)[k] == c[k])
          ++k;
        common->resize(k);
      };
      for (const Value *v : it.node->operands())
        if (auto from = v ? itemOfValue_.find(v) : itemOfValue_.end(); from != itemOfValue_.end())
          meet(from->second);
      for (unsigned j : readers[i])
        meet(j);
      if (common && !common->empty()) {
        it.folded = *common;
        changed = true;
      }
    }
    if (!changed)
      break;
  }
}

void DotDrawing::Impl::findFeeders() {
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

bool DotDrawing::Impl::isBroadcast(const Value *v) const {
  return v->type().rank() == 0 && v->uses().size() >= 3;
}

Folding DotDrawing::Impl::fold(unsigned depth) const {
  Folding f;
  f.depth = depth;
  f.boxOf.assign(items_.size(), -1);
  if (depth == 0)
    return f;
  // A shallower instance with no blocks inside is folded too: a model's
  // stem or a Swin stage's patch merging would stay a column of nodes
  // beside the boxes of its blocks.
  llvm::StringSet<> hasBlocks;
  for (const Item &it : items_)
    for (size_t k = 0; k + 1 < it.folded.size(); ++k)
      hasBlocks.insert(it.folded[k]);
  llvm::StringMap<unsigned> boxOfKey;
  for (unsigned i = 0; i < items_.size(); ++i) {
    const Item &it = items_[i];
    size_t n = std::min<size_t>(depth, it.folded.size());
    if (n == 0 || (n < depth && hasBlocks.contains(it.folded.back())))
      continue;
    std::string key = (roleName(it.role) + "\n" + it.folded[n - 1]).str();
    auto [at, fresh] = boxOfKey.try_emplace(key, f.boxes.size());
    if (fresh) {
      Box b;
      b.role = it.role;
      b.chain.assign(it.folded.begin(), it.folded.begin() + n);
      f.boxes.push_back(std::move(b));
    }
    f.boxOf[i] = static_cast<int>(at->second);
    f.boxes[at->second].members.push_back(i);
  }
  return f;
}

void DotDrawing::Impl::place(NodeRole role, Cluster &roleCluster, llvm::ArrayRef<unsigned> members,
                             const Folding &f) const {
  // The blocks each member is drawn inside: its own, those of its box
  // around the box, none for the other roles' nodes when nothing is folded
  // (drawn as their role's list).
  bool layered = isLayered(role);
  auto chainOf = [&](unsigned i) -> llvm::ArrayRef<llvm::StringRef> {
    if (f.boxOf[i] >= 0)
      return llvm::ArrayRef<llvm::StringRef>(f.boxes[f.boxOf[i]].chain).drop_back();
    if (f.depth)
      return items_[i].folded;
    return layered ? llvm::ArrayRef<llvm::StringRef>(items_[i].blocks)
                   : llvm::ArrayRef<llvm::StringRef>();
  };
  // Each item's layer key (innermost block, location); a layer of one item
  // needs no box of its own.
  std::vector<std::string> layerKey(members.size());
  llvm::StringMap<unsigned> layerSize;
  for (size_t k = 0; k < members.size(); ++k) {
    unsigned i = members[k];
    if (!layered || f.boxOf[i] >= 0 || !items_[i].loc.known())
      continue;
    llvm::ArrayRef<llvm::StringRef> chain = chainOf(i);
    layerKey[k] = (chain.empty() ? "" : chain.back().str()) + "\n" + items_[i].locKey;
    ++layerSize[layerKey[k]];
  }
  std::vector<bool> placedBox(f.boxes.size(), false);
  for (size_t k = 0; k < members.size(); ++k) {
    unsigned i = members[k];
    const Item &it = items_[i];
    Cluster *c = &roleCluster;
    llvm::StringRef parent;
    for (llvm::StringRef block : chainOf(i)) {
      c = c->child("block\n" + block.str(), relativeName(block, parent), "block " + roleClass(role),
                   "style=\"rounded,bold\", color=\"#7a7a7a\"");
      parent = block;
    }
    if (int box = f.boxOf[i]; box >= 0) {
      if (!placedBox[box])
        c->entries.push_back({-1, nullptr, box});
      placedBox[box] = true;
      continue;
    }
    if (!layerKey[k].empty() && layerSize[layerKey[k]] >= 2) {
      // Relative to its block: "q" in block "layer0".
      llvm::StringRef label = relativeName(it.name, parent);
      c = c->child("layer\n" + layerKey[k], label, "layer " + roleClass(role),
                   "style=\"rounded,dashed\", color=\"#9a9a9a\"");
      int rank = !it.node ? 1 : it.node->kind() == OpKind::Cast ? 0 : 2;
      if (rank > c->namedBy) {
        c->label = label.str();
        c->namedBy = rank;
      }
    }
    c->entries.push_back({static_cast<int>(i), nullptr, -1});
  }
}

void DotDrawing::Impl::addFeederEdges(const Folding &f, std::vector<Edge> &out) const {
  // A state tensor goes below what its anchor computes on: an invisible
  // edge from each of the anchor's other inputs (not from broadcast
  // scalars, nor along a backward edge, which is laid out reversed). One
  // inside a box is ranked with it.
  for (unsigned i = 0; i < items_.size(); ++i) {
    if (anchor_[i] < 0 || !items_[i].value || f.boxOf[i] >= 0)
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
      unsigned tail = drawnOf(f, from->second);
      if (llvm::is_contained(done, tail))
        continue;
      done.push_back(tail);
      Edge e;
      e.tail = tail;
      e.head = i;
      e.hidden = true;
      out.push_back(std::move(e));
    }
  }
}

/// Folded, a node that reads the nodes or boxes of another role from all
/// over the drawing (the loss-scaling check reads every gradient) draws
/// none of those edges: each would cross the drawing's height, and on a
/// Swin-T training graph they took three quarters of the layout time.
constexpr unsigned kHubSources = 8;

bool DotDrawing::Impl::isHub(const Folding &f, unsigned i) const {
  llvm::SmallVector<unsigned, 16> sources;
  for (const Value *v : items_[i].node->operands()) {
    auto from = v ? itemOfValue_.find(v) : itemOfValue_.end();
    if (from == itemOfValue_.end() || items_[from->second].role == items_[i].role)
      continue;
    unsigned d = drawnOf(f, from->second);
    if (!llvm::is_contained(sources, d))
      sources.push_back(d);
    if (sources.size() > kHubSources)
      return true;
  }
  return false;
}

/// Folded, a state tensor (or its cast) in one box that other forward
/// boxes read too (a tied weight, or initializers an exporter merged
/// because they are equal: zero biases all through a model) draws no edges
/// to them: they would cross the drawing to wherever the box is.
bool DotDrawing::Impl::isSharedState(const Folding &f, unsigned src, unsigned reader) const {
  return feeder_[src] && f.boxOf[src] >= 0 && isLayered(items_[reader].role) &&
         drawnOf(f, src) != drawnOf(f, reader);
}

void DotDrawing::Impl::addEdges(const Folding &f, std::vector<Edge> &out) const {
  // Folded, the edges between two boxes (or a box and a node) are one.
  llvm::DenseSet<std::pair<unsigned, unsigned>> drawn;
  for (unsigned i = 0; i < items_.size(); ++i) {
    const Node *n = items_[i].node;
    if (!n)
      continue;
    bool hub = f.depth && isHub(f, i);
    llvm::SmallVector<const Value *, 4> seen;
    for (const Value *v : n->operands()) {
      if (!v || llvm::is_contained(seen, v))
        continue;
      seen.push_back(v);
      auto from = itemOfValue_.find(v);
      if (from == itemOfValue_.end() || isBroadcast(v))
        continue;
      const Item &src = items_[from->second];
      unsigned a = drawnOf(f, from->second), b = drawnOf(f, i);
      if (a == b || (hub && src.role != n->role()) ||
          (f.depth && isSharedState(f, from->second, i)))
        continue;
      Edge e;
      e.cls = roleClass(src.role);
      if (src.role != n->role())
        e.cls += " " + roleClass(n->role());
      e.backward =
          src.node && src.node->role() == NodeRole::Backward && n->role() == NodeRole::Backward;
      e.tail = e.backward ? b : a;
      e.head = e.backward ? a : b;
      e.color = strokeOf(dotDTypeClass(dtypeName(v->dtype())));
      if (f.depth && !drawn.insert({e.tail, e.head}).second)
        continue;
      out.push_back(std::move(e));
    }
  }
}

std::vector<Edge> DotDrawing::Impl::edges(const Folding &f) const {
  std::vector<Edge> out;
  addEdges(f, out);
  addFeederEdges(f, out);
  return out;
}

DotSize DotDrawing::Impl::size(const Folding &f) const {
  DotSize s;
  s.boxes = f.boxes.size();
  s.nodes = f.boxes.size();
  for (int b : f.boxOf)
    s.nodes += b < 0;
  std::vector<Edge> es = edges(f);
  // Ranks as the longest path from a source puts them (a cycle's nodes
  // where they were when it stopped the walk), then each source just above
  // its first reader, as Graphviz pulls it down to shorten its edges.
  size_t n = items_.size() + f.boxes.size();
  std::vector<llvm::SmallVector<unsigned, 2>> succ(n);
  std::vector<unsigned> indegree(n, 0), rank(n, 0);
  for (const Edge &e : es) {
    s.edges += !e.hidden;
    succ[e.tail].push_back(e.head);
    ++indegree[e.head];
  }
  std::vector<unsigned> ready;
  for (unsigned v = 0; v < n; ++v)
    if (indegree[v] == 0)
      ready.push_back(v);
  std::vector<unsigned> sources = ready;
  std::vector<unsigned> left = indegree;
  while (!ready.empty()) {
    unsigned v = ready.back();
    ready.pop_back();
    for (unsigned w : succ[v]) {
      rank[w] = std::max(rank[w], rank[v] + 1);
      if (--left[w] == 0)
        ready.push_back(w);
    }
  }
  for (unsigned v : sources) {
    unsigned lowest = ~0u;
    for (unsigned w : succ[v])
      lowest = std::min(lowest, rank[w]);
    if (lowest != ~0u && lowest > 0)
      rank[v] = lowest - 1;
  }
  for (const Edge &e : es) {
    unsigned a = rank[e.tail], b = rank[e.head];
    s.span += std::max(1u, a < b ? b - a : a - b);
  }
  return s;
}

DotBox DotDrawing::Impl::summary(const Folding &f, unsigned box) const {
  const Box &b = f.boxes[box];
  DotBox s;
  s.id = dotBoxId(box);
  s.block = b.chain.back().str();
  s.label = relativeName(b.chain.back(), b.chain.size() > 1 ? b.chain[b.chain.size() - 2] : "");
  s.role = b.role;
  std::map<std::string, unsigned> dtypes, kinds, casts, computeDtypes;
  for (unsigned i : b.members) {
    const Item &it = items_[i];
    if (!it.node) {
      (it.value->isInput() ? s.inputs : s.state).push_back(it.listIndex);
      continue;
    }
    s.ops.push_back(it.listIndex);
    std::string dt = dotDTypeClass(precision_[it.listIndex].precision).str();
    ++dtypes[dt];
    if (it.node->kind() == OpKind::Cast) {
      ++casts[(dtypeName(it.node->operand(0)->dtype()) + "\u2192" +
               dtypeName(it.node->result(0)->dtype()))
                  .str()];
      continue;
    }
    ++computeDtypes[dt];
    ++kinds[it.node->opName().str()];
  }
  s.dtypes = byCount(dtypes);
  s.kinds = byCount(kinds);
  s.casts = byCount(casts);
  // Coloured by what its ops compute in; a box of casts alone by theirs.
  auto dominant = byCount(computeDtypes.empty() ? dtypes : computeDtypes);
  s.dtype = dominant.empty() ? "other" : dominant.front().first;
  return s;
}

void DotDrawing::Impl::print(llvm::raw_ostream &os, const Folding &f) const {
  std::vector<std::unique_ptr<Cluster>> roles;
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
    place(role, *c, members, f);
    roles.push_back(std::move(c));
  }
  std::string title = g_.name();
  auto level = g_.meta().find("amp.opt_level");
  if (level != g_.meta().end() && level->second.is(AttrType::String))
    title += " (" + level->second.getString() + ")";
  os << "digraph " << quote(g_.name()) << " {\n";
  os << "  graph [label=" << quote(title)
     << ", labelloc=t, fontname=\"Helvetica\", fontsize=14, rankdir=TB, newrank=true, "
        "nodesep=0.25, ranksep=0.35, nslimit=1];\n";
  os << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, "
        "color=\"#555555\", fillcolor=\"#e9ecef\", margin=\"0.08,0.03\"];\n";
  os << "  edge [arrowsize=0.6, color=\"#8a8a8a\"];\n";
  auto broadcast = [this](const Value *v) { return isBroadcast(v); };
  auto summaryOf = [&](unsigned box) { return summary(f, box); };
  Printer p(g_, os, items_, precision_, broadcast, summaryOf);
  for (const std::unique_ptr<Cluster> &c : roles)
    p.printCluster(*c, 1);
  for (const Edge &e : edges(f))
    p.printEdge(e);
  os << "}\n";
}

DotDrawing::DotDrawing(const Graph &g) : impl_(std::make_unique<Impl>(g)) {}
DotDrawing::~DotDrawing() = default;

unsigned DotDrawing::maxFoldDepth() const { return impl_->maxDepth(); }

DotSize DotDrawing::size(unsigned foldDepth) const { return impl_->size(impl_->fold(foldDepth)); }

std::vector<DotBox> DotDrawing::boxes(unsigned foldDepth) const {
  Folding f = impl_->fold(foldDepth);
  std::vector<DotBox> out;
  for (unsigned b = 0; b < f.boxes.size(); ++b)
    out.push_back(impl_->summary(f, b));
  return out;
}

void DotDrawing::print(llvm::raw_ostream &os, unsigned foldDepth) const {
  impl_->print(os, impl_->fold(foldDepth));
}

void printDot(const Graph &g, llvm::raw_ostream &os) { DotDrawing(g).print(os); }

} // namespace ampc
