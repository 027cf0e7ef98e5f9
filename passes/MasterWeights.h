//===- MasterWeights.h - f32 master copies of half parameters (O2) --------===//
#ifndef AMPC_PASSES_MASTERWEIGHTS_H
#define AMPC_PASSES_MASTERWEIGHTS_H

#include "passes/Pass.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace ampc {

/// Apex O2's master weights, after the optimizer pass, when the precision
/// policy asks for them (amp.master_weights; passes/PrecisionPolicy.h). For
/// every parameter %p stored in a half type that an update op updates:
///
///   master %p.master : f32[...] init <%p's init>
///   %p.master.next, <state>.next, %p.next =
///       <update>(%p.master, %p.grad, <state...>, ..., lr, grad_scale, skip, %p)
///   update %p.master = %p.master.next, update %p = %p.next
///
/// The update computes in f32 on the master (the half gradient widened) and
/// writes the new master and, in the same pass over the elements, the half
/// model weight rounded from it (the update op's model_param operand,
/// ir/ops/Optimizer.cpp). Its optimizer state is f32 already (the optimizer
/// pass keeps state in f32 for half parameters). The master starts from the
/// parameter's InitSpec and, in the runtime, from the parameter's random
/// stream, so %p == round(%p.master) from step 0 on. Updates without
/// grad_scale or skip get the shared constants %optimizer.unit_grad_scale
/// (1) and %optimizer.no_skip (0); the loss-scale pass replaces the latter.
/// f32 parameters (batchnorm's under keep_batchnorm_fp32) are left alone.
class MasterWeightsPass : public Pass {
public:
  llvm::StringRef name() const override { return "master-weights"; }
  llvm::StringRef description() const override {
    return "train half parameters through f32 master copies (amp.master_weights)";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

/// The names of the shared scalar constants that fill an update op's optional
/// grad_scale and skip operands when nothing else does.
inline constexpr const char *kUnitGradScaleName = "optimizer.unit_grad_scale";
inline constexpr const char *kNoSkipName = "optimizer.no_skip";

/// Rebuilds `old` with `operands`: the same op, attributes, role and
/// location, moved before `before` (left where it is when null), checked as
/// buildNode checks a new node. The node is changed in place and returned:
/// its results keep their values -- names, uses, state updates and graph
/// outputs -- with re-inferred types, and the results the new operands add
/// past old's are named `extraNames` (empty: fresh). Costs O(operands +
/// results), whatever the size of the graph. Returns nullptr, leaving the
/// graph unchanged, after reporting a node that does not build. Shared by
/// the mixed-precision passes that extend optimizer nodes.
Node *rebuildNode(Graph &g, Node *old, llvm::ArrayRef<Value *> operands,
                  llvm::ArrayRef<std::string> extraNames, DiagnosticEngine &diag,
                  Node *before = nullptr);

/// The shared f32[] constant `name` (fill `value`, role optimizer), created
/// before the first optimizer node that is not such a constant when the
/// graph does not have it yet.
Value *optimizerConstant(Graph &g, llvm::StringRef name, double value, DiagnosticEngine &diag);

} // namespace ampc

#endif
