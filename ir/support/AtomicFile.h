//===- AtomicFile.h - All-or-nothing file writes ---------------------------===//
#ifndef AMPC_IR_SUPPORT_ATOMICFILE_H
#define AMPC_IR_SUPPORT_ATOMICFILE_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace ampc {

/// Replaces `path` with `contents` so that a reader (or a crash) sees either
/// the old file or the complete new one, never a part: the data goes to a
/// temporary file in the same directory, is flushed to disk (fsync), and is
/// renamed over `path`. On failure returns false with a message in `err`
/// ("cannot write 'out.ir': No such file or directory"), leaves `path`
/// untouched and removes the temporary file.
bool writeFileAtomically(llvm::StringRef path, llvm::StringRef contents, std::string &err);

} // namespace ampc

#endif
