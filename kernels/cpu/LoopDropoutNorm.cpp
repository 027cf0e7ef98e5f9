//===- LoopDropoutNorm.cpp - dropout and global_norm loop kernels ---------===//
//
// dropout in f32, bf16 and f16 draws the reference's mask: an element's
// keep bit is dropoutKeep(seed, step, index) from kernels/common/Random.h, a
// pure function of its index, so the threads and vector lanes may take the
// elements in any order (the 64-bit multiplies of the mixer vectorize with
// AVX-512DQ) and the result is the reference's bits.
//
// global_norm sums the squares of every gradient in double, like the
// reference, but in fixed pieces added in order (LoopSupport.h), so it is
// the same on any number of threads and differs from the reference's
// sequential sum only by double rounding -- far below the f32 result's.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/ActivationMath.h"
#include "kernels/common/Random.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

template <DType D> void dropoutLoop(const KernelArgs &a, const LoopPlan &) {
  const void *x = a.in(0).data;
  void *y = a.out().data;
  int64_t n = a.out().numElements();
  double p = attrs::Dropout(*a.node).p();
  if (!attrs::Dropout(*a.node).training() || p == 0) {
    // The reference's identity: a load and a store (for half types that is
    // what the reference does to a NaN's payload, too).
    return parallelForElements(n, kElementwiseGrain,
                               [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
                                 for (int64_t i = begin; i < end; ++i)
                                   store<D>(y, i, load<D>(x, i));
                               });
  }
  uint64_t seed = opSeed(a.runSeed, static_cast<uint64_t>(attrs::Dropout(*a.node).seed()));
  uint64_t step = a.step;
  float scale = dropoutScale<float>(p), probability = static_cast<float>(p);
  parallelForElements(n, kElementwiseGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      bool keep = dropoutKeep(seed, step, static_cast<uint64_t>(i), probability);
      store<D>(y, i, dropoutOp(float(load<D>(x, i)), keep, scale));
    }
  });
}

/// One piece of one gradient: a range of its elements whose squares are
/// summed together.
struct NormPiece {
  unsigned tensor;
  int64_t begin, end;
};

/// Elements per piece of global_norm's sum.
constexpr int64_t kNormPiece = 4 * kSumPiece;

class GlobalNormKernel final : public LoopKernel {
public:
  explicit GlobalNormKernel(const Node &n) {
    for (unsigned t = 0; t < n.numOperands(); ++t) {
      int64_t size = n.operand(t)->type().numElements();
      for (int64_t begin = 0; begin < size; begin += kNormPiece)
        pieces_.push_back({t, begin, std::min(size, begin + kNormPiece)});
    }
    partials_.resize(pieces_.size());
  }

  void run(const KernelArgs &a) override {
    const NormPiece *pieces = pieces_.data();
    double *partials = partials_.data();
    llvm::ArrayRef<TensorArg> grads = a.inputs;
    int64_t count = static_cast<int64_t>(pieces_.size());
    // Pieces are large: one per chunk, split over the threads.
#pragma omp parallel for schedule(dynamic, 1) if (count > 1)
    for (int64_t p = 0; p < count; ++p) {
      const TensorArg &g = grads[pieces[p].tensor];
      partials[p] = 0;
      dispatchFloat(g.dtype(), [&](auto tag) {
        partials[p] = sumSquares<decltype(tag)::value>(g.data, pieces[p].begin, pieces[p].end);
      });
    }
    double total = 0;
    for (double partial : partials_)
      total += partial;
    storeFromDouble(a.out().dtype(), a.out().data, 0, std::sqrt(total));
  }

private:
  /// Sum of squares of elements [begin, end) in double, in kLanes lanes.
  template <DType D> static double sumSquares(const void *data, int64_t begin, int64_t end) {
    auto sum = [=](int64_t b, int64_t e) AMPC_LOOP_BODY {
      double lanes[kLanes] = {};
      int64_t i = b;
      for (; i + kLanes <= e; i += kLanes) {
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          double v = load<D>(data, i + l);
          lanes[l] += v * v;
        }
      }
      for (int l = 0; i < e; ++i, ++l) {
        double v = load<D>(data, i);
        lanes[l] += v * v;
      }
      for (int width = kLanes / 2; width >= 1; width /= 2)
        for (int l = 0; l < width; ++l)
          lanes[l] += lanes[l + width];
      return lanes[0];
    };
#if AMPC_LOOP_HAVE_WIDE
    if (loopsUseWideVectors())
      return sumWide(sum, begin, end);
#endif
    return sum(begin, end);
  }

  template <class Body>
  AMPC_LOOP_WIDE_TARGET AMPC_LOOP_NOINLINE static double sumWide(Body body, int64_t begin,
                                                                 int64_t end) {
    return body(begin, end);
  }

  std::vector<NormPiece> pieces_;
  std::vector<double> partials_;
};

} // namespace

std::unique_ptr<NodeKernel> prepareLoopDropout(const Node &n) {
  DType t = n.result()->dtype();
  if (n.operand(0)->dtype() != t)
    return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [](auto tag) {
    return makeLoopKernel(&dropoutLoop<decltype(tag)::value>);
  });
}

std::unique_ptr<NodeKernel> prepareLoopGlobalNorm(const Node &n) {
  for (const Value *v : n.operands())
    if (!isFloating(v->dtype()))
      return nullptr;
  return std::make_unique<GlobalNormKernel>(n);
}

} // namespace ampc::kernels::cpu
