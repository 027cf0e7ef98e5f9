//===- Shape.cpp - Reference flatten, reshape, transpose, permute, concat, ...===//
//
// Data movement copies element bytes unchanged, so it is exact for every dtype
// (indices and masks move too). embedding copies rows of its table; cast
// converts through kernels/common/CastMath.h.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/CastMath.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include "llvm/ADT/SmallVector.h"

#include <cassert>
#include <cstring>
#include <limits>

namespace ampc::kernels::ref {

namespace {

/// Same elements in the same order, only the shape differs.
void copyBytes(const KernelArgs &a) {
  const TensorArg &in = a.in(0), &out = a.out();
  assert(in.type->sizeInBytes() == out.type->sizeInBytes() && "reshape changes the size");
  if (out.data == in.data) // a view: the planner gave the result the operand's buffer
    return;
  std::memcpy(out.data, in.data, static_cast<size_t>(out.type->sizeInBytes()));
}

/// out dim i is in dim perm[i] (perm already normalised to [0, rank)).
void permuteImpl(const KernelArgs &a, llvm::ArrayRef<unsigned> perm) {
  const TensorArg &in = a.in(0), &out = a.out();
  llvm::ArrayRef<int64_t> inDims = in.dims(), outDims = out.dims();
  size_t rank = inDims.size(), elementSize = dtypeSize(in.dtype());
  llvm::SmallVector<int64_t, 6> inStrides(rank, 1);
  for (size_t d = rank; d-- > 1;)
    inStrides[d - 1] = inStrides[d] * inDims[d];
  // Stride in the input of a step along each output dim.
  llvm::SmallVector<int64_t, 6> stridesByOutDim(rank);
  for (size_t d = 0; d < rank; ++d)
    stridesByOutDim[d] = inStrides[perm[d]];
  llvm::SmallVector<int64_t, 6> position(rank, 0);
  const char *src = static_cast<const char *>(in.data);
  char *dst = static_cast<char *>(out.data);
  for (int64_t i = 0, n = out.numElements(); i < n; ++i) {
    int64_t inIndex = 0;
    for (size_t d = 0; d < rank; ++d)
      inIndex += position[d] * stridesByOutDim[d];
    std::memcpy(dst + i * elementSize, src + inIndex * elementSize, elementSize);
    for (size_t d = rank; d-- > 0;) {
      if (++position[d] < outDims[d])
        break;
      position[d] = 0;
    }
  }
}

unsigned normalizeDim(int64_t dim, size_t rank) {
  return static_cast<unsigned>(dim < 0 ? dim + static_cast<int64_t>(rank) : dim);
}

/// Calls f(DTypeTag<D>{}) for any dtype t.
template <class F> void dispatchAny(DType t, F &&f) {
  switch (t) {
  case DType::F32:
    return f(DTypeTag<DType::F32>{});
  case DType::F16:
    return f(DTypeTag<DType::F16>{});
  case DType::BF16:
    return f(DTypeTag<DType::BF16>{});
  case DType::F64:
    return f(DTypeTag<DType::F64>{});
  case DType::I64:
    return f(DTypeTag<DType::I64>{});
  case DType::I32:
    return f(DTypeTag<DType::I32>{});
  case DType::Bool:
    return f(DTypeTag<DType::Bool>{});
  }
}

} // namespace

void flatten(const KernelArgs &a) { copyBytes(a); }

void reshape(const KernelArgs &a) { copyBytes(a); }

void transpose(const KernelArgs &a) {
  size_t rank = a.in(0).dims().size();
  llvm::SmallVector<unsigned, 6> perm;
  for (unsigned d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[normalizeDim(attrs::Transpose(*a.node).dim0(), rank)],
            perm[normalizeDim(attrs::Transpose(*a.node).dim1(), rank)]);
  permuteImpl(a, perm);
}

void permute(const KernelArgs &a) {
  size_t rank = a.in(0).dims().size();
  llvm::SmallVector<unsigned, 6> perm;
  for (int64_t d : attrs::Permute(*a.node).dims())
    perm.push_back(normalizeDim(d, rank));
  permuteImpl(a, perm);
}

// Each input is [outer, size_i, inner] around the axis; the output row o is
// the concatenation of every input's row o.
void concat(const KernelArgs &a) {
  const TensorArg &out = a.out();
  llvm::ArrayRef<int64_t> outDims = out.dims();
  unsigned axis = normalizeDim(attrs::Concat(*a.node).axis(), outDims.size());
  int64_t outer = 1, inner = 1;
  for (unsigned d = 0; d < outDims.size(); ++d) {
    if (d < axis)
      outer *= outDims[d];
    else if (d > axis)
      inner *= outDims[d];
  }
  size_t elementSize = dtypeSize(out.dtype());
  int64_t outRowBytes = outDims[axis] * inner * elementSize;
  char *dst = static_cast<char *>(out.data);
  int64_t offsetInRow = 0;
  for (const TensorArg &in : a.inputs) {
    int64_t rowBytes = in.dims()[axis] * inner * elementSize;
    const char *src = static_cast<const char *>(in.data);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * outRowBytes + offsetInRow, src + o * rowBytes,
                  static_cast<size_t>(rowBytes));
    offsetInRow += rowBytes;
  }
}

// out[..., :] = weight[indices[...], :]. padding_idx changes nothing in the
// forward pass, as in PyTorch: its row is returned as stored (nn.Embedding
// initialises it to zeros; the backward pass gives it no gradient). Shapes are
// verified at compile time but index values are data: an index in
// [-num_embeddings, 0) counts from the end (ONNX Gather's rule, tableRow),
// one outside the table yields a row of NaN instead of reading out of bounds.
void embedding(const KernelArgs &a) {
  const TensorArg &indices = a.in(0), &weight = a.in(1), &out = a.out();
  int64_t numRows = weight.dims()[0], rowLength = weight.dims()[1];
  size_t rowBytes = static_cast<size_t>(rowLength) * dtypeSize(weight.dtype());
  for (int64_t i = 0, n = indices.numElements(); i < n; ++i) {
    int64_t row = tableRow(loadIndex(indices.dtype(), indices.data, i), numRows);
    char *dst = static_cast<char *>(out.data) + i * rowBytes;
    if (row >= 0) {
      std::memcpy(dst, static_cast<const char *>(weight.data) + row * rowBytes, rowBytes);
      continue;
    }
    for (int64_t k = 0; k < rowLength; ++k)
      storeFromDouble(weight.dtype(), out.data, i * rowLength + k,
                      std::numeric_limits<double>::quiet_NaN());
  }
}

// Conversion rules (rounding, truncation, saturation, f64 -> half through
// f32) are documented in kernels/common/CastMath.h.
void cast(const KernelArgs &a) {
  const TensorArg &in = a.in(0), &out = a.out();
  if (in.dtype() == out.dtype()) // a no-op cast keeps every bit (NaN payloads too)
    return copyBytes(a);
  dispatchAny(in.dtype(), [&](auto fromTag) {
    dispatchAny(out.dtype(), [&](auto toTag) {
      constexpr DType From = decltype(fromTag)::value, To = decltype(toTag)::value;
      for (int64_t i = 0, n = in.numElements(); i < n; ++i)
        castElement<From, To>(in.data, out.data, i);
    });
  });
}

} // namespace ampc::kernels::ref
