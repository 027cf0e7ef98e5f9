//===- DataParallel.cpp -----------------------------------------------------===//
#include "passes/DataParallel.h"

#include "ir/Builder.h"
#include "ir/MetaReader.h"
#include "ir/OpAttrs.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace ampc {

namespace {

constexpr int64_t kDefaultBucketBytes = int64_t(25) << 20;

/// A parameter update: an optimizer op that reads a parameter and its gradient.
bool isUpdate(const Node &n) {
  return n.role() == NodeRole::Optimizer && n.op().operandIndex("param") &&
         n.op().operandIndex("grad");
}

struct Settings {
  int64_t ranks = 1;
  bool halfWire = false;
  int64_t bucketBytes = kDefaultBucketBytes;
};

std::optional<Settings> readSettings(const Graph &g, DiagnosticEngine &diag) {
  MetaReader meta(g.meta(), diag, "data-parallel: ");
  Settings s;
  s.ranks = meta.integer("dist.ranks", 1);
  std::string wire = meta.string("dist.allreduce_dtype", "f32");
  s.bucketBytes = meta.integer("dist.bucket_bytes", kDefaultBucketBytes);
  if (meta.failed())
    return std::nullopt;
  if (s.ranks < 1)
    meta.error("meta 'dist.ranks' must be >= 1, got " + llvm::Twine(s.ranks));
  else if (wire != "f32" && wire != "half")
    meta.error("meta 'dist.allreduce_dtype' must be f32 or half, got '" + wire + "'");
  else if (s.bucketBytes < 1)
    meta.error("meta 'dist.bucket_bytes' must be >= 1, got " + llvm::Twine(s.bucketBytes));
  if (meta.failed())
    return std::nullopt;
  s.halfWire = wire == "half";
  return s;
}

class GradientAllReduce {
public:
  GradientAllReduce(Graph &g, const Settings &s, DiagnosticEngine &diag)
      : g_(g), s_(s), diag_(diag) {}
  bool run();

private:
  bool error(const Location &loc, const llvm::Twine &msg) {
    diag_.error(loc, "data-parallel: " + msg);
    return false;
  }
  DType wireOf(const Value *grad) const {
    DType t = grad->dtype();
    return s_.halfWire && (t == DType::F16 || t == DType::BF16) ? t : DType::F32;
  }
  bool emitBucket(llvm::ArrayRef<Value *> grads, DType wire, int64_t accumulate);

  Graph &g_;
  const Settings &s_;
  DiagnosticEngine &diag_;
  llvm::DenseMap<const Node *, size_t> position_;
};

/// One all_reduce of `grads`, right after the node that produces the last
/// of them; every later reader of a gradient reads its average.
bool GradientAllReduce::emitBucket(llvm::ArrayRef<Value *> grads, DType wire, int64_t accumulate) {
  Node *last = nullptr;
  for (Value *grad : grads)
    if (grad->isResult() &&
        (!last || position_.lookup(grad->definingNode()) > position_.lookup(last)))
      last = grad->definingNode();
  Node *before = nullptr;
  if (last) {
    auto next = std::next(last->getIterator());
    before = next == g_.nodes().end() ? nullptr : &*next;
  } else if (!g_.nodes().empty()) {
    before = &g_.nodes().front();
  }
  std::vector<std::string> names;
  for (Value *grad : grads)
    names.push_back(g_.uniqueName((grad->name() + ".avg").str()));
  Location loc = last ? last->loc() : g_.loc();
  Node *reduce = buildNode(g_, OpRegistry::builtin().get(OpKind::AllReduce),
                           llvm::SmallVector<Value *, 8>(grads.begin(), grads.end()),
                           {{"ranks", Attribute(s_.ranks)},
                            {"dtype", Attribute(wire)},
                            {"accumulate", Attribute(accumulate)}},
                           loc, diag_, names, before);
  if (!reduce)
    return false;
  reduce->setRole(NodeRole::Backward);
  // Positions are those of the graph before the pass; the bucket runs
  // right after its last producer.
  size_t at = last ? position_.lookup(last) + 1 : 0;
  for (unsigned i = 0; i < grads.size(); ++i) {
    Value *grad = grads[i];
    // Only nodes after the bucket may read the average; a reader before it
    // would have needed the gradient before it was complete.
    for (const Use &u : grad->uses())
      if (u.user != reduce && position_.count(u.user) && position_.lookup(u.user) < at)
        return error(u.user->loc(), "%" + grad->name() + " is read by " + u.user->opName() +
                                        " before its bucket's all_reduce");
    grad->replaceAllUsesWith(reduce->result(i));
    reduce->setOperand(i, grad);
  }
  std::vector<Value *> outputs(g_.outputs().begin(), g_.outputs().end());
  for (Value *&out : outputs)
    for (unsigned i = 0; i < grads.size(); ++i)
      if (out == grads[i])
        out = reduce->result(i);
  g_.setOutputs(std::move(outputs));
  return true;
}

bool GradientAllReduce::run() {
  // (Collectives of SyncBatchNorm's statistics may be there already.)
  size_t i = 0;
  for (Node &n : g_.nodes())
    position_[&n] = i++;

  // The gradients the updates read, each once, and the accumulation count.
  std::vector<Value *> grads;
  llvm::DenseSet<const Value *> seen;
  std::optional<int64_t> accumulate;
  for (Node &n : g_.nodes()) {
    if (!isUpdate(n))
      continue;
    const Attribute *acc = n.findAttr("accumulate");
    int64_t k = acc && acc->is(AttrType::Int) ? acc->getInt() : 1;
    if (accumulate && *accumulate != k)
      return error(n.loc(), "the updates disagree on the accumulation count");
    accumulate = k;
    Value *grad = n.operand(*n.op().operandIndex("grad"));
    if (grad->isResult() && grad->definingNode()->op().collective)
      return error(n.loc(), "the gradients are all-reduced already");
    if (seen.insert(grad).second)
      grads.push_back(grad);
  }
  if (grads.empty())
    return error(g_.loc(), "the graph has no optimizer updates (run the optimizer pass before "
                           "data-parallel)");

  // In the order the step completes them (state read as it is comes first).
  auto producedAt = [&](const Value *v) -> int64_t {
    return v->isResult() ? int64_t(position_.lookup(v->definingNode())) : -1;
  };
  std::stable_sort(grads.begin(), grads.end(),
                   [&](const Value *a, const Value *b) { return producedAt(a) < producedAt(b); });

  // One open bucket per wire type; a bucket closes when the next gradient
  // would take it past the bucket size.
  struct Bucket {
    std::vector<Value *> grads;
    int64_t bytes = 0;
  };
  std::map<DType, Bucket> open;
  std::vector<std::pair<std::vector<Value *>, DType>> closed;
  for (Value *grad : grads) {
    DType wire = wireOf(grad);
    int64_t bytes = grad->type().numElements() * int64_t(dtypeSize(wire));
    Bucket &b = open[wire];
    if (!b.grads.empty() && b.bytes + bytes > s_.bucketBytes) {
      closed.push_back({std::move(b.grads), wire});
      b = Bucket();
    }
    b.grads.push_back(grad);
    b.bytes += bytes;
  }
  for (auto &[wire, b] : open)
    if (!b.grads.empty())
      closed.push_back({std::move(b.grads), wire});
  for (auto &[bucket, wire] : closed)
    if (!emitBucket(bucket, wire, *accumulate))
      return false;
  return true;
}

} // namespace

PassResult DataParallelPass::run(Graph &g, PassContext &ctx) {
  std::optional<Settings> s = readSettings(g, ctx.diag);
  if (!s)
    return PassResult::Failed;
  if (s->ranks == 1)
    return PassResult::Unchanged;
  return GradientAllReduce(g, *s, ctx.diag).run() ? PassResult::Changed : PassResult::Failed;
}

} // namespace ampc
