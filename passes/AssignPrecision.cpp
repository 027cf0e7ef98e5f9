//===- AssignPrecision.cpp --------------------------------------------------===//
//
// Three steps: (1) parameter storage (cast_model_type half); (2) a decision
// per forward node: fixed by an override, the policy or the category, or —
// for follow and promote ops under per-op casting — left to a graph-level
// solve; (3) a walk in execution order that inserts the casts each node
// needs and re-infers its result types from the registry.
//
// The solve is a binary labelling (half / fp32) of the undecided nodes by a
// minimum s-t cut. A value whose consumers do not all run in its producer's
// precision costs one cast (casts are shared per value and dtype), so each
// value is a hyperedge over its producer and its consumers, cut when they
// disagree (Lawler's construction: two auxiliary nodes per hyperedge). Its
// weight makes the cut lexicographic: fewest casts first, then fewest
// elements cast. A promote op must be fp32 if any input is fp32: an infinite
// arc. Among minimum cuts, the one with the largest half side is taken (the
// nodes that cannot reach the sink in the residual graph), which is unique,
// so the result does not depend on any visiting order.
//
//===----------------------------------------------------------------------===//
#include "passes/AssignPrecision.h"

#include "passes/MinCut.h"
#include "passes/PrecisionPolicy.h"

#include "ir/Builder.h"
#include "ir/IdMap.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <cassert>
#include <climits>

namespace ampc {

llvm::StringRef precisionReasonKeyword(PrecisionReason r) {
  switch (r) {
  case PrecisionReason::Category:
    return "category";
  case PrecisionReason::OpOverride:
    return "op-override";
  case PrecisionReason::NodeOverride:
    return "node-override";
  case PrecisionReason::Neighbour:
    return "neighbour";
  case PrecisionReason::Promote:
    return "promote";
  case PrecisionReason::Policy:
    return "policy";
  case PrecisionReason::Integer:
    return "integer";
  case PrecisionReason::Cast:
    return "cast";
  case PrecisionReason::Backend:
    return "backend";
  }
  return "?";
}

std::optional<PrecisionReason> parsePrecisionReason(llvm::StringRef keyword) {
  for (PrecisionReason r :
       {PrecisionReason::Category, PrecisionReason::OpOverride, PrecisionReason::NodeOverride,
        PrecisionReason::Neighbour, PrecisionReason::Promote, PrecisionReason::Policy,
        PrecisionReason::Integer, PrecisionReason::Cast, PrecisionReason::Backend})
    if (precisionReasonKeyword(r) == keyword)
      return r;
  return std::nullopt;
}

std::string PrecisionDecision::reasonString() const {
  std::string s = precisionReasonKeyword(reason).str();
  if (!detail.empty())
    s += ": " + detail;
  return s;
}

std::optional<PrecisionDecision> precisionDecision(const Node &n) {
  const Attribute *dtype = n.findAttr(kPrecisionAttr);
  const Attribute *reason = n.findAttr(kPrecisionReasonAttr);
  if (!dtype || !reason || !dtype->is(AttrType::DType) || !reason->is(AttrType::String))
    return std::nullopt;
  auto [keyword, detail] = llvm::StringRef(reason->getString()).split(':');
  std::optional<PrecisionReason> r = parsePrecisionReason(keyword.trim());
  if (!r)
    return std::nullopt;
  return PrecisionDecision{dtype->getDType(), *r, detail.trim().str()};
}

namespace {

/// Source side = half, sink side = fp32.
enum class Label : uint8_t { Half, Fp32 };

/// What the pass knows about one forward node.
struct NodePlan {
  enum class Kind : uint8_t {
    Fixed,    ///< label decided by a rule
    Variable, ///< follow or promote under per-op casting: the solve decides
    Integer,  ///< no floating-point data
    Cast,     ///< a cast the model wrote
  };
  Kind kind = Kind::Integer;
  Label label = Label::Fp32;
  PrecisionReason reason = PrecisionReason::Integer;
  std::string detail;
  bool promote = false;  ///< Variable: a promote op (else follow)
  unsigned flowNode = 0; ///< Variable: its node in the cut graph
  /// Results whose dtype is the node's compute precision (not statistics).
  llvm::SmallVector<bool, 3> computeResult;
};

class PrecisionAssigner {
public:
  PrecisionAssigner(Graph &g, const PrecisionPolicy &policy, DiagnosticEngine &diag,
                    const BackendCapabilities *target)
      : g_(g), policy_(policy), diag_(diag), target_(target) {}

  PassResult run() {
    for (Node &n : g_.nodes())
      nodes_.push_back(&n);
    plans_.resize(nodes_.size());
    planIndex_ = IdMap<Node, uint32_t>(g_.idBound());
    for (size_t i = 0; i < nodes_.size(); ++i)
      planIndex_[nodes_[i]] = static_cast<uint32_t>(i + 1);
    for (const Value *v : g_.outputs())
      outputDTypes_.push_back(v->dtype());
    chooseParameterStorage();
    for (Node *n : nodes_)
      if (!planNode(*n))
        return PassResult::Failed;
    // Nothing has changed yet: a rejected graph is left as it was.
    for (Value *p : halfParams_)
      p->setType(p->type().withDType(policy_.halfType));
    if (policy_.perOpCasting)
      solve();
    if (!rewrite())
      return PassResult::Failed;
    return PassResult::Changed;
  }

private:
  /// The plan of a node of the graph as the pass found it.
  NodePlan &planFor(const Node *n) {
    uint32_t index = planIndex_.lookup(n);
    assert(index && "a node the pass made has no plan");
    return plans_[index - 1];
  }
  const NodePlan &planFor(const Node *n) const {
    return const_cast<PrecisionAssigner *>(this)->planFor(n);
  }
  /// Null for a node the pass made.
  const NodePlan *findPlan(const Node *n) const {
    uint32_t index = planIndex_.lookup(n);
    return index ? &plans_[index - 1] : nullptr;
  }

  DType dtypeOf(Label l) const { return l == Label::Half ? policy_.halfType : DType::F32; }

  /// A float operand the node's precision decides (not integral indices, not
  /// operands the row keeps in fp32, not a cast's own input).
  static bool castable(const Node &n, unsigned i) {
    if (n.kind() == OpKind::Cast)
      return false;
    const OperandSpec *spec = n.op().operandSpec(i);
    return spec && !spec->integral && !spec->keepFp32 && isFloating(n.operand(i)->dtype());
  }

  /// Parameters in half when the policy says so; batchnorm's affine
  /// parameters (every use an fp32-kept operand) stay fp32 under
  /// keep_batchnorm_fp32. Buffers (running statistics) always stay fp32:
  /// their momentum updates would lose most of their bits in half.
  void chooseParameterStorage() {
    if (policy_.castModelType != CastModelType::Half)
      return;
    for (Value *p : g_.state(StateKind::Parameter)) {
      if (p->dtype() != DType::F32)
        continue;
      bool onlyKeptOperands = p->hasUses() && llvm::all_of(p->uses(), [](const Use &u) {
                                const OperandSpec *spec = u.user->op().operandSpec(u.operandIndex);
                                return spec && spec->keepFp32;
                              });
      if (policy_.keepBatchnormFp32 && onlyKeptOperands)
        keptFp32Params_.insert(p);
      else
        halfParams_.push_back(p);
    }
  }

  /// Which results follow the compute precision: infer the node with every
  /// castable operand in half and see which float results come out half.
  void findComputeResults(const Node &n, NodePlan &plan) {
    plan.computeResult.assign(n.numResults(), false);
    llvm::SmallVector<TensorType, 4> types;
    for (unsigned i = 0; i < n.numOperands(); ++i)
      types.push_back(castable(n, i) ? n.operand(i)->type().withDType(policy_.halfType)
                                     : n.operand(i)->type());
    llvm::SmallVector<TensorType, 2> results;
    std::string err;
    if (!inferResultTypes(n.op(), types, n.attrs(), results, err) ||
        results.size() != n.numResults())
      return;
    for (unsigned r = 0; r < n.numResults(); ++r)
      plan.computeResult[r] = results[r].dtype() == policy_.halfType;
  }

  void fix(NodePlan &plan, Label label, PrecisionReason reason, std::string detail) {
    plan.kind = NodePlan::Kind::Fixed;
    plan.label = label;
    plan.reason = reason;
    plan.detail = std::move(detail);
  }

  bool planNode(Node &n) {
    NodePlan &plan = planFor(&n);
    if (n.kind() == OpKind::Cast) {
      plan.kind = NodePlan::Kind::Cast;
      plan.reason = PrecisionReason::Cast;
      plan.computeResult.assign(n.numResults(), false);
      return true;
    }
    findComputeResults(n, plan);
    bool hasFloat = false;
    for (unsigned r = 0; r < n.numResults() && !hasFloat; ++r)
      hasFloat = isFloating(n.result(r)->dtype());
    for (unsigned i = 0; i < n.numOperands() && !hasFloat; ++i)
      hasFloat = castable(n, i);
    if (!hasFloat) {
      plan.kind = NodePlan::Kind::Integer;
      plan.reason = PrecisionReason::Integer;
      return true;
    }

    // What the target cannot run in half runs in fp32, whatever else would
    // ask for half; only an explicit per-node request is an error.
    if (target_ && !target_->supports(n.op(), policy_.halfType)) {
      if (n.precisionOverride() == PrecisionOverride::Half) {
        diag_.error(n.loc(), "precision: half asks for " + n.opName() + " in " +
                                 dtypeName(policy_.halfType) + ", which backend '" +
                                 target_->name() + "' cannot run");
        return false;
      }
      fix(plan, Label::Fp32, PrecisionReason::Backend,
          (target_->name() + " has no " + dtypeName(policy_.halfType) + " kernel").str());
      return true;
    }

    switch (n.precisionOverride()) {
    case PrecisionOverride::Fp32:
      fix(plan, Label::Fp32, PrecisionReason::NodeOverride, "precision(fp32)");
      return true;
    case PrecisionOverride::Half:
      fix(plan, Label::Half, PrecisionReason::NodeOverride, "precision(half)");
      return true;
    case PrecisionOverride::None:
      break;
    }
    if (std::optional<PrecisionCategory> c = policy_.opOverride(n.opName())) {
      bool half = *c == PrecisionCategory::Half;
      fix(plan, half ? Label::Half : Label::Fp32, PrecisionReason::OpOverride,
          half ? "amp.half_ops" : "amp.fp32_ops");
      return true;
    }
    PrecisionCategory category = n.op().category;
    if (category == PrecisionCategory::Banned) {
      if (!policy_.allowBanned) {
        diag_.error(n.loc(), "op " + n.opName() +
                                 " is banned in half precision; use --allow-banned or "
                                 "precision: fp32");
        return false;
      }
      fix(plan, Label::Fp32, PrecisionReason::Category, "banned, allowed by amp.allow_banned");
      return true;
    }
    if (n.role() == NodeRole::Loss) {
      fix(plan, Label::Fp32, PrecisionReason::Policy, "losses run in fp32");
      return true;
    }
    if (!policy_.perOpCasting) {
      // Whole model in half (cast_model_type half, no per-op casting).
      bool keptParams = false;
      for (unsigned i = 0; i < n.numOperands(); ++i) {
        const OperandSpec *spec = n.op().operandSpec(i);
        keptParams |= spec && spec->keepFp32 && keptFp32Params_.count(n.operand(i));
      }
      fix(plan, Label::Half, PrecisionReason::Policy,
          keptParams ? "cast_model_type half, parameters kept fp32 (keep_batchnorm_fp32)"
                     : "cast_model_type half");
      return true;
    }
    switch (category) {
    case PrecisionCategory::Half:
      fix(plan, Label::Half, PrecisionReason::Category, "half");
      return true;
    case PrecisionCategory::Fp32:
    case PrecisionCategory::Banned:
      fix(plan, Label::Fp32, PrecisionReason::Category, "fp32");
      return true;
    case PrecisionCategory::Promote:
    case PrecisionCategory::Follow:
      plan.kind = NodePlan::Kind::Variable;
      plan.promote = category == PrecisionCategory::Promote;
      plan.reason = plan.promote ? PrecisionReason::Promote : PrecisionReason::Neighbour;
      return true;
    }
    return true;
  }

  /// The cut-graph node standing for the precision of value v as produced.
  unsigned producerFlowNode(const Value *v) const {
    if (v->isResult()) {
      const NodePlan *plan = findPlan(v->definingNode());
      if (plan && plan->computeResult[v->resultIndex()]) {
        const NodePlan &p = *plan;
        if (p.kind == NodePlan::Kind::Variable)
          return p.flowNode;
        if (p.kind == NodePlan::Kind::Fixed)
          return p.label == Label::Half ? MinCut::kSource : MinCut::kSink;
      }
    }
    return isHalfType(v->dtype()) ? MinCut::kSource : MinCut::kSink;
  }

  unsigned consumerFlowNode(const Node *n) const {
    const NodePlan &p = planFor(n);
    if (p.kind == NodePlan::Kind::Variable)
      return p.flowNode;
    return p.label == Label::Half ? MinCut::kSource : MinCut::kSink;
  }

  /// Labels every Variable node.
  void solve() {
    MinCut cut;
    bool any = false;
    for (Node *n : nodes_) {
      NodePlan &p = planFor(n);
      if (p.kind == NodePlan::Kind::Variable) {
        p.flowNode = cut.addNode();
        any = true;
      }
    }
    if (!any)
      return;

    // The values whose precision matters, with the members of their hyperedge.
    struct Edge {
      llvm::SmallVector<unsigned, 4> members;
      int64_t elements;
    };
    std::vector<Edge> edges;
    IdMap<Value, unsigned> edgeOf(g_.idBound()); // edge index + 1
    auto edgeFor = [&](const Value *v) -> Edge & {
      unsigned &index = edgeOf[v];
      if (!index) {
        edges.push_back({{producerFlowNode(v)}, v->type().numElements()});
        index = static_cast<unsigned>(edges.size());
      }
      return edges[index - 1];
    };
    for (Node *n : nodes_) {
      const NodePlan &p = planFor(n);
      if (p.kind != NodePlan::Kind::Fixed && p.kind != NodePlan::Kind::Variable)
        continue;
      for (unsigned i = 0; i < n->numOperands(); ++i)
        if (castable(*n, i))
          edgeFor(n->operand(i)).members.push_back(consumerFlowNode(n));
    }
    // Outputs and state updates keep their dtypes: consumers pinned there.
    for (const Value *v : g_.outputs())
      if (isFloating(v->dtype()))
        edgeFor(v).members.push_back(isHalfType(v->dtype()) ? MinCut::kSource : MinCut::kSink);
    for (const StateUpdate &u : g_.stateUpdates())
      if (isFloating(u.newValue->dtype()))
        edgeFor(u.newValue)
            .members.push_back(isHalfType(u.state->dtype()) ? MinCut::kSource : MinCut::kSink);

    // Weight = one cast (dominant) + its elements (tie-break).
    int64_t totalElements = 1;
    for (const Edge &e : edges)
      totalElements = std::min<int64_t>(totalElements + e.elements, INT64_MAX / 8);
    int64_t perCast = totalElements;
    bool lexicographic = perCast < MinCut::kInfinity / int64_t(edges.size() + 2) / 4;
    for (Edge &e : edges) {
      llvm::sort(e.members);
      e.members.erase(std::unique(e.members.begin(), e.members.end()), e.members.end());
      if (e.members.size() < 2)
        continue;
      if (llvm::all_of(e.members, [](unsigned m) { return m <= MinCut::kSink; }))
        continue; // terminals only: a constant cost
      int64_t weight = lexicographic ? perCast + e.elements : 1;
      if (e.members.size() == 2) {
        cut.addArc(e.members[0], e.members[1], weight);
        cut.addArc(e.members[1], e.members[0], weight);
        continue;
      }
      unsigned in = cut.addNode(), out = cut.addNode();
      for (unsigned m : e.members)
        cut.addArc(m, in, MinCut::kInfinity);
      cut.addArc(in, out, weight);
      for (unsigned m : e.members)
        cut.addArc(out, m, MinCut::kInfinity);
    }
    // A promote op in half needs every input in half.
    for (Node *n : nodes_) {
      const NodePlan &p = planFor(n);
      if (p.kind != NodePlan::Kind::Variable || !p.promote)
        continue;
      for (unsigned i = 0; i < n->numOperands(); ++i)
        if (castable(*n, i))
          cut.addArc(p.flowNode, producerFlowNode(n->operand(i)), MinCut::kInfinity);
    }

    std::vector<bool> fp32Side = cut.sinkSide();
    for (Node *n : nodes_) {
      NodePlan &p = planFor(n);
      if (p.kind == NodePlan::Kind::Variable)
        p.label = fp32Side[p.flowNode] ? Label::Fp32 : Label::Half;
    }
    // Explained against the producers as they were, before casts go in.
    for (Node *n : nodes_) {
      NodePlan &p = planFor(n);
      if (p.kind == NodePlan::Kind::Variable)
        p.detail = variableDetail(*n, p);
    }
  }

  /// The label of the value v as its producer leaves it (after the solve).
  Label producedLabel(const Value *v) const {
    if (v->isResult()) {
      const NodePlan *plan = findPlan(v->definingNode());
      if (plan && plan->computeResult[v->resultIndex()] &&
          (plan->kind == NodePlan::Kind::Fixed || plan->kind == NodePlan::Kind::Variable))
        return plan->label;
    }
    return isHalfType(v->dtype()) ? Label::Half : Label::Fp32;
  }

  std::string variableDetail(const Node &n, const NodePlan &p) const {
    bool anyInput = false, anyFp32Input = false, matchesFirstInput = false;
    for (unsigned i = 0; i < n.numOperands(); ++i) {
      if (!castable(n, i))
        continue;
      Label in = producedLabel(n.operand(i));
      if (!anyInput)
        matchesFirstInput = in == p.label;
      anyInput = true;
      anyFp32Input |= in == Label::Fp32;
    }
    if (p.promote) {
      if (p.label == Label::Half)
        return "all inputs half";
      return anyFp32Input ? "an input is fp32" : "fewer casts in fp32";
    }
    if (!anyInput)
      return "";
    return matchesFirstInput ? "as its input" : "as its consumers";
  }

  /// A cast of v to `to`, shared by every consumer that needs it, placed
  /// before the first of them.
  Value *castOf(Value *v, DType to, Node *before) {
    Value *&shared = casts_[static_cast<unsigned>(to)][v];
    if (shared)
      return shared;
    AttrMap attrs{{"to", Attribute(to)}, {"cacheable", Attribute(v->isState())}};
    std::string name = g_.uniqueName((v->name() + "." + dtypeName(to)).str());
    Node *cast = buildNode(g_, OpRegistry::builtin().get(OpKind::Cast), {v}, std::move(attrs),
                           v->loc(), diag_, {name}, before);
    if (!cast)
      return nullptr;
    shared = cast->result();
    return shared;
  }

  bool reinfer(Node &n) {
    llvm::SmallVector<TensorType, 4> types;
    for (const Value *v : n.operands())
      types.push_back(v->type());
    llvm::SmallVector<TensorType, 2> results;
    std::string err;
    if (!inferResultTypes(n.op(), types, n.attrs(), results, err)) {
      diag_.error(n.loc(), "assign-precision: " + n.opName() + ": " + err);
      return false;
    }
    assert(results.size() == n.numResults() && "an op's result count follows its attributes");
    for (unsigned r = 0; r < n.numResults(); ++r)
      n.result(r)->setType(results[r]);
    return true;
  }

  bool rewrite() {
    for (Node *n : nodes_) {
      NodePlan &p = planFor(n);
      bool decides = p.kind == NodePlan::Kind::Fixed || p.kind == NodePlan::Kind::Variable;
      if (decides) {
        DType target = dtypeOf(p.label);
        for (unsigned i = 0; i < n->numOperands(); ++i) {
          Value *v = n->operand(i);
          if (!isFloating(v->dtype()))
            continue;
          const OperandSpec *spec = n->op().operandSpec(i);
          std::optional<DType> to;
          if (castable(*n, i)) {
            // fp32 widens half inputs only: f64 (tests) is left alone.
            bool needs = p.label == Label::Half ? v->dtype() != target : isHalfType(v->dtype());
            if (needs)
              to = target;
          } else if (spec && spec->keepFp32 && v->dtype() != DType::F32 && v->dtype() != target) {
            to = DType::F32; // e.g. half batchnorm parameters under a forced-fp32 batchnorm
          }
          if (!to)
            continue;
          Value *cast = castOf(v, *to, n);
          if (!cast)
            return false;
          n->setOperand(i, cast);
        }
      }
      if (!reinfer(*n))
        return false;
      annotate(*n, p);
    }
    // Outputs and state updates keep their dtypes.
    std::vector<Value *> outputs = g_.outputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
      Value *v = outputs[i];
      DType want = outputDTypes_[i];
      if (v->dtype() == want || !isFloating(want))
        continue;
      if (!(outputs[i] = castOf(v, want, nullptr)))
        return false;
    }
    g_.setOutputs(std::move(outputs));
    std::vector<StateUpdate> updates = g_.stateUpdates();
    for (StateUpdate &u : updates)
      if (u.newValue->dtype() != u.state->dtype() && isFloating(u.state->dtype()))
        if (!(u.newValue = castOf(u.newValue, u.state->dtype(), nullptr)))
          return false;
    g_.setStateUpdates(std::move(updates));
    return true;
  }

  void annotate(Node &n, const NodePlan &p) {
    DType dtype = DType::F32; // every case below sets it
    std::string detail = p.detail;
    switch (p.kind) {
    case NodePlan::Kind::Integer:
    case NodePlan::Kind::Cast:
      if (n.numResults() == 0)
        return;
      dtype = n.result(0)->dtype();
      break;
    case NodePlan::Kind::Variable:
    case NodePlan::Kind::Fixed: {
      // The dtype actually produced: f64 graphs stay f64 under fp32, and a
      // node whose result dtype its attributes fix (fill) computes in that.
      std::optional<DType> produced, fixedByAttrs;
      for (unsigned r = 0; r < n.numResults(); ++r) {
        DType t = n.result(r)->dtype();
        if (p.computeResult[r] && !produced)
          produced = t;
        if (isFloating(t) && !fixedByAttrs)
          fixedByAttrs = t;
      }
      dtype = produced ? *produced : fixedByAttrs ? *fixedByAttrs : dtypeOf(p.label);
      break;
    }
    }
    n.setAttr(kPrecisionAttr, Attribute(dtype));
    n.setAttr(kPrecisionReasonAttr,
              Attribute(PrecisionDecision{dtype, p.reason, detail}.reasonString()));
  }

  Graph &g_;
  const PrecisionPolicy &policy_;
  DiagnosticEngine &diag_;
  const BackendCapabilities *target_;
  std::vector<Node *> nodes_;
  std::vector<DType> outputDTypes_;
  std::vector<Value *> halfParams_;
  llvm::DenseSet<const Value *> keptFp32Params_;
  /// Per node of nodes_, in the same order; planIndex_ holds a node's
  /// index + 1 (ir/IdMap.h: tables the walks read in order, not hash tables
  /// they read at random).
  std::vector<NodePlan> plans_;
  IdMap<Node, uint32_t> planIndex_;
  /// Per target dtype, the shared cast of each value made so far.
  std::array<IdMap<Value, Value *>, std::size(kAllDTypes)> casts_;
};

} // namespace

PassResult AssignPrecisionPass::run(Graph &g, PassContext &ctx) {
  for (const Node &n : g.nodes())
    if (n.role() != NodeRole::Forward && n.role() != NodeRole::Loss) {
      ctx.diag.error(n.loc(), "assign-precision: the graph already has " + roleName(n.role()) +
                                  " nodes; run assign-precision on the forward graph, before "
                                  "autodiff");
      return PassResult::Failed;
    }
  std::optional<PrecisionPolicy> policy = resolvePolicy(g, ctx.diag);
  if (!policy)
    return PassResult::Failed;
  if (!policy->mixed())
    return PassResult::Unchanged;
  // Decisions are made once: a graph that carries them (printed after this
  // pass and read back) is left as it is.
  for (const Node &n : g.nodes())
    if (n.findAttr(kPrecisionAttr))
      return PassResult::Unchanged;
  return PrecisionAssigner(g, *policy, ctx.diag, ctx.target).run();
}

} // namespace ampc
