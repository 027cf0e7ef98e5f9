//===- Prediction.cpp - What Program::predict writes, sample by sample ----===//
#include "Prediction.h"

#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace ampc::api {

const ampc::Value *predictionValue(const ampc::Graph &g) {
  const ampc::Value *pred = nullptr;
  for (const ampc::Node &n : g.nodes())
    if (n.role() == ampc::NodeRole::Loss && n.numOperands() > 0 && !ampc::combinesLosses(n))
      pred = n.operand(0);
  if (!pred && !g.outputs().empty())
    pred = g.outputs()[0];
  return pred;
}

namespace {

/// The values `v` is computed from, `v` included, each after its operands.
std::vector<const ampc::Value *> coneInPostOrder(const ampc::Value &v) {
  std::vector<const ampc::Value *> order;
  llvm::DenseSet<const ampc::Value *> seen;
  // (value, whether its operands are pushed already); an explicit stack, as
  // a deep model would overflow the call stack.
  llvm::SmallVector<std::pair<const ampc::Value *, bool>, 64> stack{{&v, false}};
  seen.insert(&v);
  while (!stack.empty()) {
    auto [value, expanded] = stack.back();
    const ampc::Node *def = value->definingNode();
    if (expanded || !def) {
      stack.pop_back();
      order.push_back(value);
      continue;
    }
    stack.back().second = true;
    for (const ampc::Value *op : def->operands())
      if (seen.insert(op).second)
        stack.push_back({op, false});
  }
  return order;
}

/// k when `t1` (at batch b1) and `t2` (at batch b2) hold the batch in dim 0
/// alone as b x k.
std::optional<int64_t> batchFactor(const ampc::TensorType &t1, int64_t b1,
                                   const ampc::TensorType &t2, int64_t b2) {
  if (t1.rank() == 0 || t1.rank() != t2.rank() || t1.dims().drop_front() != t2.dims().drop_front())
    return std::nullopt;
  int64_t d1 = t1.dim(0), d2 = t2.dim(0);
  if (d1 <= 0 || d1 % b1 != 0 || d2 % b2 != 0 || d1 / b1 != d2 / b2)
    return std::nullopt;
  return d1 / b1;
}

/// `out` for a prediction `pred` whose dim 0 holds k rows a sample.
void setLayout(const ampc::Value &pred, int64_t k, SampleLayout &out) {
  out.rowsPerSample = k;
  out.sampleShape.clear();
  if (k > 1)
    out.sampleShape.push_back(k);
  for (int64_t d : pred.type().dims().drop_front())
    out.sampleShape.push_back(d);
}

} // namespace

std::vector<std::string> inputsReadBy(const ampc::Value &v) {
  std::vector<std::string> names;
  for (const ampc::Value *u : coneInPostOrder(v))
    if (u->isInput())
      names.push_back(u->name().str());
  return names;
}

int64_t SampleLayout::sampleElements() const {
  int64_t n = 1;
  for (int64_t d : sampleShape)
    n *= d;
  return n;
}

bool sampleLayout(const ampc::Graph &at1, int64_t b1, const ampc::Graph &at2, int64_t b2,
                  SampleLayout &out, std::string &err) {
  const ampc::Value *pred = predictionValue(at1);
  if (!pred) {
    err = "the model has no output to predict";
    return false;
  }
  std::string subject = "the prediction '" + pred->name().str() + "' " + pred->type().str();
  // k of each value computed from the data; the others (parameters,
  // constants) are the same for every sample.
  llvm::DenseMap<const ampc::Value *, int64_t> factor;
  for (const ampc::Value *v : coneInPostOrder(*pred)) {
    if (v->isState())
      continue;
    llvm::SmallVector<const ampc::Value *, 4> fromData;
    if (const ampc::Node *def = v->definingNode())
      for (const ampc::Value *op : def->operands())
        if (factor.count(op) && !llvm::is_contained(fromData, op))
          fromData.push_back(op);
    if (!v->isInput() && fromData.empty())
      continue;
    const ampc::Value *other = at2.lookup(v->name());
    std::optional<int64_t> k;
    if (other)
      k = batchFactor(v->type(), b1, other->type(), b2);
    if (!k && v->isInput() && other && v->type() == other->type()) {
      err = subject + " cannot be split into samples: input '" + v->name().str() + "' " +
            v->type().str() + " is the same at every batch size (declare its dim 0 as the batch B)";
      return false;
    }
    if (!k) {
      err = subject + " cannot be split into samples: '" + v->name().str() + "' " +
            v->type().str() + " at batch " + std::to_string(b1) +
            (other ? " (" + other->type().str() + " at batch " + std::to_string(b2) + ")" : "") +
            " does not hold the batch in dim 0 alone, so its rows are not one sample's each";
      return false;
    }
    const ampc::Node *def = v->definingNode();
    for (const ampc::Value *op : fromData) {
      int64_t opK = factor.lookup(op);
      if (opK == *k ||
          (fromData.size() == 1 && op->type().numElements() == v->type().numElements()))
        continue;
      err = subject + " cannot be split into samples: " + def->opName().str() + " '" +
            v->name().str() + "' " + v->type().str() + " has " + std::to_string(*k) +
            " rows per sample from '" + op->name().str() + "' " + op->type().str() +
            ", which has " + std::to_string(opK) +
            (fromData.size() > 1 ? " (the rows of different samples mix)"
                                 : " (values repeated or dropped)");
      return false;
    }
    factor[v] = *k;
  }
  if (!factor.count(pred)) {
    err = subject + " is not computed from the data";
    return false;
  }
  setLayout(*pred, factor.lookup(pred), out);
  return true;
}

bool fixedBatchLayout(const ampc::Graph &g, int64_t b, SampleLayout &out, std::string &err) {
  const ampc::Value *pred = predictionValue(g);
  if (!pred) {
    err = "the model has no output to predict";
    return false;
  }
  if (pred->type().rank() == 0 || b <= 0 || pred->type().dim(0) % b != 0) {
    err = "the prediction '" + pred->name().str() + "' " + pred->type().str() +
          " cannot be split into samples: the model builds at batch " + std::to_string(b) +
          " only, and its dim 0 is not a multiple of it";
    return false;
  }
  setLayout(*pred, pred->type().dim(0) / b, out);
  return true;
}

} // namespace ampc::api
