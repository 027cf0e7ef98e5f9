//===- LoopSelect.cpp - where as a loop kernel of the cpu backend ---------===//
//
// where(condition, x, y): each result element is x's or y's by the bool
// condition, the three operands broadcast as numpy does. A causal mask
// (masked_fill over a [1, 1, T, T] mask, nanoGPT's attention) and its
// gradient are where nodes, and the reference kernel's index arithmetic per
// element made them a fifth of an imported GPT's step. The loop walks the
// result in runs over which each operand is read element by element or
// stays on one element (a mask row broadcast over heads, a scalar fill), so
// each run is one vectorized blend. It copies element bits, so it takes
// every dtype and gives the reference's bits. An
// operand whose broadcast is not one (middle, inner) pattern
// (broadcastPattern) leaves the node to the reference kernel.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

namespace ampc::kernels::cpu {
namespace {

/// Elements per thread below which a selection stays on one thread.
constexpr int64_t kSelectGrain = 4 * kElementwiseGrain;

/// Where an operand is read as the result is walked in C order: result
/// element i reads element (i / inner) % middle.
struct Walk {
  int64_t middle = 1, inner = 1;
};

/// A walk's position: the element read and how many result elements have
/// read it so far.
struct Cursor {
  int64_t index = 0, within = 0;

  Cursor(const Walk &w, int64_t i) : index((i / w.inner) % w.middle), within(i % w.inner) {}
};

/// The unsigned integer of an element's size: the selection copies bits,
/// and integers let the compiler blend them in vectors.
template <size_t Size> struct ElementBits;
template <> struct ElementBits<1> { using type = uint8_t; };
template <> struct ElementBits<2> { using type = uint16_t; };
template <> struct ElementBits<4> { using type = uint32_t; };
template <> struct ElementBits<8> { using type = uint64_t; };

/// How an operand is read along a run of result elements: element by
/// element (stride 1) or the same element throughout (stride 0).
enum class Step { Same, Next };

/// Result elements from cursor `c` on for which its operand keeps one step:
/// an operand broadcast whole (middle 1) is the same element forever; a
/// walk with inner 1 reads the next element until it wraps; otherwise the
/// same element until `inner` result elements have read it.
int64_t runOf(const Walk &w, const Cursor &c, Step &step) {
  if (w.middle == 1) {
    step = Step::Same;
    return INT64_MAX;
  }
  if (w.inner == 1) {
    step = Step::Next;
    return w.middle - c.index;
  }
  step = Step::Same;
  return w.inner - c.within;
}

/// One run: `n` result elements with each operand at a fixed step, so the
/// loop has no index arithmetic and vectorizes (a blend per vector). Bits
/// 4, 2 and 1 of `Next` say whether the condition, x and y step.
template <class E, unsigned Next>
void selectRun(const uint8_t *condition, const E *x, const E *y, E *out, int64_t n) {
  constexpr bool nextC = Next & 4, nextX = Next & 2, nextY = Next & 1;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    out[j] = condition[nextC ? j : 0] ? x[nextX ? j : 0] : y[nextY ? j : 0];
}

template <class E>
void selectRun(Step c, Step l, Step r, const uint8_t *condition, const E *x, const E *y, E *out,
               int64_t n) {
  using Run = void (*)(const uint8_t *, const E *, const E *, E *, int64_t);
  static constexpr Run runs[8] = {&selectRun<E, 0>, &selectRun<E, 1>, &selectRun<E, 2>,
                                  &selectRun<E, 3>, &selectRun<E, 4>, &selectRun<E, 5>,
                                  &selectRun<E, 6>, &selectRun<E, 7>};
  constexpr Step N = Step::Next;
  runs[(c == N ? 4 : 0) | (l == N ? 2 : 0) | (r == N ? 1 : 0)](condition, x, y, out, n);
}

/// Moves a cursor `n` result elements on (within the run runOf gave).
void advanceBy(const Walk &w, Cursor &c, int64_t n) {
  if (w.middle == 1)
    return;
  if (w.inner == 1) {
    c.index += n;
    if (c.index == w.middle)
      c.index = 0;
    return;
  }
  c.within += n;
  if (c.within == w.inner) {
    c.within = 0;
    if (++c.index == w.middle)
      c.index = 0;
  }
}

template <size_t Size> class WhereKernel final : public LoopKernel {
public:
  explicit WhereKernel(const std::array<Walk, 3> &walks) : walks_(walks) {}

  void run(const KernelArgs &a) override {
    using E = typename ElementBits<Size>::type;
    const auto *condition = static_cast<const uint8_t *>(a.in(0).data);
    const E *x = static_cast<const E *>(a.in(1).data), *y = static_cast<const E *>(a.in(2).data);
    E *out = static_cast<E *>(a.out().data);
    std::array<Walk, 3> w = walks_;
    parallelFor(a.out().numElements(), kSelectGrain, [=](int64_t begin, int64_t end) {
      Cursor c(w[0], begin), l(w[1], begin), r(w[2], begin);
      // The result in runs over which every operand keeps its step.
      for (int64_t i = begin; i < end;) {
        Step sc, sl, sr;
        int64_t n = std::min({end - i, runOf(w[0], c, sc), runOf(w[1], l, sl), runOf(w[2], r, sr)});
        selectRun(sc, sl, sr, condition + c.index, x + l.index, y + r.index, out + i, n);
        advanceBy(w[0], c, n);
        advanceBy(w[1], l, n);
        advanceBy(w[2], r, n);
        i += n;
      }
    });
  }

private:
  std::array<Walk, 3> walks_;
};

} // namespace

std::unique_ptr<NodeKernel> prepareLoopWhere(const Node &n) {
  const TensorType &out = n.result()->type();
  if (n.numOperands() != 3 || n.operand(0)->dtype() != DType::Bool ||
      n.operand(1)->dtype() != out.dtype() || n.operand(2)->dtype() != out.dtype())
    return nullptr;
  std::array<Walk, 3> walks;
  for (unsigned k = 0; k < 3; ++k) {
    auto pattern = broadcastPattern(n.operand(k)->type().dims(), out.dims());
    if (!pattern)
      return nullptr;
    walks[k] = {std::max<int64_t>(pattern->first, 1), std::max<int64_t>(pattern->second, 1)};
  }
  switch (dtypeSize(out.dtype())) {
  case 1:
    return std::make_unique<WhereKernel<1>>(walks);
  case 2:
    return std::make_unique<WhereKernel<2>>(walks);
  case 4:
    return std::make_unique<WhereKernel<4>>(walks);
  case 8:
    return std::make_unique<WhereKernel<8>>(walks);
  default:
    return nullptr;
  }
}

} // namespace ampc::kernels::cpu
