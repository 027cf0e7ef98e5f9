//===- LoopElementwise.cpp - Elementwise loop kernels of the cpu backend ---===//
//
// cast, the pointwise ops of ir/Pointwise.def (unary ops, the activations'
// gradients, binary ops of same shapes or with one operand broadcast over a
// contiguous block of the result's dims: a bias row, a per-channel [C, 1, 1]
// or a scalar), mse_loss_grad and global_avgpool_grad, in f32, bf16 and f16. Each element
// runs the reference's element function from kernels/common, so the results
// are the reference's bits. f16 elements are converted a block at a time in
// hardware (vcvtph2ps / vcvtps2ph, see halvesToFloats in LoopSupport.h, with
// the scalar conversions' bits) into float buffers the element function runs
// over, so f16 loops vectorize too; cast between f32 and f16 is the
// conversion alone. (f64 -> f16 is not a loop: it rounds through f32.)
//
//===----------------------------------------------------------------------===//
#include "kernels/Pointwise.h"
#include "kernels/common/CastMath.h"
#include "kernels/common/LossMath.h"
#include "kernels/cpu/ElementFunctors.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace ampc::kernels::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Unary maps: out[i] = f(in[i])
//===----------------------------------------------------------------------===//

using namespace elem;

template <DType In, DType Out, class Fn> void unaryMap(const KernelArgs &a, const LoopPlan &plan) {
  const void *x = a.in(0).data;
  void *y = a.out().data;
  Fn f = plan.elementFn.get<Fn>();
  // The half types through float blocks: for bf16 too, where a direct loop
  // around a long functor (gelu's) stayed scalar with a call per store.
  if constexpr (In == DType::F16 || Out == DType::F16 || In == DType::BF16 || Out == DType::BF16) {
    parallelForElements(a.out().numElements(), kElementwiseGrain,
                        [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                          float xs[kHalfBlock], ys[kHalfBlock];
                          forBlocks(begin, end, [&](int64_t i, int64_t n) AMPC_LOOP_BODY {
                            const float *xv = loadBlock<In>(x, i, n, xs);
                            float *yv = resultBlock<Out>(y, i, ys);
#pragma omp simd
                            for (int64_t j = 0; j < n; ++j)
                              yv[j] = f(xv[j]);
                            storeBlock<Out>(yv, y, i, n);
                          });
                        });
  } else {
    parallelForElements(a.out().numElements(), kElementwiseGrain,
                        [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
                          for (int64_t i = begin; i < end; ++i)
                            store<Out>(y, i, f(load<In>(x, i)));
                        });
  }
}

/// cast f32 -> f16 and f16 -> f32: the conversion alone.
void castF32ToF16(const KernelArgs &a, const LoopPlan &) {
  const float *x = static_cast<const float *>(a.in(0).data);
  uint16_t *y = static_cast<uint16_t *>(a.out().data);
  parallelForElements(a.out().numElements(), kElementwiseGrain, [=](int64_t begin, int64_t end) {
    floatsToHalves(x + begin, y + begin, end - begin);
  });
}

void castF16ToF32(const KernelArgs &a, const LoopPlan &) {
  const uint16_t *x = static_cast<const uint16_t *>(a.in(0).data);
  float *y = static_cast<float *>(a.out().data);
  parallelForElements(a.out().numElements(), kElementwiseGrain, [=](int64_t begin, int64_t end) {
    halvesToFloats(x + begin, y + begin, end - begin);
  });
}

void copyBytes(const KernelArgs &a, const LoopPlan &) {
  copyInParallel(a.in(0).data, a.out().data, a.out().type->sizeInBytes());
}

template <class Fn> std::unique_ptr<NodeKernel> prepareSameDTypeUnary(const Node &n, Fn fn) {
  DType t = n.operand(0)->dtype();
  if (!allOfDType(n, t))
    return nullptr;
  LoopPlan plan;
  plan.elementFn.set(fn);
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    return makeLoopKernel(&unaryMap<D, D, Fn>, plan);
  });
}

//===----------------------------------------------------------------------===//
// Binary maps: out[i] = f(lhs[i'], rhs[i''])
//===----------------------------------------------------------------------===//

/// plan.variant of a binary map: both operands have the result's shape, or
/// one of them (the other has the result's shape) is broadcast.
enum BinaryVariant : int { kSameShape = 0, kRhsBroadcast = 1, kLhsBroadcast = 2 };

/// binaryMap for the half types: the same loops, over blocks converted to
/// float buffers. For bf16 too: a direct loop of load<BF16>/store<BF16>
/// around a long functor (gelu's gradient) stayed scalar, with store<BF16>
/// called per element, and took a third of a BERT layer's step.
template <DType D, class Fn> void binaryMapBlocked(const KernelArgs &a, const LoopPlan &plan) {
  const void *lhs = a.in(0).data, *rhs = a.in(1).data;
  void *out = a.out().data;
  int64_t n = a.out().numElements();
  Fn f = plan.elementFn.get<Fn>();
  if (plan.variant == kSameShape)
    return parallelForElements(
        n, kElementwiseGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
          float ls[kHalfBlock], rs[kHalfBlock], os[kHalfBlock];
          forBlocks(begin, end, [&](int64_t i, int64_t len) AMPC_LOOP_BODY {
            const float *lv = loadBlock<D>(lhs, i, len, ls), *rv = loadBlock<D>(rhs, i, len, rs);
#pragma omp simd
            for (int64_t j = 0; j < len; ++j)
              os[j] = f(lv[j], rv[j]);
            storeBlock<D>(os, out, i, len);
          });
        });
  bool rhsBroadcast = plan.variant == kRhsBroadcast;
  const void *full = rhsBroadcast ? lhs : rhs, *broadcast = rhsBroadcast ? rhs : lhs;
  auto apply = [=](float fullValue, float broadcastValue) AMPC_LOOP_BODY {
    return rhsBroadcast ? f(fullValue, broadcastValue) : f(broadcastValue, fullValue);
  };
  int64_t middle = plan.middle, inner = plan.inner;
  if (inner == 1) {
    int64_t rows = n / middle;
    return parallelFor(rows, std::max<int64_t>(1, kElementwiseGrain / middle),
                       [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                         float fs[kHalfBlock], bs[kHalfBlock], os[kHalfBlock];
                         for (int64_t r = begin; r < end; ++r)
                           forBlocks(0, middle, [&](int64_t m, int64_t len) AMPC_LOOP_BODY {
                             const float *fv = loadBlock<D>(full, r * middle + m, len, fs);
                             const float *bv = loadBlock<D>(broadcast, m, len, bs);
#pragma omp simd
                             for (int64_t j = 0; j < len; ++j)
                               os[j] = apply(fv[j], bv[j]);
                             storeBlock<D>(os, out, r * middle + m, len);
                           });
                       });
  }
  int64_t blocks = n / inner;
  parallelFor(blocks, std::max<int64_t>(1, kElementwiseGrain / inner),
              [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                float fs[kHalfBlock], os[kHalfBlock];
                for (int64_t b = begin; b < end; ++b) {
                  float value = load<D>(broadcast, b % middle);
                  forBlocks(b * inner, (b + 1) * inner, [&](int64_t i, int64_t len) AMPC_LOOP_BODY {
                    const float *fv = loadBlock<D>(full, i, len, fs);
#pragma omp simd
                    for (int64_t j = 0; j < len; ++j)
                      os[j] = apply(fv[j], value);
                    storeBlock<D>(os, out, i, len);
                  });
                }
              });
}

/// out = f(lhs, rhs). A broadcast operand holds plan.middle elements: block b
/// of plan.inner consecutive result elements reads its element b % middle.
template <DType D, class Fn> void binaryMap(const KernelArgs &a, const LoopPlan &plan) {
  const void *lhs = a.in(0).data, *rhs = a.in(1).data;
  void *out = a.out().data;
  int64_t n = a.out().numElements();
  Fn f = plan.elementFn.get<Fn>();
  if (plan.variant == kSameShape)
    return parallelForElements(n, kElementwiseGrain,
                               [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
                                 for (int64_t i = begin; i < end; ++i)
                                   store<D>(out, i, f(load<D>(lhs, i), load<D>(rhs, i)));
                               });
  bool rhsBroadcast = plan.variant == kRhsBroadcast;
  const void *full = rhsBroadcast ? lhs : rhs, *broadcast = rhsBroadcast ? rhs : lhs;
  // The operands in f's order, from the full operand's element and the
  // broadcast operand's.
  auto apply = [=](float fullValue, float broadcastValue) AMPC_LOOP_BODY {
    return rhsBroadcast ? f(fullValue, broadcastValue) : f(broadcastValue, fullValue);
  };
  int64_t middle = plan.middle, inner = plan.inner;
  if (inner == 1) {
    // A row of `middle` elements (a bias) repeated: vectorize along the row.
    int64_t rows = n / middle;
    return parallelFor(rows, std::max<int64_t>(1, kElementwiseGrain / middle),
                       [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                         for (int64_t r = begin; r < end; ++r) {
#pragma omp simd
                           for (int64_t m = 0; m < middle; ++m)
                             store<D>(out, r * middle + m,
                                      apply(load<D>(full, r * middle + m), load<D>(broadcast, m)));
                         }
                       });
  }
  // One broadcast value per block of `inner` elements (a per-channel value
  // over a plane): vectorize along the block.
  int64_t blocks = n / inner;
  parallelFor(blocks, std::max<int64_t>(1, kElementwiseGrain / inner),
              [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                for (int64_t b = begin; b < end; ++b) {
                  float value = load<D>(broadcast, b % middle);
#pragma omp simd
                  for (int64_t j = 0; j < inner; ++j)
                    store<D>(out, b * inner + j, apply(load<D>(full, b * inner + j), value));
                }
              });
}

template <class Fn> std::unique_ptr<NodeKernel> prepareBinary(const Node &n, Fn fn) {
  DType t = n.result()->dtype();
  if (!allOfDType(n, t) || !isLoopFloat(t))
    return nullptr;
  const TensorType &out = n.result()->type();
  LoopPlan plan;
  plan.elementFn.set(fn);
  auto lhs = broadcastPattern(n.operand(0)->type().dims(), out.dims());
  auto rhs = broadcastPattern(n.operand(1)->type().dims(), out.dims());
  if (!lhs || !rhs)
    return nullptr;
  int64_t size = out.numElements();
  bool lhsFull = lhs->first == size, rhsFull = rhs->first == size;
  if (lhsFull && rhsFull) {
    plan.variant = kSameShape;
  } else if (lhsFull || rhsFull) {
    plan.variant = lhsFull ? kRhsBroadcast : kLhsBroadcast;
    std::tie(plan.middle, plan.inner) = lhsFull ? *rhs : *lhs;
    if (plan.middle == 1) // a scalar: blocks of the whole tensor
      plan.inner = std::max<int64_t>(size, 1);
  } else {
    return nullptr; // both broadcast ([N, 1] + [1, C]): the reference does it
  }
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (D == DType::F16 || D == DType::BF16)
      return makeLoopKernel(&binaryMapBlocked<D, Fn>, plan);
    else
      return makeLoopKernel(&binaryMap<D, Fn>, plan);
  });
}

//===----------------------------------------------------------------------===//
// Others
//===----------------------------------------------------------------------===//

/// (dy, input, target) -> d input = squaredErrorGradTerm(input, target, dy / n).
template <DType D> void mseLossGradLoop(const KernelArgs &a, const LoopPlan &) {
  const void *input = a.in(1).data, *target = a.in(2).data;
  void *out = a.out().data;
  int64_t n = a.out().numElements();
  float scale = load<D>(a.in(0).data, 0) / float(n);
  if constexpr (D == DType::F16) {
    parallelForElements(n, kElementwiseGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
      float is[kHalfBlock], ts[kHalfBlock], os[kHalfBlock];
      forBlocks(begin, end, [&](int64_t i, int64_t len) AMPC_LOOP_BODY {
        const float *iv = loadBlock<D>(input, i, len, is), *tv = loadBlock<D>(target, i, len, ts);
#pragma omp simd
        for (int64_t j = 0; j < len; ++j)
          os[j] = squaredErrorGradTerm(iv[j], tv[j], scale);
        storeBlock<D>(os, out, i, len);
      });
    });
  } else {
    parallelForElements(n, kElementwiseGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i)
        store<D>(out, i, squaredErrorGradTerm(load<D>(input, i), load<D>(target, i), scale));
    });
  }
}

/// dy [N, C, 1, 1] -> dx [N, C, H, W]: each plane gets dy / (H W).
template <DType D> void globalAvgPoolGradLoop(const KernelArgs &a, const LoopPlan &) {
  const void *dy = a.in(0).data;
  void *dx = a.out().data;
  llvm::ArrayRef<int64_t> dims = a.out().dims();
  int64_t planes = dims[0] * dims[1], planeSize = dims[2] * dims[3];
  parallelFor(planes, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(planeSize, 1)),
              [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                for (int64_t p = begin; p < end; ++p) {
                  float share = load<D>(dy, p) / static_cast<float>(planeSize);
                  if constexpr (D == DType::F16) {
                    // One conversion per plane, then a fill.
                    uint16_t bits = floatToHalfBits(share);
                    uint16_t *plane = static_cast<uint16_t *>(dx) + p * planeSize;
#pragma omp simd
                    for (int64_t e = 0; e < planeSize; ++e)
                      plane[e] = bits;
                  } else {
#pragma omp simd
                    for (int64_t e = 0; e < planeSize; ++e)
                      store<D>(dx, p * planeSize + e, share);
                  }
                }
              });
}

} // namespace

std::optional<std::pair<int64_t, int64_t>> broadcastPattern(llvm::ArrayRef<int64_t> dims,
                                                            llvm::ArrayRef<int64_t> outDims) {
  size_t rank = outDims.size(), offset = rank - dims.size();
  int64_t middle = 1, inner = 1;
  bool seenKept = false, endedKept = false;
  for (size_t d = 0; d < rank; ++d) {
    int64_t own = d >= offset ? dims[d - offset] : 1;
    if (outDims[d] == 1) // neither kept nor broadcast
      continue;
    bool kept = own == outDims[d];
    if (kept) {
      if (endedKept)
        return std::nullopt;
      seenKept = true;
      middle *= outDims[d];
      continue;
    }
    if (seenKept) {
      endedKept = true;
      inner *= outDims[d];
    }
  }
  if (!seenKept) // a scalar: every element reads element 0
    inner = 1;
  return std::make_pair(middle, inner);
}

std::unique_ptr<NodeKernel> prepareLoopCast(const Node &n) {
  DType from = n.operand(0)->dtype(), to = n.result()->dtype();
  if (from == to) // every bit kept (NaN payloads too), any dtype
    return makeLoopKernel(&copyBytes);
  return dispatchLoopFloat(from, std::unique_ptr<NodeKernel>(), [&](auto fromTag) {
    return dispatchLoopFloat(to, std::unique_ptr<NodeKernel>(), [&](auto toTag) {
      constexpr DType From = decltype(fromTag)::value, To = decltype(toTag)::value;
      if constexpr (From == DType::F32 && To == DType::F16)
        return makeLoopKernel(&castF32ToF16);
      else if constexpr (From == DType::F16 && To == DType::F32)
        return makeLoopKernel(&castF16ToF32);
      else
        return makeLoopKernel(&unaryMap<From, To, CastFn<To>>);
    });
  });
}

// The pointwise ops of ir/Pointwise.def. tanh and gelu's tanh form call
// libm's tanh per element, as the reference does (the same scalar
// functions, so the same bits): the threads speed them up, vectors do not.
// sigmoid, silu and gelu's erf form (and their gradients) in f32 and the
// half types are float arithmetic and portableExp alone (ActivationMath.h),
// shared with the reference, so their loops vectorize with the same bits; in
// bf16 and f16 gelu and its gradient read tables (LoopHalfTables.cpp).

template <class Fn> std::unique_ptr<NodeKernel> prepareLoopUnary(const Node &n) {
  return withElementFn<Fn>(n, [&](auto f) {
    if constexpr (TabulatesHalves<decltype(f)>)
      if (auto table = prepareHalfTableUnary(n, f))
        return table;
    return prepareSameDTypeUnary(n, f);
  });
}

template <class Fn> std::unique_ptr<NodeKernel> prepareLoopGrad(const Node &n) {
  // The backward ops' operands have the result's shape; prepareBinary sees that.
  return withElementFn<Fn>(n, [&](auto f) {
    if constexpr (TabulatesHalves<decltype(f)>)
      if (auto table = prepareHalfTableGrad(n, f))
        return table;
    return prepareBinary(n, GradOf<decltype(f)>{f});
  });
}

template <class Fn> std::unique_ptr<NodeKernel> prepareLoopBinary(const Node &n) {
  return prepareBinary(n, makeElementFn<Fn>(n));
}

#define AMPC_POINTWISE_UNARY(Op, Fn)                                                               \
  template std::unique_ptr<NodeKernel> prepareLoopUnary<Fn>(const Node &);
#define AMPC_POINTWISE_GRAD(Op, GradOp, Fn, Saved)                                                 \
  template std::unique_ptr<NodeKernel> prepareLoopGrad<Fn>(const Node &);
#define AMPC_POINTWISE_BINARY(Op, Fn)                                                              \
  template std::unique_ptr<NodeKernel> prepareLoopBinary<Fn>(const Node &);
#include "ir/Pointwise.def"

std::unique_ptr<NodeKernel> prepareLoopMseLossGrad(const Node &n) {
  // The reference reads all three operands in the result's dtype.
  DType t = n.result()->dtype();
  if (!allOfDType(n, t))
    return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [](auto tag) {
    return makeLoopKernel(&mseLossGradLoop<decltype(tag)::value>);
  });
}

std::unique_ptr<NodeKernel> prepareLoopGlobalAvgPoolGrad(const Node &n) {
  DType t = n.result()->dtype();
  if (!allOfDType(n, t) || n.result()->type().rank() != 4)
    return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [](auto tag) {
    return makeLoopKernel(&globalAvgPoolGradLoop<decltype(tag)::value>);
  });
}

} // namespace ampc::kernels::cpu
