//===- LoopReduction.cpp - Reduction loop kernels of the cpu backend ------===//
//
// reduce_sum (over leading and/or trailing dims: bias gradients) and
// reduce_mean (the same sums, each divided by its count), mse_loss
// and global_avgpool in f32, bf16 and f16, accumulated in f32 like the
// reference. Where a sum's order differs from the reference's sequential
// one, it is fixed by the shapes alone (LoopSupport.h), so a run gives the
// same bits on any number of threads.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/LossMath.h"
#include "kernels/common/ReduceMath.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include "llvm/ADT/SmallBitVector.h"

#include <algorithm>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

/// Columns summed together by one pass over the rows (a stack buffer).
constexpr int64_t kColumnBlock = 256;

/// reduce_sum's input viewed as [outer, middle, inner] with middle kept and
/// the other two summed (plan.outer/middle/inner), by one of three methods.
enum ReduceVariant : int {
  /// inner == 1: each output sums a column of [outer, middle], row after
  /// row -- the reference's order, so the reference's bits.
  kColumns = 0,
  /// inner > 1: each output sums `outer` runs of `inner` elements; the runs'
  /// columns are summed down the rows first, then across.
  kSlices = 1,
  /// middle == 1: one sum of everything, in pieces.
  kEverything = 2,
};

/// What an output of reduce_sum (count 0) or reduce_mean (count: the elements
/// of each sum) stores: the sum, or the reference's mean of it.
inline float finishSum(float sum, int64_t count) { return count ? meanOfSum(sum, count) : sum; }

template <DType D>
void reduceColumns(const void *x, void *y, int64_t rows, int64_t columns, int64_t count) {
  auto body = [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    for (int64_t block = begin; block < end; block += kColumnBlock) {
      int64_t width = std::min(kColumnBlock, end - block);
      float acc[kColumnBlock];
      for (int64_t k = 0; k < width; ++k)
        acc[k] = 0;
      for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
        for (int64_t k = 0; k < width; ++k)
          acc[k] += load<D>(x, r * columns + block + k);
      }
      for (int64_t k = 0; k < width; ++k)
        store<D>(y, block + k, finishSum(acc[k], count));
    }
  };
  parallelFor(columns, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(rows, 1)), body);
}

template <DType D>
void reduceSlices(const void *x, void *y, int64_t outer, int64_t middle, int64_t inner,
                  int64_t count) {
  auto body = [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    for (int64_t k = begin; k < end; ++k) {
      float total = 0;
      for (int64_t block = 0; block < inner; block += kColumnBlock) {
        int64_t width = std::min(kColumnBlock, inner - block);
        float acc[kColumnBlock];
        for (int64_t j = 0; j < width; ++j)
          acc[j] = 0;
        for (int64_t o = 0; o < outer; ++o) {
          int64_t base = (o * middle + k) * inner + block;
#pragma omp simd
          for (int64_t j = 0; j < width; ++j)
            acc[j] += load<D>(x, base + j);
        }
        for (int64_t j = 0; j < width; ++j)
          total += acc[j];
      }
      store<D>(y, k, finishSum(total, count));
    }
  };
  parallelFor(middle, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(outer * inner, 1)),
              body);
}

/// Sum of term(i) over [0, n): pieces of kSumPiece elements summed in
/// parallel by lanes, then added in order.
template <class Term> float sumInPieces(int64_t n, const Term &term) {
  int64_t pieces = (n + kSumPiece - 1) / kSumPiece;
  std::vector<float> partial(std::max<int64_t>(pieces, 1), 0.0f);
  float *partialData = partial.data();
  parallelChunks(n, kSumPiece, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    LaneSum sum;
    sum.add(begin, end, term);
    partialData[begin / kSumPiece] = sum.total();
  });
  float total = 0;
  for (float p : partial)
    total += p;
  return total;
}

/// reduce_sum, or reduce_mean if Mean: each output sums outer * inner
/// elements (the dims of size 1 add none).
template <DType D, bool Mean> void reduceLoop(const KernelArgs &a, const LoopPlan &plan) {
  const void *x = a.in(0).data;
  void *y = a.out().data;
  int64_t count = Mean ? plan.outer * plan.inner : 0;
  switch (static_cast<ReduceVariant>(plan.variant)) {
  case kColumns:
    return reduceColumns<D>(x, y, plan.outer, plan.middle, count);
  case kSlices:
    return reduceSlices<D>(x, y, plan.outer, plan.middle, plan.inner, count);
  case kEverything:
    store<D>(y, 0,
             finishSum(sumInPieces(a.in(0).numElements(),
                                   [=](int64_t i) AMPC_LOOP_BODY { return load<D>(x, i); }),
                       count));
    return;
  }
}

template <DType D> void mseLossLoop(const KernelArgs &a, const LoopPlan &) {
  const void *input = a.in(0).data, *target = a.in(1).data;
  int64_t n = a.in(0).numElements();
  float sum = sumInPieces(n, [=](int64_t i) AMPC_LOOP_BODY {
    return squaredErrorTerm(load<D>(input, i), load<D>(target, i));
  });
  // An empty input gives 0/0 = NaN, as the reference.
  store<D>(a.out().data, 0, sum / float(n));
}

/// [N, C, H, W] -> [N, C, 1, 1]: each plane's mean, summed in the
/// reference's order (planes are small; the threads split the planes).
template <DType D> void globalAvgPoolLoop(const KernelArgs &a, const LoopPlan &) {
  const void *x = a.in(0).data;
  void *y = a.out().data;
  llvm::ArrayRef<int64_t> dims = a.in(0).dims();
  int64_t planes = dims[0] * dims[1], planeSize = dims[2] * dims[3];
  parallelFor(planes, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(planeSize, 1)),
              [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                for (int64_t p = begin; p < end; ++p) {
                  float sum = 0;
                  for (int64_t e = 0; e < planeSize; ++e)
                    sum += load<D>(x, p * planeSize + e);
                  store<D>(y, p, sum / static_cast<float>(planeSize));
                }
              });
}

bool sameDTypes(const Node &n) {
  DType t = n.result()->dtype();
  for (const Value *v : n.operands())
    if (v->dtype() != t)
      return false;
  return true;
}

/// reduce_sum's or reduce_mean's plan, or nullptr where the loops decline.
template <bool Mean> std::unique_ptr<NodeKernel> prepareReduce(const Node &n) {
  if (!sameDTypes(n))
    return nullptr;
  llvm::ArrayRef<int64_t> dims = n.operand(0)->type().dims();
  unsigned rank = dims.size();
  const std::vector<int64_t> &axes = attrs::ReduceSum(n).dims();
  llvm::SmallBitVector reduced(rank, axes.empty());
  for (int64_t d : axes)
    reduced.set(static_cast<unsigned>(d < 0 ? d + rank : d));
  // Dims of size 1 change nothing; the rest must read reduced*, kept*,
  // reduced* from the left.
  LoopPlan plan;
  int phase = 0; // 0: leading reduced, 1: kept, 2: trailing reduced
  for (unsigned d = 0; d < rank; ++d) {
    if (dims[d] == 1)
      continue;
    if (reduced[d]) {
      if (phase == 1)
        phase = 2;
      (phase == 0 ? plan.outer : plan.inner) *= dims[d];
      continue;
    }
    if (phase == 2)
      return nullptr;
    phase = 1;
    plan.middle *= dims[d];
  }
  if (n.operand(0)->type().numElements() == 0)
    return nullptr; // nothing to sum; the reference writes the zeros (NaNs for a mean)
  if (plan.middle == 1)
    plan.variant = kEverything;
  else if (plan.inner == 1)
    plan.variant = kColumns;
  else
    plan.variant = kSlices;
  return dispatchLoopFloat(n.result()->dtype(), std::unique_ptr<NodeKernel>(), [&](auto tag) {
    return makeLoopKernel(&reduceLoop<decltype(tag)::value, Mean>, plan);
  });
}

} // namespace

std::unique_ptr<NodeKernel> prepareLoopReduceSum(const Node &n) { return prepareReduce<false>(n); }

std::unique_ptr<NodeKernel> prepareLoopReduceMean(const Node &n) { return prepareReduce<true>(n); }

std::unique_ptr<NodeKernel> prepareLoopMseLoss(const Node &n) {
  if (!sameDTypes(n))
    return nullptr;
  return dispatchLoopFloat(n.result()->dtype(), std::unique_ptr<NodeKernel>(), [](auto tag) {
    return makeLoopKernel(&mseLossLoop<decltype(tag)::value>);
  });
}

std::unique_ptr<NodeKernel> prepareLoopGlobalAvgPool(const Node &n) {
  if (!sameDTypes(n) || n.operand(0)->type().rank() != 4)
    return nullptr;
  return dispatchLoopFloat(n.result()->dtype(), std::unique_ptr<NodeKernel>(), [](auto tag) {
    return makeLoopKernel(&globalAvgPoolLoop<decltype(tag)::value>);
  });
}

} // namespace ampc::kernels::cpu
