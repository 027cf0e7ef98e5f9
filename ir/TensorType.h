//===- TensorType.h - dtype + static shape ---------------------------------===//
#ifndef AMPC_IR_TENSORTYPE_H
#define AMPC_IR_TENSORTYPE_H

#include "ir/DType.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace ampc {

/// A tensor's element type and static shape. Rank 0 is a scalar.
class TensorType {
public:
  TensorType() = default;
  TensorType(DType dtype, llvm::ArrayRef<int64_t> dims) : dtype_(dtype), dims_(dims.begin(), dims.end()) {}

  DType dtype() const { return dtype_; }
  llvm::ArrayRef<int64_t> dims() const { return dims_; }
  unsigned rank() const { return dims_.size(); }
  int64_t dim(unsigned i) const { return dims_[i]; }

  /// Product of the dims; the caller must know it does not overflow
  /// (the verifier and the frontends check with checkedNumElements).
  int64_t numElements() const;
  /// Product of the dims, or nullopt if it overflows int64 or a dim is negative.
  std::optional<int64_t> checkedNumElements() const;
  /// Storage bytes; same caveat as numElements.
  int64_t sizeInBytes() const { return numElements() * dtypeSize(dtype_); }

  TensorType withDType(DType t) const { return TensorType(t, dims_); }

  /// "f32[2,3]", "i64[]" for a scalar. The textual IR's spelling.
  std::string str() const;

  friend bool operator==(const TensorType &a, const TensorType &b) {
    return a.dtype_ == b.dtype_ && a.dims_ == b.dims_;
  }
  friend bool operator!=(const TensorType &a, const TensorType &b) { return !(a == b); }

private:
  DType dtype_ = DType::F32;
  llvm::SmallVector<int64_t, 4> dims_;
};

} // namespace ampc

#endif
