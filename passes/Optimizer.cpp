//===- Optimizer.cpp --------------------------------------------------------===//
#include "passes/Optimizer.h"

#include "passes/Autodiff.h"

#include "ir/Builder.h"
#include "ir/MetaReader.h"

#include "llvm/ADT/DenseSet.h"

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
  } else if (kind.empty()) {
    m.error("the graph's meta has no 'optimizer' (give the model an 'optimizer:' section)");
  } else {
    m.error("unknown optimizer '" + kind + "'; expected sgd, adam or adamw");
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
  if (schedule == "step") {
    attrs["step_size"] = Attribute(m.integer("train.lr_schedule.step_size", 1));
    attrs["gamma"] = Attribute(m.number("train.lr_schedule.gamma", 0.1));
  } else if (schedule == "cosine") {
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

/// The f32 state dtype for a parameter (f64 parameters keep f64 state, so the
/// reference runs in f64 end to end).
DType stateDType(const Value *param) {
  return param->dtype() == DType::F64 ? DType::F64 : DType::F32;
}

} // namespace

PassResult OptimizerPass::run(Graph &g, PassContext &ctx) {
  DiagnosticEngine &diag = ctx.diag;
  for (Node &n : g.nodes())
    if (n.role() == NodeRole::Optimizer) {
      diag.error(n.loc(), "optimizer: the graph already has optimizer nodes");
      return PassResult::Failed;
    }

  // The parameters to update: trainable, with a gradient among the outputs.
  llvm::DenseSet<const Value *> outputs(g.outputs().begin(), g.outputs().end());
  std::vector<std::pair<Value *, Value *>> paramGrads;
  for (Value *p : g.state(StateKind::Parameter)) {
    if (!p->trainable())
      continue;
    Value *grad = g.lookup(gradientName(p->name()));
    if (grad && outputs.count(grad))
      paramGrads.push_back({p, grad});
  }

  MetaReader meta(g.meta(), diag, "optimizer: ");
  int64_t accumulate = meta.integer("train.accumulate", 1);
  if (!meta.failed() && accumulate < 1)
    meta.error("meta 'train.accumulate' must be >= 1, got " + llvm::Twine(accumulate));
  double clipNorm = meta.number("train.clip_grad_norm", 0.0);
  bool clip = meta.has("train.clip_grad_norm");
  if (!meta.failed() && clip && !(clipNorm > 0))
    meta.error("meta 'train.clip_grad_norm' must be > 0, got " + formatDouble(clipNorm));
  if (meta.failed())
    return PassResult::Failed;
  std::optional<UpdateRecipe> recipe = readRecipe(meta, accumulate);
  if (!recipe)
    return PassResult::Failed;
  std::optional<AttrMap> schedule = readSchedule(meta, accumulate);
  if (!schedule)
    return PassResult::Failed;
  if (paramGrads.empty()) {
    diag.error(Location(), "optimizer: the graph has no parameter gradients (run autodiff first)");
    return PassResult::Failed;
  }

  auto freeName = [&](const std::string &name) {
    if (g.isNameFree(name))
      return true;
    diag.error(Location(), "optimizer: the name '" + name + "' is taken");
    return false;
  };
  auto build = [&](OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                   llvm::ArrayRef<std::string> names, const Location &loc) -> Node * {
    Node *n =
        buildNode(g, OpRegistry::builtin().get(kind), operands, std::move(attrs), loc, diag, names);
    if (n)
      n->setRole(NodeRole::Optimizer);
    return n;
  };
  auto nextName = [&](llvm::StringRef stateName) {
    return g.uniqueName(stateName.str() + ".next");
  };

  if (!freeName("lr") || (clip && !freeName("grad_norm")))
    return PassResult::Failed;
  // Nodes that belong to no one parameter point at the loss: the training
  // objective they serve (and a location keeps the textual IR round-trip).
  Location stepLoc;
  for (Node &n : g.nodes())
    if (n.role() == NodeRole::Loss)
      stepLoc = n.loc();
  Node *lrNode = build(OpKind::LearningRate, {}, *schedule, {"lr"}, stepLoc);
  if (!lrNode)
    return PassResult::Failed;
  Value *lr = lrNode->result();

  Value *stepCount = nullptr;
  if (recipe->takesStepCount) {
    const std::string counterName = "optimizer.step";
    if (!freeName(counterName))
      return PassResult::Failed;
    InitSpec zeros;
    zeros.kind = InitSpec::Kind::Zeros;
    Value *counter = g.addState(counterName, TensorType(DType::F32, {}), StateKind::OptimizerState,
                                zeros, stepLoc);
    Node *n = build(OpKind::StepCounter, {counter}, {{"accumulate", Attribute(accumulate)}},
                    {nextName(counterName)}, stepLoc);
    if (!n)
      return PassResult::Failed;
    stepCount = n->result();
    g.addStateUpdate(counter, stepCount);
  }

  auto addZeroState = [&](const Value *param, llvm::StringRef suffix) -> Value * {
    std::string name = (param->name() + "." + suffix).str();
    if (!freeName(name))
      return nullptr;
    InitSpec zeros;
    zeros.kind = InitSpec::Kind::Zeros;
    return g.addState(name, TensorType(stateDType(param), param->type().dims()),
                      StateKind::OptimizerState, zeros, param->loc());
  };

  // The gradients the updates use: the mean over each group of micro-batches
  // when accumulating.
  llvm::DenseSet<const Value *> consumedGrads;
  std::vector<Value *> grads;
  for (auto [param, grad] : paramGrads) {
    consumedGrads.insert(grad);
    if (accumulate == 1) {
      grads.push_back(grad);
      continue;
    }
    Value *acc = addZeroState(param, "grad_accum");
    if (!acc)
      return PassResult::Failed;
    Node *n = build(OpKind::AccumulateGrad, {acc, grad}, {{"accumulate", Attribute(accumulate)}},
                    {nextName(acc->name())}, param->loc());
    if (!n)
      return PassResult::Failed;
    g.addStateUpdate(acc, n->result());
    grads.push_back(n->result());
  }

  Value *gradScale = nullptr;
  Value *gradNorm = nullptr;
  if (clip) {
    Node *norm = build(OpKind::GlobalNorm, grads, {}, {"grad_norm"}, stepLoc);
    if (!norm)
      return PassResult::Failed;
    gradNorm = norm->result();
    Node *coef = build(OpKind::ClipCoefficient, {gradNorm}, {{"max_norm", Attribute(clipNorm)}},
                       {g.uniqueName("grad_clip_coef")}, stepLoc);
    if (!coef)
      return PassResult::Failed;
    gradScale = coef->result();
  }

  for (size_t i = 0; i < paramGrads.size(); ++i) {
    Value *param = paramGrads[i].first;
    llvm::SmallVector<Value *, 8> operands = {param, grads[i]};
    llvm::SmallVector<Value *, 2> state;
    std::vector<std::string> names = {nextName(param->name())};
    for (const std::string &suffix : recipe->stateSuffixes) {
      Value *s = addZeroState(param, suffix);
      if (!s)
        return PassResult::Failed;
      state.push_back(s);
      operands.push_back(s);
      names.push_back(nextName(s->name()));
    }
    if (stepCount)
      operands.push_back(stepCount);
    operands.push_back(lr);
    if (gradScale)
      operands.push_back(gradScale);
    Node *n = build(recipe->op, operands, recipe->attrs, names, param->loc());
    if (!n)
      return PassResult::Failed;
    g.addStateUpdate(param, n->result(0));
    for (size_t s = 0; s < state.size(); ++s)
      g.addStateUpdate(state[s], n->result(s + 1));
  }

  // The gradients are consumed here; keeping them as outputs would keep
  // their buffers alive for nothing.
  std::vector<Value *> newOutputs;
  for (Value *v : g.outputs())
    if (!consumedGrads.count(v))
      newOutputs.push_back(v);
  newOutputs.push_back(lr);
  if (gradNorm)
    newOutputs.push_back(gradNorm);
  g.setOutputs(std::move(newOutputs));
  return PassResult::Changed;
}

} // namespace ampc
