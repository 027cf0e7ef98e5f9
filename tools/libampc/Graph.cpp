//===- Graph.cpp - Views of a graph and the host passes' editor -----------===//
#include "Internal.h"
#include "ir/OpAttrs.h"
#include <set>

#include "ir/support/AtomicFile.h"

#include "frontends/yaml/GraphYamlEmitter.h"
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/AssignPrecision.h"
#include "passes/GraphDot.h"
#include "passes/OptimizerSets.h"
#include "passes/PrecisionReport.h"
#include "passes/StructuralKeys.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>

namespace ampc::api {

//===----------------------------------------------------------------------===//
// ValueView
//===----------------------------------------------------------------------===//

std::string ValueView::name() const { return v_->name().str(); }
DType ValueView::dtype() const { return toPublic(v_->dtype()); }
std::vector<int64_t> ValueView::shape() const {
  return {v_->type().dims().begin(), v_->type().dims().end()};
}
TensorInfo ValueView::info() const { return {dtype(), shape()}; }
std::string ValueView::typeStr() const { return v_->type().str(); }
bool ValueView::isInput() const { return v_->isInput(); }
bool ValueView::isState() const { return v_->isState(); }
bool ValueView::isResult() const { return v_->isResult(); }

std::optional<StateKind> ValueView::stateKind() const {
  if (!v_->isState())
    return std::nullopt;
  return static_cast<StateKind>(v_->stateKind());
}

bool ValueView::trainable() const { return v_->isState() && v_->trainable(); }

NodeView ValueView::producer() const { return Access::node(v_->definingNode()); }

std::vector<NodeView> ValueView::users() const {
  std::vector<NodeView> out;
  for (const Use &u : v_->uses())
    if (!llvm::is_contained(out, Access::node(u.user)))
      out.push_back(Access::node(u.user));
  // Use lists are in no particular order; graph order is deterministic.
  const ampc::Graph *g = v_->uses().empty() ? nullptr : v_->uses()[0].user->graph();
  if (!g || out.size() < 2)
    return out;
  std::vector<NodeView> ordered;
  for (const ampc::Node &n : g->nodes())
    if (llvm::is_contained(out, Access::node(&n)))
      ordered.push_back(Access::node(&n));
  return ordered;
}

//===----------------------------------------------------------------------===//
// NodeView
//===----------------------------------------------------------------------===//

std::string NodeView::op() const { return n_->opName().str(); }
bool NodeView::isCustomOp() const { return n_->kind() == OpKind::Custom; }
bool NodeView::isCast() const { return n_->kind() == OpKind::Cast; }
Category NodeView::category() const { return static_cast<Category>(n_->op().category); }
NodeRole NodeView::role() const { return static_cast<NodeRole>(n_->role()); }

std::vector<ValueView> NodeView::inputs() const {
  std::vector<ValueView> out;
  for (const ampc::Value *v : n_->operands())
    out.push_back(Access::value(v));
  return out;
}

std::vector<ValueView> NodeView::outputs() const {
  std::vector<ValueView> out;
  for (unsigned i = 0; i < n_->numResults(); ++i)
    out.push_back(Access::value(n_->result(i)));
  return out;
}

ValueView NodeView::output(unsigned i) const {
  return i < n_->numResults() ? Access::value(n_->result(i)) : ValueView();
}

std::optional<DType> NodeView::precision() const {
  const Attribute *a = n_->findAttr(kPrecisionAttr);
  if (!a || !a->is(AttrType::DType))
    return std::nullopt;
  return toPublic(a->getDType());
}

std::string NodeView::reason() const {
  const Attribute *a = n_->findAttr(kPrecisionReasonAttr);
  return a && a->is(AttrType::String) ? a->getString() : std::string();
}

std::string NodeView::location() const { return n_->loc().known() ? n_->loc().str() : ""; }

std::vector<std::string> NodeView::attrNames() const {
  std::vector<std::string> out;
  for (const auto &[name, value] : n_->attrs())
    out.push_back(name.str());
  return out;
}

std::optional<AttrValue> NodeView::attr(std::string_view name) const {
  llvm::StringRef n(name.data(), name.size());
  if (const Attribute *a = n_->findAttr(n))
    return toPublic(*a);
  const AttrSpec *spec = n_->op().findAttr(n);
  if (!spec || !spec->defaultValue)
    return std::nullopt;
  return toPublic(*spec->defaultValue);
}

//===----------------------------------------------------------------------===//
// GraphView
//===----------------------------------------------------------------------===//

std::string GraphView::name() const { return g_->name(); }

std::vector<NodeView> GraphView::nodes() const {
  std::vector<NodeView> out;
  out.reserve(g_->numNodes());
  for (const ampc::Node &n : g_->nodes())
    out.push_back(Access::node(&n));
  return out;
}

size_t GraphView::numNodes() const { return g_->numNodes(); }

static std::vector<ValueView> views(llvm::ArrayRef<ampc::Value *> values) {
  std::vector<ValueView> out;
  for (const ampc::Value *v : values)
    out.push_back(Access::value(v));
  return out;
}

std::vector<ValueView> GraphView::inputs() const { return views(g_->inputs()); }
std::vector<ValueView> GraphView::outputs() const { return views(g_->outputs()); }
std::vector<ValueView> GraphView::state() const { return views(g_->state()); }

ValueView GraphView::findValue(std::string_view name) const {
  return Access::value(g_->lookup(llvm::StringRef(name.data(), name.size())));
}

std::vector<NodeView> GraphView::casts() const {
  std::vector<NodeView> out;
  for (const ampc::Node &n : g_->nodes())
    if (n.kind() == OpKind::Cast)
      out.push_back(Access::node(&n));
  return out;
}

std::unordered_map<std::string, uint64_t> GraphView::structuralKeys() const {
  std::unordered_map<std::string, uint64_t> out;
  for (const auto &[value, key] : computeStructuralKeys(*g_))
    out.emplace(value->name().str(), key);
  return out;
}

std::string GraphView::printIR() const { return printGraphToString(*g_); }
std::string GraphView::toYaml() const { return emitGraphYaml(*g_); }

std::string GraphView::toDot() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  printDot(*g_, os);
  return os.str();
}

std::string GraphView::collectives() const {
  // The data-parallel pass's buckets average gradients; the sums are
  // SyncBatchNorm's statistics and their gradients.
  uint64_t buckets = 0, bytes = 0, ranks = 0, statistics = 0, statisticBytes = 0;
  std::set<std::string> types;
  for (const ampc::Node &n : g_->nodes()) {
    if (n.kind() != OpKind::AllReduce)
      continue;
    attrs::AllReduce a(n);
    ranks = static_cast<uint64_t>(a.ranks());
    uint64_t nodeBytes = 0;
    for (const ampc::Value *v : n.operands())
      nodeBytes += uint64_t(v->type().numElements()) * dtypeSize(a.dtype());
    if (a.reduce() == CollectiveReduce::Mean) {
      ++buckets;
      bytes += nodeBytes;
      types.insert(dtypeName(a.dtype()).str());
    } else {
      ++statistics;
      statisticBytes += nodeBytes;
    }
  }
  if (!buckets && !statistics)
    return "";
  std::string dtypes;
  for (const std::string &t : types)
    dtypes += (dtypes.empty() ? "" : ", ") + t;
  std::string s = "data-parallel: " + std::to_string(ranks) + " ranks, " + std::to_string(buckets) +
                  " all-reduce bucket" + (buckets == 1 ? "" : "s") + ", " + std::to_string(bytes) +
                  " bytes of gradients per optimizer step (" + dtypes + ")";
  if (statistics)
    s += "; sync batchnorm: " + std::to_string(statistics) + " all-reduces of statistics, " +
         std::to_string(statisticBytes) + " bytes per step";
  return s;
}

namespace {

/// One optimizer's settings and parameter groups, read from `meta` (the
/// graph's, or one of several optimizers' view of it, OptimizerSets.h),
/// over the trainable parameters `holds` admits; "" without an optimizer.
std::string describeOptimizer(const ampc::Graph &g, const ampc::AttrMap &meta,
                              const std::string &title,
                              llvm::function_ref<bool(const ampc::Value *)> holds) {
  auto find = [&](const std::string &key, AttrType t) -> const Attribute * {
    auto it = meta.find(key);
    return it != meta.end() && it->second.is(t) ? &it->second : nullptr;
  };
  const Attribute *count = find("optimizer.groups", AttrType::Int);
  const Attribute *kind = find("optimizer", AttrType::String);
  if (!kind)
    return "";
  int64_t groups = count ? count->getInt() : 0;
  std::vector<std::vector<std::string>> members(static_cast<size_t>(groups + 1));
  for (const ampc::Value *p : g.state(ampc::StateKind::Parameter)) {
    if (!p->trainable() || !holds(p))
      continue;
    const Attribute *in = find("optimizer.group_of." + p->name().str(), AttrType::Int);
    int64_t group = in ? in->getInt() : -1;
    if (group >= -1 && group < groups)
      members[static_cast<size_t>(group + 1)].push_back(p->name().str());
  }
  auto list = [](const std::vector<std::string> &names) {
    std::string s =
        std::to_string(names.size()) + (names.size() == 1 ? " parameter" : " parameters");
    for (size_t i = 0; i < names.size(); ++i)
      s += (i ? ", " : ": ") + names[i];
    return s;
  };
  // The optimizer's own settings, as the model file gives them.
  std::string settings;
  for (const auto &[key, value] : meta) {
    llvm::StringRef k(key);
    if (k.consume_front("optimizer.") && !k.contains('.') && k != "groups")
      settings += (settings.empty() ? "" : ", ") + k.str() + " " + value.str();
  }
  std::string s = title + kind->getString() + " (" + settings + "): " + list(members[0]);
  for (int64_t i = 0; i < groups; ++i) {
    std::string prefix = "optimizer.groups." + std::to_string(i) + ".";
    std::string globs, changes;
    for (const auto &[key, value] : meta) {
      llvm::StringRef k(key);
      if (!k.consume_front(prefix))
        continue;
      if (k == "params")
        globs = value.getString();
      else
        changes += (changes.empty() ? "" : ", ") + k.str() + " " + value.str();
    }
    s += "\n  group " + std::to_string(i) + " (" + globs +
         "): " + (changes.empty() ? "the optimizer's settings" : changes) + "; " +
         list(members[static_cast<size_t>(i + 1)]);
  }
  return s;
}

} // namespace

std::string GraphView::parameterGroups() const {
  if (!ampc::hasOptimizerSets(*g_)) {
    if (!findMeta(*g_, "optimizer.groups", AttrType::Int))
      return "";
    return describeOptimizer(*g_, g_->meta(), "optimizer ",
                             [](const ampc::Value *) { return true; });
  }
  ampc::DiagnosticEngine quiet;
  std::optional<std::vector<ampc::OptimizerSet>> sets = ampc::readOptimizerSets(*g_, quiet);
  if (!sets)
    return "";
  std::string s;
  for (size_t i = 0; i < sets->size(); ++i) {
    const ampc::OptimizerSet &set = (*sets)[i];
    std::string turns;
    if (int64_t(set.turns.size()) != set.period) {
      for (int64_t t : set.turns)
        turns += (turns.empty() ? "" : ",") + std::to_string(t + 1);
      turns = ", steps " + turns + " of every " + std::to_string(set.period);
    }
    std::string title = "optimizer " + set.name + " (" + set.params + "; loss term " +
                        std::to_string(set.lossTerm) + turns + "): ";
    int64_t index = int64_t(i);
    s += (s.empty() ? "" : "\n") +
         describeOptimizer(*g_, set.meta, title, [&](const ampc::Value *p) {
           return ampc::optimizerIndexOf(*g_, p) == index;
         });
  }
  return s;
}

std::string GraphView::recomputed() const {
  const ampc::Attribute *values = findMeta(*g_, "train.recompute.values", AttrType::String);
  if (!values)
    return "";
  std::string list;
  size_t count = 0;
  uint64_t bytes = 0;
  llvm::SmallVector<llvm::StringRef, 16> names;
  llvm::StringRef(values->getString()).split(names, ',');
  for (llvm::StringRef name : names) {
    const ampc::Value *v = g_->lookup(name);
    if (!v || !v->isResult())
      continue;
    ++count;
    bytes += v->type().sizeInBytes();
    list += (list.empty() ? "" : ", ") +
            ("%" + name + " (" + v->definingNode()->opName() + ", " + v->type().str() + ")").str();
  }
  char total[64];
  std::snprintf(total, sizeof total, "%.2f MiB", double(bytes) / 1048576.0);
  return "recomputed for the backward (train.recompute: cheap): " + std::to_string(count) +
         " values, " + total + ", each computed again from values live there: " + list;
}

std::string GraphView::explain() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  printExplain(*g_, os);
  return os.str();
}

PrecisionStats GraphView::precisionStats() const {
  PrecisionSummary p = summarizePrecision(*g_);
  PrecisionStats s;
  s.ops = p.ops;
  s.halfOps = p.halfOps;
  s.casts = p.casts;
  s.castBytes = p.castBytes;
  s.cacheableCasts = p.cacheableCasts;
  s.cacheableCastBytes = p.cacheableCastBytes;
  llvm::raw_string_ostream os(s.str);
  printPrecisionSummary(p, os);
  os.flush();
  while (!s.str.empty() && s.str.back() == '\n')
    s.str.pop_back();
  return s;
}

std::optional<std::string> GraphView::meta(std::string_view key) const {
  auto it = g_->meta().find(key);
  if (it == g_->meta().end())
    return std::nullopt;
  // Strings as written, not quoted: what a caller compares with.
  return it->second.is(AttrType::String) ? it->second.getString() : it->second.str();
}

std::optional<int64_t> GraphView::metaInt(std::string_view key) const {
  const Attribute *a = findMeta(*g_, key, AttrType::Int);
  return a ? std::optional<int64_t>(a->getInt()) : std::nullopt;
}

namespace {
SpecialOutputs specialOutputs(bool writeThrough) {
  return writeThrough ? SpecialOutputs::WriteThrough : SpecialOutputs::Refuse;
}
} // namespace

Status writeFileAtomically(const std::string &path, std::string_view text, bool writeThrough) {
  std::string err;
  if (!ampc::writeFileAtomically(path, llvm::StringRef(text.data(), text.size()), err,
                                 specialOutputs(writeThrough)))
    return Status::error(err);
  return {};
}

Status checkOutputPath(const std::string &path, bool writeThrough) {
  std::string err;
  if (!ampc::checkOutputPath(path, err, specialOutputs(writeThrough)))
    return Status::error(err);
  return {};
}

Status GraphView::verify() const {
  DiagnosticEngine diag;
  verifyGraph(*g_, diag);
  return toStatus(diag);
}

//===----------------------------------------------------------------------===//
// GraphEditor
//===----------------------------------------------------------------------===//

namespace {

/// Views handed to an editor are read-only; the editor owns the graph, so
/// it may write through them.
ampc::Node *mut(const NodeView &n) { return const_cast<ampc::Node *>(Access::get(n)); }
ampc::Value *mut(const ValueView &v) { return const_cast<ampc::Value *>(Access::get(v)); }

} // namespace

static Status checkNode(const ampc::Graph *g, const NodeView &n) {
  if (!n.valid() || Access::get(n)->graph() != g)
    return Status::error("the node does not belong to this graph");
  return {};
}

Status GraphEditor::setAttr(NodeView node, std::string_view name, AttrValue value) {
  if (Status s = checkNode(mg_, node); !s)
    return s;
  ampc::Node *n = mut(node);
  llvm::StringRef key(name.data(), name.size());
  Attribute a = toInternal(value);
  if (!isAnnotationAttr(key)) {
    const AttrSpec *spec = n->op().findAttr(key);
    if (!spec)
      return Status::error(n->opName().str() + " has no attribute '" + key.str() + "'");
    AttrMap trial;
    for (const auto &[k, v] : n->attrs())
      if (!isAnnotationAttr(k))
        trial[k] = v;
    trial[key.str()] = a;
    std::string err;
    if (!normalizeAttrs(n->op(), trial, err))
      return Status::error(n->opName().str() + ": " + err);
    a = trial[key.str()];
  }
  n->setAttr(key, std::move(a));
  changed_ = true;
  return {};
}

Status GraphEditor::setPrecisionOverride(NodeView node, std::string_view precision) {
  if (Status s = checkNode(mg_, node); !s)
    return s;
  PrecisionOverride p;
  if (precision == "fp32")
    p = PrecisionOverride::Fp32;
  else if (precision == "half")
    p = PrecisionOverride::Half;
  else if (precision == "none")
    p = PrecisionOverride::None;
  else
    return Status::error("unknown precision '" + std::string(precision) +
                         "'; expected fp32, half or none");
  mut(node)->setPrecisionOverride(p);
  changed_ = true;
  return {};
}

Result<std::vector<ValueView>> GraphEditor::insertNode(std::string_view op,
                                                       std::vector<ValueView> operands,
                                                       std::map<std::string, AttrValue> attrs,
                                                       NodeView before) {
  const OpInfo *info = OpRegistry::builtin().lookup(llvm::StringRef(op.data(), op.size()));
  if (!info)
    return Status::error("unknown op '" + std::string(op) + "'");
  llvm::SmallVector<ampc::Value *, 4> ins;
  for (const ValueView &v : operands) {
    if (!v.valid())
      return Status::error(std::string(op) + ": an operand is an invalid value");
    ins.push_back(mut(v));
  }
  if (before.valid())
    if (Status s = checkNode(mg_, before); !s)
      return s;
  AttrMap am;
  for (auto &[k, v] : attrs)
    am[k] = toInternal(v);
  // Inserted nodes inherit the location of the node they precede (or of
  // their first operand), so diagnostics still point at the user's file.
  Location loc =
      before.valid() ? Access::get(before)->loc() : (ins.empty() ? Location() : ins[0]->loc());
  DiagnosticEngine diag;
  ampc::Node *n = buildNode(*mg_, *info, ins, std::move(am), loc, diag, {},
                            before.valid() ? mut(before) : nullptr);
  if (!n)
    return toStatus(diag);
  changed_ = true;
  std::vector<ValueView> out;
  for (unsigned i = 0; i < n->numResults(); ++i)
    out.push_back(Access::value(n->result(i)));
  return out;
}

Result<ValueView> GraphEditor::insertCast(ValueView value, DType to, NodeView before) {
  Result<std::vector<ValueView>> r = insertNode("cast", {value}, {{"to", AttrValue(to)}}, before);
  if (!r)
    return r.status();
  return r->front();
}

Status GraphEditor::replaceAllUses(ValueView from, ValueView to) {
  if (!from.valid() || !to.valid())
    return Status::error("replaceAllUses: invalid value");
  if (Access::get(from)->type() != Access::get(to)->type())
    return Status::error("replaceAllUses: %" + from.name() + " is " + from.typeStr() + " but %" +
                         to.name() + " is " + to.typeStr());
  if (from == to)
    return {};
  mut(from)->replaceAllUsesWith(mut(to));
  std::vector<ampc::Value *> outs(mg_->outputs().begin(), mg_->outputs().end());
  for (ampc::Value *&o : outs)
    if (o == Access::get(from))
      o = mut(to);
  mg_->setOutputs(std::move(outs));
  std::vector<StateUpdate> updates(mg_->stateUpdates().begin(), mg_->stateUpdates().end());
  for (StateUpdate &u : updates)
    if (u.newValue == Access::get(from))
      u.newValue = mut(to);
  mg_->setStateUpdates(std::move(updates));
  changed_ = true;
  return {};
}

Status GraphEditor::eraseNode(NodeView node) {
  if (Status s = checkNode(mg_, node); !s)
    return s;
  ampc::Node *n = mut(node);
  for (unsigned i = 0; i < n->numResults(); ++i) {
    const ampc::Value *r = n->result(i);
    if (r->hasUses() || llvm::is_contained(mg_->outputs(), r))
      return Status::error("cannot erase " + n->opName().str() + ": %" + r->name().str() +
                           " is still used");
    for (const StateUpdate &u : mg_->stateUpdates())
      if (u.newValue == r)
        return Status::error("cannot erase " + n->opName().str() + ": %" + r->name().str() +
                             " updates state %" + u.state->name().str());
  }
  mg_->eraseNode(n);
  changed_ = true;
  return {};
}

} // namespace ampc::api
