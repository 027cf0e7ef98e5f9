//===- AssignPrecision.h - Decide each forward op's precision, insert casts ===//
#ifndef AMPC_PASSES_ASSIGNPRECISION_H
#define AMPC_PASSES_ASSIGNPRECISION_H

#include "passes/Pass.h"

#include <optional>
#include <string>

namespace ampc {

/// The rule that chose a node's precision (what `ampc --explain` prints).
enum class PrecisionReason : uint8_t {
  Category,     ///< the op's registry category (half, fp32; banned with allow_banned)
  OpOverride,   ///< amp.fp32_ops / amp.half_ops name the op
  NodeOverride, ///< the node's own precision(...) (a layer's `precision:` key)
  Neighbour,    ///< a follow op painted by its neighbours (fewest casts)
  Promote,      ///< a promote op in the widest of its inputs' precisions
  Policy,       ///< the policy: whole model in half (cast_model_type), losses in fp32
  Integer,      ///< no floating-point data: nothing to decide, never cast
  Cast,         ///< a cast written in the model: its `to` decides
  Backend,      ///< the target backend cannot run the op in the half type
};
llvm::StringRef precisionReasonKeyword(PrecisionReason r);
std::optional<PrecisionReason> parsePrecisionReason(llvm::StringRef keyword);

/// Node annotations (attributes exempt from op rows, ir/Builder.h) that
/// record the decision on each forward node, so it round-trips through the
/// textual IR and shows in --emit ir:
///   amp.precision = bf16                    the dtype the node computes in
///   amp.reason = "neighbour: as its input"  keyword[: detail]
inline constexpr llvm::StringLiteral kPrecisionAttr = "amp.precision";
inline constexpr llvm::StringLiteral kPrecisionReasonAttr = "amp.reason";

struct PrecisionDecision {
  DType dtype;
  PrecisionReason reason;
  std::string detail; ///< may be empty
  /// "keyword" or "keyword: detail".
  std::string reasonString() const;
};

/// The decision recorded on `n`, or nullopt when it has none (nodes the pass
/// did not see: inserted casts, backward and optimizer nodes, O0 graphs) or
/// the annotation is malformed.
std::optional<PrecisionDecision> precisionDecision(const Node &n);

/// Precision assignment on the forward graph (before autodiff), driven by the
/// policy in the graph's meta (passes/PrecisionPolicy.h):
///  - nothing in half (O0): unchanged;
///  - cast_model_type half (O2/O3): parameters are stored in the half type
///    (batchnorm's affine parameters stay fp32 under keep_batchnorm_fp32;
///    running statistics always stay fp32); every op computes in half unless
///    overridden; losses in fp32;
///  - per_op_casting (O1): ops by category; follow and promote ops by a
///    minimum cut over the graph (fewest casts, then fewest elements cast,
///    then the most ops in half; docs/opt-levels.md).
/// Overrides: a node's precision(...) beats amp.fp32_ops/half_ops, which
/// beat the category; a banned op is an error unless overridden or
/// amp.allow_banned (then fp32). Casts are inserted where a producer's dtype
/// differs from what a consumer runs in: one per (value, dtype), placed
/// before its first user, with the cast value's location; casts of state are
/// cacheable. Graph outputs and state updates keep their dtypes. Every
/// forward node records its decision (kPrecisionAttr, kPrecisionReasonAttr).
class AssignPrecisionPass : public Pass {
public:
  llvm::StringRef name() const override { return "assign-precision"; }
  llvm::StringRef description() const override {
    return "decide each forward op's precision from the amp policy and insert the casts";
  }
  PassResult run(Graph &g, PassContext &ctx) override;
};

} // namespace ampc

#endif
