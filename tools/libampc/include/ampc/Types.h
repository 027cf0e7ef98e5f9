//===- ampc/Types.h - Enums the public API shares -------------*- C++ -*-===//
#ifndef AMPC_PUBLIC_TYPES_H
#define AMPC_PUBLIC_TYPES_H

#include "ampc/Export.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ampc::api {

/// Element types; f16 and bf16 are stored as their 16-bit patterns.
enum class DType { F32, F16, BF16, F64, I64, I32, Bool };
/// "f32", "f16", "bf16", "f64", "i64", "i32", "bool".
AMPC_API std::string_view dtypeName(DType t);
AMPC_API std::optional<DType> parseDType(std::string_view name);
/// f16 or bf16.
AMPC_API bool isHalf(DType t);
/// Bytes one element takes in memory (2 for f16/bf16, 1 for bool).
AMPC_API int64_t dtypeSize(DType t);

/// What a node is part of in a training step.
enum class NodeRole { Forward, Loss, Backward, Optimizer, LossScale };
AMPC_API std::string_view roleName(NodeRole r);

/// What a state tensor holds (what a checkpoint must save).
enum class StateKind { Parameter, Buffer, OptimizerState, MasterWeight, ScalerState };

/// How mixed precision treats an op (docs/opt-levels.md).
enum class Category {
  Half,    ///< worth running in f16/bf16
  Fp32,    ///< needs fp32 range or accuracy
  Promote, ///< mixed inputs are cast to the widest
  Follow,  ///< runs in whatever dtype it is fed
  Banned,  ///< unsafe in half: an error under O1 unless overridden
};
AMPC_API std::string_view categoryName(Category c);

/// Which graph the pipeline builds.
enum class Stage {
  Forward, ///< the precision passes only (inference, inspection)
  Train,   ///< forward, backward, optimizer, master weights, loss scaling
};

/// An attribute value: int, float, bool, string, int list, float list, dtype.
using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                               std::vector<double>, DType>;
/// The kind of an AttrValue, in the variant's order.
enum class AttrKind { Int, Float, Bool, String, Ints, Floats, DType };

/// A tensor's element type and static shape.
struct TensorInfo {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  int64_t sizeInBytes() const { return numElements() * dtypeSize(dtype); }
};

} // namespace ampc::api

#endif
