//===- LossScale.cpp --------------------------------------------------------===//
#include "passes/LossScale.h"
#include "ir/OpAttrs.h"

#include "passes/Autodiff.h"
#include "passes/MasterWeights.h"
#include "passes/PrecisionPolicy.h"

#include "ir/Builder.h"
#include "ir/IdMap.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace ampc {

namespace {

/// What the pass needs to know of the graph before it changes anything,
/// found in one walk over a graph that is at its biggest by now (forward,
/// backward and optimizer): the optimizer nodes it conditions on "all
/// finite" -- parameter updates (a `grad` and a `skip` operand) and step
/// counters (a `skip` only) -- the loss, and any loss scaling already there.
struct SkippableNodes {
  std::vector<Node *> updates;
  std::vector<Node *> counters;
  /// The first node that already does loss scaling, if any.
  Node *lossScaling = nullptr;
  /// The loss, as findLoss finds it.
  Value *loss = nullptr;
};

SkippableNodes findSkippable(Graph &g) {
  SkippableNodes s;
  for (Node &n : g.nodes()) {
    if (n.role() == NodeRole::LossScale && !s.lossScaling)
      s.lossScaling = &n;
    if (Value *loss = lossDefinedBy(n))
      s.loss = loss;
    if (n.role() != NodeRole::Optimizer || !n.op().operandIndex("skip"))
      continue;
    (n.op().operandIndex("grad") ? s.updates : s.counters).push_back(&n);
  }
  return s;
}

/// The node after `n` in the graph's order, or null at the end.
Node *nextNode(Graph &g, Node *n) {
  auto it = std::next(n->getIterator());
  return it == g.nodes().end() ? nullptr : &*it;
}

class LossScaleSplicer {
public:
  LossScaleSplicer(Graph &g, const PrecisionPolicy &policy, DiagnosticEngine &diag)
      : g_(g), policy_(policy), diag_(diag) {}

  bool run();

private:
  bool error(const Location &loc, const llvm::Twine &msg) {
    diag_.error(loc, "loss-scale: " + msg);
    return false;
  }
  bool requireFreeName(llvm::StringRef name) {
    return g_.isNameFree(name) || error(g_.loc(), "the name '" + name + "' is taken");
  }
  Node *build(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs,
              llvm::ArrayRef<std::string> names, Node *before) {
    Node *n = buildNode(g_, OpRegistry::builtin().get(kind), operands, std::move(attrs), loc_,
                        diag_, names, before);
    if (n)
      n->setRole(NodeRole::LossScale);
    return n;
  }
  bool scaleSeed(Value *scale);
  Node *insertUnscaleCheck(Value *scale, llvm::ArrayRef<Value *> grads, int64_t accumulate);
  bool conditionOnFinite(const SkippableNodes &nodes, Node *check);
  Value *unscaledGradScale(Value *current, Value *inverse, Node *user);
  bool unscaleNorm(Node *norm, Value *inverse);

  Graph &g_;
  const PrecisionPolicy &policy_;
  DiagnosticEngine &diag_;
  Location loc_;
  Value *loss_ = nullptr;
};

/// The seed d(loss)/d(loss) = 1 (autodiff's fill) becomes the scale.
bool LossScaleSplicer::scaleSeed(Value *scale) {
  std::string seedName = gradientName(loss_->name());
  Value *seed = g_.lookup(seedName);
  Node *fill = seed ? seed->definingNode() : nullptr;
  if (!fill || fill->kind() != OpKind::Fill || attrs::Fill(*fill).value() != 1.0)
    return error(loss_->loc(), "the backward seed %" + seedName +
                                   " is not a fill with 1 (run autodiff before loss-scale)");
  Value *scaled = scale;
  if (seed->dtype() != scale->dtype()) {
    Node *cast = build(OpKind::Cast, {scale}, {{"to", Attribute(seed->dtype())}}, {""}, fill);
    if (!cast)
      return false;
    scaled = cast->result();
  }
  seed->replaceAllUsesWith(scaled);
  g_.eraseNode(fill);
  if (scaled != scale)
    g_.renameValue(scaled, seedName);
  return true;
}

Node *LossScaleSplicer::insertUnscaleCheck(Value *scale, llvm::ArrayRef<Value *> grads,
                                           int64_t accumulate) {
  // Right after the last gradient is computed: before anything reads them.
  IdSet<Node> producers(g_.idBound());
  for (Value *grad : grads)
    if (grad->isResult())
      producers.insert(grad->definingNode());
  Node *before = nullptr;
  for (auto it = g_.nodes().rbegin(); it != g_.nodes().rend(); ++it) {
    if (producers.count(&*it))
      break;
    before = &*it;
  }
  std::vector<std::string> names = {"skipped", "loss_scale", g_.uniqueName("loss_scale.inverse")};
  llvm::SmallVector<Value *, 8> operands = {scale};
  operands.append(grads.begin(), grads.end());
  Node *check =
      build(OpKind::UnscaleCheck, operands, {{"accumulate", Attribute(accumulate)}}, names, before);
  if (!check)
    return nullptr;

  // The gradients stay scaled: the updates unscale them as they read them
  // (conditionOnFinite gives them grad_scale 1 / scale), and the global norm
  // of clipping is unscaled by its clip coefficient. Any other reader would
  // see scaled values, so it is refused.
  IdSet<Node> later(g_.idBound());
  for (Node *n = nextNode(g_, check); n; n = nextNode(g_, n))
    later.insert(n);
  llvm::SmallVector<Node *, 2> norms;
  for (Value *grad : grads)
    for (const Use &u : grad->uses()) {
      if (!later.count(u.user))
        continue;
      bool isUpdateGrad = u.user->op().operandIndex("grad") == u.operandIndex &&
                          u.user->op().operandIndex("grad_scale");
      if (u.user->kind() == OpKind::GlobalNorm) {
        if (!llvm::is_contained(norms, u.user))
          norms.push_back(u.user);
      } else if (!isUpdateGrad) {
        error(u.user->loc(), "%" + grad->name() + " is read by " + u.user->opName() +
                                 " after the gradients are checked; only optimizer updates "
                                 "and global_norm can take the unscale factor");
        return nullptr;
      }
    }
  for (Node *norm : norms)
    if (!unscaleNorm(norm, check->result(2)))
      return nullptr;
  return check;
}

/// The norm of the scaled gradients, times 1 / scale, under the norm's name:
/// clipping and whoever logs the norm see it unscaled.
bool LossScaleSplicer::unscaleNorm(Node *norm, Value *inverse) {
  Value *scaled = norm->result();
  std::string name = scaled->name().str();
  g_.renameValue(scaled, g_.uniqueName(name + ".scaled"));
  Node *mul = build(OpKind::Mul, {scaled, inverse}, {}, {name}, nextNode(g_, norm));
  if (!mul)
    return false;
  Value *unscaled = mul->result();
  scaled->replaceAllUsesWith(unscaled);
  mul->setOperand(0, scaled);
  std::vector<Value *> outputs(g_.outputs().begin(), g_.outputs().end());
  std::replace(outputs.begin(), outputs.end(), scaled, unscaled);
  g_.setOutputs(std::move(outputs));
  return true;
}

/// The grad_scale that unscales: 1 / scale where the update had none (or the
/// unit placeholder); any other factor (a clip coefficient) times 1 / scale,
/// computed just before its first user.
Value *LossScaleSplicer::unscaledGradScale(Value *current, Value *inverse, Node *user) {
  if (!current || current->name() == kUnitGradScaleName)
    return inverse;
  Node *mul = build(OpKind::Mul, {current, inverse}, {},
                    {g_.uniqueName((current->name() + ".unscaled").str())}, user);
  return mul ? mul->result() : nullptr;
}

/// Gives every update and step counter skip = %skipped, moving the counters
/// after the check (the optimizer pass puts them first).
bool LossScaleSplicer::conditionOnFinite(const SkippableNodes &nodes, Node *check) {
  Value *skipped = check->result(0);
  // The updates read the unscaled gradients, so they follow the check.
  Node *afterCheck = nextNode(g_, check);
  assert(afterCheck && "the updates come after the unscale check");
  for (Node *counter : nodes.counters) {
    unsigned skipIndex = *counter->op().operandIndex("skip");
    llvm::SmallVector<Value *, 2> operands(counter->operands().begin(),
                                           counter->operands().begin() + skipIndex);
    operands.push_back(skipped);
    if (!rebuildNode(g_, counter, operands, {}, diag_, afterCheck))
      return false;
  }
  // Updates sharing a grad_scale (a clip coefficient) share its unscaled one.
  llvm::DenseMap<Value *, Value *> unscaledScales;
  Value *inverse = check->result(2);
  for (Node *update : nodes.updates) {
    unsigned gradScaleIndex = *update->op().operandIndex("grad_scale");
    unsigned skipIndex = *update->op().operandIndex("skip");
    Value *current =
        update->numOperands() > gradScaleIndex ? update->operand(gradScaleIndex) : nullptr;
    Value *&unscaled = unscaledScales[current];
    if (!unscaled && !(unscaled = unscaledGradScale(current, inverse, update)))
      return false;
    if (update->numOperands() > skipIndex) {
      // The master-weights pass's placeholders (or an earlier skip).
      update->setOperand(gradScaleIndex, unscaled);
      update->setOperand(skipIndex, skipped);
      continue;
    }
    llvm::SmallVector<Value *, 10> operands(update->operands().begin(),
                                            update->operands().begin() + gradScaleIndex);
    operands.push_back(unscaled);
    operands.push_back(skipped);
    if (!rebuildNode(g_, update, operands, {}, diag_))
      return false;
  }
  for (const char *placeholder : {kNoSkipName, kUnitGradScaleName})
    if (Value *unused = g_.lookup(placeholder))
      if (!unused->hasUses() && unused->isResult())
        g_.eraseNode(unused->definingNode());
  return true;
}

bool LossScaleSplicer::run() {
  SkippableNodes nodes = findSkippable(g_);
  if (nodes.lossScaling)
    return error(nodes.lossScaling->loc(), "the graph already has loss scaling");
  loss_ = nodes.loss;
  if (!loss_)
    return error(g_.loc(), "the graph has no loss (a node with role loss)");
  loc_ = loss_->loc();
  if (nodes.updates.empty())
    return error(g_.loc(), "the graph has no optimizer updates (run the optimizer pass "
                           "before loss-scale)");
  bool dynamic = policy_.dynamicLossScale;
  const char *scaleName = "loss_scale.scale", *trackerName = "loss_scale.growth_tracker";
  for (const char *name : {scaleName, "loss_scale", "skipped"})
    if (!requireFreeName(name))
      return false;
  if (dynamic && !requireFreeName(trackerName))
    return false;

  InitSpec init;
  init.kind = InitSpec::Kind::Constant;
  init.a = dynamic ? policy_.dynamic.init : policy_.staticLossScale;
  Value *scale =
      g_.addState(scaleName, TensorType(DType::F32, {}), StateKind::ScalerState, init, loc_);
  if (!scaleSeed(scale))
    return false;

  // The gradients the updates apply, in update order.
  std::vector<Value *> grads;
  IdSet<Value> seenGrads(g_.idBound()); // a scan of `grads` would be quadratic
  unsigned gradIndex = *nodes.updates.front()->op().operandIndex("grad");
  int64_t accumulate = attrs::SgdUpdate(*nodes.updates.front()).accumulate();
  for (Node *update : nodes.updates) {
    if (attrs::SgdUpdate(*update).accumulate() != accumulate)
      return error(update->loc(), "the updates disagree on the accumulation count");
    Value *grad = update->operand(gradIndex);
    if (seenGrads.insert(grad))
      grads.push_back(grad);
  }
  Node *check = insertUnscaleCheck(scale, grads, accumulate);
  if (!check || !conditionOnFinite(nodes, check))
    return false;

  if (dynamic) {
    InitSpec zeros;
    zeros.kind = InitSpec::Kind::Zeros;
    Value *tracker =
        g_.addState(trackerName, TensorType(DType::F32, {}), StateKind::ScalerState, zeros, loc_);
    const DynamicLossScale &d = policy_.dynamic;
    Node *update = build(OpKind::UpdateLossScale, {scale, tracker, check->result(0)},
                         {{"growth_factor", Attribute(d.growthFactor)},
                          {"backoff_factor", Attribute(d.backoffFactor)},
                          {"growth_interval", Attribute(d.growthInterval)},
                          {"min_scale", Attribute(d.minScale)},
                          {"max_scale", Attribute(d.maxScale)},
                          {"accumulate", Attribute(accumulate)}},
                         {g_.uniqueName(std::string(scaleName) + ".next"),
                          g_.uniqueName(std::string(trackerName) + ".next")},
                         nullptr);
    if (!update)
      return false;
    g_.addStateUpdate(scale, update->result(0));
    g_.addStateUpdate(tracker, update->result(1));
  }
  g_.addOutput(check->result(1));
  g_.addOutput(check->result(0));
  return true;
}

} // namespace

PassResult LossScalePass::run(Graph &g, PassContext &ctx) {
  std::optional<PrecisionPolicy> policy = resolvePolicy(g, ctx.diag);
  if (!policy)
    return PassResult::Failed;
  if (!policy->scalesLoss())
    return PassResult::Unchanged;
  LossScaleSplicer splicer(g, *policy, ctx.diag);
  return splicer.run() ? PassResult::Changed : PassResult::Failed;
}

} // namespace ampc
