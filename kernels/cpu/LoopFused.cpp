//===- LoopFused.cpp - Chains of elementwise ops in one pass (cpu backend) ===//
//
// A chain of elementwise nodes (runtime/Program.cpp finds them: adjacent in
// the schedule, one shape, each result read only by the next node) runs as
// one kernel: the tensor is cut into blocks of kBlock elements, the blocks
// are split over the threads, and each block goes through every node in turn,
// its intermediate results in two small per-thread buffers instead of
// full-size tensors. Each node stores its block in its result's dtype with
// the same store<>() as its own loop kernel (LoopElementwise.cpp), and the
// next node loads it back with load<>(), so every intermediate is rounded
// exactly as the unfused kernels round it and the chain's result has their
// bits (which are the reference's). f32 gelu and its gradient read tables
// where a block's inputs are all bf16 values (HalfTables.h), with the same
// bits.
//
//===----------------------------------------------------------------------===//
#include "kernels/Pointwise.h"
#include "kernels/common/CastMath.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/ElementFunctors.h"
#include "kernels/cpu/HalfTables.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <type_traits>

namespace ampc::kernels::cpu {
namespace {

/// Elements per block: two f32 blocks per thread stay in L1/L2.
constexpr int64_t kBlock = 4096;

/// One node's work on one block: out[i] = f(a[i], b[i]) for i in [0, n).
/// `b` is null for unary ops; `fn` is the stage's element functor (its
/// per-node state, see Stage::functor).
using StageFn = void (*)(const void *a, const void *b, void *out, int64_t n,
                         const FunctorBytes &fn);

template <DType In, DType Out, class Fn>
void unaryStage(const void *a, const void *, void *out, int64_t n, const FunctorBytes &fn) {
  Fn f = fn.get<Fn>();
  runVectorized(
      [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i)
          store<Out>(out, i, f(load<In>(a, i)));
      },
      0, n);
}

template <DType D, class Fn>
void binaryStage(const void *a, const void *b, void *out, int64_t n, const FunctorBytes &fn) {
  Fn f = fn.get<Fn>();
  runVectorized(
      [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i)
          store<D>(out, i, f(load<D>(a, i), load<D>(b, i)));
      },
      0, n);
}

/// A functor with kTabulateHalves (gelu) and its f32 tables at every bf16
/// value (HalfTables.h).
template <class Fn> struct Bf16Tabulated {
  const Bf16ValueTables *tables;
  Fn fn;
};

/// An f32 stage of gelu: from the table where the block's inputs are all
/// bf16 values (O1's cast-up linear outputs), with the bits the computed
/// loop gives; computed otherwise.
template <class Fn>
void tabulatedUnaryStage(const void *a, const void *, void *out, int64_t n,
                         const FunctorBytes &fn) {
  auto t = fn.get<Bf16Tabulated<Fn>>();
  const float *x = static_cast<const float *>(a);
  if (!allBf16Values(x, n)) {
    FunctorBytes plain;
    plain.set(t.fn);
    return unaryStage<DType::F32, DType::F32, Fn>(a, nullptr, out, n, plain);
  }
  const float *values = t.tables->values.data();
  float *y = static_cast<float *>(out);
  for (int64_t i = 0; i < n; ++i)
    y[i] = values[bf16Index(x[i])];
}

/// The f32 stage of gelu's gradient (dy, x): dy * f'(x), f' from the table
/// where the block's x are all bf16 values.
template <class Fn>
void tabulatedGradStage(const void *a, const void *b, void *out, int64_t n,
                        const FunctorBytes &fn) {
  auto t = fn.get<Bf16Tabulated<Fn>>();
  const float *dy = static_cast<const float *>(a), *x = static_cast<const float *>(b);
  if (!allBf16Values(x, n)) {
    FunctorBytes plain;
    plain.set(GradOf<Fn>{t.fn});
    return binaryStage<DType::F32, GradOf<Fn>>(a, b, out, n, plain);
  }
  const float *derivatives = t.tables->derivatives.data();
  float *dx = static_cast<float *>(out);
  for (int64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * derivatives[bf16Index(x[i])];
}

/// Where a stage's operand comes from: the previous stage's block, or an
/// input of the fused kernel (an operand from outside the chain).
constexpr int kPrevious = -1;

struct Stage {
  StageFn fn = nullptr;
  int a = kPrevious, b = kPrevious; ///< input index or kPrevious; b unused for unary stages
  bool binary = false;
  FunctorBytes functor; ///< the element functor
};

// The element functions: the unfused loops' own (kernels/Pointwise.h,
// ElementFunctors.h). Each maker sets a stage for node `n` of dtype `t`, or
// leaves fn null for dtypes the loops do not run.
using namespace elem;
using StageMaker = void (*)(const Node &n, DType t, Stage &st);

template <class Fn> void sameDTypeUnaryWith(DType t, Stage &st, const Fn &f) {
  st.functor.set(f);
  st.fn = dispatchLoopFloat(t, StageFn(nullptr), [](auto tag) {
    constexpr DType D = decltype(tag)::value;
    return StageFn(&unaryStage<D, D, Fn>);
  });
}

template <class Fn> void sameDTypeUnary(const Node &n, DType t, Stage &st) {
  withElementFn<Fn>(n, [&](auto f) {
    using F = decltype(f);
    if constexpr (TabulatesHalves<F>)
      if (t == DType::F32) {
        st.functor.set(Bf16Tabulated<F>{&bf16ValueTables(f), f});
        st.fn = &tabulatedUnaryStage<F>;
        return;
      }
    sameDTypeUnaryWith(t, st, f);
  });
}

template <class Fn> void sameDTypeBinaryWith(DType t, Stage &st, const Fn &f) {
  st.functor.set(f);
  st.fn = dispatchLoopFloat(t, StageFn(nullptr), [](auto tag) {
    return StageFn(&binaryStage<decltype(tag)::value, Fn>);
  });
}

template <class Fn> void sameDTypeBinary(const Node &n, DType t, Stage &st) {
  sameDTypeBinaryWith(t, st, makeElementFn<Fn>(n));
}

template <class Fn> void sameDTypeGrad(const Node &n, DType t, Stage &st) {
  withElementFn<Fn>(n, [&](auto f) {
    using F = decltype(f);
    if constexpr (TabulatesHalves<F>)
      if (t == DType::F32) {
        st.functor.set(Bf16Tabulated<F>{&bf16ValueTables(f), f});
        st.fn = &tabulatedGradStage<F>;
        return;
      }
    sameDTypeBinaryWith(t, st, GradOf<F>{f});
  });
}

StageFn castStage(DType from, DType to) {
  if (from == to) // the unfused kernel copies bytes (NaN payloads too): not fused
    return nullptr;
  return dispatchLoopFloat(from, StageFn(nullptr), [&](auto fromTag) {
    return dispatchLoopFloat(to, StageFn(nullptr), [&](auto toTag) {
      constexpr DType From = decltype(fromTag)::value, To = decltype(toTag)::value;
      return StageFn(&unaryStage<From, To, CastFn<To>>);
    });
  });
}

struct FusableOp {
  OpKind kind;
  StageMaker make;
};

/// The kernel table of the fused loops: the pointwise ops (ir/Pointwise.def);
/// cast is handled apart (two dtypes). Ops not listed here are not fused.
constexpr FusableOp kFusableOps[] = {
#define AMPC_POINTWISE_UNARY(Op, Fn) {OpKind::Op, sameDTypeUnary<Fn>},
#define AMPC_POINTWISE_GRAD(Op, GradOp, Fn, Saved) {OpKind::GradOp, sameDTypeGrad<Fn>},
#define AMPC_POINTWISE_BINARY(Op, Fn) {OpKind::Op, sameDTypeBinary<Fn>},
#include "ir/Pointwise.def"
};

/// The stage for `n`: fn stays null when the fused kernel does not take it
/// (its dtypes, or an op it has no element function for).
Stage stageFor(const Node &n) {
  Stage st;
  if (n.numResults() != 1)
    return st;
  DType t = n.result()->dtype();
  if (n.kind() == OpKind::Cast) {
    if (n.numOperands() == 1)
      st.fn = castStage(n.operand(0)->dtype(), t);
    return st;
  }
  for (const Value *v : n.operands())
    if (v->dtype() != t)
      return st;
  for (const FusableOp &op : kFusableOps)
    if (op.kind == n.kind()) {
      op.make(n, t, st);
      break;
    }
  return st;
}

class FusedLoopKernel final : public LoopKernel {
public:
  explicit FusedLoopKernel(llvm::SmallVector<Stage, 4> stages) : stages_(std::move(stages)) {}

  void run(const KernelArgs &args) override {
    int64_t n = args.out().numElements();
    int64_t blocks = (n + kBlock - 1) / kBlock;
    if (blocks <= 1 || n <= kElementwiseGrain || loopThreads() == 1) {
      for (int64_t b = 0; b < blocks; ++b)
        runBlock(args, b * kBlock, std::min(kBlock, n - b * kBlock));
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b)
      runBlock(args, b * kBlock, std::min(kBlock, n - b * kBlock));
  }

private:
  /// Elements [begin, begin + count) through every stage.
  void runBlock(const KernelArgs &args, int64_t begin, int64_t count) const {
    // Bytes for a block of the widest dtype the stages store (f32).
    alignas(64) unsigned char scratch[2][kBlock * sizeof(float)];
    auto at = [&](const TensorArg &t) -> char * {
      return static_cast<char *>(t.data) + begin * static_cast<int64_t>(dtypeSize(t.dtype()));
    };
    const void *previous = nullptr;
    for (size_t s = 0; s < stages_.size(); ++s) {
      const Stage &st = stages_[s];
      const void *a = st.a == kPrevious ? previous : at(args.in(st.a));
      const void *b = !st.binary ? nullptr : st.b == kPrevious ? previous : at(args.in(st.b));
      void *out = s + 1 == stages_.size() ? static_cast<void *>(at(args.out())) : scratch[s % 2];
      st.fn(a, b, out, count, st.functor);
      previous = out;
    }
  }

  llvm::SmallVector<Stage, 4> stages_;
};

} // namespace

bool fusableCpuNode(const Node &n) {
  if (!n.op().elementwise || n.numOperands() > 2)
    return false;
  return stageFor(n).fn != nullptr;
}

std::unique_ptr<NodeKernel> prepareFusedCpuKernel(llvm::ArrayRef<const Node *> chain) {
  if (chain.empty())
    return nullptr;
  const TensorType &shape = chain.back()->result()->type();
  llvm::SmallVector<Stage, 4> stages;
  int inputs = 0;
  const Value *previous = nullptr;
  for (const Node *n : chain) {
    if (!fusableCpuNode(*n) || n->result()->type().dims() != shape.dims())
      return nullptr;
    Stage st = stageFor(*n);
    st.binary = n->numOperands() == 2;
    bool readsPrevious = false;
    for (unsigned i = 0; i < n->numOperands(); ++i) {
      const Value *v = n->operand(i);
      if (v->type().dims() != shape.dims())
        return nullptr; // no broadcasting inside a chain
      int source = kPrevious;
      if (v == previous) {
        if (readsPrevious)
          return nullptr; // read twice: the chain finder never offers this
        readsPrevious = true;
      } else {
        source = inputs++;
      }
      (i == 0 ? st.a : st.b) = source;
    }
    if (previous && !readsPrevious)
      return nullptr; // not a chain
    stages.push_back(st);
    previous = n->result();
  }
  return std::make_unique<FusedLoopKernel>(std::move(stages));
}

} // namespace ampc::kernels::cpu
