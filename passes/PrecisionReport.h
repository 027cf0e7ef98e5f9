//===- PrecisionReport.h - Per-node precision and why (ampc --explain) -----===//
#ifndef AMPC_PASSES_PRECISIONREPORT_H
#define AMPC_PASSES_PRECISIONREPORT_H

#include "ir/Graph.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampc {

/// One node's precision and the rule behind it.
struct NodePrecision {
  const Node *node;
  /// "%name" of its first result, or the op name for a node without results.
  std::string label;
  /// The dtype it computes in ("bf16", "f32", "i64"), or "-".
  std::string precision;
  /// Forward nodes: the decision assign-precision recorded ("category: half",
  /// "neighbour: as its input", "policy: losses run in fp32", ...). Others:
  /// "cast: ...", "backward", "optimizer", "loss-scale", or for a forward node
  /// without a decision "policy: nothing runs in half" (an O0 graph) or
  /// "unassigned".
  std::string reason;
  /// The node computes on floating-point data (counted as an op) and it is
  /// not a cast.
  bool isOp = false;
  bool isHalf = false;
};

/// Every node of g, in execution order.
std::vector<NodePrecision> explainPrecision(const Graph &g);

/// The dtype a node computes in: its first floating result, else its first
/// floating operand (what the summary, the profile and the views report).
std::optional<DType> computeDType(const Node &n);

/// What `ampc` prints after compiling:
///   "N of M ops in half, K casts (X bytes per step)"
/// M counts the nodes of every role that compute on floating-point data,
/// casts excluded; N those whose compute dtype (the first floating result,
/// else the first floating operand) is f16 or bf16. X is the bytes the K cast
/// nodes write if each runs once per step. Casts of state (cacheable) are
/// part of K and X, and also counted apart: the cast cache serves them until
/// the tensor changes, so they are written once per optimizer step in
/// training (less under gradient accumulation) and once in total in
/// evaluation.
struct PrecisionSummary {
  unsigned ops = 0;
  unsigned halfOps = 0;
  unsigned casts = 0;
  uint64_t castBytes = 0;
  unsigned cacheableCasts = 0;
  uint64_t cacheableCastBytes = 0;
};
PrecisionSummary summarizePrecision(const Graph &g);

/// One line; adds ", of which C casts of state (Y bytes) served from the cast
/// cache" when there are any.
void printPrecisionSummary(const PrecisionSummary &s, llvm::raw_ostream &os);

/// One line per node, in execution order, columns aligned:
///   %fc1   linear   bf16   category: half
void printExplain(const Graph &g, llvm::raw_ostream &os);

} // namespace ampc

#endif
