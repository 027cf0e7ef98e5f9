//===- AtomicFile.h - All-or-nothing file writes ---------------------------===//
#ifndef AMPC_IR_SUPPORT_ATOMICFILE_H
#define AMPC_IR_SUPPORT_ATOMICFILE_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace ampc {

/// What an output path may already be, besides a regular file or nothing.
enum class SpecialOutputs {
  /// A symlink, device, FIFO or socket at the path is refused: replacing it
  /// would, say, turn the system's /dev/null into a regular file.
  Refuse,
  /// A symlink is followed and its target written; a device or FIFO is
  /// written into in place (not atomically: it holds no old contents to
  /// keep). `ampc --write-through`.
  WriteThrough,
};

/// Checks, before any work is done, that `path` can later be written by
/// writeFileAtomically: a non-empty name, not a directory, not a special
/// file or symlink (unless `special` allows it), in an existing directory
/// where a file can be created (tried: a probe file is created and removed).
/// Also removes temporary files that an earlier, killed writer of `path`
/// left behind. On failure returns false with a message in `err`
/// ("cannot write 'out.ir': No such file or directory").
bool checkOutputPath(llvm::StringRef path, std::string &err,
                     SpecialOutputs special = SpecialOutputs::Refuse);

/// Replaces `path` with `contents` so that a reader (or a crash) sees either
/// the old file or the complete new one, never a part: the data goes to a
/// temporary file in the same directory, is flushed to disk (fsync), and is
/// renamed over `path`. The temporary file is removed on every way out,
/// SIGINT and SIGTERM included; one left by a process killed outright is
/// removed by the next write of the same path. The same checks as
/// checkOutputPath come first. On failure returns false with a message in
/// `err`, leaves `path` untouched and removes the temporary file.
bool writeFileAtomically(llvm::StringRef path, llvm::StringRef contents, std::string &err,
                         SpecialOutputs special = SpecialOutputs::Refuse);

} // namespace ampc

#endif
