//===- NpyFile.h - Read and write NumPy .npy files --------------------------===//
//
// The .npy format (versions 1.0, 2.0 and 3.0): a magic string, a version, a
// header length, a Python dict literal {'descr', 'fortran_order', 'shape'}
// padded to a multiple of 64 bytes, then the raw data in C order. Used for
// parameter files under a model's init.from folder, the npy data source and
// for tests. Every failure returns false with a message that names the file.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_SUPPORT_NPYFILE_H
#define AMPC_IR_SUPPORT_NPYFILE_H

#include "ir/DType.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampc {

/// One array read from a .npy file.
struct NpyArray {
  /// Element type. For '|u1' files (DType has no u8) this is Bool, used only as
  /// a 1-byte placeholder, and isUint8 is set: check isUint8 first.
  DType dtype = DType::F32;
  bool isUint8 = false;
  llvm::SmallVector<int64_t, 4> shape;
  /// Raw element bytes, little-endian, C order (empty after readNpyHeader).
  std::vector<char> data;

  /// Product of the shape (1 for a scalar).
  int64_t numElements() const;
  /// Size of one element in bytes.
  unsigned elementSize() const;
};

/// Reads the header only (data left empty) and checks that the file holds
/// exactly the bytes the header announces, so a truncated file is caught
/// without reading a large array.
bool readNpyHeader(llvm::StringRef path, NpyArray &out, std::string &err);

/// Reads header and data.
bool readNpy(llvm::StringRef path, NpyArray &out, std::string &err);

/// Writes a version 1.0 file (2.0 if the header needs it). `data` holds
/// product(shape) elements of `dtype`, little-endian, C order. bf16 has no
/// NumPy dtype and is rejected.
bool writeNpy(llvm::StringRef path, DType dtype, llvm::ArrayRef<int64_t> shape, const void *data,
              std::string &err);

/// The bytes writeNpy would write, in `out` (for a caller that writes the
/// file itself, e.g. atomically). False + `err` as writeNpy; `name` stands
/// for the file in messages.
bool encodeNpy(llvm::StringRef name, DType dtype, llvm::ArrayRef<int64_t> shape, const void *data,
               std::string &out, std::string &err);

/// Like writeNpy, for uint8 data ('|u1').
bool writeNpyUint8(llvm::StringRef path, llvm::ArrayRef<int64_t> shape, const uint8_t *data,
                   std::string &err);

} // namespace ampc

#endif
