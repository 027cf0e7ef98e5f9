//===- Builder.h - Checked node construction -------------------------------===//
//
// The one place that checks a node against its op's row: operand count,
// attribute names and types (defaults filled in), and shape/dtype inference.
// Frontends, the textual IR parser and passes build nodes through here, and
// the verifier re-runs the same checks.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_BUILDER_H
#define AMPC_IR_BUILDER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include <string>

namespace ampc {

/// Attributes whose name starts with "amp." are annotations that passes record
/// on nodes (the precision pass's decision and its reason). They are not part
/// of any op's row: the attribute checks skip them, kernels never read them,
/// and they round-trip through the textual IR like any attribute.
inline bool isAnnotationAttr(llvm::StringRef name) { return name.startswith("amp."); }

/// Checks attribute names and types against the op, widens ints given for
/// float attributes (and [] for float lists), and fills in defaults.
/// On failure returns false with a message in `err`.
bool normalizeAttrs(const OpInfo &op, AttrMap &attrs, std::string &err);

/// Strict form for the verifier: every declared attribute present with its
/// exact type, no unknown ones.
bool checkAttrs(const OpInfo &op, const AttrMap &attrs, std::string &err);

/// Operand count against the op's signature.
bool checkOperandCount(const OpInfo &op, unsigned n, std::string &err);

/// Runs the op's inference on (already normalised) attributes.
bool inferResultTypes(const OpInfo &op, llvm::ArrayRef<TensorType> operandTypes,
                      const AttrMap &attrs, llvm::SmallVectorImpl<TensorType> &results,
                      std::string &err);

/// Builds a node after checking it; on failure reports "<op>: <problem>" at
/// `loc` and returns nullptr, leaving the graph unchanged. Result names may be
/// empty (fresh names) and must otherwise be free in the graph.
Node *buildNode(Graph &g, const OpInfo &op, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                const Location &loc, DiagnosticEngine &diag, llvm::ArrayRef<std::string> names = {},
                Node *before = nullptr);

} // namespace ampc

#endif
