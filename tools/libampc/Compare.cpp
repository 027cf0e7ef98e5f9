//===- Compare.cpp - One step at two levels, node by node (ampc compare) ---===//
//
// The recorder keeps every forward, loss and backward node's floating
// results of one step, as doubles. Under loss scaling the backward pass
// starts from the scale instead of 1, and everything it computes is that
// many times larger; the recorder divides those values (the ones that
// depend on the scale) by it, so that they compare with an unscaled
// level's. The comparison pairs values by structural key and measures the
// relative L2 error, which stays meaningful for tensors with zeros, where
// an elementwise relative error would not.
//
//===----------------------------------------------------------------------===//
#include "Internal.h"

#include "kernels/common/Storage.h"
#include "passes/StructuralKeys.h"
#include "runtime/Program.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace ampc::api {

namespace {
bool computedEachStep(NodeRole role) {
  return role == NodeRole::Forward || role == NodeRole::Loss || role == NodeRole::Backward;
}
} // namespace

StepRecorder::StepRecorder(const ampc::Program &program, std::function<void(RecordedValue &&)> sink)
    : program_(program), sink_(std::move(sink)), keys_(computeStructuralKeys(program.graph())) {
  const ampc::Graph &g = program.graph();
  // A model retyped by Model::widenToF64 has f64 inputs; its values are
  // kept as doubles.
  wide_ =
      llvm::any_of(g.inputs(), [](const ampc::Value *v) { return v->dtype() == ampc::DType::F64; });
  level_ = wide_ ? "f64" : optLevelOf(g);
  // The loss scale stands in for autodiff's unit seed: what the backward
  // pass computes from it is scaled (looked at through casts).
  for (const ampc::Value *v : g.state())
    if (v->stateKind() == ampc::StateKind::ScalerState)
      scaled_.insert(v);
  for (const ampc::Node &n : g.nodes()) {
    bool fromScale =
        llvm::any_of(n.operands(), [&](const ampc::Value *v) { return scaled_.count(v) != 0; });
    if (!fromScale)
      continue;
    if (n.kind() == OpKind::Cast || n.role() == ampc::NodeRole::Backward)
      for (unsigned r = 0; r < n.numResults(); ++r)
        scaled_.insert(n.result(r));
    // The seed: the scale that a backward node reads.
    if (n.role() == ampc::NodeRole::Backward)
      for (const ampc::Value *v : n.operands())
        if (v->isState() && v->stateKind() == ampc::StateKind::ScalerState)
          lossScale_ = kernels::loadAsDouble(v->dtype(), program.data(v), 0);
  }
}

void StepRecorder::observe(unsigned position) {
  const ampc::Node &n = *program_.schedule()[position];
  NodeRole role = static_cast<NodeRole>(n.role());
  if (n.kind() == OpKind::Cast || !computedEachStep(role))
    return;
  std::vector<uint64_t> operandKeys;
  for (const ampc::Value *v : n.operands())
    operandKeys.push_back(keys_.lookup(v));
  for (unsigned r = 0; r < n.numResults(); ++r) {
    const ampc::Value *v = n.result(r);
    if (!isFloating(v->dtype()))
      continue;
    RecordedValue rec;
    rec.name = v->name().str();
    rec.op = n.opName().str();
    rec.role = role;
    rec.dtype = toPublic(v->dtype());
    rec.shape.assign(v->type().dims().begin(), v->type().dims().end());
    rec.key = keys_.lookup(v);
    rec.operandKeys = operandKeys;
    const void *data = program_.data(v);
    int64_t count = v->type().numElements();
    double divisor = scaled_.count(v) ? lossScale_ : 1.0;
    if (wide_) {
      rec.values64.resize(count);
      for (int64_t i = 0; i < count; ++i)
        rec.values64[i] = kernels::loadAsDouble(v->dtype(), data, i) / divisor;
    } else {
      rec.values.resize(count);
      for (int64_t i = 0; i < count; ++i)
        rec.values[i] = static_cast<float>(kernels::loadAsDouble(v->dtype(), data, i) / divisor);
    }
    sink_(std::move(rec));
  }
}

namespace {

struct Errors {
  double relative = 0, maxAbs = 0, referenceMaxAbs = 0, referenceRms = 0;
  uint64_t nonFinite = 0;
};

Errors measure(const RecordedValue &candidate, const RecordedValue &reference) {
  Errors e;
  double diff2 = 0, ref2 = 0;
  size_t n = candidate.size();
  for (size_t i = 0; i < n; ++i) {
    double c = candidate.at(i), r = reference.at(i);
    if (!std::isfinite(c) || !std::isfinite(r)) {
      // The same infinity at both (a mask's -inf before a softmax) is an
      // exact match; anything else non-finite is an error of its own.
      if (c != r)
        ++e.nonFinite;
      continue;
    }
    double d = c - r;
    diff2 += d * d;
    ref2 += r * r;
    e.maxAbs = std::max(e.maxAbs, std::fabs(d));
    e.referenceMaxAbs = std::max(e.referenceMaxAbs, std::fabs(r));
  }
  if (n)
    e.referenceRms = std::sqrt(ref2 / double(n));
  if (e.nonFinite)
    e.relative = std::numeric_limits<double>::infinity();
  else if (ref2 > 0)
    e.relative = std::sqrt(diff2 / ref2);
  else
    e.relative = diff2 > 0 ? std::numeric_limits<double>::infinity() : 0;
  return e;
}

std::unordered_map<uint64_t, size_t> indexByKey(const StepRecord &r) {
  std::unordered_map<uint64_t, size_t> index;
  for (size_t i = 0; i < r.values.size(); ++i)
    index.emplace(r.values[i].key, i); // the first value with each key
  return index;
}

/// `v`'s counterpart in `record`: the value with its key, if of its size.
const RecordedValue *counterpart(const StepRecord &record,
                                 const std::unordered_map<uint64_t, size_t> &index,
                                 const RecordedValue &v) {
  auto it = index.find(v.key);
  if (it == index.end())
    return nullptr;
  const RecordedValue &match = record.values[it->second];
  return match.size() == v.size() ? &match : nullptr;
}

} // namespace

ComparisonBuilder::ComparisonBuilder(const StepRecord &reference, const StepRecord *f64,
                                     const CompareOptions &opts)
    : reference_(reference), f64_(f64), opts_(opts), referenceByKey_(indexByKey(reference)) {
  if (f64)
    f64ByKey_ = indexByKey(*f64);
}

void ComparisonBuilder::add(const RecordedValue &v) {
  const RecordedValue *ref = counterpart(reference_, referenceByKey_, v);
  if (!ref) {
    ++report_.unmatched;
    return;
  }
  ValueComparison c;
  c.name = v.name;
  c.referenceName = ref->name;
  c.op = v.op;
  c.role = v.role;
  c.dtype = v.dtype;
  c.referenceDType = ref->dtype;
  Errors e = measure(v, *ref);
  c.relativeError = e.relative;
  c.maxAbsError = e.maxAbs;
  c.referenceMaxAbs = e.referenceMaxAbs;
  c.referenceRms = e.referenceRms;
  c.nonFinite = e.nonFinite;
  if (f64_)
    if (const RecordedValue *exact = counterpart(*f64_, f64ByKey_, v)) {
      c.relativeErrorF64 = measure(v, *exact).relative;
      c.referenceRelativeErrorF64 = measure(*ref, *exact).relative;
    }
  for (uint64_t k : v.operandKeys)
    if (auto it = comparedByKey_.find(k); it != comparedByKey_.end())
      c.operands.push_back(it->second);
  comparedByKey_.emplace(v.key, report_.values.size());
  report_.values.push_back(std::move(c));
}

ComparisonReport ComparisonBuilder::finish(std::string level, double lossScale) {
  ComparisonReport report = std::move(report_);
  report.level = std::move(level);
  report.referenceLevel = reference_.level;
  report.withF64 = f64_ != nullptr;
  report.tolerance = opts_.tolerance;
  report.lossScale = lossScale;
  // A gradient far below the step's largest that misses the tolerance is
  // ~0 in truth: its relative error measures rounding noise.
  double largestGradient = 0;
  for (const ValueComparison &c : report.values)
    if (c.role == NodeRole::Backward)
      largestGradient = std::max(largestGradient, c.referenceRms);
  for (size_t i = 0; i < report.values.size(); ++i) {
    ValueComparison &c = report.values[i];
    bool within = c.relativeError <= opts_.tolerance;
    c.negligible = !within && c.role == NodeRole::Backward && c.nonFinite == 0 &&
                   c.referenceRms < opts_.negligible * largestGradient;
    if (within || c.negligible)
      continue;
    if (!report.firstDivergent)
      report.firstDivergent = i;
    if (!report.firstDivergentGradient && c.role == NodeRole::Backward)
      report.firstDivergentGradient = i;
  }
  return report;
}

ComparisonReport compareSteps(const StepRecord &reference, const StepRecord &candidate,
                              const StepRecord *f64, const CompareOptions &opts) {
  ComparisonBuilder builder(reference, f64, opts);
  for (const RecordedValue &v : candidate.values)
    builder.add(v);
  return builder.finish(candidate.level, candidate.lossScale);
}

namespace {
std::string errorText(double e) {
  if (std::isinf(e))
    return "inf";
  return format("%.2e", e);
}

/// "%8 (%fc1.bias.grad)": the candidate's name, and the reference's when
/// the passes named it otherwise (fresh names of backward nodes).
std::string shownName(const ValueComparison &v) {
  std::string s = "%" + v.name;
  if (v.referenceName != v.name)
    s += " (%" + v.referenceName + ")";
  return s;
}

std::string dtypePair(const ValueComparison &v) {
  return std::string(dtypeName(v.referenceDType)) + "/" + std::string(dtypeName(v.dtype));
}
} // namespace

std::string ComparisonReport::str(size_t worst) const {
  std::string s;
  size_t forward = 0, backward = 0;
  for (const ValueComparison &v : values)
    (v.role == NodeRole::Backward ? backward : forward) += 1;
  s += format("compared %zu values: %zu forward and loss, %zu gradients", values.size(), forward,
              backward);
  if (lossScale != 1)
    s += format(" (%s's gradients divided by its loss scale %g)", level.c_str(), lossScale);
  s += "\n";
  if (unmatched)
    s += format("%zu values of %s have no counterpart at %s\n", unmatched, level.c_str(),
                referenceLevel.c_str());
  s += format("relative error: |%s - %s| / |%s| over each tensor (L2)%s; tolerance %g\n",
              level.c_str(), referenceLevel.c_str(), referenceLevel.c_str(),
              withF64 ? ", and each level against f64" : "", tolerance);
  // Forward and gradients apart: a gradient past the tolerance with the
  // forward within is what half precision's rounding usually does to
  // sums that cancel; a forward value past it is an op that should not run
  // in half.
  for (bool gradients : {false, true}) {
    std::optional<size_t> first;
    size_t count = 0, largest = values.size();
    for (size_t i = 0; i < values.size(); ++i) {
      const ValueComparison &v = values[i];
      if ((v.role == NodeRole::Backward) != gradients || v.negligible)
        continue;
      ++count;
      if (!first && !(v.relativeError <= tolerance))
        first = i;
      if (largest == values.size() || v.relativeError > values[largest].relativeError)
        largest = i;
    }
    s += gradients ? "gradients: " : "forward and loss: ";
    if (count == 0) {
      s += "none compared\n";
      continue;
    }
    if (!first) {
      s += format("all %zu within the tolerance (largest error %s at %s)\n", count,
                  errorText(values[largest].relativeError).c_str(),
                  shownName(values[largest]).c_str());
      continue;
    }
    const ValueComparison &v = values[*first];
    s +=
        format("first past the tolerance: %s: %s, %s at %s/%s: relative error %s, max abs "
               "error %.3g (|x| up to %.3g)",
               shownName(v).c_str(), v.op.c_str(), dtypePair(v).c_str(), referenceLevel.c_str(),
               level.c_str(), errorText(v.relativeError).c_str(), v.maxAbsError, v.referenceMaxAbs);
    if (v.nonFinite)
      s += format(", %llu values inf or NaN", static_cast<unsigned long long>(v.nonFinite));
    s += "\n";
    if (!v.operands.empty()) {
      s += "  its inputs:";
      for (size_t i : v.operands) {
        const ValueComparison &in = values[i];
        s += format(" %s %s %s;", shownName(in).c_str(), in.op.c_str(),
                    errorText(in.relativeError).c_str());
      }
      s.back() = '\n';
    }
  }
  std::vector<size_t> negligible, order;
  for (size_t i = 0; i < values.size(); ++i)
    (values[i].negligible ? negligible : order).push_back(i);
  if (!negligible.empty()) {
    s += format("%zu %s ~0 at %s (RMS below 1e-4 of the largest gradient's; their relative "
                "errors measure rounding noise, as where a bias feeds batchnorm or a softmax's "
                "keys):",
                negligible.size(), negligible.size() == 1 ? "gradient is" : "gradients are",
                referenceLevel.c_str());
    for (size_t i : negligible)
      s += " " + shownName(values[i]);
    s += "\n";
  }
  // The worst values, largest error first (ties in schedule order).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return values[a].relativeError > values[b].relativeError;
  });
  order.resize(std::min(worst, order.size()));
  if (order.empty())
    return s;
  size_t nameWidth = 5, opWidth = 2;
  for (size_t i : order) {
    nameWidth = std::max(nameWidth, shownName(values[i]).size());
    opWidth = std::max(opWidth, values[i].op.size());
  }
  int nw = static_cast<int>(nameWidth), ow = static_cast<int>(opWidth);
  std::string vsRef = level + " vs " + referenceLevel;
  s += format("worst %zu:\n  %-*s  %-*s  %-8s  %-9s  %-10s  %-9s", order.size(), nw, "value", ow,
              "op", "role", "dtypes", vsRef.c_str(), "max abs");
  if (withF64)
    s += format("  %-10s  %s", (level + " vs f64").c_str(), (referenceLevel + " vs f64").c_str());
  s += "\n";
  for (size_t i : order) {
    const ValueComparison &v = values[i];
    std::string name = shownName(v);
    s += format("  %-*s  %-*s  %-8s  %-9s  %-10s  %-9.3g", nw, name.c_str(), ow, v.op.c_str(),
                std::string(roleName(v.role)).c_str(), dtypePair(v).c_str(),
                errorText(v.relativeError).c_str(), v.maxAbsError);
    if (withF64)
      s += format("  %-10s  %s", v.relativeErrorF64 ? errorText(*v.relativeErrorF64).c_str() : "-",
                  v.referenceRelativeErrorF64 ? errorText(*v.referenceRelativeErrorF64).c_str()
                                              : "-");
    s += "\n";
  }
  // The columns pad; the lines end at their last character.
  std::string trimmed;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    std::string line = s.substr(start, end - start);
    line.erase(line.find_last_not_of(' ') + 1);
    trimmed += line + "\n";
    start = end + 1;
  }
  return trimmed;
}

} // namespace ampc::api
