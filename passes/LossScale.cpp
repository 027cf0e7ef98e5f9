//===- LossScale.cpp --------------------------------------------------------===//
#include "passes/LossScale.h"
#include "ir/OpAttrs.h"

#include "passes/Autodiff.h"
#include "passes/MasterWeights.h"
#include "passes/OptimizerSets.h"
#include "passes/PrecisionPolicy.h"

#include "ir/Builder.h"
#include "ir/IdMap.h"
#include "ir/MetaReader.h"

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
  bool scaleSeed(Value *seedOf, Value *scale);
  Node *insertUnscaleCheck(Value *scale, llvm::ArrayRef<Value *> grads, int64_t accumulate);
  /// The non-finite flag an update skips on (per update: with several
  /// optimizers each skips on its own loss's check).
  using SkipOf = llvm::function_ref<Value *(Node *update)>;
  bool conditionOnFinite(const SkippableNodes &nodes, SkipOf skipOf, Value *inverse, Node *after);
  Value *withTurn(Value *existing, Value *skipped, Node *before);
  Value *reportedSkip(Value *anySkipped);
  Value *unscaledGradScale(Value *current, Value *inverse, Node *user);
  bool unscaleNorm(Node *norm, Value *inverse);
  Node *buildScaleUpdate(Value *scale, Value *tracker, Value *skipped, int64_t accumulate,
                         const std::string &scaleName, const std::string &trackerName);
  bool runPerLoss(const SkippableNodes &nodes);
  Value *unitGradScale(Node *before);
  Value *unscaledSum(llvm::ArrayRef<Value *> parts, llvm::ArrayRef<Value *> inverses, Node *before);
  void replaceEverywhere(Value *old, Value *by);
  Value *addScale(const std::string &name);
  Value *addTracker(const std::string &name);

  Graph &g_;
  const PrecisionPolicy &policy_;
  DiagnosticEngine &diag_;
  Location loc_;
  Value *loss_ = nullptr;
  Value *unit_ = nullptr; // the 1 of updates that had no grad_scale (runPerLoss)
  /// max(off-turn flag, non-finite flag), one per pair (withTurn).
  llvm::DenseMap<std::pair<Value *, Value *>, Value *> withTurn_;
  /// The (off-turn flag or null, non-finite flag) pairs the updates skip
  /// on, in the order first seen (reportedSkip).
  std::vector<std::pair<Value *, Value *>> skipSources_;
};

/// The seed d(loss)/d(loss) = 1 (autodiff's fill) of `seedOf` becomes the
/// scale.
bool LossScaleSplicer::scaleSeed(Value *seedOf, Value *scale) {
  std::string seedName = gradientName(seedOf->name());
  Value *seed = g_.lookup(seedName);
  Node *fill = seed ? seed->definingNode() : nullptr;
  if (!fill || fill->kind() != OpKind::Fill || attrs::Fill(*fill).value() != 1.0)
    return error(seedOf->loc(), "the backward seed %" + seedName +
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
  replaceEverywhere(scaled, mul->result());
  mul->setOperand(0, scaled);
  return true;
}

/// `by` in place of `old` for every reader and among the graph's outputs.
void LossScaleSplicer::replaceEverywhere(Value *old, Value *by) {
  old->replaceAllUsesWith(by);
  std::vector<Value *> outputs(g_.outputs().begin(), g_.outputs().end());
  std::replace(outputs.begin(), outputs.end(), old, by);
  g_.setOutputs(std::move(outputs));
}

/// A scaler's scale (the policy's initial or static value) and its growth
/// tracker (zeros), f32 scalars.
Value *LossScaleSplicer::addScale(const std::string &name) {
  InitSpec init;
  init.kind = InitSpec::Kind::Constant;
  init.a = policy_.dynamicLossScale ? policy_.dynamic.init : policy_.staticLossScale;
  return g_.addState(name, TensorType(DType::F32, {}), StateKind::ScalerState, init, loc_);
}
Value *LossScaleSplicer::addTracker(const std::string &name) {
  InitSpec zeros;
  zeros.kind = InitSpec::Kind::Zeros;
  return g_.addState(name, TensorType(DType::F32, {}), StateKind::ScalerState, zeros, loc_);
}

/// sum_k f32(parts[k]) * inverses[k] over the parts that are there (a null
/// part: that loss gives this parameter no gradient), built before `before`.
Value *LossScaleSplicer::unscaledSum(llvm::ArrayRef<Value *> parts,
                                     llvm::ArrayRef<Value *> inverses, Node *before) {
  Value *sum = nullptr;
  for (size_t k = 0; k < parts.size(); ++k) {
    Value *part = parts[k];
    if (!part)
      continue;
    if (part->dtype() != DType::F32) {
      Node *widen = build(OpKind::Cast, {part}, {{"to", Attribute(DType::F32)}}, {""}, before);
      if (!widen)
        return nullptr;
      part = widen->result();
    }
    Node *mul = build(OpKind::Mul, {part, inverses[k]}, {}, {""}, before);
    if (!mul)
      return nullptr;
    Node *add = sum ? build(OpKind::Add, {sum, mul->result()}, {}, {""}, before) : mul;
    if (!add)
      return nullptr;
    sum = add->result();
  }
  return sum;
}

/// The grad_scale that unscales: 1 / scale where the update had none (or the
/// unit placeholder); any other factor (a clip coefficient) times 1 / scale,
/// computed just before its first user. Without `inverse` (gradients that are
/// unscaled already) the factor stays, and an update without one gets 1.
Value *LossScaleSplicer::unscaledGradScale(Value *current, Value *inverse, Node *user) {
  if (!inverse)
    return current ? current : unitGradScale(user);
  if (!current || current->name() == kUnitGradScaleName)
    return inverse;
  Node *mul = build(OpKind::Mul, {current, inverse}, {},
                    {g_.uniqueName((current->name() + ".unscaled").str())}, user);
  return mul ? mul->result() : nullptr;
}

Value *LossScaleSplicer::unitGradScale(Node *before) {
  if (unit_)
    return unit_;
  Node *one = build(OpKind::Fill, {},
                    {{"value", Attribute(1.0)},
                     {"shape", Attribute(std::vector<int64_t>{})},
                     {"dtype", Attribute(DType::F32)}},
                    {g_.uniqueName("loss_scale.unit")}, before);
  return unit_ = one ? one->result() : nullptr;
}

/// The skip of an update or step counter that had `existing` (an
/// optimizer's off-turn flag, several optimizers on a schedule) as well as
/// `skipped`: their max, built before `before`; `skipped` alone when
/// existing is none or master weights' constant 0.
Value *LossScaleSplicer::withTurn(Value *existing, Value *skipped, Node *before) {
  if (!existing || existing == skipped || existing->name() == kNoSkipName)
    existing = nullptr;
  std::pair<Value *, Value *> source = {existing, skipped};
  if (!llvm::is_contained(skipSources_, source))
    skipSources_.push_back(source);
  if (!existing)
    return skipped;
  Value *&combined = withTurn_[{existing, skipped}];
  if (!combined && existing->isResult() && existing->definingNode()->numOperands() == 0) {
    // The optimizer pass built the flag (turn_skip, reading nothing) with
    // the updates, after the checks; it moves up to where max reads it.
    Node *def = existing->definingNode();
    bool defined = false;
    for (Node &n : g_.nodes()) {
      if (&n == before)
        break;
      defined = defined || &n == def;
    }
    if (!defined)
      g_.moveNode(def, before);
  }
  if (!combined) {
    Node *max = build(OpKind::Max, {existing, skipped}, {},
                      {g_.uniqueName((existing->name() + ".or_skipped").str())}, before);
    combined = max ? max->result() : nullptr;
  }
  return combined;
}

/// Several optimizers with a scaler per term: the graph's %skipped, 1 when
/// an optimizer whose turn it is skipped its step for an overflow in its
/// own term (an overflow in another's term, off its turn, skips nothing):
/// the max over the updates' sources of relu(non-finite - off-turn).
/// `anySkipped` (any term overflowed) is renamed %skipped.any.
Value *LossScaleSplicer::reportedSkip(Value *anySkipped) {
  g_.renameValue(anySkipped, g_.uniqueName("skipped.any"));
  std::vector<Value *> parts;
  for (auto [offTurn, nonFinite] : skipSources_) {
    if (!offTurn) {
      parts.push_back(nonFinite);
      continue;
    }
    std::string base = (offTurn->name() + ".overflow").str();
    Node *sub = build(OpKind::Sub, {nonFinite, offTurn}, {}, {""}, nullptr);
    Node *relu =
        sub ? build(OpKind::Relu, {sub->result()}, {}, {g_.uniqueName(base)}, nullptr) : nullptr;
    if (!relu)
      return nullptr;
    parts.push_back(relu->result());
  }
  Value *reported = parts.front();
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string name = i + 1 == parts.size() ? "skipped" : g_.uniqueName("skipped.reported");
    Node *max = build(OpKind::Max, {reported, parts[i]}, {}, {name}, nullptr);
    if (!max)
      return nullptr;
    reported = max->result();
  }
  if (reported->name() != "skipped") {
    Node *copy =
        build(OpKind::Scale, {reported}, {{"factor", Attribute(1.0)}}, {"skipped"}, nullptr);
    reported = copy ? copy->result() : nullptr;
  }
  return reported;
}

/// Gives every update skip = skipOf(update) (with its off-turn flag, if it
/// has one) and every step counter the skip of the updates that read its
/// count, moving the counters after `after`, the node that computes the
/// flags (the optimizer pass puts them first); the updates' grad_scale takes
/// `inverse` (see unscaledGradScale).
bool LossScaleSplicer::conditionOnFinite(const SkippableNodes &nodes, SkipOf skipOf, Value *inverse,
                                         Node *after) {
  // The updates read the unscaled gradients, so they follow the check.
  Node *afterCheck = nextNode(g_, after);
  assert(afterCheck && "the updates come after the unscale check");
  // Each update's skip, before any node is rebuilt.
  llvm::DenseMap<Node *, Value *> skipOfUpdate;
  for (Node *update : nodes.updates) {
    unsigned skipIndex = *update->op().operandIndex("skip");
    Value *existing = update->numOperands() > skipIndex ? update->operand(skipIndex) : nullptr;
    Value *skip = withTurn(existing, skipOf(update), afterCheck);
    if (!skip)
      return false;
    skipOfUpdate[update] = skip;
  }
  for (Node *counter : nodes.counters) {
    unsigned skipIndex = *counter->op().operandIndex("skip");
    Value *skip = nullptr;
    for (const Use &use : counter->result()->uses())
      if (auto it = skipOfUpdate.find(use.user); it != skipOfUpdate.end()) {
        skip = it->second;
        break;
      }
    if (!skip) {
      // A count no update reads: it skips on the first update's flags.
      Value *existing = counter->numOperands() > skipIndex ? counter->operand(skipIndex) : nullptr;
      if (!(skip = withTurn(existing, skipOf(nodes.updates.front()), afterCheck)))
        return false;
    }
    llvm::SmallVector<Value *, 2> operands(counter->operands().begin(),
                                           counter->operands().begin() + skipIndex);
    operands.push_back(skip);
    if (!rebuildNode(g_, counter, operands, {}, diag_, afterCheck))
      return false;
  }
  // Updates sharing a grad_scale (a clip coefficient) share its unscaled one.
  llvm::DenseMap<Value *, Value *> unscaledScales;
  for (Node *update : nodes.updates) {
    unsigned gradScaleIndex = *update->op().operandIndex("grad_scale");
    unsigned skipIndex = *update->op().operandIndex("skip");
    Value *skipped = skipOfUpdate[update];
    Value *current =
        update->numOperands() > gradScaleIndex ? update->operand(gradScaleIndex) : nullptr;
    Value *&unscaled = unscaledScales[current];
    if (!unscaled && !(unscaled = unscaledGradScale(current, inverse, update)))
      return false;
    if (update->numOperands() > skipIndex) {
      // The master-weights pass's placeholders, an off-turn flag (or an
      // earlier skip).
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

/// update_loss_scale at the end of the step, its results the scaler's next
/// state.
Node *LossScaleSplicer::buildScaleUpdate(Value *scale, Value *tracker, Value *skipped,
                                         int64_t accumulate, const std::string &scaleName,
                                         const std::string &trackerName) {
  const DynamicLossScale &d = policy_.dynamic;
  Node *update =
      build(OpKind::UpdateLossScale, {scale, tracker, skipped},
            {{"growth_factor", Attribute(d.growthFactor)},
             {"backoff_factor", Attribute(d.backoffFactor)},
             {"growth_interval", Attribute(d.growthInterval)},
             {"min_scale", Attribute(d.minScale)},
             {"max_scale", Attribute(d.maxScale)},
             {"accumulate", Attribute(accumulate)}},
            {g_.uniqueName(scaleName + ".next"), g_.uniqueName(trackerName + ".next")}, nullptr);
  if (!update)
    return nullptr;
  g_.addStateUpdate(scale, update->result(0));
  g_.addStateUpdate(tracker, update->result(1));
  return update;
}

/// amp.num_losses = N > 1: autodiff walked back from each term %t_k of the
/// loss on its own, giving %p.grad.<k>, and summed them into %p.grad. Each
/// term gets its own scaler (Apex's num_losses):
///
///   scaler %loss_scale.scale (term 0), %loss_scale.<k>.scale (k > 0)
///   the seed %t_k.grad becomes the scale of term k
///   %skipped.<k>, %loss_scale[.<k>], %loss_scale[.<k>].inverse =
///       unscale_check(<scale k>, %p.grad.<k>...)
///   %skipped = max(%skipped.0, ..., %skipped.<N-1>)
///   %p.grad = sum_k f32(%p.grad.<k>) * <inverse k>      (replaces the sum)
///   updates and counters skip on %skipped; each scaler's update_loss_scale
///   reads its own %skipped.<k>
///
/// A step is applied only when every loss's gradients are finite (a
/// gradient with an inf cannot be applied), but only the scaler of the loss
/// that overflowed backs off: the other keeps growing. The gradients the
/// updates read are unscaled f32 sums, so grad_scale keeps only a clip
/// coefficient, and a global_norm reads them as they are.
bool LossScaleSplicer::runPerLoss(const SkippableNodes &nodes) {
  std::vector<Value *> terms = lossTerms(loss_);
  // Several optimizers: a scaler for each term, whatever num_losses says.
  const bool severalOptimizers = hasOptimizerSets(g_);
  size_t numLosses = severalOptimizers ? terms.size() : size_t(policy_.numLosses);
  if (terms.size() != numLosses)
    return error(loss_->loc(), "amp.num_losses is " + llvm::Twine(numLosses) +
                                   " but the loss sums " + llvm::Twine(terms.size()) + " term(s)");
  for (Node *update : nodes.updates)
    if (attrs::SgdUpdate(*update).accumulate() != 1)
      return error(update->loc(), "amp.num_losses > 1 does not combine with gradient "
                                  "accumulation yet");
  // The checks would read each rank's own gradients, and the ranks could
  // disagree on a skip.
  if (metaInt(g_, "dist.ranks", 1) > 1)
    return error(g_.loc(), "amp.num_losses > 1 does not combine with data-parallel training yet");
  bool dynamic = policy_.dynamicLossScale;
  auto prefix = [](size_t k) {
    return k == 0 ? std::string("loss_scale") : "loss_scale." + std::to_string(k);
  };

  // The sums the updates apply and, for each, its per-loss parts.
  unsigned gradIndex = *nodes.updates.front()->op().operandIndex("grad");
  std::vector<Value *> sums;
  IdSet<Value> seenSums(g_.idBound());
  for (Node *update : nodes.updates) {
    Value *sum = update->operand(gradIndex);
    if (seenSums.insert(sum))
      sums.push_back(sum);
  }
  std::vector<std::vector<Value *>> partsOfSum(sums.size()); // null where loss k gives none
  std::vector<std::vector<Value *>> partsOfLoss(numLosses);
  IdSet<Node> sumNodes(g_.idBound());
  for (size_t i = 0; i < sums.size(); ++i) {
    Value *sum = sums[i];
    bool any = false;
    for (size_t k = 0; k < numLosses; ++k) {
      Value *part = g_.lookup((sum->name() + "." + llvm::Twine(k)).str());
      partsOfSum[i].push_back(part);
      if (part) {
        partsOfLoss[k].push_back(part);
        any = true;
      }
    }
    if (!any || !sum->isResult())
      return error(sum->loc(), "%" + sum->name() +
                                   " is not a sum of per-loss gradients (run "
                                   "autodiff with the same amp.num_losses)");
    sumNodes.insert(sum->definingNode());
  }
  // Checks and unscaled sums go before the first of autodiff's sums, after
  // every per-loss gradient.
  Node *firstSum = nullptr;
  for (Node &n : g_.nodes())
    if (sumNodes.count(&n)) {
      firstSum = &n;
      break;
    }

  std::vector<Value *> scales, inverses, skips;
  std::vector<Node *> checks;
  for (size_t k = 0; k < numLosses; ++k) {
    if (partsOfLoss[k].empty())
      return error(terms[k]->loc(),
                   "loss term %" + terms[k]->name() +
                       " gives no gradient to a parameter that an optimizer updates");
    std::string scaleName = prefix(k) + ".scale";
    for (const std::string &name : {scaleName, prefix(k)})
      if (!requireFreeName(name))
        return false;
    Value *scale = addScale(scaleName);
    if (!scaleSeed(terms[k], scale))
      return false;
    llvm::SmallVector<Value *, 8> operands = {scale};
    operands.append(partsOfLoss[k].begin(), partsOfLoss[k].end());
    Node *check = build(OpKind::UnscaleCheck, operands, {{"accumulate", Attribute(int64_t(1))}},
                        {g_.uniqueName("skipped." + std::to_string(k)), prefix(k),
                         g_.uniqueName(prefix(k) + ".inverse")},
                        firstSum);
    if (!check)
      return false;
    scales.push_back(scale);
    checks.push_back(check);
    skips.push_back(check->result(0));
    inverses.push_back(check->result(2));
  }
  Node *anySkipped = nullptr;
  Value *skipped = skips[0];
  for (size_t k = 1; k < numLosses; ++k) {
    std::string name = k + 1 == numLosses ? "skipped" : g_.uniqueName("skipped.any");
    if (!(anySkipped = build(OpKind::Max, {skipped, skips[k]}, {}, {name}, firstSum)))
      return false;
    skipped = anySkipped->result();
  }

  // Each sum again, of the unscaled parts in f32 (all built before
  // firstSum, which goes with autodiff's sums below).
  std::vector<Value *> unscaledSums;
  for (const std::vector<Value *> &parts : partsOfSum) {
    unscaledSums.push_back(unscaledSum(parts, inverses, firstSum));
    if (!unscaledSums.back())
      return false;
  }
  for (size_t i = 0; i < sums.size(); ++i) {
    Value *sum = sums[i], *unscaled = unscaledSums[i];
    std::string name = sum->name().str();
    replaceEverywhere(sum, unscaled);
    // autodiff's sum (a chain of adds, or a copy) reads nothing else now.
    std::vector<Node *> dead = {sum->definingNode()};
    while (!dead.empty()) {
      Node *n = dead.back();
      dead.pop_back();
      llvm::SmallVector<Value *, 2> operands(n->operands().begin(), n->operands().end());
      g_.eraseNode(n);
      for (Value *operand : operands)
        if (operand->isResult() && !operand->hasUses() &&
            !llvm::is_contained(partsOfSum[i], operand) &&
            operand->definingNode()->role() == NodeRole::Backward)
          dead.push_back(operand->definingNode());
    }
    g_.renameValue(unscaled, name);
  }

  Node *after = anySkipped ? anySkipped : checks.back();
  // One optimizer skips when any loss overflowed (Apex's num_losses); each
  // of several skips on the check of its own term (autodiff gave each of
  // its parameters that term's part alone).
  llvm::DenseMap<Value *, size_t> sumIndex;
  for (size_t i = 0; i < sums.size(); ++i)
    sumIndex[unscaledSums[i]] = i;
  auto skipOf = [&](Node *update) -> Value * {
    auto it = severalOptimizers ? sumIndex.find(update->operand(gradIndex)) : sumIndex.end();
    if (it == sumIndex.end())
      return skipped;
    const std::vector<Value *> &parts = partsOfSum[it->second];
    if (llvm::count_if(parts, [](Value *p) { return p != nullptr; }) != 1)
      return skipped;
    return skips[size_t(llvm::find_if(parts, [](Value *p) { return p != nullptr; }) -
                        parts.begin())];
  };
  if (!conditionOnFinite(nodes, skipOf, nullptr, after))
    return false;
  if (dynamic)
    for (size_t k = 0; k < numLosses; ++k) {
      std::string trackerName = prefix(k) + ".growth_tracker";
      if (!requireFreeName(trackerName))
        return false;
      if (!buildScaleUpdate(scales[k], addTracker(trackerName), skips[k], 1, prefix(k) + ".scale",
                            trackerName))
        return false;
    }
  for (Node *check : checks)
    g_.addOutput(check->result(1));
  if (severalOptimizers && !(skipped = reportedSkip(skipped)))
    return false;
  g_.addOutput(skipped);
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
  if (policy_.numLosses > 1 || (hasOptimizerSets(g_) && lossTerms(loss_).size() > 1))
    return requireFreeName("skipped") && runPerLoss(nodes);
  bool dynamic = policy_.dynamicLossScale;
  const char *scaleName = "loss_scale.scale", *trackerName = "loss_scale.growth_tracker";
  for (const char *name : {scaleName, "loss_scale", "skipped"})
    if (!requireFreeName(name))
      return false;
  if (dynamic && !requireFreeName(trackerName))
    return false;

  Value *scale = addScale(scaleName);
  if (!scaleSeed(loss_, scale))
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
  Value *skipped = check ? check->result(0) : nullptr;
  if (!check || !conditionOnFinite(
                    nodes, [skipped](Node *) { return skipped; }, check->result(2), check))
    return false;

  if (dynamic) {
    Value *tracker = addTracker(trackerName);
    if (!buildScaleUpdate(scale, tracker, check->result(0), accumulate, scaleName, trackerName))
      return false;
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
