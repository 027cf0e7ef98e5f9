//===- LoopShape.cpp - Data movement loop kernels of the cpu backend ------===//
//
// reshape and flatten (a copy: the runtime gives every value its own
// buffer), transpose, permute, broadcast_to and slice (one strided copy),
// concat, embedding, embedding_grad and fill. Data movement copies element
// bytes unchanged, so it takes every dtype and gives the reference's bits;
// embedding_grad adds rows in f32 in the reference's order (the indices' order)
// and rounds once, in f32, bf16 and f16.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

/// Elements of a copy per thread below which it stays on one thread.
constexpr int64_t kCopyGrain = 4 * kElementwiseGrain;

unsigned normalizeDim(int64_t dim, size_t rank) {
  return static_cast<unsigned>(dim < 0 ? dim + static_cast<int64_t>(rank) : dim);
}

llvm::SmallVector<int64_t, 6> denseStridesOf(llvm::ArrayRef<int64_t> dims) {
  llvm::SmallVector<int64_t, 6> strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;)
    strides[d - 1] = strides[d] * dims[d];
  return strides;
}

//===----------------------------------------------------------------------===//
// Strided copies: out[i] = in[offset + sum_d position_d(i) * strides[d]]
//===----------------------------------------------------------------------===//

/// Copies `n` elements of `Size` bytes read `stride` elements apart.
template <size_t Size> struct Element { unsigned char bytes[Size]; };

template <size_t Size> void gatherRun(const char *src, int64_t stride, char *dst, int64_t n) {
  using E = Element<Size>;
  const E *s = reinterpret_cast<const E *>(src);
  E *d = reinterpret_cast<E *>(dst);
  for (int64_t k = 0; k < n; ++k)
    d[k] = s[k * stride];
}

/// A permute, transpose, broadcast_to or slice, as a walk over the result
/// in C order reading the input with a stride per result dim. Dims of size
/// 1 are dropped and dims that read the input contiguously after each other
/// merged, so the innermost run is as long as it can be (a whole row of a
/// head when permute keeps the last dim, a plain memcpy for a slice).
class StridedCopyKernel final : public LoopKernel {
public:
  StridedCopyKernel(llvm::ArrayRef<int64_t> outDims, llvm::ArrayRef<int64_t> strides,
                    int64_t offset, size_t elementSize)
      : offset_(offset), elementSize_(elementSize) {
    for (size_t d = 0; d < outDims.size(); ++d) {
      if (outDims[d] == 1)
        continue;
      if (!dims_.empty() && strides_.back() == strides[d] * outDims[d]) {
        dims_.back() *= outDims[d];
        strides_.back() = strides[d];
        continue;
      }
      dims_.push_back(outDims[d]);
      strides_.push_back(strides[d]);
    }
    if (dims_.empty()) { // one element
      dims_.push_back(1);
      strides_.push_back(1);
    }
  }

  void run(const KernelArgs &a) override {
    const char *src = static_cast<const char *>(a.in(0).data) + offset_ * elementSize_;
    char *dst = static_cast<char *>(a.out().data);
    int64_t rank = static_cast<int64_t>(dims_.size());
    int64_t runLength = dims_.back(), runStride = strides_.back();
    int64_t runs = a.out().numElements() / runLength;
    if (runs == 0 || runLength == 0)
      return;
    const int64_t *dims = dims_.data(), *strides = strides_.data();
    size_t size = elementSize_;
    auto body = [=](int64_t begin, int64_t end) {
      // The input offset of run `begin`, then stepped run by run.
      int64_t position[8] = {}, in = 0;
      for (int64_t d = rank - 1, rest = begin; d-- > 0;) {
        position[d] = rest % dims[d];
        rest /= dims[d];
        in += position[d] * strides[d];
      }
      for (int64_t r = begin; r < end; ++r) {
        char *to = dst + r * runLength * size;
        const char *from = src + in * size;
        copyRun(from, runStride, to, runLength, size);
        for (int64_t d = rank - 1; d-- > 0;) {
          in += strides[d];
          if (++position[d] < dims[d])
            break;
          in -= position[d] * strides[d];
          position[d] = 0;
        }
      }
    };
    int64_t grain = std::max<int64_t>(1, kCopyGrain / runLength);
    int64_t threads = loopThreads(), perThread = (runs + threads - 1) / threads;
    int64_t chunk = std::max(perThread, grain), chunks = (runs + chunk - 1) / chunk;
    if (chunks == 1)
      return body(0, runs);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c)
      body(c * chunk, std::min(runs, (c + 1) * chunk));
  }

private:
  static void copyRun(const char *from, int64_t stride, char *to, int64_t n, size_t size) {
    if (stride == 1) {
      std::memcpy(to, from, static_cast<size_t>(n) * size);
      return;
    }
    switch (size) {
    case 1:
      return gatherRun<1>(from, stride, to, n);
    case 2:
      return gatherRun<2>(from, stride, to, n);
    case 4:
      return gatherRun<4>(from, stride, to, n);
    case 8:
      return gatherRun<8>(from, stride, to, n);
    default:
      for (int64_t k = 0; k < n; ++k)
        std::memcpy(to + k * size, from + k * stride * size, size);
    }
  }

  llvm::SmallVector<int64_t, 6> dims_, strides_;
  int64_t offset_;
  size_t elementSize_;
};

/// The strided copy of a permute: result dim d is input dim perm[d].
std::unique_ptr<NodeKernel> preparePermutation(const Node &n, llvm::ArrayRef<unsigned> perm) {
  llvm::ArrayRef<int64_t> inDims = n.operand(0)->type().dims();
  if (inDims.size() > 8)
    return nullptr;
  llvm::SmallVector<int64_t, 6> inStrides = denseStridesOf(inDims), strides;
  for (unsigned p : perm)
    strides.push_back(inStrides[p]);
  return std::make_unique<StridedCopyKernel>(n.result()->type().dims(), strides, 0,
                                             dtypeSize(n.result()->dtype()));
}

//===----------------------------------------------------------------------===//
// Others
//===----------------------------------------------------------------------===//

void copyAll(const KernelArgs &a, const LoopPlan &) {
  if (a.out().data == a.in(0).data) // a view: the planner gave the result the operand's buffer
    return;
  copyInParallel(a.in(0).data, a.out().data, a.out().type->sizeInBytes());
}

/// Each input is [outer, size_i * inner] around the axis; row o of the
/// result is the inputs' rows o one after another.
void concatLoop(const KernelArgs &a, const LoopPlan &plan) {
  int64_t outer = plan.outer, outRowBytes = plan.middle;
  char *dst = static_cast<char *>(a.out().data);
  llvm::ArrayRef<TensorArg> inputs = a.inputs;
  int64_t grain = std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(outRowBytes, 1));
  parallelFor(outer, grain, [=](int64_t begin, int64_t end) {
    int64_t offsetInRow = 0;
    for (const TensorArg &in : inputs) {
      int64_t rowBytes = outer ? in.type->sizeInBytes() / outer : 0;
      const char *src = static_cast<const char *>(in.data);
      for (int64_t o = begin; o < end; ++o)
        std::memcpy(dst + o * outRowBytes + offsetInRow, src + o * rowBytes,
                    static_cast<size_t>(rowBytes));
      offsetInRow += rowBytes;
    }
  });
}

/// out[i, :] = weight[indices[i], :], or NaN for an index outside the table.
void embeddingLoop(const KernelArgs &a, const LoopPlan &plan) {
  const TensorArg &indices = a.in(0), &weight = a.in(1);
  int64_t numRows = plan.outer, rowLength = plan.inner;
  size_t rowBytes = static_cast<size_t>(rowLength) * dtypeSize(weight.dtype());
  const char *table = static_cast<const char *>(weight.data);
  char *out = static_cast<char *>(a.out().data);
  DType indexType = indices.dtype(), type = weight.dtype();
  const void *indexData = indices.data;
  // A NaN row in the table's dtype, made once.
  std::vector<char> nanRow(rowBytes);
  for (int64_t k = 0; k < rowLength; ++k)
    storeFromDouble(type, nanRow.data(), k, std::numeric_limits<double>::quiet_NaN());
  const char *nan = nanRow.data();
  parallelFor(indices.numElements(),
              std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(rowLength, 1)),
              [=](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                  int64_t row = tableRow(loadIndex(indexType, indexData, i), numRows);
                  bool inTable = row >= 0;
                  std::memcpy(out + i * rowBytes, inTable ? table + row * rowBytes : nan, rowBytes);
                }
              });
}

/// dweight[r, :] = sum of grad[i, :] over the i with indices[i] == r (none
/// for padding_idx or an index outside the table), added in the order of i
/// as the reference does. The columns are split over the threads, so each
/// sum keeps that order.
/// `scratch`: numRows x rowLength floats for the half types' f32 sums.
template <DType D>
void embeddingGradLoop(const KernelArgs &a, const LoopPlan &plan, float *scratch) {
  const TensorArg &indices = a.in(1);
  const void *grad = a.in(0).data;
  void *out = a.out().data;
  int64_t numRows = plan.outer, rowLength = plan.inner,
          paddingIdx = attrs::Embedding(*a.node).padding_idx();
  int64_t count = indices.numElements();
  DType indexType = indices.dtype();
  const void *indexData = indices.data;
  // The rows each position adds to (-1: none), read once.
  std::vector<int64_t> targets(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t row = tableRow(loadIndex(indexType, indexData, i), numRows);
    targets[i] = row == paddingIdx ? -1 : row;
  }
  const int64_t *target = targets.data();
  // f32 sums: the result itself for f32, else the kernel's scratch table.
  float *acc = D == DType::F32 ? static_cast<float *>(out) : scratch;
  // Each column costs count + numRows adds and stores: split only when
  // every thread gets a few hundred thousand of them.
  int64_t grain = std::max<int64_t>(16, kCopyGrain / std::max<int64_t>(count + numRows, 1));
  parallelFor(
      rowLength, grain,
      [=](int64_t first, int64_t last) AMPC_LOOP_BODY {
        for (int64_t r = 0; r < numRows; ++r) {
#pragma omp simd
          for (int64_t k = first; k < last; ++k)
            acc[r * rowLength + k] = 0;
        }
        for (int64_t i = 0; i < count; ++i) {
          int64_t row = target[i];
          if (row < 0)
            continue;
#pragma omp simd
          for (int64_t k = first; k < last; ++k)
            acc[row * rowLength + k] += load<D>(grad, i * rowLength + k);
        }
        if constexpr (D != DType::F32)
          for (int64_t r = 0; r < numRows; ++r) {
#pragma omp simd
            for (int64_t k = first; k < last; ++k)
              store<D>(out, r * rowLength + k, acc[r * rowLength + k]);
          }
      },
      /*alignment=*/32);
}

/// embedding_grad with its f32 sums table for the half types kept between
/// runs: allocated per run (3 MiB for a 1000 x 768 table), it came back as
/// fresh pages every step, and their faults cost more than the sums.
template <DType D> class EmbeddingGradKernel final : public LoopKernel {
public:
  explicit EmbeddingGradKernel(const LoopPlan &plan)
      : plan_(plan), scratch_(D == DType::F32 ? 0 : static_cast<size_t>(plan.outer * plan.inner)) {}
  void run(const KernelArgs &a) override { embeddingGradLoop<D>(a, plan_, scratch_.data()); }
  uint64_t heldBytes() const override { return scratch_.size() * sizeof(float); }

private:
  LoopPlan plan_;
  std::vector<float> scratch_;
};

/// Every element = value (converted as the reference's storeFromDouble
/// does, once), copied as bytes.
template <class Word> void fillWords(void *out, int64_t n, Word value) {
  Word *words = static_cast<Word *>(out);
  parallelForElements(n, kCopyGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i)
      words[i] = value;
  });
}

void fillLoop(const KernelArgs &a, const LoopPlan &) {
  const TensorArg &y = a.out();
  unsigned char bits[8] = {};
  storeFromDouble(y.dtype(), bits, 0, attrs::Fill(*a.node).value());
  switch (dtypeSize(y.dtype())) {
  case 1:
    return fillWords<uint8_t>(y.data, y.numElements(), bits[0]);
  case 2: {
    uint16_t v;
    std::memcpy(&v, bits, 2);
    return fillWords(y.data, y.numElements(), v);
  }
  case 4: {
    uint32_t v;
    std::memcpy(&v, bits, 4);
    return fillWords(y.data, y.numElements(), v);
  }
  default: {
    uint64_t v;
    std::memcpy(&v, bits, 8);
    return fillWords(y.data, y.numElements(), v);
  }
  }
}

} // namespace

std::unique_ptr<NodeKernel> prepareLoopReshape(const Node &n) {
  // flatten too: the same bytes under another shape.
  if (n.operand(0)->type().sizeInBytes() != n.result()->type().sizeInBytes())
    return nullptr;
  return makeLoopKernel(&copyAll);
}

std::unique_ptr<NodeKernel> prepareLoopTranspose(const Node &n) {
  size_t rank = n.operand(0)->type().rank();
  llvm::SmallVector<unsigned, 6> perm;
  for (unsigned d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[normalizeDim(attrs::Transpose(n).dim0(), rank)],
            perm[normalizeDim(attrs::Transpose(n).dim1(), rank)]);
  return preparePermutation(n, perm);
}

std::unique_ptr<NodeKernel> prepareLoopPermute(const Node &n) {
  size_t rank = n.operand(0)->type().rank();
  llvm::SmallVector<unsigned, 6> perm;
  for (int64_t d : attrs::Permute(n).dims())
    perm.push_back(normalizeDim(d, rank));
  return preparePermutation(n, perm);
}

std::unique_ptr<NodeKernel> prepareLoopBroadcastTo(const Node &n) {
  // numpy broadcasting: the input's dims align at the right; a dim of 1 (or
  // a missing leading one) is read with stride 0.
  llvm::ArrayRef<int64_t> inDims = n.operand(0)->type().dims(), outDims = n.result()->type().dims();
  if (outDims.size() > 8)
    return nullptr;
  size_t offset = outDims.size() - inDims.size();
  llvm::SmallVector<int64_t, 6> strides(outDims.size(), 0);
  int64_t stride = 1;
  for (size_t d = inDims.size(); d-- > 0;) {
    strides[d + offset] = inDims[d] == 1 ? 0 : stride;
    stride *= inDims[d];
  }
  return std::make_unique<StridedCopyKernel>(outDims, strides, 0, dtypeSize(n.result()->dtype()));
}

std::unique_ptr<NodeKernel> prepareLoopSlice(const Node &n) {
  llvm::ArrayRef<int64_t> inDims = n.operand(0)->type().dims();
  if (inDims.size() > 8)
    return nullptr;
  unsigned axis = normalizeDim(attrs::Slice(n).axis(), inDims.size());
  llvm::SmallVector<int64_t, 6> strides = denseStridesOf(inDims);
  int64_t offset = attrs::Slice(n).start() * strides[axis];
  return std::make_unique<StridedCopyKernel>(n.result()->type().dims(), strides, offset,
                                             dtypeSize(n.result()->dtype()));
}

std::unique_ptr<NodeKernel> prepareLoopConcat(const Node &n) {
  llvm::ArrayRef<int64_t> outDims = n.result()->type().dims();
  for (const Value *v : n.operands())
    if (v->dtype() != n.result()->dtype())
      return nullptr;
  unsigned axis = normalizeDim(attrs::Slice(n).axis(), outDims.size());
  LoopPlan plan;
  for (unsigned d = 0; d < axis; ++d)
    plan.outer *= outDims[d];
  if (plan.outer == 0)
    return nullptr;
  plan.middle = n.result()->type().sizeInBytes() / plan.outer; // bytes per row
  return makeLoopKernel(&concatLoop, plan);
}

std::unique_ptr<NodeKernel> prepareLoopEmbedding(const Node &n) {
  llvm::ArrayRef<int64_t> table = n.operand(1)->type().dims();
  LoopPlan plan;
  plan.outer = table[0];
  plan.inner = table[1];
  return makeLoopKernel(&embeddingLoop, plan);
}

std::unique_ptr<NodeKernel> prepareLoopEmbeddingGrad(const Node &n) {
  DType t = n.result()->dtype();
  if (n.operand(0)->dtype() != t)
    return nullptr;
  llvm::ArrayRef<int64_t> table = n.result()->type().dims();
  LoopPlan plan;
  plan.outer = table[0];
  plan.inner = table[1];
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [&](auto tag) {
    return std::unique_ptr<NodeKernel>(
        std::make_unique<EmbeddingGradKernel<decltype(tag)::value>>(plan));
  });
}

std::unique_ptr<NodeKernel> prepareLoopFill(const Node &) { return makeLoopKernel(&fillLoop); }

} // namespace ampc::kernels::cpu
