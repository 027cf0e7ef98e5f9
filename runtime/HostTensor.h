//===- HostTensor.h - A tensor in host memory ------------------------------===//
//
// A TensorType plus owned, zero-initialised, 64-byte-aligned storage (the
// alignment vector units and pinned-copy paths like). Elements are in C order
// in the storage format of the dtype (f16 and bf16 as their 16-bit patterns),
// the same layout kernels::TensorArg describes. Copying copies the elements.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_HOSTTENSOR_H
#define AMPC_RUNTIME_HOSTTENSOR_H

#include "ir/TensorType.h"
#include "kernels/KernelArgs.h"

#include "llvm/ADT/ArrayRef.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace ampc {

class HostTensor {
public:
  static constexpr size_t kAlignment = 64;

  HostTensor() = default;
  /// Allocates storage for `type` and fills it with zero bytes.
  explicit HostTensor(TensorType type);
  HostTensor(const HostTensor &other);
  HostTensor &operator=(const HostTensor &other);
  HostTensor(HostTensor &&other) noexcept { *this = std::move(other); }
  HostTensor &operator=(HostTensor &&other) noexcept;

  const TensorType &type() const { return type_; }
  DType dtype() const { return type_.dtype(); }
  llvm::ArrayRef<int64_t> dims() const { return type_.dims(); }
  int64_t numElements() const { return numElements_; }
  int64_t sizeInBytes() const { return numElements_ * dtypeSize(type_.dtype()); }
  /// Elements in one slice along dim 0 (one sample of a batch); 1 for rank 0.
  int64_t rowElements() const;

  void *data() { return storage_.get(); }
  const void *data() const { return storage_.get(); }
  /// Start of row `row` along dim 0.
  void *rowData(int64_t row) {
    return static_cast<char *>(data()) + row * rowElements() * dtypeSize(dtype());
  }

  /// Typed view; T must be the storage type of the dtype (float for f32,
  /// uint16_t for f16/bf16, uint8_t for bool, ...).
  template <class T> llvm::MutableArrayRef<T> values() {
    assert(sizeof(T) == dtypeSize(dtype()) && "element type does not match the dtype");
    return {static_cast<T *>(data()), static_cast<size_t>(numElements_)};
  }
  template <class T> llvm::ArrayRef<T> values() const {
    assert(sizeof(T) == dtypeSize(dtype()) && "element type does not match the dtype");
    return {static_cast<const T *>(data()), static_cast<size_t>(numElements_)};
  }

  /// Element i converted to double (half types widened exactly).
  double getAsDouble(int64_t i) const;
  /// Stores v as element i in the dtype (rounding to nearest even for halves).
  void setFromDouble(int64_t i, double v);
  /// Zero bytes from element `begin` to the end.
  void zeroFrom(int64_t begin);

  /// A kernel argument viewing this tensor; valid while the tensor lives.
  kernels::TensorArg arg() { return {data(), &type_}; }

private:
  struct AlignedFree {
    void operator()(char *p) const;
  };
  void allocate();

  TensorType type_;
  int64_t numElements_ = 0;
  std::unique_ptr<char, AlignedFree> storage_;
};

} // namespace ampc

#endif
