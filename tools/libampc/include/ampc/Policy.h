//===- ampc/Policy.h - Mixed-precision properties -------------*- C++ -*-===//
//
// A policy is an opt level (O0-O3, Apex's presets) plus property overrides,
// spelled as on the command line (docs/opt-levels.md): half_type bf16|f16,
// cast_model_type none|half, per_op_casting, keep_batchnorm_fp32,
// master_weights (true|false), loss_scale dynamic|VALUE, loss_scale.* numbers,
// fp32_ops / half_ops (comma-separated op names), allow_banned.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_POLICY_H
#define AMPC_PUBLIC_POLICY_H

#include "ampc/Export.h"
#include "ampc/Status.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ampc::api {

class AMPC_API Policy {
public:
  using Overrides = std::vector<std::pair<std::string, std::string>>;

  /// Checks the level and every override (unknown property, bad value,
  /// unknown op name, contradictions); an error Status names the property.
  static Result<Policy> fromLevel(std::string_view level, const Overrides &overrides = {});

  /// Adds (or replaces) one override, checked as fromLevel checks it.
  Status set(std::string_view property, std::string_view value);

  const std::string &level() const { return level_; }
  const Overrides &overrides() const { return overrides_; }
  /// A resolved property as printed ("cast_model_type" -> "half"); "" for an
  /// unknown property.
  std::string get(std::string_view property) const;
  /// One property a line, Apex style, overrides marked "(override)".
  std::string str() const;
  /// One line for a console: "O2: bf16 model, fp32 batchnorm, fp32 master
  /// weights, dynamic loss scale 65536", overridden properties named.
  std::string summary() const;
  /// Warnings for overrides that have no effect in the resolved combination.
  std::vector<Diagnostic> warnings() const;
  /// A note worth printing when the policy runs on `device` ("cpu", ...),
  /// e.g. that f16 is emulated (exactly, but slowly) on the CPU; "" when
  /// there is nothing to say. One line, "note: ...", no newline.
  std::string deviceNote(std::string_view device) const;

private:
  Policy() = default;
  std::string level_;
  Overrides overrides_;
};

} // namespace ampc::api

#endif
