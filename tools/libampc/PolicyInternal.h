//===- PolicyInternal.h - Policies to and from a graph's meta -------------===//
#ifndef AMPC_TOOLS_LIBAMPC_POLICYINTERNAL_H
#define AMPC_TOOLS_LIBAMPC_POLICYINTERNAL_H

#include "ampc/Policy.h"

#include "ir/Attribute.h"
#include "ir/Diagnostics.h"

#include <optional>

namespace ampc::api {

/// Replaces every policy key of `meta` with `level` and `overrides`.
bool writePolicyMeta(const std::string &level, const Policy::Overrides &overrides, AttrMap &meta,
                     DiagnosticEngine &diag);
/// The policy the keys of `meta` spell.
Result<Policy> policyFromMeta(const AttrMap &meta);

} // namespace ampc::api

#endif
