//===- SyncBatchNorm.cpp ----------------------------------------------------===//
#include "passes/SyncBatchNorm.h"

#include "ir/Builder.h"
#include "ir/MetaReader.h"
#include "ir/OpAttrs.h"

#include <vector>

namespace ampc {

namespace {

class SyncBatchNormRewriter {
public:
  SyncBatchNormRewriter(Graph &g, int64_t ranks, DiagnosticEngine &diag)
      : g_(g), ranks_(ranks), diag_(diag) {}

  /// Replaces `bn` by its arithmetic over the global statistics.
  bool rewrite(Node *bn);

private:
  /// One node before `bn_`, in f32 by override, at the batchnorm's place.
  Value *build(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs,
               const std::string &name = "") {
    std::vector<std::string> names;
    if (!name.empty())
      names.push_back(g_.uniqueName(name));
    Node *n = buildNode(g_, OpRegistry::builtin().get(kind), operands, std::move(attrs), bn_->loc(),
                        diag_, names, bn_);
    if (!n)
      return nullptr;
    n->setRole(bn_->role());
    n->setPrecisionOverride(PrecisionOverride::Fp32);
    return n->result(0);
  }
  Value *toF32(Value *v) {
    return v->dtype() == DType::F32 ? v : build(OpKind::Cast, {v}, {{"to", Attribute(DType::F32)}});
  }
  /// The global sum over ranks of the per-channel sum of `v`, [1, C, 1, 1].
  Value *globalChannelSum(Value *v, const std::string &name) {
    Value *local =
        build(OpKind::ReduceSum, {v},
              {{"dims", Attribute(std::vector<int64_t>{0, 2, 3})}, {"keepdim", Attribute(true)}});
    if (!local)
      return nullptr;
    return build(OpKind::AllReduce, {local},
                 {{"ranks", Attribute(ranks_)}, {"reduce", Attribute("sum")}}, name);
  }

  Graph &g_;
  int64_t ranks_;
  DiagnosticEngine &diag_;
  Node *bn_ = nullptr;
};

bool SyncBatchNormRewriter::rewrite(Node *bn) {
  bn_ = bn;
  attrs::BatchNorm2d a(*bn);
  Value *x = bn->operand(0);
  const TensorType &xt = x->type();
  int64_t channels = xt.dim(1);
  double count = double(xt.dim(0) * xt.dim(2) * xt.dim(3)) * double(ranks_);
  std::string base = bn->result(0)->name().str();
  std::vector<int64_t> perChannel = {1, channels, 1, 1};

  Value *xf = toF32(x);
  Value *sum = xf ? globalChannelSum(xf, base + ".global_sum") : nullptr;
  Value *mean =
      sum ? build(OpKind::Scale, {sum}, {{"factor", Attribute(1.0 / count)}}, base + ".global_mean")
          : nullptr;
  Value *centered = mean ? build(OpKind::Sub, {xf, mean}, {}) : nullptr;
  Value *squares = centered ? build(OpKind::Mul, {centered, centered}, {}) : nullptr;
  Value *squareSum = squares ? globalChannelSum(squares, base + ".global_sq_sum") : nullptr;
  Value *var = squareSum ? build(OpKind::Scale, {squareSum}, {{"factor", Attribute(1.0 / count)}},
                                 base + ".global_var")
                         : nullptr;
  Value *eps = var ? build(OpKind::Fill, {},
                           {{"value", Attribute(a.eps())},
                            {"shape", Attribute(std::vector<int64_t>{})},
                            {"dtype", Attribute(DType::F32)}})
                   : nullptr;
  Value *shifted = eps ? build(OpKind::Add, {var, eps}, {}) : nullptr;
  Value *invStd =
      shifted ? build(OpKind::Pow, {shifted}, {{"exponent", Attribute(-0.5)}}) : nullptr;
  Value *normalized = invStd ? build(OpKind::Mul, {centered, invStd}, {}) : nullptr;
  auto perChannelOperand = [&](unsigned i) -> Value * {
    Value *v = toF32(bn->operand(i));
    return v ? build(OpKind::Reshape, {v}, {{"shape", Attribute(perChannel)}}) : nullptr;
  };
  Value *weight = normalized ? perChannelOperand(1) : nullptr;
  Value *bias = weight ? perChannelOperand(2) : nullptr;
  Value *scaled = bias ? build(OpKind::Mul, {normalized, weight}, {}) : nullptr;
  Value *y = scaled ? build(OpKind::Add, {scaled, bias}, {}) : nullptr;
  if (y && x->dtype() != DType::F32)
    y = build(OpKind::Cast, {y}, {{"to", Attribute(x->dtype())}});
  if (!y)
    return false;

  // The running statistics, as batchnorm2d updates them (PyTorch's rule:
  // the unbiased variance of the batch).
  double m = a.momentum();
  auto blend = [&](unsigned operand, Value *batchStat, double factor) -> Value * {
    Value *running = bn->operand(operand);
    Value *stat =
        build(OpKind::Reshape, {batchStat}, {{"shape", Attribute(std::vector<int64_t>{channels})}});
    if (stat && running->dtype() != DType::F32)
      return nullptr; // keep_batchnorm_fp32 or not, the statistics are f32
    Value *kept = stat ? build(OpKind::Scale, {running}, {{"factor", Attribute(1 - m)}}) : nullptr;
    Value *added =
        kept ? build(OpKind::Scale, {stat}, {{"factor", Attribute(m * factor)}}) : nullptr;
    return added ? build(OpKind::Add, {kept, added}, {}) : nullptr;
  };
  Value *runningMean = blend(3, mean, 1.0);
  Value *runningVar = runningMean ? blend(4, var, count > 1 ? count / (count - 1) : 1.0) : nullptr;
  if (!runningMean || !runningVar) {
    diag_.error(bn->loc(), "sync-batchnorm: running statistics must be f32");
    return false;
  }

  // The rewrite takes the batchnorm's names and places.
  Value *newResults[3] = {y, runningMean, runningVar};
  for (unsigned i = 0; i < 3; ++i) {
    Value *old = bn->result(i);
    std::string name = old->name().str();
    old->replaceAllUsesWith(newResults[i]);
    g_.renameValue(old, g_.uniqueName(name + ".replaced"));
    g_.renameValue(newResults[i], name);
  }
  std::vector<StateUpdate> updates(g_.stateUpdates().begin(), g_.stateUpdates().end());
  for (StateUpdate &u : updates)
    for (unsigned i = 1; i < 3; ++i)
      if (u.newValue == bn->result(i))
        u.newValue = newResults[i];
  g_.setStateUpdates(std::move(updates));
  std::vector<Value *> outputs(g_.outputs().begin(), g_.outputs().end());
  for (Value *&out : outputs)
    for (unsigned i = 0; i < 3; ++i)
      if (out == bn->result(i))
        out = newResults[i];
  g_.setOutputs(std::move(outputs));
  g_.eraseNode(bn);
  return true;
}

} // namespace

PassResult SyncBatchNormPass::run(Graph &g, PassContext &ctx) {
  MetaReader meta(g.meta(), ctx.diag, "sync-batchnorm: ");
  bool sync = meta.boolean("train.sync_batchnorm", false);
  int64_t ranks = meta.integer("dist.ranks", 1);
  if (meta.failed())
    return PassResult::Failed;
  if (!sync || ranks <= 1)
    return PassResult::Unchanged;
  std::vector<Node *> batchNorms;
  for (Node &n : g.nodes())
    if (n.kind() == OpKind::BatchNorm2d && attrs::BatchNorm2d(n).training())
      batchNorms.push_back(&n);
  SyncBatchNormRewriter rewriter(g, ranks, ctx.diag);
  for (Node *bn : batchNorms)
    if (!rewriter.rewrite(bn))
      return PassResult::Failed;
  return batchNorms.empty() ? PassResult::Unchanged : PassResult::Changed;
}

} // namespace ampc
