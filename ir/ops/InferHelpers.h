//===- InferHelpers.h - Shared checks for shape/dtype inference ------------===//
#ifndef AMPC_IR_OPS_INFERHELPERS_H
#define AMPC_IR_OPS_INFERHELPERS_H

#include "ir/OpRegistry.h"

namespace ampc::infer {

/// "f32[2,3]" for messages.
inline std::string typeStr(const TensorType &t) { return t.str(); }

/// "[2,3]" for messages.
std::string shapeStr(llvm::ArrayRef<int64_t> dims);

/// Operand i must have a floating dtype.
bool requireFloat(InferContext &ctx, unsigned i);
/// Operand i must have exactly `rank` dims.
bool requireRank(InferContext &ctx, unsigned i, unsigned rank);
/// Operands a and b must share a dtype.
bool requireSameDType(InferContext &ctx, unsigned a, unsigned b);
/// Operand i must be i64 or i32 (indices, labels).
bool requireIndex(InferContext &ctx, unsigned i);
/// Operand i must have at least `rank` dims.
bool requireMinRank(InferContext &ctx, unsigned i, unsigned rank);
/// Operands a and b must have the same shape (no broadcasting).
bool requireSameShape(InferContext &ctx, unsigned a, unsigned b);
/// Operand `param` must have exactly `dims` and be f32 or the dtype of operand
/// `input` (parameters kept in fp32 while the op runs in half).
bool requireParam(InferContext &ctx, unsigned param, unsigned input, llvm::ArrayRef<int64_t> dims);
/// An Ints attribute must hold exactly `count` values.
bool requireIntsCount(InferContext &ctx, llvm::StringRef attr, size_t count);
/// Every value of each named Ints attribute (a window's kernel, stride,
/// padding, dilation) must be below 2^31: larger ones describe no real
/// model, and bounding them keeps the size arithmetic of every backend
/// within int64.
bool requireGeometryBounds(InferContext &ctx, std::initializer_list<llvm::StringRef> attrs);
/// Normalise a possibly negative axis against `rank`; reports an error if out of range.
bool normalizeAxis(InferContext &ctx, int64_t axis, unsigned rank, unsigned &out,
                   llvm::StringRef what = "dim");
/// numpy broadcasting of two shapes.
bool broadcastShapes(InferContext &ctx, llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                     llvm::SmallVectorImpl<int64_t> &out);
/// The widest floating dtype (f64 > f32 > bf16 ~ f16; f16 with bf16 gives f32).
DType widestFloat(DType a, DType b);

/// A single result with the operand's type (elementwise unary ops).
bool inferSameAsOperand0(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results);
/// Unary float op: operand 0 floating, result same type.
bool inferUnaryFloat(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results);

} // namespace ampc::infer

#endif
