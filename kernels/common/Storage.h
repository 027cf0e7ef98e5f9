//===- Storage.h - Load and store elements of any dtype --------------------===//
//
// Kernels compute in ComputeT<D>: double for f64, float for f32/f16/bf16 (the
// f32 accumulation tensor cores and oneDNN use), the integer itself for ints.
// Loading a half widens exactly; storing rounds to nearest even. Shared by
// every backend (AMPC_HD), so all of them round the same way.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_STORAGE_H
#define AMPC_KERNELS_COMMON_STORAGE_H

#include "ir/DType.h"
#include "ir/HalfConversion.h"

#include <cstdint>

namespace ampc::kernels {

template <DType D> struct DTypeTraits;
template <> struct DTypeTraits<DType::F32> {
  using Storage = float;
  using Compute = float;
};
template <> struct DTypeTraits<DType::F64> {
  using Storage = double;
  using Compute = double;
};
template <> struct DTypeTraits<DType::F16> {
  using Storage = uint16_t;
  using Compute = float;
};
template <> struct DTypeTraits<DType::BF16> {
  using Storage = uint16_t;
  using Compute = float;
};
template <> struct DTypeTraits<DType::I64> {
  using Storage = int64_t;
  using Compute = int64_t;
};
template <> struct DTypeTraits<DType::I32> {
  using Storage = int32_t;
  using Compute = int32_t;
};
template <> struct DTypeTraits<DType::Bool> {
  using Storage = uint8_t;
  using Compute = uint8_t;
};

template <DType D> using StorageT = typename DTypeTraits<D>::Storage;
template <DType D> using ComputeT = typename DTypeTraits<D>::Compute;

/// Element i of a buffer of dtype D, widened to its compute type.
template <DType D> AMPC_HD inline ComputeT<D> load(const void *p, int64_t i) {
  const StorageT<D> *s = static_cast<const StorageT<D> *>(p);
  if constexpr (D == DType::F16)
    return halfBitsToFloat(s[i]);
  else if constexpr (D == DType::BF16)
    return bf16BitsToFloat(s[i]);
  else
    return s[i];
}

/// Stores v as element i, rounding to nearest even for half types.
template <DType D> AMPC_HD inline void store(void *p, int64_t i, ComputeT<D> v) {
  StorageT<D> *s = static_cast<StorageT<D> *>(p);
  if constexpr (D == DType::F16)
    s[i] = floatToHalfBits(v);
  else if constexpr (D == DType::BF16)
    s[i] = floatToBf16Bits(v);
  else
    s[i] = v;
}

/// Any dtype's element as double (indices, labels, reference comparisons).
AMPC_HD inline double loadAsDouble(DType t, const void *p, int64_t i) {
  switch (t) {
  case DType::F32:
    return load<DType::F32>(p, i);
  case DType::F64:
    return load<DType::F64>(p, i);
  case DType::F16:
    return load<DType::F16>(p, i);
  case DType::BF16:
    return load<DType::BF16>(p, i);
  case DType::I64:
    return static_cast<double>(load<DType::I64>(p, i));
  case DType::I32:
    return load<DType::I32>(p, i);
  case DType::Bool:
    return load<DType::Bool>(p, i);
  }
  return 0;
}

/// Stores a double as dtype t (f64 -> f32 -> half for half types: the value
/// is first rounded to f32, as every backend's f32 compute would hold it).
AMPC_HD inline void storeFromDouble(DType t, void *p, int64_t i, double v) {
  switch (t) {
  case DType::F32:
    return store<DType::F32>(p, i, static_cast<float>(v));
  case DType::F64:
    return store<DType::F64>(p, i, v);
  case DType::F16:
    return store<DType::F16>(p, i, static_cast<float>(v));
  case DType::BF16:
    return store<DType::BF16>(p, i, static_cast<float>(v));
  case DType::I64:
    return store<DType::I64>(p, i, static_cast<int64_t>(v));
  case DType::I32:
    return store<DType::I32>(p, i, static_cast<int32_t>(v));
  case DType::Bool:
    return store<DType::Bool>(p, i, static_cast<uint8_t>(v != 0));
  }
}

/// Integer element (indices, labels) of an i64 or i32 buffer.
AMPC_HD inline int64_t loadIndex(DType t, const void *p, int64_t i) {
  return t == DType::I64 ? static_cast<const int64_t *>(p)[i] : static_cast<const int32_t *>(p)[i];
}

/// The table row an embedding index names: [0, numRows) as is, and
/// [-numRows, 0) counted from the end as ONNX Gather does; -1 for anything
/// else (the kernels then give a NaN row rather than read out of bounds).
AMPC_HD inline int64_t tableRow(int64_t index, int64_t numRows) {
  int64_t row = index < 0 ? index + numRows : index;
  return row >= 0 && row < numRows ? row : -1;
}

template <DType D> struct DTypeTag { static constexpr DType value = D; };

/// Calls f(DTypeTag<D>{}) for the floating dtype t. Returns false (and calls
/// nothing) for non-floating dtypes.
template <class F> bool dispatchFloat(DType t, F &&f) {
  switch (t) {
  case DType::F32:
    f(DTypeTag<DType::F32>{});
    return true;
  case DType::F64:
    f(DTypeTag<DType::F64>{});
    return true;
  case DType::F16:
    f(DTypeTag<DType::F16>{});
    return true;
  case DType::BF16:
    f(DTypeTag<DType::BF16>{});
    return true;
  case DType::I64:
  case DType::I32:
  case DType::Bool:
    return false;
  }
  return false;
}

} // namespace ampc::kernels

#endif
