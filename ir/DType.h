//===- DType.h - Element types ---------------------------------------------===//
#ifndef AMPC_IR_DTYPE_H
#define AMPC_IR_DTYPE_H

#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace ampc {

/// Element type of a tensor. f64 exists for tests and reference checks.
enum class DType : uint8_t { F32, F16, BF16, F64, I64, I32, Bool };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                       DType::I64, DType::I32, DType::Bool};

/// Short name used by the textual IR and model files: "f32", "bf16", ...
llvm::StringRef dtypeName(DType t);
std::optional<DType> parseDType(llvm::StringRef name);
/// Storage size of one element in bytes.
unsigned dtypeSize(DType t);
bool isFloating(DType t);
/// f16 or bf16: the "half" types mixed precision casts to.
bool isHalfType(DType t);
bool isIntegral(DType t);

} // namespace ampc

/// DType as a DenseMap key (LLVM 14 has no DenseMapInfo for enums): side
/// tables keyed by (value, dtype) such as the casts a pass has made.
template <> struct llvm::DenseMapInfo<ampc::DType> {
  static ampc::DType getEmptyKey() { return static_cast<ampc::DType>(0xFF); }
  static ampc::DType getTombstoneKey() { return static_cast<ampc::DType>(0xFE); }
  static unsigned getHashValue(ampc::DType t) { return static_cast<unsigned>(t) * 37U; }
  static bool isEqual(ampc::DType a, ampc::DType b) { return a == b; }
};

#endif
