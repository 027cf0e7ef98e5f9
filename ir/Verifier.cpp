//===- Verifier.cpp ---------------------------------------------------------===//
#include "ir/Verifier.h"

#include "ir/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <functional>

namespace ampc {
namespace {

class GraphVerifier {
public:
  GraphVerifier(const Graph &g, DiagnosticEngine &diag) : g_(g), diag_(diag) {}

  bool run() {
    unsigned before = diag_.numErrors();
    checkDeclarations();
    indexNodes();
    for (const Node &n : g_.nodes())
      checkNode(n);
    checkOrderAndCycles();
    checkOutputsAndUpdates();
    return diag_.numErrors() == before;
  }

private:
  /// A value belongs to this graph if the name table maps its name to it.
  bool ownsValue(const Value *v) const { return v && g_.lookup(v->name()) == v; }

  void checkTypeSize(const TensorType &t, const Location &loc, llvm::StringRef what) {
    for (int64_t d : t.dims())
      if (d < 0) {
        diag_.error(loc, what + " has a negative dimension: " + t.str());
        return;
      }
    if (!t.checkedNumElements())
      diag_.error(loc, what + " has an element count that overflows int64: " + t.str());
  }

  void checkDeclarations() {
    for (const Value *v : g_.inputs())
      checkTypeSize(v->type(), v->loc(), "input %" + v->name().str());
    for (const Value *v : g_.state()) {
      checkTypeSize(v->type(), v->loc(), "state %" + v->name().str());
      if (v->init().kind == InitSpec::Kind::Uniform && v->init().a > v->init().b)
        diag_.error(v->loc(),
                    "state %" + v->name().str() + " has an empty uniform range " + v->init().str());
      if (v->init().kind == InitSpec::Kind::Data && v->type().checkedNumElements() &&
          (!v->init().data || int64_t(v->init().data->size()) != *v->type().checkedNumElements()))
        diag_.error(v->loc(), "state %" + v->name().str() + " of type " + v->type().str() +
                                  " has " +
                                  std::to_string(v->init().data ? v->init().data->size() : 0) +
                                  " elements in its data(...)");
      if (v->init().kind == InitSpec::Kind::Normal && v->init().b < 0)
        diag_.error(v->loc(), "state %" + v->name().str() +
                                  " has a negative standard deviation in " + v->init().str());
    }
  }

  void indexNodes() {
    unsigned i = 0;
    for (const Node &n : g_.nodes())
      position_[&n] = i++;
  }

  void checkNode(const Node &n) {
    const OpInfo &op = n.op();
    std::string err;
    auto fail = [&](const llvm::Twine &msg) { diag_.error(n.loc(), op.name + ": " + msg); };

    bool operandsOk = true;
    for (unsigned i = 0; i < n.numOperands(); ++i) {
      const Value *v = n.operand(i);
      if (!v) {
        fail("operand " + llvm::Twine(i) + " is missing");
        operandsOk = false;
      } else if (!ownsValue(v) || (v->isResult() && !position_.count(v->definingNode()))) {
        fail("operand " + llvm::Twine(i) + " (%" + v->name() +
             ") is dangling: it is not defined in this graph");
        operandsOk = false;
      }
    }
    for (unsigned i = 0; i < n.numResults(); ++i) {
      const Value *r = n.result(i);
      if (r->definingNode() != &n || r->resultIndex() != i)
        fail("result %" + r->name() + " does not point back at its node");
      for (const Use &u : r->uses())
        if (u.operandIndex >= u.user->numOperands() || u.user->operand(u.operandIndex) != r)
          fail("use list of %" + r->name() + " is out of sync with its users");
    }
    if (!checkOperandCount(op, n.numOperands(), err))
      return fail(err);
    if (!checkAttrs(op, n.attrs(), err))
      return fail(err);
    if (!operandsOk)
      return;
    llvm::SmallVector<TensorType, 4> operandTypes;
    for (const Value *v : n.operands())
      operandTypes.push_back(v->type());
    llvm::SmallVector<TensorType, 2> expected;
    if (!inferResultTypes(op, operandTypes, n.attrs(), expected, err))
      return fail(err);
    if (expected.size() != n.numResults())
      return fail("expected " + llvm::Twine(expected.size()) + " result(s), found " +
                  llvm::Twine(n.numResults()));
    for (unsigned i = 0; i < expected.size(); ++i)
      if (expected[i] != n.result(i)->type())
        fail("result %" + n.result(i)->name() + " has type " + n.result(i)->type().str() +
             " but the operands give " + expected[i].str());
  }

  /// A node must come after the producers of its operands. When it does not,
  /// tell a true cycle apart from a mere ordering problem.
  void checkOrderAndCycles() {
    for (const Node &n : g_.nodes()) {
      unsigned pos = position_[&n];
      for (const Value *v : n.operands()) {
        if (!v || !v->isResult())
          continue;
        auto it = position_.find(v->definingNode());
        if (it == position_.end() || it->second < pos)
          continue;
        if (std::vector<const Node *> cycle = findCycleThrough(&n); !cycle.empty()) {
          std::string path;
          for (const Node *c : cycle)
            path += nodeLabel(c) + " -> ";
          path += nodeLabel(cycle.front());
          diag_.error(n.loc(), n.opName() + ": cycle in the graph: " + path);
          return; // one report per cycle is enough
        }
        diag_.error(n.loc(), n.opName() + ": operand %" + v->name() +
                                 " is used before the node that defines it");
      }
    }
  }

  static std::string nodeLabel(const Node *n) {
    if (n->numResults() == 0)
      return n->opName().str();
    return "%" + n->result(0)->name().str();
  }

  /// Nodes on a cycle through `start` (following operand edges), or empty.
  std::vector<const Node *> findCycleThrough(const Node *start) {
    std::vector<const Node *> path;
    llvm::SmallPtrSet<const Node *, 16> visited;
    std::function<bool(const Node *)> dfs = [&](const Node *n) -> bool {
      path.push_back(n);
      for (const Value *v : n->operands()) {
        if (!v || !v->isResult() || !position_.count(v->definingNode()))
          continue;
        const Node *p = v->definingNode();
        if (p == start)
          return true;
        if (visited.insert(p).second && dfs(p))
          return true;
      }
      path.pop_back();
      return false;
    };
    visited.insert(start);
    if (!dfs(start))
      return {};
    return path;
  }

  void checkOutputsAndUpdates() {
    Location graphLoc;
    for (const Value *v : g_.outputs())
      if (!ownsValue(v))
        diag_.error(graphLoc, "graph output is dangling: it is not defined in this graph");
    llvm::SmallPtrSet<const Value *, 8> updated;
    for (const StateUpdate &u : g_.stateUpdates()) {
      if (!ownsValue(u.state) || !ownsValue(u.newValue)) {
        diag_.error(graphLoc, "state update refers to a value not defined in this graph");
        continue;
      }
      const Location &loc = u.newValue->loc();
      if (!u.state->isState())
        diag_.error(loc, "update target %" + u.state->name() + " is not a state tensor");
      else if (u.state->type() != u.newValue->type())
        diag_.error(loc, "update of %" + u.state->name() + " (" + u.state->type().str() +
                             ") with %" + u.newValue->name() + " of type " +
                             u.newValue->type().str());
      if (!updated.insert(u.state).second)
        diag_.error(loc, "state %" + u.state->name() + " is updated more than once");
    }
  }

  const Graph &g_;
  DiagnosticEngine &diag_;
  llvm::DenseMap<const Node *, unsigned> position_;
};

} // namespace

bool verifyGraph(const Graph &g, DiagnosticEngine &diag) { return GraphVerifier(g, diag).run(); }

} // namespace ampc
