//===- BatchShapes.cpp - Which dims of a graph are the batch --------------===//
#include "frontends/onnx/BatchShapes.h"

#include "ir/Builder.h"
#include "ir/MetaReader.h"
#include "ir/OpAttrs.h"

#include "llvm/ADT/Twine.h"

namespace ampc {

const TensorType &BatchShapes::at(const Value *v) const {
  auto it = other.find(v);
  return it == other.end() ? v->type() : it->second;
}

std::optional<std::string> BatchShapes::symbol(const Value *v, unsigned d) const {
  int64_t mine = v->type().dim(d), theirs = at(v).dim(d);
  if (mine == theirs || batch <= 0 || mine % batch != 0)
    return std::nullopt;
  int64_t k = mine / batch;
  if (theirs != k * otherBatch)
    return std::nullopt;
  return k == 1 ? std::string("batch") : "batch*" + std::to_string(k);
}

namespace {

std::string quoted(const Value *v) { return "'" + v->name().str() + "'"; }

} // namespace

bool BatchProbe::match(const Graph &g, const Graph &other, std::string &why) {
  batch_ = metaInt(g, "batch", 0);
  otherBatch_ = metaInt(other, "batch", 0);
  if (batch_ <= 0 || otherBatch_ <= 0 || batch_ == otherBatch_) {
    why = "the model has no batch size to vary";
    return false;
  }
  auto differ = [&](const llvm::Twine &what) {
    why = ("at batch " + llvm::Twine(otherBatch_) + " the model imports with " + what).str();
    return false;
  };
  if (g.inputs().size() != other.inputs().size())
    return differ("other inputs");
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value *a = g.inputs()[i], *b = other.inputs()[i];
    if (a->name() != b->name() || a->dtype() != b->dtype() || a->type().rank() != b->type().rank())
      return differ("input " + quoted(b) + " " + b->type().str() + " for " + quoted(a) + " " +
                    a->type().str());
    inputs_[a->name()] = b->type();
  }
  if (g.state().size() != other.state().size())
    return differ("other parameters");
  for (size_t i = 0; i < g.state().size(); ++i) {
    const Value *a = g.state()[i], *b = other.state()[i];
    if (a->name() != b->name() || a->type() != b->type())
      return differ(quoted(b) + " " + b->type().str() + " for " + quoted(a) + " " +
                    a->type().str());
  }
  if (g.numNodes() != other.numNodes())
    return differ("another number of ops");
  auto b = other.nodes().begin();
  for (const Node &a : g.nodes()) {
    const Node &n = *b++;
    std::string where = "the op making " + quoted(a.result(0));
    if (a.kind() != n.kind() || a.numOperands() != n.numOperands() ||
        a.numResults() != n.numResults())
      return differ("another op in place of " + where);
    for (unsigned i = 0; i < a.numOperands(); ++i)
      if (a.operand(i)->name() != n.operand(i)->name())
        return differ("other operands for " + where);
    for (unsigned i = 0; i < a.numResults(); ++i)
      if (a.result(i)->name() != n.result(i)->name())
        return differ("other results for " + where);
    if (a.kind() == OpKind::Reshape) {
      const TensorType &t = n.result()->type();
      reshapes_[a.id()] = {attrs::Reshape(a).shape(), {t.dims().begin(), t.dims().end()}};
      continue;
    }
    // Any other attribute that follows the batch would need the batch
    // computed in the ONNX graph (Shape, Gather ...): not written yet.
    if (a.attrs() != n.attrs())
      return differ("other attributes for " + where + " (" + a.opName() +
                    "): an attribute follows the batch");
  }
  return true;
}

bool BatchProbe::propagate(const Graph &g, BatchShapes &out, std::string &why) const {
  out.batch = batch_;
  out.otherBatch = otherBatch_;
  out.other.clear();
  for (const Value *in : g.inputs()) {
    auto it = inputs_.find(in->name());
    if (it == inputs_.end()) {
      why = "the input " + quoted(in) + " is not the model's";
      return false;
    }
    out.other[in] = it->second.withDType(in->dtype());
  }
  llvm::SmallVector<TensorType, 4> operands;
  llvm::SmallVector<TensorType, 2> results;
  for (const Node &n : g.nodes()) {
    operands.clear();
    results.clear();
    for (const Value *v : n.operands())
      operands.push_back(out.at(v));
    std::string err;
    auto target = n.kind() == OpKind::Reshape ? reshapes_.find(n.id()) : reshapes_.end();
    if (target != reshapes_.end() && target->second.shape == attrs::Reshape(n).shape()) {
      results.push_back(TensorType(n.result()->dtype(), target->second.other));
      if (results[0].numElements() != operands[0].numElements())
        err = "its target " + results[0].str() + " does not fit " + operands[0].str();
    } else if (!inferResultTypes(n.op(), operands, n.attrs(), results, err) && err.empty()) {
      err = "it does not type-check";
    }
    // The exporter reads a result's dims at both batches side by side.
    for (unsigned i = 0; err.empty() && i < n.numResults(); ++i)
      if (i >= results.size() || results[i].rank() != n.result(i)->type().rank())
        err = "its result " + std::to_string(i) + " has another rank than " +
              n.result(i)->type().str();
    if (!err.empty()) {
      why = ("at batch " + llvm::Twine(otherBatch_) + ", " + n.opName() + " making " +
             quoted(n.result(0)) + ": " + err)
                .str();
      return false;
    }
    for (unsigned i = 0; i < n.numResults(); ++i)
      out.other[n.result(i)] = results[i].withDType(n.result(i)->dtype());
  }
  return true;
}

} // namespace ampc
