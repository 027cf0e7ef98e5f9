//===- ShapeGrad.cpp - Reference slice, broadcast_to, embedding_grad --------===//
//
// The ops the gradients of the shape family need: slice (concat's backward),
// broadcast_to (reduce_sum's backward) and embedding_grad (a scatter-add of
// gradient rows into the table's shape). slice and broadcast_to move element
// bytes unchanged, so they are exact for every dtype.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include "llvm/ADT/SmallVector.h"

#include <cassert>
#include <cstring>
#include <vector>

namespace ampc::kernels::ref {

// out = input[..., start:end, ...] along `axis`: each of the `outer` rows
// around the axis is one contiguous run of bytes.
void slice(const KernelArgs &a) {
  const TensorArg &in = a.in(0), &out = a.out();
  llvm::ArrayRef<int64_t> inDims = in.dims();
  int64_t rank = static_cast<int64_t>(inDims.size());
  int64_t axisAttr = attrs::Slice(*a.node).axis();
  unsigned axis = static_cast<unsigned>(axisAttr < 0 ? axisAttr + rank : axisAttr);
  int64_t start = attrs::Slice(*a.node).start(), end = attrs::Slice(*a.node).end();
  int64_t outer = 1, inner = 1;
  for (unsigned d = 0; d < inDims.size(); ++d) {
    if (d < axis)
      outer *= inDims[d];
    else if (d > axis)
      inner *= inDims[d];
  }
  size_t elementSize = dtypeSize(in.dtype());
  int64_t inRowBytes = inDims[axis] * inner * elementSize;
  int64_t outRowBytes = (end - start) * inner * elementSize;
  const char *src = static_cast<const char *>(in.data) + start * inner * elementSize;
  char *dst = static_cast<char *>(out.data);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * outRowBytes, src + o * inRowBytes, static_cast<size_t>(outRowBytes));
}

// numpy broadcasting: the input's dims align at the right of the output's; a
// dim of 1 (or a missing leading one) repeats, i.e. is read with stride 0.
void broadcastTo(const KernelArgs &a) {
  const TensorArg &in = a.in(0), &out = a.out();
  llvm::ArrayRef<int64_t> inDims = in.dims(), outDims = out.dims();
  size_t outRank = outDims.size(), offset = outRank - inDims.size();
  llvm::SmallVector<int64_t, 6> strides(outRank, 0);
  int64_t stride = 1;
  for (size_t d = inDims.size(); d-- > 0;) {
    strides[d + offset] = inDims[d] == 1 ? 0 : stride;
    stride *= inDims[d];
  }
  size_t elementSize = dtypeSize(in.dtype());
  const char *src = static_cast<const char *>(in.data);
  char *dst = static_cast<char *>(out.data);
  llvm::SmallVector<int64_t, 6> position(outRank, 0);
  for (int64_t i = 0, n = out.numElements(); i < n; ++i) {
    int64_t inIndex = 0;
    for (size_t d = 0; d < outRank; ++d)
      inIndex += position[d] * strides[d];
    std::memcpy(dst + i * elementSize, src + inIndex * elementSize, elementSize);
    for (size_t d = outRank; d-- > 0;) {
      if (++position[d] < outDims[d])
        break;
      position[d] = 0;
    }
  }
}

// dweight[r, :] = sum of grad[i, :] over the positions i whose index is r.
// The row padding_idx gets no gradient (zeros), as in PyTorch; an index
// outside the table (its forward row was NaN) contributes nothing. Sums are
// accumulated in the compute type and rounded once on store.
void embeddingGrad(const KernelArgs &a) {
  const TensorArg &grad = a.in(0), &indices = a.in(1), &out = a.out();
  int64_t numRows = out.dims()[0], rowLength = out.dims()[1];
  int64_t paddingIdx = attrs::Embedding(*a.node).padding_idx();
  bool handled = dispatchFloat(out.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = ComputeT<D>;
    std::vector<T> acc(static_cast<size_t>(numRows * rowLength), T(0));
    for (int64_t i = 0, n = indices.numElements(); i < n; ++i) {
      int64_t row = tableRow(loadIndex(indices.dtype(), indices.data, i), numRows);
      if (row < 0 || row == paddingIdx)
        continue;
      for (int64_t k = 0; k < rowLength; ++k)
        acc[row * rowLength + k] += load<D>(grad.data, i * rowLength + k);
    }
    for (size_t e = 0; e < acc.size(); ++e)
      store<D>(out.data, static_cast<int64_t>(e), acc[e]);
  });
  assert(handled && "embedding_grad on a non-floating dtype");
  (void)handled;
}

} // namespace ampc::kernels::ref
