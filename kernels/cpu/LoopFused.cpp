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
// bits (which are the reference's).
//
//===----------------------------------------------------------------------===//
#include "kernels/common/ActivationMath.h"
#include "kernels/common/CastMath.h"
#include "kernels/common/ElementwiseMath.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/ElementFunctors.h"
#include "kernels/cpu/LoopSupport.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>

namespace ampc::kernels::cpu {
namespace {

/// Elements per block: two f32 blocks per thread stay in L1/L2.
constexpr int64_t kBlock = 4096;

/// One node's work on one block: out[i] = f(a[i], b[i]) for i in [0, n).
/// `b` is null for unary ops; `factor` is scale's.
using StageFn = void (*)(const void *a, const void *b, void *out, int64_t n, double factor);

template <DType In, DType Out, class Fn>
void unaryStage(const void *a, const void *, void *out, int64_t n, double factor) {
  Fn f{factor};
  runVectorized(
      [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i)
          store<Out>(out, i, f(load<In>(a, i)));
      },
      0, n);
}

template <DType D, class Fn>
void binaryStage(const void *a, const void *b, void *out, int64_t n, double) {
  Fn f;
  runVectorized(
      [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i)
          store<D>(out, i, f(load<D>(a, i), load<D>(b, i)));
      },
      0, n);
}

// The element functions: the unfused loops' own (ElementFunctors.h).
using namespace elem;

template <class Fn> StageFn sameDTypeUnary(DType t) {
  return dispatchLoopFloat(t, StageFn(nullptr), [](auto tag) {
    constexpr DType D = decltype(tag)::value;
    return StageFn(&unaryStage<D, D, Fn>);
  });
}

template <class Fn> StageFn sameDTypeBinary(DType t) {
  return dispatchLoopFloat(t, StageFn(nullptr), [](auto tag) {
    return StageFn(&binaryStage<decltype(tag)::value, Fn>);
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

bool isTanhApproximation(const Node &n) { return n.attr("approximate").getString() == "tanh"; }

/// The stage function for `n`, or null when the fused kernel does not take
/// it (its dtypes, or an op it has no element function for). The kernel
/// table of the fused loops: ops not listed here are not fused.
StageFn stageFor(const Node &n) {
  if (n.numResults() != 1)
    return nullptr;
  DType t = n.result()->dtype();
  if (n.kind() == OpKind::Cast)
    return n.numOperands() == 1 ? castStage(n.operand(0)->dtype(), t) : nullptr;
  for (const Value *v : n.operands())
    if (v->dtype() != t)
      return nullptr;
  switch (n.kind()) {
  case OpKind::Relu:
    return sameDTypeUnary<ReluFn>(t);
  case OpKind::Scale:
    return sameDTypeUnary<ScaleFn>(t);
  case OpKind::Gelu:
    return isTanhApproximation(n) ? sameDTypeUnary<GeluTanhFn>(t) : sameDTypeUnary<GeluErfFn>(t);
  case OpKind::Sigmoid:
    return sameDTypeUnary<SigmoidFn>(t);
  case OpKind::Tanh:
    return sameDTypeUnary<TanhFn>(t);
  case OpKind::Add:
    return sameDTypeBinary<AddFn>(t);
  case OpKind::Sub:
    return sameDTypeBinary<SubFn>(t);
  case OpKind::Mul:
    return sameDTypeBinary<MulFn>(t);
  case OpKind::Div:
    return sameDTypeBinary<DivFn>(t);
  case OpKind::ReluGrad:
    return sameDTypeBinary<ReluGradFn>(t);
  case OpKind::GeluGrad:
    return isTanhApproximation(n) ? sameDTypeBinary<GeluTanhGradFn>(t)
                                  : sameDTypeBinary<GeluErfGradFn>(t);
  case OpKind::SigmoidGrad:
    return sameDTypeBinary<SigmoidGradFn>(t);
  case OpKind::TanhGrad:
    return sameDTypeBinary<TanhGradFn>(t);
  default:
    return nullptr;
  }
}

/// Where a stage's operand comes from: the previous stage's block, or an
/// input of the fused kernel (an operand from outside the chain).
constexpr int kPrevious = -1;

struct Stage {
  StageFn fn;
  int a = kPrevious, b = kPrevious; ///< input index or kPrevious; b unused for unary stages
  bool binary = false;
  double factor = 0; ///< scale's
};

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
      st.fn(a, b, out, count, st.factor);
      previous = out;
    }
  }

  llvm::SmallVector<Stage, 4> stages_;
};

} // namespace

bool fusableCpuNode(const Node &n) {
  if (!n.op().elementwise || n.numOperands() > 2)
    return false;
  return stageFor(n) != nullptr;
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
    Stage st;
    st.fn = stageFor(*n);
    st.binary = n->numOperands() == 2;
    if (n->kind() == OpKind::Scale)
      st.factor = n->attr("factor").getFloat();
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
