//===- Optimizer.cpp --------------------------------------------------------===//
#include "passes/Optimizer.h"
#include "ir/OpAttrs.h"

#include "passes/Autodiff.h"
#include "passes/MasterWeights.h"
#include "passes/OptimizerSets.h"

#include "ir/Builder.h"
#include "ir/IdMap.h"
#include "ir/MetaReader.h"

#include <optional>

namespace ampc {

namespace {

/// Which update op a configuration uses, the state it keeps per parameter
/// and its attributes: everything that differs between optimizers. The rest
/// of the pass is the same for all of them (the operand layout is shared,
/// see ir/ops/Optimizer.cpp).
struct UpdateRecipe {
  OpKind op = OpKind::SgdUpdate;
  /// Per-parameter state tensors, named <param>.<suffix>, in operand order.
  std::vector<std::string> stateSuffixes;
  bool takesStepCount = false;
  /// LAMB: the global norm of every gradient, before the learning rate.
  bool takesGradNorm = false;
  AttrMap attrs;
};

/// The update op and its settings from meta `optimizer` / `optimizer.*`
/// (defaults: PyTorch's).
std::optional<UpdateRecipe> readRecipe(MetaReader &m, int64_t accumulate) {
  std::string kind = m.string("optimizer", "");
  if (m.failed())
    return std::nullopt;
  UpdateRecipe r;
  if (kind == "sgd") {
    double lrCheck = m.number("optimizer.lr", std::nullopt); // SGD has no default lr
    (void)lrCheck;
    double momentum = m.number("optimizer.momentum", 0.0);
    double weightDecay = m.number("optimizer.weight_decay", 0.0);
    r.attrs["weight_decay"] = Attribute(weightDecay);
    if (momentum != 0) {
      r.op = OpKind::SgdMomentumUpdate;
      r.stateSuffixes = {"momentum_buffer"};
      r.takesStepCount = true;
      r.attrs["momentum"] = Attribute(momentum);
      r.attrs["dampening"] = Attribute(m.number("optimizer.dampening", 0.0));
      r.attrs["nesterov"] = Attribute(m.boolean("optimizer.nesterov", false));
    } else if (m.boolean("optimizer.nesterov", false)) {
      m.error("nesterov momentum needs momentum > 0");
    }
  } else if (kind == "adam" || kind == "adamw") {
    bool decoupled = kind == "adamw";
    std::vector<double> betas = m.numbers("optimizer.betas", {0.9, 0.999});
    if (betas.size() != 2)
      m.error("meta 'optimizer.betas' must hold 2 numbers");
    r.op = OpKind::AdamUpdate;
    r.stateSuffixes = {"exp_avg", "exp_avg_sq"};
    r.takesStepCount = true;
    r.attrs["beta1"] = Attribute(betas.size() == 2 ? betas[0] : 0.9);
    r.attrs["beta2"] = Attribute(betas.size() == 2 ? betas[1] : 0.999);
    r.attrs["eps"] = Attribute(m.number("optimizer.eps", 1e-8));
    r.attrs["weight_decay"] = Attribute(m.number("optimizer.weight_decay", decoupled ? 1e-2 : 0.0));
    r.attrs["decoupled_weight_decay"] = Attribute(decoupled);
  } else if (kind == "lamb") {
    // Apex FusedLAMB's settings and defaults.
    std::vector<double> betas = m.numbers("optimizer.betas", {0.9, 0.999});
    if (betas.size() != 2)
      m.error("meta 'optimizer.betas' must hold 2 numbers");
    r.op = OpKind::LambUpdate;
    r.stateSuffixes = {"exp_avg", "exp_avg_sq"};
    r.takesStepCount = true;
    r.takesGradNorm = true;
    r.attrs["beta1"] = Attribute(betas.size() == 2 ? betas[0] : 0.9);
    r.attrs["beta2"] = Attribute(betas.size() == 2 ? betas[1] : 0.999);
    r.attrs["eps"] = Attribute(m.number("optimizer.eps", 1e-6));
    r.attrs["weight_decay"] = Attribute(m.number("optimizer.weight_decay", 0.01));
    r.attrs["decoupled_weight_decay"] = Attribute(m.boolean("optimizer.adam_w_mode", true));
    r.attrs["grad_averaging"] = Attribute(m.boolean("optimizer.grad_averaging", true));
    r.attrs["bias_correction"] = Attribute(m.boolean("optimizer.bias_correction", true));
    r.attrs["max_grad_norm"] = Attribute(m.number("optimizer.max_grad_norm", 1.0));
    r.attrs["use_nvlamb"] = Attribute(m.boolean("optimizer.use_nvlamb", false));
  } else if (kind.empty()) {
    m.error("the graph's meta has no 'optimizer' (give the model an 'optimizer:' section)");
  } else {
    m.error("unknown optimizer '" + kind + "'; expected sgd, adam, adamw or lamb");
  }
  r.attrs["accumulate"] = Attribute(accumulate);
  if (m.failed())
    return std::nullopt;
  return r;
}

/// learning_rate's attributes from meta optimizer.lr and train.lr_schedule*.
std::optional<AttrMap> readSchedule(MetaReader &m, int64_t accumulate) {
  AttrMap attrs;
  std::string schedule = m.string("train.lr_schedule", "constant");
  // Adam's default lr; SGD's presence was checked with the recipe.
  attrs["lr"] = Attribute(m.number("optimizer.lr", 1e-3));
  attrs["schedule"] = Attribute(schedule);
  attrs["warmup_steps"] = Attribute(m.integer("train.lr_schedule.warmup_steps", 0));
  attrs["accumulate"] = Attribute(accumulate);
  std::optional<LrScheduleKind> kind = attrs::parseEnum<LrScheduleKind>(schedule);
  if (kind == LrScheduleKind::Step) {
    attrs["step_size"] = Attribute(m.integer("train.lr_schedule.step_size", 1));
    attrs["gamma"] = Attribute(m.number("train.lr_schedule.gamma", 0.1));
  } else if (kind == LrScheduleKind::Cosine) {
    attrs["min_lr"] = Attribute(m.number("train.lr_schedule.min_lr", 0.0));
    // The total in optimizer steps: the schedule's own, else the run's.
    int64_t total = m.integer("train.lr_schedule.total_steps", m.integer("train.steps", 0));
    if (total <= 0 && !m.failed())
      m.error("the cosine schedule needs the number of steps: give 'train.steps' or the "
              "schedule's 'total_steps'");
    attrs["total_steps"] = Attribute(total);
  }
  if (m.failed())
    return std::nullopt;
  return attrs;
}

/// The pass's phases over one graph, in the order they build: the settings,
/// the learning rate, the step counter, the gradients the updates use
/// (accumulated, clipped), the updates, the outputs.
///
/// With several optimizers (OptimizerSets.h) it runs once for each, over
/// the parameters that optimizer holds and with its settings as the
/// optimizer's; the values it creates for all of them take its name
/// (%lr.<name>, %optimizer.<name>.step, %grad_norm.<name>), and on the
/// turns of the schedule that are not its own its updates and step count
/// skip (%optimizer.<name>.off_turn, a turn_skip node).
class OptimizerLowering {
public:
  OptimizerLowering(Graph &g, DiagnosticEngine &diag) : g_(g), diag_(diag), meta_(g.meta()) {}
  OptimizerLowering(Graph &g, DiagnosticEngine &diag, const OptimizerSet &set, int64_t index)
      : g_(g), diag_(diag), meta_(set.meta), set_(&set), setIndex_(index) {}

  bool run();

private:
  bool error(const Location &loc, const llvm::Twine &msg) {
    diag_.error(loc, "optimizer: " + msg);
    return false;
  }
  bool requireFreeName(const std::string &name) {
    return g_.isNameFree(name) || error(g_.loc(), "the name '" + name + "' is taken");
  }
  Node *build(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs,
              llvm::ArrayRef<std::string> names, const Location &loc) {
    Node *n = buildNode(g_, OpRegistry::builtin().get(kind), operands, std::move(attrs), loc, diag_,
                        names);
    if (n)
      n->setRole(NodeRole::Optimizer);
    return n;
  }
  std::string nextName(llvm::StringRef stateName) {
    return g_.uniqueName(stateName.str() + ".next");
  }
  Value *addZeroState(const Value *param, llvm::StringRef suffix);

  bool readSettings();
  /// Whether an update reads the global gradient norm (LAMB).
  bool takesGradNorm() const {
    for (const Group &group : groups_)
      if (group.recipe->takesGradNorm)
        return true;
    return false;
  }
  /// `base` with this optimizer's name: "lr" -> "lr.<name>".
  std::string ownName(llvm::StringRef base) const {
    return set_ ? (base + "." + set_->name).str() : base.str();
  }
  bool addTurnSkip();
  bool addStepCounter();
  bool accumulateGrads();
  bool addClipping();
  bool addUpdates();
  void replaceOutputs();

  Graph &g_;
  DiagnosticEngine &diag_;
  /// The settings: the graph's meta, or one of several optimizers' view of it.
  const AttrMap &meta_;
  const OptimizerSet *set_ = nullptr;
  int64_t setIndex_ = -1;
  /// 1 on the steps that are not this optimizer's turn (several optimizers
  /// on a schedule), else null.
  Value *offTurn_ = nullptr;
  /// The parameters to update and their gradients, in state order.
  std::vector<std::pair<Value *, Value *>> paramGrads_;
  /// A parameter group's update and learning rate (meta optimizer.groups.*);
  /// groups_[0] is the optimizer's own settings, group i + 1 the file's
  /// group i.
  struct Group {
    std::optional<UpdateRecipe> recipe;
    std::optional<AttrMap> schedule;
    Value *lr = nullptr;
  };
  std::vector<Group> groups_;
  /// Per parameter (paramGrads_ order), its index in groups_.
  std::vector<size_t> groupOf_;
  int64_t accumulate_ = 1;
  bool clip_ = false;
  double clipNorm_ = 0;
  /// Where nodes that belong to no one parameter point: the loss.
  Location stepLoc_;
  Value *lr_ = nullptr;
  Value *stepCount_ = nullptr;
  /// Per parameter, the gradient its update applies.
  std::vector<Value *> grads_;
  IdSet<Value> consumedGrads_;
  Value *gradScale_ = nullptr;
  Value *gradNorm_ = nullptr;
};

/// The trainable parameters with a gradient among the outputs, and the
/// settings from the graph's meta.
bool OptimizerLowering::readSettings() {
  IdSet<Value> outputs(g_.idBound());
  outputs.insertAll(g_.outputs());
  for (Value *p : g_.state(StateKind::Parameter)) {
    if (!p->trainable() || (set_ && optimizerIndexOf(g_, p) != setIndex_))
      continue;
    Value *grad = g_.lookup(gradientName(p->name()));
    if (grad && outputs.count(grad))
      paramGrads_.push_back({p, grad});
  }

  MetaReader meta(meta_, diag_, "optimizer: ");
  accumulate_ = meta.integer("train.accumulate", 1);
  if (!meta.failed() && accumulate_ < 1)
    meta.error("meta 'train.accumulate' must be >= 1, got " + llvm::Twine(accumulate_));
  clipNorm_ = meta.number("train.clip_grad_norm", 0.0);
  clip_ = meta.has("train.clip_grad_norm");
  if (!meta.failed() && clip_ && !(clipNorm_ > 0))
    meta.error("meta 'train.clip_grad_norm' must be > 0, got " + formatDouble(clipNorm_));
  int64_t groups = meta.integer("optimizer.groups", 0);
  if (meta.failed())
    return false;
  for (int64_t i = -1; i < groups; ++i) {
    // A group's settings stand in for the optimizer's, the rest are shared.
    AttrMap settings = meta_;
    if (i >= 0) {
      std::string prefix = "optimizer.groups." + std::to_string(i) + ".";
      for (const auto &[key, value] : meta_)
        if (llvm::StringRef(key).startswith(prefix) && !llvm::StringRef(key).endswith(".params"))
          settings[("optimizer." + llvm::StringRef(key).substr(prefix.size())).str()] = value;
    }
    MetaReader m(settings, diag_, "optimizer: ");
    Group group;
    group.recipe = readRecipe(m, accumulate_);
    if (!group.recipe)
      return false;
    group.schedule = readSchedule(m, accumulate_);
    if (!group.schedule)
      return false;
    if (i >= 0)
      group.recipe->attrs["group"] = Attribute(i);
    groups_.push_back(std::move(group));
  }
  for (auto [param, grad] : paramGrads_) {
    int64_t group = meta.integer("optimizer.group_of." + param->name().str(), -1);
    if (group < -1 || group >= groups)
      return error(param->loc(), "meta 'optimizer.group_of." + param->name() + "' is " +
                                     llvm::Twine(group) + ", not a group of the " +
                                     llvm::Twine(groups));
    groupOf_.push_back(static_cast<size_t>(group + 1));
  }
  if (paramGrads_.empty())
    return error(g_.loc(), set_ ? "optimizer '" + set_->name + "' has no parameter gradients"
                                : std::string("the graph has no parameter gradients (run "
                                              "autodiff first)"));
  if (set_ && accumulate_ > 1)
    return error(g_.loc(), "several optimizers do not combine with gradient accumulation yet");
  return true;
}

Value *OptimizerLowering::addZeroState(const Value *param, llvm::StringRef suffix) {
  std::string name = (param->name() + "." + suffix).str();
  if (!requireFreeName(name))
    return nullptr;
  InitSpec zeros;
  zeros.kind = InitSpec::Kind::Zeros;
  return g_.addState(name, TensorType(optimizerStateDType(param->dtype()), param->type().dims()),
                     StateKind::OptimizerState, zeros, param->loc());
}

/// The off-turn flag of an optimizer that does not step on every step.
bool OptimizerLowering::addTurnSkip() {
  if (!set_ || int64_t(set_->turns.size()) == set_->period)
    return true;
  std::string name = "optimizer." + set_->name + ".off_turn";
  if (!requireFreeName(name))
    return false;
  Node *n = build(OpKind::TurnSkip, {},
                  {{"period", Attribute(set_->period)},
                   {"turns", Attribute(set_->turns)},
                   {"accumulate", Attribute(accumulate_)}},
                  {name}, stepLoc_);
  if (!n)
    return false;
  offTurn_ = n->result();
  return true;
}

/// One step count shared by every update that needs it (of one optimizer,
/// when there are several: each counts its own steps, as each PyTorch
/// optimizer's state['step']).
bool OptimizerLowering::addStepCounter() {
  bool needed = false;
  for (const Group &group : groups_)
    needed = needed || group.recipe->takesStepCount;
  if (!needed)
    return true;
  const std::string counterName =
      set_ ? "optimizer." + set_->name + ".step" : std::string("optimizer.step");
  if (!requireFreeName(counterName))
    return false;
  InitSpec zeros;
  zeros.kind = InitSpec::Kind::Zeros;
  Value *counter = g_.addState(counterName, TensorType(DType::F32, {}), StateKind::OptimizerState,
                               zeros, stepLoc_);
  llvm::SmallVector<Value *, 2> operands = {counter};
  if (offTurn_)
    operands.push_back(offTurn_);
  Node *n = build(OpKind::StepCounter, operands, {{"accumulate", Attribute(accumulate_)}},
                  {nextName(counterName)}, stepLoc_);
  if (!n)
    return false;
  stepCount_ = n->result();
  g_.addStateUpdate(counter, stepCount_);
  return true;
}

/// The gradients the updates use: the mean over each group of micro-batches
/// when accumulating.
bool OptimizerLowering::accumulateGrads() {
  for (auto [param, grad] : paramGrads_) {
    consumedGrads_.insert(grad);
    if (accumulate_ == 1) {
      grads_.push_back(grad);
      continue;
    }
    Value *acc = addZeroState(param, "grad_accum");
    if (!acc)
      return false;
    Node *n = build(OpKind::AccumulateGrad, {acc, grad}, {{"accumulate", Attribute(accumulate_)}},
                    {nextName(acc->name())}, param->loc());
    if (!n)
      return false;
    g_.addStateUpdate(acc, n->result());
    grads_.push_back(n->result());
  }
  return true;
}

/// Clipping by the global norm: one coefficient every update scales by.
bool OptimizerLowering::addClipping() {
  bool lamb = takesGradNorm();
  if (lamb && clip_)
    return error(stepLoc_, "lamb clips by the global norm itself (its max_grad_norm); "
                           "remove train.clip_grad_norm");
  if (lamb) {
    // FusedLAMB's global norm, of every gradient before any clipping.
    Node *norm = build(OpKind::GlobalNorm, grads_, {}, {ownName("grad_norm")}, stepLoc_);
    if (!norm)
      return false;
    gradNorm_ = norm->result();
    return true;
  }
  if (!clip_)
    return true;
  Node *norm = build(OpKind::GlobalNorm, grads_, {}, {ownName("grad_norm")}, stepLoc_);
  if (!norm)
    return false;
  gradNorm_ = norm->result();
  Node *coef = build(OpKind::ClipCoefficient, {gradNorm_}, {{"max_norm", Attribute(clipNorm_)}},
                     {g_.uniqueName("grad_clip_coef")}, stepLoc_);
  if (!coef)
    return false;
  gradScale_ = coef->result();
  return true;
}

bool OptimizerLowering::addUpdates() {
  for (size_t i = 0; i < paramGrads_.size(); ++i) {
    Value *param = paramGrads_[i].first;
    const Group &group = groups_[groupOf_[i]];
    const UpdateRecipe &recipe = *group.recipe;
    llvm::SmallVector<Value *, 8> operands = {param, grads_[i]};
    llvm::SmallVector<Value *, 2> state;
    std::vector<std::string> names = {nextName(param->name())};
    for (const std::string &suffix : recipe.stateSuffixes) {
      Value *s = addZeroState(param, suffix);
      if (!s)
        return false;
      state.push_back(s);
      operands.push_back(s);
      names.push_back(nextName(s->name()));
    }
    if (recipe.takesStepCount)
      operands.push_back(stepCount_);
    if (recipe.takesGradNorm)
      operands.push_back(gradNorm_);
    operands.push_back(group.lr);
    if (gradScale_) {
      operands.push_back(gradScale_);
    } else if (offTurn_) {
      Value *one = optimizerConstant(g_, kUnitGradScaleName, 1.0, diag_);
      if (!one)
        return false;
      operands.push_back(one);
    }
    if (offTurn_)
      operands.push_back(offTurn_);
    Node *n = build(recipe.op, operands, recipe.attrs, names, param->loc());
    if (!n)
      return false;
    g_.addStateUpdate(param, n->result(0));
    for (size_t s = 0; s < state.size(); ++s)
      g_.addStateUpdate(state[s], n->result(s + 1));
  }
  return true;
}

/// The gradients are consumed here; keeping them as outputs would keep their
/// buffers alive for nothing.
void OptimizerLowering::replaceOutputs() {
  std::vector<Value *> newOutputs;
  for (Value *v : g_.outputs())
    if (!consumedGrads_.count(v))
      newOutputs.push_back(v);
  newOutputs.push_back(lr_);
  if (gradNorm_)
    newOutputs.push_back(gradNorm_);
  g_.setOutputs(std::move(newOutputs));
}

bool OptimizerLowering::run() {
  // Nodes that belong to no one parameter point at the loss: the training
  // objective they serve (and a location keeps the textual IR round-trip).
  for (Node &n : g_.nodes())
    if (n.role() == NodeRole::Loss)
      stepLoc_ = n.loc();
  if (!readSettings())
    return false;
  if (!requireFreeName(ownName("lr")) ||
      ((clip_ || takesGradNorm()) && !requireFreeName(ownName("grad_norm"))))
    return false;
  // One learning rate for the optimizer's settings, and one for each group
  // whose schedule differs from it (its own lr).
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group &group = groups_[i];
    if (i > 0 && *group.schedule == *groups_[0].schedule) {
      group.lr = lr_;
      continue;
    }
    std::string name = i == 0 ? ownName("lr") : ownName("lr") + ".group" + std::to_string(i - 1);
    if (i > 0 && !requireFreeName(name))
      return false;
    Node *lrNode = build(OpKind::LearningRate, {}, *group.schedule, {name}, stepLoc_);
    if (!lrNode)
      return false;
    group.lr = lrNode->result();
    if (i == 0)
      lr_ = group.lr;
  }
  if (!addTurnSkip() || !addStepCounter() || !accumulateGrads() || !addClipping() || !addUpdates())
    return false;
  replaceOutputs();
  return true;
}

} // namespace

PassResult OptimizerPass::run(Graph &g, PassContext &ctx) {
  for (Node &n : g.nodes())
    if (n.role() == NodeRole::Optimizer) {
      ctx.diag.error(n.loc(), "optimizer: the graph already has optimizer nodes");
      return PassResult::Failed;
    }
  if (!hasOptimizerSets(g))
    return OptimizerLowering(g, ctx.diag).run() ? PassResult::Changed : PassResult::Failed;
  std::optional<std::vector<OptimizerSet>> sets = readOptimizerSets(g, ctx.diag);
  if (!sets)
    return PassResult::Failed;
  if (metaInt(g, "dist.ranks", 1) > 1) {
    ctx.diag.error(g.loc(), "optimizer: several optimizers do not combine with data-parallel "
                            "training yet");
    return PassResult::Failed;
  }
  for (size_t i = 0; i < sets->size(); ++i)
    if (!OptimizerLowering(g, ctx.diag, (*sets)[i], int64_t(i)).run())
      return PassResult::Failed;
  return PassResult::Changed;
}

} // namespace ampc
