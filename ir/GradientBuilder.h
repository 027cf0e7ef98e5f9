//===- GradientBuilder.h - What a gradient rule builds with ----------------===//
//
// Gradient rules (OpInfo::gradient, in ir/ops/*.cpp) create backward nodes
// through this builder: each node is checked by buildNode, gets role
// backward and the forward node's location, and is inserted at the builder's
// insertion point. A rule that fails to build leaves the builder failed and
// the autodiff pass reports it.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_GRADIENTBUILDER_H
#define AMPC_IR_GRADIENTBUILDER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/SmallBitVector.h"

namespace ampc {

class GradientBuilder {
public:
  GradientBuilder(Graph &g, DiagnosticEngine &diag) : g_(g), diag_(diag) {}

  /// Set by the autodiff pass before calling a rule.
  void beginNode(const Node &forward, llvm::SmallBitVector needed) {
    forward_ = &forward;
    needed_ = std::move(needed);
  }
  /// Whether the rule must produce operand i's gradient.
  bool needsGradient(unsigned i) const { return i < needed_.size() && needed_[i]; }

  /// One backward node of op `kind`; returns its results (empty on failure).
  llvm::SmallVector<Value *, 3> build(OpKind kind, llvm::ArrayRef<Value *> operands,
                                      AttrMap attrs = {});
  /// The same for any registered op, custom ops included (a custom op's
  /// gradient rule usually builds its own custom backward op).
  llvm::SmallVector<Value *, 3> build(const OpInfo &op, llvm::ArrayRef<Value *> operands,
                                      AttrMap attrs = {});
  /// A single-result backward node; nullptr on failure.
  Value *build1(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs = {});

  // Common pieces of many rules.
  /// Sums a broadcast gradient back to `shape` (numpy broadcasting rules).
  Value *sumToShape(Value *grad, llvm::ArrayRef<int64_t> shape);
  Value *reshape(Value *v, llvm::ArrayRef<int64_t> shape);
  Value *castTo(Value *v, DType t);
  Value *scale(Value *v, double factor);
  Value *add(Value *a, Value *b);

  bool failed() const { return failed_; }
  /// Marks the rule failed after it reported why through diag() (rules that
  /// fail for reasons other than a node that cannot be built: a host
  /// program's custom op).
  void fail() { failed_ = true; }
  Graph &graph() { return g_; }
  DiagnosticEngine &diag() { return diag_; }

private:
  Graph &g_;
  DiagnosticEngine &diag_;
  const Node *forward_ = nullptr;
  llvm::SmallBitVector needed_;
  bool failed_ = false;
};

} // namespace ampc

#endif
