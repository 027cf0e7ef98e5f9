//===- LoopSoftmax.cpp - softmax, log_softmax and cross_entropy loops ------===//
//
// softmax and log_softmax along any dim, their gradients, cross_entropy and
// cross_entropy_grad, in f32, bf16 and f16. Each gives the reference's bits:
// a row's maximum and sums run in the reference's sequential order and every
// element goes through the same kernels/common function; only the schedule
// differs. Rows are split over the threads; where the dim is not the last
// one, the rows next to each other (the dims after it) share vectors.
//
// exp is portableExp (kernels/common/ExpMath.h) in the reference and here
// alike, so a row's exp terms are computed in vectors, once, and kept for
// its outputs (the reference computes them twice); only their sum stays
// sequential. log stays libm's, once per row.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/ActivationMath.h"
#include "kernels/common/LossMath.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

/// Elements per thread below which an exp-bound loop stays on one thread:
/// an exp costs several times a simple map's element, so a smaller tensor
/// than kElementwiseGrain pays for waking the threads.
constexpr int64_t kExpGrain = kElementwiseGrain / 4;

/// Columns (positions along the dims after the softmax dim) handled
/// together when the dim is not the last one: their running maxima and
/// sums live in stack arrays.
constexpr int64_t kColumnBlock = 64;

/// A scratch row of at least n floats for the calling thread (grows, stays).
float *rowScratch(int64_t n) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(n))
    scratch.resize(static_cast<size_t>(n));
  return scratch.data();
}

int64_t rowGrain(int64_t rowSize) {
  return std::max<int64_t>(1, kExpGrain / std::max<int64_t>(rowSize, 1));
}

/// plan.outer, plan.middle (the dim's size) and plan.inner of `dims` around
/// `dim`, as the reference views them.
LoopPlan axisPlan(llvm::ArrayRef<int64_t> dims, int64_t dim) {
  int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = dim < 0 ? dim + rank : dim;
  LoopPlan plan;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis)
      plan.outer *= dims[d];
    else if (d == axis)
      plan.middle = dims[d];
    else
      plan.inner *= dims[d];
  }
  return plan;
}

/// True when every floating operand and result of `n` has dtype `t`.
bool floatsOfDType(const Node &n, DType t) {
  for (const Value *v : n.operands())
    if (isFloating(v->dtype()) && v->dtype() != t)
      return false;
  for (unsigned r = 0; r < n.numResults(); ++r)
    if (n.result(r)->dtype() != t)
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

/// Along the last dim: one row of plan.middle elements at a time.
template <DType D, bool Log> void softmaxRows(const KernelArgs &a, const LoopPlan &plan) {
  const void *x = a.in(0).data;
  void *y = a.out().data;
  int64_t size = plan.middle;
  parallelFor(plan.outer, rowGrain(size), [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    float *terms = rowScratch(size);
    for (int64_t r = begin; r < end; ++r) {
      int64_t base = r * size;
      float rowMax = load<D>(x, base);
      for (int64_t k = 1; k < size; ++k)
        rowMax = softmaxMaxStep(rowMax, load<D>(x, base + k));
        // The terms in vectors, then their sum in the reference's order.
#pragma omp simd
      for (int64_t k = 0; k < size; ++k)
        terms[k] = softmaxExpTerm(load<D>(x, base + k), rowMax);
      float sumExp = 0;
      for (int64_t k = 0; k < size; ++k)
        sumExp += terms[k];
      if constexpr (Log) {
        float logSum = std::log(sumExp);
#pragma omp simd
        for (int64_t k = 0; k < size; ++k)
          store<D>(y, base + k, logSoftmaxFromLogSum(load<D>(x, base + k), rowMax, logSum));
      } else {
#pragma omp simd
        for (int64_t k = 0; k < size; ++k)
          store<D>(y, base + k, softmaxFromExpTerm(terms[k], sumExp));
      }
    }
  });
}

/// Along a dim with others after it: for each outer index, blocks of
/// kColumnBlock columns, each column a row of the reference.
template <DType D, bool Log> void softmaxColumns(const KernelArgs &a, const LoopPlan &plan) {
  const void *x = a.in(0).data;
  void *y = a.out().data;
  int64_t size = plan.middle, inner = plan.inner;
  int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  int64_t grain = std::max<int64_t>(1, kExpGrain / (size * std::min(inner, kColumnBlock)));
  parallelFor(plan.outer * blocks, grain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    float rowMax[kColumnBlock], sumExp[kColumnBlock], logSum[kColumnBlock];
    for (int64_t u = begin; u < end; ++u) {
      int64_t o = u / blocks, first = (u % blocks) * kColumnBlock;
      int64_t width = std::min(kColumnBlock, inner - first);
      int64_t base = o * size * inner + first;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) {
        rowMax[j] = load<D>(x, base + j);
        sumExp[j] = 0;
      }
      for (int64_t k = 1; k < size; ++k) {
#pragma omp simd
        for (int64_t j = 0; j < width; ++j)
          rowMax[j] = softmaxMaxStep(rowMax[j], load<D>(x, base + k * inner + j));
      }
      // Each column's sum runs along k in the reference's order; the
      // columns are independent, so they share vectors.
      for (int64_t k = 0; k < size; ++k) {
#pragma omp simd
        for (int64_t j = 0; j < width; ++j)
          sumExp[j] += softmaxExpTerm(load<D>(x, base + k * inner + j), rowMax[j]);
      }
      if constexpr (Log)
        for (int64_t j = 0; j < width; ++j)
          logSum[j] = std::log(sumExp[j]);
      for (int64_t k = 0; k < size; ++k) {
        int64_t row = base + k * inner;
        if constexpr (Log) {
#pragma omp simd
          for (int64_t j = 0; j < width; ++j)
            store<D>(y, row + j, logSoftmaxFromLogSum(load<D>(x, row + j), rowMax[j], logSum[j]));
        } else {
#pragma omp simd
          for (int64_t j = 0; j < width; ++j)
            store<D>(y, row + j, softmaxOutput(load<D>(x, row + j), rowMax[j], sumExp[j]));
        }
      }
    }
  });
}

/// softmax_grad / log_softmax_grad (dy, y) along the last dim.
template <DType D, bool Log> void softmaxGradRows(const KernelArgs &a, const LoopPlan &plan) {
  const void *dy = a.in(0).data, *y = a.in(1).data;
  void *dx = a.out().data;
  int64_t size = plan.middle;
  // log_softmax_grad calls exp per element; softmax_grad is a plain map.
  int64_t grain =
      Log ? rowGrain(size) : std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(size, 1));
  parallelFor(plan.outer, grain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    for (int64_t r = begin; r < end; ++r) {
      int64_t base = r * size;
      float rowSum = 0;
      for (int64_t k = 0; k < size; ++k) {
        float g = load<D>(dy, base + k);
        rowSum += Log ? g : softmaxGradDotTerm(g, float(load<D>(y, base + k)));
      }
#pragma omp simd
      for (int64_t k = 0; k < size; ++k) {
        float g = load<D>(dy, base + k), yk = load<D>(y, base + k);
        store<D>(dx, base + k,
                 Log ? logSoftmaxGradOp(g, yk, rowSum) : softmaxGradOp(g, yk, rowSum));
      }
    }
  });
}

/// softmax_grad / log_softmax_grad along a dim with others after it.
template <DType D, bool Log> void softmaxGradColumns(const KernelArgs &a, const LoopPlan &plan) {
  const void *dy = a.in(0).data, *y = a.in(1).data;
  void *dx = a.out().data;
  int64_t size = plan.middle, inner = plan.inner;
  int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  int64_t grain = std::max<int64_t>(1, kExpGrain / (size * std::min(inner, kColumnBlock)));
  parallelFor(plan.outer * blocks, grain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    float rowSum[kColumnBlock];
    for (int64_t u = begin; u < end; ++u) {
      int64_t o = u / blocks, first = (u % blocks) * kColumnBlock;
      int64_t width = std::min(kColumnBlock, inner - first);
      int64_t base = o * size * inner + first;
      for (int64_t j = 0; j < width; ++j)
        rowSum[j] = 0;
      for (int64_t k = 0; k < size; ++k) {
        int64_t row = base + k * inner;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) {
          float g = load<D>(dy, row + j);
          rowSum[j] += Log ? g : softmaxGradDotTerm(g, float(load<D>(y, row + j)));
        }
      }
      for (int64_t k = 0; k < size; ++k) {
        int64_t row = base + k * inner;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) {
          float g = load<D>(dy, row + j), yk = load<D>(y, row + j);
          store<D>(dx, row + j,
                   Log ? logSoftmaxGradOp(g, yk, rowSum[j]) : softmaxGradOp(g, yk, rowSum[j]));
        }
      }
    }
  });
}

template <bool Log, bool Grad> std::unique_ptr<NodeKernel> prepareSoftmaxFamily(const Node &n) {
  DType t = n.result()->dtype();
  if (!floatsOfDType(n, t))
    return nullptr;
  LoopPlan plan = axisPlan(n.result()->type().dims(), attrs::Softmax(n).dim());
  if (n.result()->type().numElements() == 0)
    return nullptr; // nothing to do; the reference handles the empty case
  bool lastDim = plan.inner == 1;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (Grad)
      return makeLoopKernel(lastDim ? &softmaxGradRows<D, Log> : &softmaxGradColumns<D, Log>, plan);
    else
      return makeLoopKernel(lastDim ? &softmaxRows<D, Log> : &softmaxColumns<D, Log>, plan);
  });
}

//===----------------------------------------------------------------------===//
// cross_entropy, cross_entropy_grad
//===----------------------------------------------------------------------===//

/// What one row of logits contributes, computed in parallel; the reference's
/// running sums over the rows are then taken in row order.
struct RowStats {
  float rowMax;
  float logSum;
  float logProbability; ///< log p[label]
};

/// cross_entropy(logits [N, C], labels [N]) -> mean loss.
template <DType D> void crossEntropyLoop(const KernelArgs &a, const LoopPlan &plan) {
  const TensorArg &logits = a.in(0), &labels = a.in(1);
  const void *x = logits.data;
  int64_t ignoreIndex = attrs::CrossEntropy(*a.node).ignore_index();
  double labelSmoothing = attrs::CrossEntropy(*a.node).label_smoothing();
  int64_t rows = plan.outer, classes = plan.middle;
  DType labelType = labels.dtype();
  const void *labelData = labels.data;
  std::vector<RowStats> stats(static_cast<size_t>(rows));
  RowStats *statsData = stats.data();
  parallelFor(rows, rowGrain(classes), [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    for (int64_t r = begin; r < end; ++r) {
      int64_t label = loadIndex(labelType, labelData, r);
      if (label == ignoreIndex || label < 0 || label >= classes)
        continue;
      int64_t base = r * classes;
      float rowMax = load<D>(x, base);
      for (int64_t c = 1; c < classes; ++c)
        rowMax = softmaxMaxStep(rowMax, load<D>(x, base + c));
      float sumExp = 0;
      for (int64_t c = 0; c < classes; ++c)
        sumExp += softmaxExpTerm(load<D>(x, base + c), rowMax);
      float logSum = std::log(sumExp);
      statsData[r] = {rowMax, logSum,
                      logSoftmaxFromLogSum(float(load<D>(x, base + label)), rowMax, logSum)};
    }
  });
  // The reference's two running sums, in its order (rows, then classes).
  float nllSum = 0, smoothSum = 0;
  int64_t counted = 0;
  bool badLabel = false;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = loadIndex(labelType, labelData, r);
    if (label == ignoreIndex)
      continue;
    if (label < 0 || label >= classes) {
      badLabel = true;
      continue;
    }
    ++counted;
    nllSum -= stats[r].logProbability;
    if (labelSmoothing != 0)
      for (int64_t c = 0; c < classes; ++c)
        smoothSum -= logSoftmaxFromLogSum(float(load<D>(x, r * classes + c)), stats[r].rowMax,
                                          stats[r].logSum);
  }
  float count = float(counted);
  float loss = crossEntropyCombine(nllSum / count, smoothSum / count, labelSmoothing, classes);
  store<D>(a.out().data, 0, badLabel ? std::numeric_limits<float>::quiet_NaN() : loss);
}

/// cross_entropy_grad(dy, logits [N, C], labels [N]) -> d logits.
template <DType D> void crossEntropyGradLoop(const KernelArgs &a, const LoopPlan &plan) {
  const TensorArg &labels = a.in(2);
  const void *x = a.in(1).data;
  void *dx = a.out().data;
  int64_t ignoreIndex = attrs::CrossEntropy(*a.node).ignore_index();
  double labelSmoothing = attrs::CrossEntropy(*a.node).label_smoothing();
  int64_t rows = plan.outer, classes = plan.middle;
  DType labelType = labels.dtype();
  const void *labelData = labels.data;
  int64_t counted = 0;
  bool badLabel = false;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = loadIndex(labelType, labelData, r);
    if (label == ignoreIndex)
      continue;
    if (label < 0 || label >= classes)
      badLabel = true;
    else
      ++counted;
  }
  float scale = load<D>(a.in(0).data, 0) / float(counted);
  parallelFor(rows, rowGrain(classes), [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    float *terms = rowScratch(classes);
    for (int64_t r = begin; r < end; ++r) {
      int64_t label = loadIndex(labelType, labelData, r);
      int64_t base = r * classes;
      if (badLabel || label == ignoreIndex) {
        float fillValue = badLabel ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
#pragma omp simd
        for (int64_t c = 0; c < classes; ++c)
          store<D>(dx, base + c, fillValue);
        continue;
      }
      float rowMax = load<D>(x, base);
      for (int64_t c = 1; c < classes; ++c)
        rowMax = softmaxMaxStep(rowMax, load<D>(x, base + c));
      float sumExp = 0;
      for (int64_t c = 0; c < classes; ++c) {
        terms[c] = softmaxExpTerm(load<D>(x, base + c), rowMax);
        sumExp += terms[c];
      }
#pragma omp simd
      for (int64_t c = 0; c < classes; ++c)
        store<D>(dx, base + c,
                 crossEntropyGradTerm(softmaxFromExpTerm(terms[c], sumExp), c == label,
                                      labelSmoothing, classes, scale));
    }
  });
}

template <bool Grad> std::unique_ptr<NodeKernel> prepareCrossEntropyFamily(const Node &n) {
  const Value *logits = n.operand(Grad ? 1 : 0);
  DType t = logits->dtype();
  if (!floatsOfDType(n, t))
    return nullptr;
  LoopPlan plan;
  plan.outer = logits->type().dim(0);
  plan.middle = logits->type().dim(1);
  if (plan.outer == 0)
    return nullptr; // the reference's 0/0 for an empty batch
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    return makeLoopKernel(Grad ? &crossEntropyGradLoop<D> : &crossEntropyLoop<D>, plan);
  });
}

} // namespace

std::unique_ptr<NodeKernel> prepareLoopSoftmax(const Node &n) {
  return prepareSoftmaxFamily</*Log=*/false, /*Grad=*/false>(n);
}
std::unique_ptr<NodeKernel> prepareLoopLogSoftmax(const Node &n) {
  return prepareSoftmaxFamily</*Log=*/true, /*Grad=*/false>(n);
}
std::unique_ptr<NodeKernel> prepareLoopSoftmaxGrad(const Node &n) {
  return prepareSoftmaxFamily</*Log=*/false, /*Grad=*/true>(n);
}
std::unique_ptr<NodeKernel> prepareLoopLogSoftmaxGrad(const Node &n) {
  return prepareSoftmaxFamily</*Log=*/true, /*Grad=*/true>(n);
}
std::unique_ptr<NodeKernel> prepareLoopCrossEntropy(const Node &n) {
  return prepareCrossEntropyFamily</*Grad=*/false>(n);
}
std::unique_ptr<NodeKernel> prepareLoopCrossEntropyGrad(const Node &n) {
  return prepareCrossEntropyFamily</*Grad=*/true>(n);
}

} // namespace ampc::kernels::cpu
