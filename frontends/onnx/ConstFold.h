//===- ConstFold.h - Tensor arithmetic on constants known at import -*- C++ -*-===//
//
// Internal to the ONNX frontend. Once the inputs are bound every shape is
// static, so the shape arithmetic exporters wrap around Shape (Gather,
// Concat, Range, Mod, Where, ...) and the masks and index tensors they build
// from constants (a causal mask sliced from a buffer, arange positions)
// are computed here, on doubles, and never reach the graph as ops.
//
// Each function is pure: it returns false with a message in `err` when the
// operands do not fit the op, or when the result would pass
// kMaxFoldedElements.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_ONNX_CONSTFOLD_H
#define AMPC_FRONTENDS_ONNX_CONSTFOLD_H

#include "frontends/onnx/Lowering.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace ampc::onnxfe {

/// The largest constant folding may make: a 2048-token causal mask.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 22;

/// The element count of dims, or -1 past kMaxFoldedElements (or a negative dim).
int64_t foldedCount(llvm::ArrayRef<int64_t> dims);

/// numpy broadcasting of several shapes; false when they do not broadcast.
bool broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes,
                     llvm::SmallVectorImpl<int64_t> &out, std::string &err);

/// out[i] = fn(operands[k][i]...) with numpy broadcasting; out has `dtype`.
bool foldElementwise(llvm::ArrayRef<const ConstTensor *> operands, DType dtype,
                     llvm::function_ref<double(llvm::ArrayRef<double>)> fn, ConstTensor &out,
                     std::string &err);

/// `c` broadcast to `dims` (ONNX Expand: the result's shape is the broadcast
/// of both).
bool foldExpand(const ConstTensor &c, llvm::ArrayRef<int64_t> dims, ConstTensor &out,
                std::string &err);

/// Result dim d is input dim perm[d].
ConstTensor foldTranspose(const ConstTensor &c, llvm::ArrayRef<int64_t> perm);

/// One axis of a strided slice: `count` elements from `start`, `step` apart
/// (step may be negative).
struct SliceAxis {
  unsigned axis;
  int64_t start, step, count;
};
ConstTensor foldSlice(const ConstTensor &c, llvm::ArrayRef<SliceAxis> axes);

/// Gather along `axis` with any index tensor (negative indices count from
/// the end).
bool foldGather(const ConstTensor &data, const ConstTensor &indices, unsigned axis,
                ConstTensor &out, std::string &err);

/// Concatenation along `axis`; the other dims must agree.
bool foldConcat(llvm::ArrayRef<const ConstTensor *> parts, unsigned axis, ConstTensor &out,
                std::string &err);

/// ONNX Tile: each dim repeated repeats[d] times.
bool foldTile(const ConstTensor &c, llvm::ArrayRef<int64_t> repeats, ConstTensor &out,
              std::string &err);

/// ONNX Trilu over the last two dims: keep the upper (or lower) triangle
/// from diagonal k, zero the rest.
ConstTensor foldTrilu(const ConstTensor &c, int64_t k, bool upper);

/// ONNX CumSum along `axis`.
ConstTensor foldCumSum(const ConstTensor &c, unsigned axis, bool exclusive, bool reverse);

/// ONNX ScatterND with reduction none, add or mul.
bool foldScatterNd(const ConstTensor &data, const ConstTensor &indices, const ConstTensor &updates,
                   llvm::StringRef reduction, ConstTensor &out, std::string &err);

/// ONNX Range: start, start + delta, ... while before limit.
bool foldRange(double start, double limit, double delta, DType dtype, ConstTensor &out,
               std::string &err);

/// Rounds or truncates every element as storing in `dtype` would (ONNX Cast
/// semantics for the dtypes ampc has: float to int truncates, to bool tests
/// non-zero, to half rounds to nearest even).
void convertElements(ConstTensor &c, DType dtype);

} // namespace ampc::onnxfe

#endif
