//===- Graph.cpp ------------------------------------------------------------===//
#include "ir/Graph.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cstring>
#include <optional>

namespace ampc {

llvm::StringRef roleName(NodeRole r) {
  switch (r) {
  case NodeRole::Forward:
    return "forward";
  case NodeRole::Loss:
    return "loss";
  case NodeRole::Backward:
    return "backward";
  case NodeRole::Optimizer:
    return "optimizer";
  case NodeRole::LossScale:
    return "loss_scale";
  }
  return "forward";
}

std::optional<NodeRole> parseRole(llvm::StringRef s) {
  for (NodeRole r : {NodeRole::Forward, NodeRole::Loss, NodeRole::Backward, NodeRole::Optimizer,
                     NodeRole::LossScale})
    if (roleName(r) == s)
      return r;
  return std::nullopt;
}

llvm::StringRef stateKindKeyword(StateKind k) {
  switch (k) {
  case StateKind::Parameter:
    return "param";
  case StateKind::Buffer:
    return "buffer";
  case StateKind::OptimizerState:
    return "optstate";
  case StateKind::MasterWeight:
    return "master";
  case StateKind::ScalerState:
    return "scaler";
  }
  return "param";
}

std::optional<StateKind> parseStateKind(llvm::StringRef s) {
  for (StateKind k : {StateKind::Parameter, StateKind::Buffer, StateKind::OptimizerState,
                      StateKind::MasterWeight, StateKind::ScalerState})
    if (stateKindKeyword(k) == s)
      return k;
  return std::nullopt;
}

llvm::StringRef precisionOverrideName(PrecisionOverride p) {
  switch (p) {
  case PrecisionOverride::None:
    return "none";
  case PrecisionOverride::Fp32:
    return "fp32";
  case PrecisionOverride::Half:
    return "half";
  }
  return "none";
}

std::string InitSpec::str() const {
  switch (kind) {
  case Kind::None:
    return "none";
  case Kind::Zeros:
    return "zeros";
  case Kind::Ones:
    return "ones";
  case Kind::Constant:
    return "constant(" + formatDouble(a) + ")";
  case Kind::Uniform:
    return "uniform(" + formatDouble(a) + ", " + formatDouble(b) + ")";
  case Kind::Normal:
    return "normal(" + formatDouble(a) + ", " + formatDouble(b) + ")";
  case Kind::File:
    return "file(" + Attribute(path).str() + (key.empty() ? "" : ", " + Attribute(key).str()) + ")";
  case Kind::Data: {
    std::string out = "data(";
    const std::vector<double> &v = data ? *data : std::vector<double>{};
    for (size_t i = 0; i < v.size();) {
      size_t run = 1;
      auto same = [](double x, double y) { return x == y || (x != x && y != y); };
      while (i + run < v.size() && same(v[i + run], v[i]))
        ++run;
      if (i)
        out += ", ";
      out += formatDouble(v[i]);
      if (run > 1)
        out += " x " + std::to_string(run);
      i += run;
    }
    return out + ")";
  }
  }
  return "none";
}

bool InitSpec::equalBits(const std::vector<double> &x, const std::vector<double> &y) {
  if (x.size() != y.size())
    return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (x[i] != x[i] && y[i] != y[i])))
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

const Location &Value::loc() const {
  static const Location unknown;
  if (def_)
    return def_->loc();
  return decl_ ? decl_->loc : unknown;
}

const InitSpec &Value::init() const {
  static const InitSpec none;
  return decl_ ? decl_->init : none;
}

Value::Declaration &Value::declaration() {
  if (!decl_)
    decl_ = std::make_unique<Declaration>();
  return *decl_;
}

void Value::addUse(Node *user, unsigned operandIndex) {
  user->useSlots_[operandIndex] = static_cast<unsigned>(uses_.size());
  uses_.push_back({user, operandIndex});
}

void Value::removeUse(Node *user, unsigned operandIndex) {
  unsigned slot = user->useSlots_[operandIndex];
  assert(slot < uses_.size() && uses_[slot].user == user &&
         uses_[slot].operandIndex == operandIndex && "use list out of sync with operands");
  uses_[slot].user = nullptr;
  ++deadUses_;
  if (deadUses_ == uses_.size()) {
    uses_.clear();
    deadUses_ = 0;
  } else if (deadUses_ > 8 && 2 * deadUses_ > uses_.size()) {
    compactUses(); // amortised: at least as many removals since the last
  }
}

void Value::compactUses() const {
  size_t kept = 0;
  for (const Use &u : uses_) {
    if (!u.user)
      continue;
    u.user->useSlots_[u.operandIndex] = static_cast<unsigned>(kept);
    uses_[kept++] = u;
  }
  uses_.resize(kept);
  deadUses_ = 0;
}

void Value::replaceAllUsesWith(Value *other) {
  assert(other != this && "replacing a value with itself");
  // setOperand edits uses_, so walk a copy.
  std::vector<Use> uses(this->uses().begin(), this->uses().end());
  for (const Use &u : uses)
    u.user->setOperand(u.operandIndex, other);
}

//===----------------------------------------------------------------------===//
// Node
//===----------------------------------------------------------------------===//

Node::~Node() {
  for (unsigned i = 0; i < operands_.size(); ++i)
    if (operands_[i])
      operands_[i]->removeUse(this, i);
  if (graph_)
    for (auto &r : results_)
      graph_->forgetName(r.get());
}

void Node::setOperand(unsigned i, Value *v) {
  assert(i < operands_.size() && "operand index out of range");
  if (operands_[i])
    operands_[i]->removeUse(this, i);
  operands_[i] = v;
  if (v)
    v->addUse(this, i);
}

void Node::setOperands(llvm::ArrayRef<Value *> operands) {
  for (unsigned i = 0; i < operands_.size(); ++i)
    setOperand(i, nullptr);
  operands_.assign(operands.size(), nullptr);
  useSlots_.assign(operands.size(), 0);
  for (unsigned i = 0; i < operands.size(); ++i)
    setOperand(i, operands[i]);
}

llvm::SmallVector<Value *, 2> Node::results() const {
  llvm::SmallVector<Value *, 2> out;
  for (auto &r : results_)
    out.push_back(r.get());
  return out;
}

const Attribute *Node::findAttr(llvm::StringRef n) const {
  auto it = attrs_.find(n);
  return it == attrs_.end() ? nullptr : &it->second;
}

const Attribute &Node::attr(llvm::StringRef n) const {
  if (const Attribute *a = findAttr(n))
    return *a;
  const AttrSpec *spec = op_->findAttr(n);
  assert(spec && spec->defaultValue && "attribute neither set nor defaulted");
  return *spec->defaultValue;
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

Graph::~Graph() {
  // Drop operands first so destroying nodes in any order never touches a
  // value that is already gone.
  for (Node &n : nodes_)
    for (unsigned i = 0; i < n.operands_.size(); ++i)
      n.setOperand(i, nullptr);
  for (Node &n : nodes_)
    n.graph_ = nullptr;
  nodes_.clear();
  nodeCount_ = 0;
}

void DestroyInArena::operator()(Value *v) const { v->~Value(); }

ArenaValuePtr Graph::makeValue(ValueKind k, TensorType t) {
  // 32-byte aligned: a value's first 32 bytes (kind, id, producer, dead
  // uses) never straddle two cache lines.
  void *memory = valueArena_.Allocate(sizeof(Value), llvm::Align(32));
  return ArenaValuePtr(new (memory) Value(k, std::move(t), nextId_++));
}

namespace {
/// The number `name` spells in canonical decimal ("0", "17"; not "017",
/// "+1" or past 64 bits): the only names claimFreshName makes.
std::optional<uint64_t> canonicalNumber(llvm::StringRef name) {
  uint64_t n = 0;
  if (name.empty() || (name.size() > 1 && name[0] == '0') || name.getAsInteger(10, n))
    return std::nullopt;
  return n;
}
} // namespace

Value *const *Graph::freshSlot(llvm::StringRef name) const {
  std::optional<uint64_t> n = canonicalNumber(name);
  if (!n || *n >= freshNamed_.size() || !freshNamed_[*n])
    return nullptr;
  return &freshNamed_[*n];
}

bool Graph::isNameFree(llvm::StringRef name) const {
  return !freshSlot(name) && !names_.count(name);
}

void Graph::forgetName(const Value *v) {
  if (Value **slot = freshSlot(v->name())) {
    if (*slot == v)
      *slot = nullptr;
    return;
  }
  auto entry = names_.find(v->name());
  if (entry != names_.end() && entry->second == v)
    unlinkName(*entry);
}

void Graph::claimName(Value *v, llvm::StringRef name) {
  // One probe of the table both checks and inserts. The value's name is the
  // entry's own key, so the chars are kept once; entries are unlinked, never
  // destroyed, while the graph lives (unlinkName).
  assert(!freshSlot(name) && "value name already used");
  auto [entry, inserted] = names_.try_emplace(name, v);
  assert(inserted && "value name already used");
  (void)inserted;
  if (canonicalNumber(name))
    numericNamesInTable_ = true;
  v->name_ = entry->first();
}

void Graph::claimFreshName(Value *v) {
  while (true) {
    uint64_t number = nextFreshName_++;
    char digits[24];
    char *end = std::to_chars(digits, digits + sizeof(digits), number).ptr;
    llvm::StringRef name(digits, static_cast<size_t>(end - digits));
    // Numbers only ever count up, so no fresh name has this one yet; an
    // explicit one may (a parsed %7).
    if (numericNamesInTable_ && names_.count(name))
      continue;
    char *chars = freshNameChars_.Allocate<char>(name.size());
    std::memcpy(chars, name.data(), name.size());
    if (freshNamed_.size() <= number)
      freshNamed_.resize(number + 1, nullptr);
    freshNamed_[number] = v;
    v->name_ = llvm::StringRef(chars, name.size());
    return;
  }
}

Value *Graph::registerValue(ArenaValuePtr v, llvm::StringRef name) {
  Value *raw = v.get();
  claimName(raw, name);
  declared_.push_back(std::move(v));
  return raw;
}

Value *Graph::addInput(llvm::StringRef name, TensorType type, Location loc) {
  auto v = makeValue(ValueKind::Input, std::move(type));
  v->declaration().loc = std::move(loc);
  Value *raw = registerValue(std::move(v), name);
  inputs_.push_back(raw);
  return raw;
}

Value *Graph::addState(llvm::StringRef name, TensorType type, StateKind kind, InitSpec init,
                       Location loc) {
  auto v = makeValue(ValueKind::State, std::move(type));
  Value::Declaration &decl = v->declaration();
  decl.stateKind = kind;
  decl.init = std::move(init);
  decl.loc = std::move(loc);
  Value *raw = registerValue(std::move(v), name);
  state_.push_back(raw);
  return raw;
}

std::vector<Value *> Graph::state(StateKind k) const {
  std::vector<Value *> out;
  for (Value *v : state_)
    if (v->stateKind() == k)
      out.push_back(v);
  return out;
}

std::string Graph::freshName() {
  while (true) {
    std::string n = std::to_string(nextFreshName_++);
    if (isNameFree(n))
      return n;
  }
}

std::string Graph::uniqueName(llvm::StringRef base) const {
  if (isNameFree(base))
    return base.str();
  for (unsigned i = 1;; ++i) {
    std::string n = (base + "_" + llvm::Twine(i)).str();
    if (isNameFree(n))
      return n;
  }
}

Value *Graph::lookup(llvm::StringRef name) const {
  if (Value *const *slot = freshSlot(name))
    return *slot;
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : it->second;
}

void Graph::renameValue(Value *v, llvm::StringRef newName) {
  // One probe for the old name (asserts are on in optimised builds too).
  if (Value **slot = freshSlot(v->name())) {
    assert(*slot == v && "renaming a value of another graph");
    *slot = nullptr;
  } else {
    auto entry = names_.find(v->name());
    assert(entry != names_.end() && entry->second == v && "renaming a value of another graph");
    unlinkName(*entry);
  }
  claimName(v, newName); // asserts that newName is free
}

Value *&Graph::nameHolder(const Value *v) {
  if (Value **slot = freshSlot(v->name()))
    return *slot;
  auto entry = names_.find(v->name());
  assert(entry != names_.end() && "a value of another graph");
  return entry->second;
}

void Graph::swapNames(Value *a, Value *b) {
  // The entries stay; each points at the other value. No name is freed or
  // claimed, so nothing is probed for but the two names.
  Value *&holderA = nameHolder(a);
  Value *&holderB = nameHolder(b);
  assert(holderA == a && holderB == b && "swapping the names of values of another graph");
  holderA = b;
  holderB = a;
  std::swap(a->name_, b->name_);
}

Node *Graph::createNode(const OpInfo &op, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                        llvm::ArrayRef<TensorType> resultTypes, llvm::ArrayRef<std::string> names,
                        Location loc, Node *before) {
  assert((names.empty() || names.size() == resultTypes.size()) && "one name per result");
  // 64-byte aligned, so that a node's first cache line holds what walks read
  // (see the field order in Graph.h).
  Node *n = new (nodeArena_.Allocate(sizeof(Node), llvm::Align(64))) Node(this, &op, nextId_++);
  n->operands_.resize(operands.size(), nullptr);
  n->useSlots_.resize(operands.size(), 0);
  for (unsigned i = 0; i < operands.size(); ++i)
    n->setOperand(i, operands[i]);
  n->attrs_ = std::move(attrs);
  n->loc_ = std::move(loc);
  for (unsigned i = 0; i < resultTypes.size(); ++i) {
    ArenaValuePtr v = makeValue(ValueKind::Result, resultTypes[i]);
    v->def_ = n;
    v->resultIndex_ = i;
    if (names.empty() || names[i].empty())
      claimFreshName(v.get());
    else
      claimName(v.get(), names[i]);
    n->results_.push_back(std::move(v));
  }
  if (before)
    nodes_.insert(before->getIterator(), n);
  else
    nodes_.push_back(n);
  ++nodeCount_;
  return n;
}

Value *Graph::addResult(Node *n, TensorType type, llvm::StringRef name) {
  assert(n->graph_ == this && "a node of another graph");
  ArenaValuePtr v = makeValue(ValueKind::Result, std::move(type));
  v->def_ = n;
  v->resultIndex_ = n->results_.size();
  if (name.empty())
    claimFreshName(v.get());
  else
    claimName(v.get(), name);
  n->results_.push_back(std::move(v));
  return n->results_.back().get();
}

void Graph::moveNode(Node *n, Node *before) {
  if (n == before)
    return;
  nodes_.remove(n);
  if (before)
    nodes_.insert(before->getIterator(), n);
  else
    nodes_.push_back(n);
}

void Graph::eraseNode(Node *n) {
  for (auto &r : n->results_)
    assert(!r->hasUses() && "erasing a node whose results are still used");
  // ~Node frees the results' names, so they can be reused.
  nodes_.erase(n->getIterator());
  --nodeCount_;
}

} // namespace ampc

namespace ampc {

bool combinesLosses(const Node &n) {
  if (n.role() != NodeRole::Loss || n.numOperands() == 0)
    return false;
  for (const Value *operand : n.operands())
    if (!operand->isResult() || operand->definingNode()->role() != NodeRole::Loss)
      return false;
  return true;
}

std::vector<Value *> lossTerms(Value *total) {
  std::vector<Value *> terms;
  // Depth first, left to right: the terms in the order the sum lists them.
  std::vector<Value *> pending = {total};
  while (!pending.empty()) {
    Value *v = pending.back();
    pending.pop_back();
    Node *def = v->isResult() ? v->definingNode() : nullptr;
    if (def && def->kind() == OpKind::Add && combinesLosses(*def)) {
      for (unsigned i = def->numOperands(); i-- > 0;)
        pending.push_back(def->operand(i));
      continue;
    }
    terms.push_back(v);
  }
  return terms;
}

} // namespace ampc
