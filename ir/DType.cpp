//===- DType.cpp ------------------------------------------------------------===//
#include "ir/DType.h"

namespace ampc {

llvm::StringRef dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F64:
    return "f64";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

std::optional<DType> parseDType(llvm::StringRef name) {
  for (DType t : kAllDTypes)
    if (dtypeName(t) == name)
      return t;
  return std::nullopt;
}

unsigned dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::Bool:
    return 1;
  }
  return 0;
}

bool isFloating(DType t) {
  switch (t) {
  case DType::F32:
  case DType::F16:
  case DType::BF16:
  case DType::F64:
    return true;
  case DType::I64:
  case DType::I32:
  case DType::Bool:
    return false;
  }
  return false;
}

bool isHalfType(DType t) { return t == DType::F16 || t == DType::BF16; }

bool isIntegral(DType t) { return t == DType::I64 || t == DType::I32; }

} // namespace ampc
