//===- PrecisionPolicy.h - Mixed-precision properties, O0-O3 presets -------===//
//
// A precision policy is a set of properties, as Apex's amp.initialize has
// them; the optimization levels O0-O3 are presets of those properties, never
// something a pass looks at. The resolved policy lives in Graph::meta under
// "amp.*" keys (docs/opt-levels.md): the model file's `amp:` section and the
// command line write the keys, and every pass resolves the same policy from
// them. An absent key means the value of the preset named by amp.opt_level
// (no opt level: O0).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PASSES_PRECISIONPOLICY_H
#define AMPC_PASSES_PRECISIONPOLICY_H

#include "ir/Attribute.h"
#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ampc {

enum class OptLevel : uint8_t { O0, O1, O2, O3 };
llvm::StringRef optLevelName(OptLevel l);
/// "O0".."O3" (also "o1"); nullopt otherwise.
std::optional<OptLevel> parseOptLevel(llvm::StringRef s);

/// Where parameters are stored: as imported (f32), or in the half type.
enum class CastModelType : uint8_t { None, Half };

/// Dynamic loss scaling settings (PyTorch GradScaler / Apex defaults).
struct DynamicLossScale {
  double init = 65536.0;      ///< 2^16
  double growthFactor = 2.0;  ///< after growthInterval finite steps
  double backoffFactor = 0.5; ///< on an inf/NaN gradient (the step is skipped)
  int64_t growthInterval = 2000;
  double minScale = 1.0;
  double maxScale = 16777216.0; ///< 2^24
};

struct PrecisionPolicy {
  OptLevel optLevel = OptLevel::O0;
  /// The type "half" means: bf16 (the CPU default) or f16.
  DType halfType = DType::BF16;
  CastModelType castModelType = CastModelType::None;
  /// Ops run in half or fp32 by their category (O1's patched functions).
  bool perOpCasting = false;
  /// With castModelType Half: batchnorm's affine parameters stay fp32.
  bool keepBatchnormFp32 = false;
  /// fp32 master copies of half parameters are the optimizer's state.
  bool masterWeights = false;
  /// Dynamic loss scaling; otherwise a static scale of staticLossScale.
  bool dynamicLossScale = false;
  double staticLossScale = 1.0;
  DynamicLossScale dynamic;
  /// Per-op-kind category overrides (op names, in the order given).
  std::vector<std::string> fp32Ops, halfOps;
  /// Banned ops run in fp32 instead of being an error.
  bool allowBanned = false;
  /// Apex's num_losses: with N > 1 each of the N terms of a list of losses
  /// gets its own backward walk and its own loss scaler.
  int64_t numLosses = 1;

  /// The "amp.*" meta keys that were present (overriding the preset).
  std::set<std::string> overridden;

  /// Apex's values for a level (DESIGN.md, "Optimization levels").
  static PrecisionPolicy preset(OptLevel level);

  /// Whether anything runs in half: per-op casting or half parameters.
  bool mixed() const { return perOpCasting || castModelType == CastModelType::Half; }
  /// Whether the loss is scaled at all (dynamic, or a static scale other than 1).
  bool scalesLoss() const { return dynamicLossScale || staticLossScale != 1.0; }
  /// The category an op-kind override gives `opName`, if any.
  std::optional<PrecisionCategory> opOverride(llvm::StringRef opName) const;
};

/// Every property (meta key without "amp."), in printing order.
llvm::ArrayRef<llvm::StringRef> policyPropertyNames();

/// Reads the policy from the graph's meta: the preset of amp.opt_level, then
/// each present amp.* key overrides. A key with a wrong type or value is an
/// error naming the key; so are contradictions that cannot mean anything
/// (the same op in fp32_ops and half_ops, an unknown op name, a dynamic
/// initial scale outside [min, max]). Properties that have no effect in the
/// resolved combination are normalised (master_weights without half
/// parameters is off); warnPolicy explains them. Keys that are not policy
/// properties are ignored (other passes keep their own amp.* state there).
std::optional<PrecisionPolicy> resolvePolicy(const AttrMap &meta, DiagnosticEngine &diag);
/// The same from a graph's meta; errors point at the keys where the graph
/// was written (Graph::metaLocation).
std::optional<PrecisionPolicy> resolvePolicy(const Graph &g, DiagnosticEngine &diag);

/// Warnings for explicitly set properties that have no effect in the
/// resolved combination (Apex refuses most of these; we explain and go on).
/// Call once, where the policy is first shown (the CLI), not in every pass.
void warnPolicy(const PrecisionPolicy &policy, DiagnosticEngine &diag);

/// One property a line, Apex style: "opt_level: O1", "cast_model_type: none",
/// ...; properties set explicitly are marked "(override)".
void printPolicy(const PrecisionPolicy &policy, llvm::raw_ostream &os);

/// Sets a property from a command-line string, checking it: `property` is a
/// name from policyPropertyNames() (an "amp." prefix is accepted), `value`
/// its spelling: opt_level O0..O3; half_type bf16|f16; cast_model_type
/// none|half; booleans true|false; loss_scale "dynamic" or a positive number
/// (a static scale); loss_scale.* numbers; fp32_ops/half_ops a comma-separated
/// list of op names. Returns false after reporting an error.
bool setPolicyOverride(AttrMap &meta, llvm::StringRef property, llvm::StringRef value,
                       DiagnosticEngine &diag);

/// Splits a comma-separated op list ("softmax, gelu") into trimmed names.
std::vector<std::string> splitOpList(llvm::StringRef list);

} // namespace ampc

#endif
