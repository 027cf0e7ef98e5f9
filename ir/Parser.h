//===- Parser.h - Textual IR input -----------------------------------------===//
#ifndef AMPC_IR_PARSER_H
#define AMPC_IR_PARSER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"

#include <memory>
#include <optional>
#include <string>

namespace ampc {

/// Parses textual IR. Syntax errors are reported as "<bufferName>:line:col:
/// error: ..." and give nullptr. The parser checks syntax, names, operand
/// counts and attributes, but records each node's result types as written,
/// so that the verifier (not the parser) reports type mismatches and cycles.
/// With `fileLocations`, every declaration and node is located in this text
/// (its loc(...) is checked but dropped): for reporting the verifier's
/// findings where the reader of the .ir file can fix them.
std::unique_ptr<Graph> parseGraph(llvm::StringRef text, llvm::StringRef bufferName,
                                  DiagnosticEngine &diag,
                                  const OpRegistry &registry = OpRegistry::builtin(),
                                  bool fileLocations = false);

/// Reads one initialiser as InitSpec::str() writes it (`zeros`,
/// `uniform(-0.1, 0.1)`, `file("w.npy")`; also `none`): the state's `init:`
/// in a graph written by `ampc --emit yaml`. On an error, nullopt and the
/// message (without a position) in `error`.
std::optional<InitSpec> parseInitSpec(llvm::StringRef text, std::string &error);

} // namespace ampc

#endif
