//===- Parser.h - Textual IR input -----------------------------------------===//
#ifndef AMPC_IR_PARSER_H
#define AMPC_IR_PARSER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"

#include <memory>

namespace ampc {

/// Parses textual IR. Syntax errors are reported as "<bufferName>:line:col:
/// error: ..." and give nullptr. The parser checks syntax, names, operand
/// counts and attributes, but records each node's result types as written,
/// so that the verifier (not the parser) reports type mismatches and cycles.
std::unique_ptr<Graph> parseGraph(llvm::StringRef text, llvm::StringRef bufferName,
                                  DiagnosticEngine &diag,
                                  const OpRegistry &registry = OpRegistry::builtin());

} // namespace ampc

#endif
