//===- LoopHalfTables.cpp - Costly element functions of the half types -----===//
//
// A half type (bf16, f16) has 65536 values, so a unary element function that
// costs several cycles an element (gelu's erf polynomial and two exps: about
// 5 cycles on Zen 4's AVX-512, a quarter of a BERT layer's non-GEMM time)
// can be computed once for every input and then looked up. The forward's
// table holds f(x) already stored as the half type, the gradient's holds the
// derivative in f32 (grad(dy, x) == dy * derivative(x) in the functors of
// kernels/common/ActivationMath.h), so a loop is one load from the table per
// element (plus one multiply for the gradient).
//
// The tables are built by the same scalar functions as the reference's
// kernels (load<D>, the functor, store<D>), so the results keep the
// reference's bits; tests/unit/CpuHalfTableTest.cpp checks every one of
// the 65536 inputs. A table is built the first time a kernel asks for it
// and kept for the process (128 KiB for a forward, 256 KiB for a gradient,
// one per functor state and dtype), shared by every node that uses it.
//
// The f32 tables of HalfTables.h (f and f' at every bf16 value, 512 KiB per
// functor state) serve fused f32 chains whose inputs are bf16 values
// (LoopFused.cpp).
//
//===----------------------------------------------------------------------===//
#include "kernels/Pointwise.h"
#include "kernels/cpu/HalfTables.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

constexpr int kHalfValues = 1 << 16;

using ResultTable = std::array<uint16_t, kHalfValues>;
using DerivativeTable = std::array<float, kHalfValues>;

/// The table `build(f)` makes for functor state `f`, built once per process
/// and state (gelu's two forms are two states).
template <class Table, DType D, class Fn, class Build>
const Table &cachedTable(const Fn &f, Build build) {
  static std::mutex mutex;
  static std::vector<std::pair<Fn, std::unique_ptr<Table>>> tables;
  auto sameState = [&](const Fn &other) {
    if constexpr (std::is_empty_v<Fn>)
      return true;
    else
      return std::memcmp(&other, &f, sizeof(Fn)) == 0;
  };
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto &[state, table] : tables)
    if (sameState(state))
      return *table;
  auto table = std::make_unique<Table>();
  build(f, *table);
  tables.emplace_back(f, std::move(table));
  return *tables.back().second;
}

/// The half value whose bits are `bits`, widened as the loops widen it.
template <DType D> float halfValue(uint16_t bits) { return load<D>(&bits, 0); }

template <DType D, class Fn> const ResultTable &resultTable(const Fn &f) {
  return cachedTable<ResultTable, D>(f, [](const Fn &fn, ResultTable &table) {
    for (int bits = 0; bits < kHalfValues; ++bits)
      store<D>(table.data(), bits, fn(halfValue<D>(static_cast<uint16_t>(bits))));
  });
}

template <DType D, class Fn> const DerivativeTable &derivativeTable(const Fn &f) {
  return cachedTable<DerivativeTable, D>(f, [](const Fn &fn, DerivativeTable &table) {
    for (int bits = 0; bits < kHalfValues; ++bits)
      table[bits] = fn.derivative(halfValue<D>(static_cast<uint16_t>(bits)));
  });
}

template <class Fn> const Bf16ValueTables &valueTables(const Fn &f) {
  return cachedTable<Bf16ValueTables, DType::F32>(f, [](const Fn &fn, Bf16ValueTables &t) {
    for (int bits = 0; bits < kHalfValues; ++bits) {
      float x = halfValue<DType::BF16>(static_cast<uint16_t>(bits));
      t.values[bits] = fn(x);
      t.derivatives[bits] = fn.derivative(x);
    }
  });
}

/// y[i] = table[x[i]].
class TableUnaryKernel final : public LoopKernel {
public:
  explicit TableUnaryKernel(const ResultTable &table) : table_(table.data()) {}
  void run(const KernelArgs &a) override {
    const uint16_t *x = static_cast<const uint16_t *>(a.in(0).data);
    uint16_t *y = static_cast<uint16_t *>(a.out().data);
    const uint16_t *table = table_;
    parallelForElements(a.out().numElements(), kElementwiseGrain,
                        [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                          for (int64_t i = begin; i < end; ++i)
                            y[i] = table[x[i]];
                        });
  }

private:
  const uint16_t *table_;
};

/// dx[i] = dy[i] * derivative[x[i]], rounded to D once.
template <DType D> class TableGradKernel final : public LoopKernel {
public:
  explicit TableGradKernel(const DerivativeTable &derivative) : derivative_(derivative.data()) {}
  void run(const KernelArgs &a) override {
    const void *dy = a.in(0).data;
    const uint16_t *x = static_cast<const uint16_t *>(a.in(1).data);
    void *dx = a.out().data;
    const float *derivative = derivative_;
    parallelForElements(a.out().numElements(), kElementwiseGrain,
                        [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
                          float dys[kHalfBlock], dxs[kHalfBlock];
                          forBlocks(begin, end, [&](int64_t i, int64_t n) AMPC_LOOP_BODY {
                            const float *dyv = loadBlock<D>(dy, i, n, dys);
#pragma omp simd
                            for (int64_t j = 0; j < n; ++j)
                              dxs[j] = dyv[j] * derivative[x[i + j]];
                            storeBlock<D>(dxs, dx, i, n);
                          });
                        });
  }

private:
  const float *derivative_;
};

/// Calls make(DTypeTag<D>{}) when every operand and result of `n` is one
/// half type D; null otherwise.
template <class Make> std::unique_ptr<NodeKernel> forHalfNode(const Node &n, Make make) {
  DType t = n.result()->dtype();
  if (!allOfDType(n, t))
    return nullptr;
  if (t == DType::BF16)
    return make(DTypeTag<DType::BF16>{});
  if (t == DType::F16)
    return make(DTypeTag<DType::F16>{});
  return nullptr;
}

} // namespace

template <class Fn> std::unique_ptr<NodeKernel> prepareHalfTableUnary(const Node &n, const Fn &f) {
  return forHalfNode(n, [&](auto tag) -> std::unique_ptr<NodeKernel> {
    return std::make_unique<TableUnaryKernel>(resultTable<decltype(tag)::value>(f));
  });
}

template <class Fn> std::unique_ptr<NodeKernel> prepareHalfTableGrad(const Node &n, const Fn &f) {
  // The gradient's operands (dy, x) have the result's shape.
  for (const Value *operand : n.operands())
    if (operand->type().numElements() != n.result()->type().numElements())
      return nullptr;
  return forHalfNode(n, [&](auto tag) -> std::unique_ptr<NodeKernel> {
    constexpr DType D = decltype(tag)::value;
    return std::make_unique<TableGradKernel<D>>(derivativeTable<D>(f));
  });
}

template <class Fn> const Bf16ValueTables &bf16ValueTables(const Fn &f) { return valueTables(f); }

#define AMPC_HALF_TABLE(Fn)                                                                        \
  template std::unique_ptr<NodeKernel> prepareHalfTableUnary<Fn>(const Node &, const Fn &);        \
  template std::unique_ptr<NodeKernel> prepareHalfTableGrad<Fn>(const Node &, const Fn &);         \
  template const Bf16ValueTables &bf16ValueTables<Fn>(const Fn &);
AMPC_HALF_TABLE(GeluFn)
AMPC_HALF_TABLE(GeluErfFn)
#undef AMPC_HALF_TABLE

} // namespace ampc::kernels::cpu
