//===- Ema.cpp --------------------------------------------------------------===//
#include "passes/Ema.h"
#include "passes/Optimizer.h"
#include "passes/OptimizerSets.h"

#include "ir/Builder.h"
#include "ir/MetaReader.h"

#include "llvm/ADT/DenseMap.h"

namespace ampc {

namespace {

class EmaLowering {
public:
  EmaLowering(Graph &g, DiagnosticEngine &diag) : g_(g), diag_(diag) {}

  PassResult run();

private:
  bool error(const Location &loc, const llvm::Twine &msg) {
    diag_.error(loc, "ema: " + msg);
    return false;
  }
  bool requireFreeName(const std::string &name) {
    return g_.isNameFree(name) || error(g_.loc(), "the name '" + name + "' is taken");
  }
  Node *build(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs, const std::string &name,
              const Location &loc) {
    Node *n = buildNode(g_, OpRegistry::builtin().get(kind), operands, std::move(attrs), loc, diag_,
                        {name});
    if (n)
      n->setRole(NodeRole::Optimizer);
    return n;
  }
  Value *addZeroState(const std::string &name, TensorType type, const Location &loc) {
    if (!requireFreeName(name))
      return nullptr;
    InitSpec zeros;
    zeros.kind = InitSpec::Kind::Zeros;
    return g_.addState(name, type, StateKind::OptimizerState, zeros, loc);
  }

  /// A trained parameter and the new value its update writes for it.
  struct Averaged {
    Value *param;
    Value *newValue;
  };
  std::vector<Averaged> findTrained();

  Graph &g_;
  DiagnosticEngine &diag_;
};

/// Every trainable parameter with a state update, and the value it averages:
/// the new master where master weights keep one, else the new parameter.
std::vector<EmaLowering::Averaged> EmaLowering::findTrained() {
  llvm::DenseMap<const Value *, Value *> newValueOf;
  for (const StateUpdate &u : g_.stateUpdates())
    newValueOf[u.state] = u.newValue;
  std::vector<Averaged> trained;
  for (Value *p : g_.state(StateKind::Parameter)) {
    if (!p->trainable())
      continue;
    const Value *source = p;
    Value *master = g_.lookup((p->name() + ".master").str());
    if (master && master->isState() && master->stateKind() == StateKind::MasterWeight)
      source = master;
    Value *next = newValueOf.lookup(source);
    if (!next || !next->isResult() || next->definingNode()->role() != NodeRole::Optimizer)
      continue; // not trained here (no gradient reaches it)
    trained.push_back({p, next});
  }
  return trained;
}

/// The skip flag of the update that wrote `newValue`, if it has one (loss
/// scaling's %skipped; master weights' constant 0 without it).
Value *skipOf(Value *newValue) {
  Node *update = newValue->definingNode();
  std::optional<unsigned> index = update->op().operandIndex("skip");
  if (!index || update->numOperands() <= *index)
    return nullptr;
  return update->operand(*index);
}

PassResult EmaLowering::run() {
  if (!g_.meta().count("train.ema.decay"))
    return PassResult::Unchanged;
  for (const Node &n : g_.nodes())
    if (n.op().kind == OpKind::EmaUpdate) {
      error(n.loc(), "the graph already averages its weights");
      return PassResult::Failed;
    }
  MetaReader meta(g_.meta(), diag_, "ema: ");
  double decay = meta.number("train.ema.decay", std::nullopt);
  int64_t accumulate = meta.integer("train.accumulate", 1);
  if (meta.failed())
    return PassResult::Failed;
  if (!(decay >= 0 && decay < 1)) {
    error(g_.loc(), "meta 'train.ema.decay' must be in [0, 1), got " + formatDouble(decay));
    return PassResult::Failed;
  }
  std::vector<Averaged> trained = findTrained();
  if (trained.empty()) {
    error(g_.loc(), "the graph updates no parameter to average (run the optimizer pass first)");
    return PassResult::Failed;
  }

  // One count of the steps averaged, skipped as the updates skip; with
  // several optimizers one per optimizer (%ema.<name>.count), each
  // counting the steps its own updates took (a GAN's generator average
  // moves on the generator's turns only).
  std::optional<std::vector<OptimizerSet>> sets = readOptimizerSets(g_, diag_);
  if (!sets)
    return PassResult::Failed;
  const bool severalOptimizers = !sets->empty();
  llvm::DenseMap<int64_t, Value *> countOf; // optimizer index (-1: the one) -> count
  auto countFor = [&](const Averaged &t) -> Value * {
    int64_t optimizer = severalOptimizers ? optimizerIndexOf(g_, t.param) : -1;
    if (Value *c = countOf.lookup(optimizer))
      return c;
    std::string name = optimizer >= 0 && optimizer < int64_t(sets->size())
                           ? "ema." + (*sets)[size_t(optimizer)].name + ".count"
                           : std::string("ema.count");
    Location loc = t.newValue->definingNode()->loc();
    Value *counter = addZeroState(name, TensorType(DType::F32, {}), loc);
    if (!counter)
      return nullptr;
    llvm::SmallVector<Value *, 2> counterOperands = {counter};
    if (Value *skip = skipOf(t.newValue))
      counterOperands.push_back(skip);
    Node *count =
        build(OpKind::StepCounter, counterOperands, {{"accumulate", Attribute(accumulate)}},
              g_.uniqueName(name + ".next"), loc);
    if (!count)
      return nullptr;
    g_.addStateUpdate(counter, count->result());
    return countOf[optimizer] = count->result();
  };

  AttrMap attrs = {{"decay", Attribute(decay)}, {"accumulate", Attribute(accumulate)}};
  for (const Averaged &t : trained) {
    Value *count = countFor(t);
    if (!count)
      return PassResult::Failed;
    DType dtype = optimizerStateDType(t.newValue->dtype());
    Value *average = addZeroState((t.param->name() + ".ema").str(),
                                  TensorType(dtype, t.param->type().dims()), t.param->loc());
    if (!average)
      return PassResult::Failed;
    llvm::SmallVector<Value *, 4> operands = {average, t.newValue, count};
    if (Value *s = skipOf(t.newValue))
      operands.push_back(s);
    Node *n = build(OpKind::EmaUpdate, operands, attrs,
                    g_.uniqueName((average->name() + ".next").str()), t.param->loc());
    if (!n)
      return PassResult::Failed;
    g_.addStateUpdate(average, n->result());
  }
  return PassResult::Changed;
}

} // namespace

PassResult EmaPass::run(Graph &g, PassContext &ctx) { return EmaLowering(g, ctx.diag).run(); }

} // namespace ampc
