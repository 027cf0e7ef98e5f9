//===- MasterWeights.cpp ----------------------------------------------------===//
#include "passes/MasterWeights.h"

#include "passes/PrecisionPolicy.h"

#include "ir/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace ampc {

/// The position of the operand named `name` in `op`'s row, if it has one.
static std::optional<unsigned> operandIndex(const OpInfo &op, llvm::StringRef name) {
  for (unsigned i = 0; i < op.operands.size(); ++i)
    if (op.operands[i].name == name)
      return i;
  return std::nullopt;
}

Node *rebuildNode(Graph &g, Node *old, llvm::ArrayRef<Value *> operands,
                  llvm::ArrayRef<std::string> extraNames, DiagnosticEngine &diag, Node *before) {
  // Fresh names first: old's names are taken until old is erased.
  std::vector<std::string> names(old->numResults());
  names.insert(names.end(), extraNames.begin(), extraNames.end());
  Node *n = buildNode(g, old->op(), operands, old->attrs(), old->loc(), diag, names,
                      before ? before : old);
  if (!n)
    return nullptr;
  n->setRole(old->role());
  n->setPrecisionOverride(old->precisionOverride());
  llvm::DenseMap<Value *, Value *> replaced;
  std::vector<std::string> oldNames;
  for (unsigned r = 0; r < old->numResults(); ++r) {
    replaced[old->result(r)] = n->result(r);
    oldNames.push_back(old->result(r)->name().str());
    old->result(r)->replaceAllUsesWith(n->result(r));
  }
  std::vector<StateUpdate> updates(g.stateUpdates().begin(), g.stateUpdates().end());
  for (StateUpdate &u : updates)
    if (Value *v = replaced.lookup(u.newValue))
      u.newValue = v;
  g.setStateUpdates(std::move(updates));
  std::vector<Value *> outputs(g.outputs().begin(), g.outputs().end());
  for (Value *&v : outputs)
    if (Value *w = replaced.lookup(v))
      v = w;
  g.setOutputs(std::move(outputs));
  g.eraseNode(old);
  for (unsigned r = 0; r < oldNames.size(); ++r)
    g.renameValue(n->result(r), oldNames[r]);
  return n;
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
  std::optional<PrecisionPolicy> policy = resolvePolicy(g.meta(), diag);
  if (!policy)
    return PassResult::Failed;
  if (!policy->masterWeights)
    return PassResult::Unchanged;

  // The update ops (those whose row can refresh a model weight) of half
  // parameters.
  std::vector<Node *> updates;
  for (Node &n : g.nodes()) {
    if (n.role() != NodeRole::Optimizer || !operandIndex(n.op(), "model_param"))
      continue;
    Value *param = n.operand(0);
    if (!param->isState() || param->stateKind() != StateKind::Parameter ||
        !isHalfType(param->dtype()))
      continue;
    updates.push_back(&n);
  }
  if (updates.empty())
    return PassResult::Unchanged;

  for (Node *update : updates) {
    Value *param = update->operand(0);
    std::string masterName = (param->name() + ".master").str();
    if (!g.isNameFree(masterName)) {
      diag.error(param->loc(), "master-weights: the name '" + masterName + "' is taken");
      return PassResult::Failed;
    }
    Value *master = g.addState(masterName, param->type().withDType(DType::F32),
                               StateKind::MasterWeight, param->init(), param->loc());

    const OpInfo &op = update->op();
    unsigned gradScaleIndex = *operandIndex(op, "grad_scale");
    unsigned skipIndex = *operandIndex(op, "skip");
    llvm::SmallVector<Value *, 10> operands(update->operands().begin(), update->operands().end());
    operands[0] = master;
    if (operands.size() == gradScaleIndex) {
      Value *one = optimizerConstant(g, kUnitGradScaleName, 1.0, diag);
      if (!one)
        return PassResult::Failed;
      operands.push_back(one);
    }
    if (operands.size() == skipIndex) {
      Value *never = optimizerConstant(g, kNoSkipName, 0.0, diag);
      if (!never)
        return PassResult::Failed;
      operands.push_back(never);
    }
    operands.push_back(param);

    Node *n = rebuildNode(g, update, operands, {g.uniqueName(masterName + ".next")}, diag);
    if (!n)
      return PassResult::Failed;
    // Result 0 is now the new master; the model weight is the last result.
    Value *newMaster = n->result(0), *newModel = n->result(n->numResults() - 1);
    std::string modelName = newMaster->name().str();
    std::string masterNextName = newModel->name().str();
    g.renameValue(newMaster, g.uniqueName(modelName + ".tmp"));
    g.renameValue(newModel, modelName);
    g.renameValue(newMaster, masterNextName);
    // Anything that read the new parameter reads the refreshed model weight.
    newMaster->replaceAllUsesWith(newModel);
    std::vector<Value *> outputs(g.outputs().begin(), g.outputs().end());
    std::replace(outputs.begin(), outputs.end(), newMaster, newModel);
    g.setOutputs(std::move(outputs));
    std::vector<StateUpdate> stateUpdates;
    for (const StateUpdate &u : g.stateUpdates()) {
      if (u.state != param) {
        stateUpdates.push_back(u);
        continue;
      }
      stateUpdates.push_back({master, newMaster});
      stateUpdates.push_back({param, newModel});
    }
    g.setStateUpdates(std::move(stateUpdates));
  }
  return PassResult::Changed;
}

} // namespace ampc
