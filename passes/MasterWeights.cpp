//===- MasterWeights.cpp ----------------------------------------------------===//
#include "passes/MasterWeights.h"

#include "passes/PrecisionPolicy.h"

#include "ir/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace ampc {

Node *rebuildNode(Graph &g, Node *old, llvm::ArrayRef<Value *> operands,
                  llvm::ArrayRef<std::string> extraNames, DiagnosticEngine &diag, Node *before) {
  // The node is rewritten in place rather than replaced: its results keep
  // their names, uses, state updates and output slots without anything
  // walking the graph's update or output lists (a replacement would have to,
  // once per rebuilt node: quadratic in the number of parameters). The
  // checks are buildNode's, made before anything changes.
  const OpInfo &op = old->op();
  std::string err;
  auto fail = [&]() -> Node * {
    diag.error(old->loc(), op.name + ": " + err);
    return nullptr;
  };
  if (!checkOperandCount(op, operands.size(), err))
    return fail();
  AttrMap attrs = old->attrs();
  if (!normalizeAttrs(op, attrs, err))
    return fail();
  llvm::SmallVector<TensorType, 4> operandTypes;
  for (Value *v : operands)
    operandTypes.push_back(v->type());
  llvm::SmallVector<TensorType, 2> resultTypes;
  if (!inferResultTypes(op, operandTypes, attrs, resultTypes, err))
    return fail();
  unsigned oldResults = old->numResults();
  size_t numNames = oldResults + extraNames.size();
  if (numNames != 0 && numNames != resultTypes.size()) {
    err = "expected " + std::to_string(resultTypes.size()) + " result name(s), got " +
          std::to_string(numNames);
    return fail();
  }
  for (const std::string &n : extraNames)
    if (!n.empty() && !g.isNameFree(n)) {
      err = "the name '" + n + "' is already used";
      return fail();
    }

  // A rebuilt node took fresh numeric names for old's results before taking
  // over their names: draw them too, so later unnamed values are numbered
  // as they always were.
  for (unsigned r = 0; r < oldResults; ++r)
    (void)g.freshName();
  old->setOperands(operands);
  for (auto &[name, value] : attrs)
    old->setAttr(name, std::move(value));
  for (unsigned r = 0; r < resultTypes.size(); ++r) {
    if (r < oldResults)
      old->result(r)->setType(resultTypes[r]);
    else
      g.addResult(old, resultTypes[r], extraNames[r - oldResults]);
  }
  if (before)
    g.moveNode(old, before);
  return old;
}

Value *optimizerConstant(Graph &g, llvm::StringRef name, double value, DiagnosticEngine &diag) {
  if (Value *v = g.lookup(name))
    return v;
  Node *firstOptimizer = nullptr;
  Location loc;
  // After the constants already there, so they read in creation order.
  for (Node &n : g.nodes())
    if (n.role() == NodeRole::Optimizer && n.kind() != OpKind::Fill) {
      firstOptimizer = &n;
      loc = n.loc();
      break;
    }
  Node *n = buildNode(g, OpRegistry::builtin().get(OpKind::Fill), {},
                      {{"value", Attribute(value)},
                       {"shape", Attribute(std::vector<int64_t>{})},
                       {"dtype", Attribute(DType::F32)}},
                      loc, diag, {name.str()}, firstOptimizer);
  if (!n)
    return nullptr;
  n->setRole(NodeRole::Optimizer);
  return n->result();
}

PassResult MasterWeightsPass::run(Graph &g, PassContext &ctx) {
  DiagnosticEngine &diag = ctx.diag;
  std::optional<PrecisionPolicy> policy = resolvePolicy(g, diag);
  if (!policy)
    return PassResult::Failed;
  if (!policy->masterWeights)
    return PassResult::Unchanged;

  // The update ops (those whose row can refresh a model weight) of half
  // parameters.
  std::vector<Node *> updates;
  for (Node &n : g.nodes()) {
    if (n.role() != NodeRole::Optimizer || !n.op().operandIndex("model_param"))
      continue;
    Value *param = n.operand(0);
    if (!param->isState() || param->stateKind() != StateKind::Parameter ||
        !isHalfType(param->dtype()))
      continue;
    updates.push_back(&n);
  }
  if (updates.empty())
    return PassResult::Unchanged;

  // What each update's rewrite does to the graph's outputs and state
  // updates, applied in one pass over each list at the end (per update, it
  // would be quadratic). No two updates touch the same entries, so the order
  // does not matter.
  struct Rewrite {
    Value *master, *newMaster, *newModel;
  };
  llvm::DenseMap<const Value *, Rewrite> byParam;
  llvm::DenseMap<const Value *, Value *> outputSwap;
  auto applyRewrites = [&] {
    if (byParam.empty())
      return;
    std::vector<Value *> outputs(g.outputs().begin(), g.outputs().end());
    for (Value *&v : outputs)
      if (Value *w = outputSwap.lookup(v))
        v = w;
    g.setOutputs(std::move(outputs));
    std::vector<StateUpdate> stateUpdates;
    stateUpdates.reserve(g.stateUpdates().size() + byParam.size());
    for (const StateUpdate &u : g.stateUpdates()) {
      auto it = byParam.find(u.state);
      if (it == byParam.end()) {
        stateUpdates.push_back(u);
        continue;
      }
      stateUpdates.push_back({it->second.master, it->second.newMaster});
      stateUpdates.push_back({u.state, it->second.newModel});
    }
    g.setStateUpdates(std::move(stateUpdates));
    byParam.clear();
    outputSwap.clear();
  };
  auto failed = [&] {
    applyRewrites(); // what was done so far, as it would have been
    return PassResult::Failed;
  };

  for (Node *update : updates) {
    Value *param = update->operand(0);
    std::string masterName = (param->name() + ".master").str();
    if (!g.isNameFree(masterName)) {
      diag.error(param->loc(), "master-weights: the name '" + masterName + "' is taken");
      return failed();
    }
    Value *master = g.addState(masterName, param->type().withDType(DType::F32),
                               StateKind::MasterWeight, param->init(), param->loc());

    const OpInfo &op = update->op();
    unsigned gradScaleIndex = *op.operandIndex("grad_scale");
    unsigned skipIndex = *op.operandIndex("skip");
    llvm::SmallVector<Value *, 10> operands(update->operands().begin(), update->operands().end());
    operands[0] = master;
    if (operands.size() == gradScaleIndex) {
      Value *one = optimizerConstant(g, kUnitGradScaleName, 1.0, diag);
      if (!one)
        return failed();
      operands.push_back(one);
    }
    if (operands.size() == skipIndex) {
      Value *never = optimizerConstant(g, kNoSkipName, 0.0, diag);
      if (!never)
        return failed();
      operands.push_back(never);
    }
    operands.push_back(param);

    Node *n = rebuildNode(g, update, operands, {g.uniqueName(masterName + ".next")}, diag);
    if (!n)
      return failed();
    // Result 0 is now the new master; the model weight is the last result.
    Value *newMaster = n->result(0), *newModel = n->result(n->numResults() - 1);
    // Each takes the other's name: the model weight keeps its name.
    g.swapNames(newMaster, newModel);
    // Anything that read the new parameter reads the refreshed model weight.
    newMaster->replaceAllUsesWith(newModel);
    outputSwap[newMaster] = newModel;
    byParam[param] = {master, newMaster, newModel};
  }
  applyRewrites();
  return PassResult::Changed;
}

} // namespace ampc
