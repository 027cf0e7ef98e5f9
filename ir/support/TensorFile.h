//===- TensorFile.h - Named tensors in container files ----------*- C++ -*-===//
//
// A state tensor initialised with `file("m.onnx", "conv1.weight")` takes one
// named tensor of a container file. ir/ knows no container format: a
// frontend that imports one (frontends/onnx) registers a reader for its file
// extension, and the runtime asks here. Plain .npy files (no tensor name)
// are read by readNpy directly.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_SUPPORT_TENSORFILE_H
#define AMPC_IR_SUPPORT_TENSORFILE_H

#include "ir/support/NpyFile.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace ampc {

/// Reads tensor `name` of container file `path` into `out` (shape, dtype,
/// raw little-endian data); false with a message in `err`.
using TensorFileReader = bool (*)(llvm::StringRef path, llvm::StringRef name, NpyArray &out,
                                  std::string &err);

/// Registers the reader of files ending in `.extension` (e.g. "onnx");
/// a second registration for the same extension replaces the first.
void registerTensorFileReader(llvm::StringRef extension, TensorFileReader reader);

/// Reads tensor `name` of `path` with the reader registered for its
/// extension; an unregistered extension is an error naming it.
bool readNamedTensor(llvm::StringRef path, llvm::StringRef name, NpyArray &out, std::string &err);

} // namespace ampc

#endif
