//===- PrecisionReport.cpp --------------------------------------------------===//
#include "passes/PrecisionReport.h"
#include "ir/OpAttrs.h"

#include "passes/AssignPrecision.h"
#include "passes/PrecisionPolicy.h"

#include "llvm/Support/Format.h"

#include <algorithm>

namespace ampc {

std::optional<DType> computeDType(const Node &n) {
  for (unsigned r = 0; r < n.numResults(); ++r)
    if (isFloating(n.result(r)->dtype()))
      return n.result(r)->dtype();
  for (const Value *v : n.operands())
    if (v && isFloating(v->dtype()))
      return v->dtype();
  return std::nullopt;
}

namespace {

uint64_t bytesOf(const TensorType &t) {
  return static_cast<uint64_t>(t.numElements()) * dtypeSize(t.dtype());
}

/// Whether the graph's policy leaves everything in fp32 (an O0 graph).
bool nothingInHalf(const Graph &g) {
  DiagnosticEngine scratch;
  std::optional<PrecisionPolicy> policy = resolvePolicy(g.meta(), scratch);
  return policy && !policy->mixed();
}

} // namespace

std::vector<NodePrecision> explainPrecision(const Graph &g) {
  bool fp32Graph = nothingInHalf(g);
  std::vector<NodePrecision> rows;
  for (const Node &n : g.nodes()) {
    NodePrecision row{&n, "", "-", "", false, false};
    row.label = n.numResults() ? ("%" + n.result(0)->name()).str() : n.opName().str();
    std::optional<DType> dtype = computeDType(n);
    bool isCast = n.kind() == OpKind::Cast;
    std::optional<PrecisionDecision> decision = precisionDecision(n);
    if (decision) {
      row.precision = dtypeName(decision->dtype).str();
      row.reason = decision->reasonString();
    } else {
      if (n.numResults())
        row.precision = dtypeName(dtype ? *dtype : n.result(0)->dtype()).str();
      if (isCast) {
        const Value *in = n.operand(0);
        row.reason =
            ("cast: " + dtypeName(in->dtype()) + " to " + dtypeName(attrs::Cast(n).to())).str();
        if (attrs::Cast(n).cacheable())
          row.reason += ", cacheable";
      } else {
        switch (n.role()) {
        case NodeRole::Forward:
        case NodeRole::Loss:
          row.reason = fp32Graph ? "policy: nothing runs in half" : "unassigned";
          break;
        case NodeRole::Backward:
          row.reason = "backward";
          break;
        case NodeRole::Optimizer:
          row.reason = "optimizer";
          break;
        case NodeRole::LossScale:
          row.reason = "loss-scale";
          break;
        }
      }
    }
    row.isOp = !isCast && dtype.has_value();
    row.isHalf = row.isOp && isHalfType(*dtype);
    rows.push_back(std::move(row));
  }
  return rows;
}

PrecisionSummary summarizePrecision(const Graph &g) {
  PrecisionSummary s;
  for (const Node &n : g.nodes()) {
    if (n.kind() == OpKind::Cast) {
      uint64_t bytes = bytesOf(n.result()->type());
      ++s.casts;
      s.castBytes += bytes;
      if (attrs::Cast(n).cacheable()) {
        ++s.cacheableCasts;
        s.cacheableCastBytes += bytes;
      }
      continue;
    }
    std::optional<DType> dtype = computeDType(n);
    if (!dtype)
      continue;
    ++s.ops;
    if (isHalfType(*dtype))
      ++s.halfOps;
  }
  return s;
}

void printPrecisionSummary(const PrecisionSummary &s, llvm::raw_ostream &os) {
  os << s.halfOps << " of " << s.ops << " ops in half, " << s.casts
     << (s.casts == 1 ? " cast (" : " casts (") << s.castBytes << " bytes per step)";
  // Casts of state run once per weight change, not once per use: say so
  // rather than promise cache hits that training (which changes the
  // weights every step) does not have.
  if (s.cacheableCasts)
    os << "; " << s.cacheableCasts
       << (s.cacheableCasts == 1 ? " cast of weights (" : " casts of weights (")
       << s.cacheableCastBytes << (s.cacheableCasts == 1 ? " bytes) runs" : " bytes) run")
       << " once per weight change";
  os << "\n";
}

void printExplain(const Graph &g, llvm::raw_ostream &os) {
  std::vector<NodePrecision> rows = explainPrecision(g);
  size_t labelWidth = 0, opWidth = 0, precisionWidth = 0;
  for (const NodePrecision &r : rows) {
    labelWidth = std::max(labelWidth, r.label.size());
    opWidth = std::max(opWidth, r.node->opName().size());
    precisionWidth = std::max(precisionWidth, r.precision.size());
  }
  for (const NodePrecision &r : rows) {
    os << llvm::left_justify(r.label, labelWidth) << "  "
       << llvm::left_justify(r.node->opName(), opWidth) << "  "
       << llvm::left_justify(r.precision, precisionWidth) << "  " << r.reason << '\n';
  }
}

} // namespace ampc
