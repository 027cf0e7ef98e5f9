//===- LoopSelect.cpp - where as a loop kernel of the cpu backend ---------===//
//
// where(condition, x, y): each result element is x's or y's by the bool
// condition, the three operands broadcast as numpy does. A causal mask
// (masked_fill over a [1, 1, T, T] mask, nanoGPT's attention) and its
// gradient are where nodes, and the reference kernel's index arithmetic per
// element made them a fifth of an imported GPT's step. The loop copies
// element bytes, so it takes every dtype and gives the reference's bits. An
// operand whose broadcast is not one (middle, inner) pattern
// (broadcastPattern) leaves the node to the reference kernel.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <array>
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

  void advance(const Walk &w) {
    if (++within < w.inner)
      return;
    within = 0;
    if (++index == w.middle)
      index = 0;
  }
};

template <size_t Size> struct Element { unsigned char bytes[Size]; };

template <size_t Size> class WhereKernel final : public LoopKernel {
public:
  explicit WhereKernel(const std::array<Walk, 3> &walks) : walks_(walks) {}

  void run(const KernelArgs &a) override {
    using E = Element<Size>;
    const auto *condition = static_cast<const uint8_t *>(a.in(0).data);
    const E *x = static_cast<const E *>(a.in(1).data), *y = static_cast<const E *>(a.in(2).data);
    E *out = static_cast<E *>(a.out().data);
    std::array<Walk, 3> w = walks_;
    parallelFor(a.out().numElements(), kSelectGrain, [=](int64_t begin, int64_t end) {
      Cursor c(w[0], begin), l(w[1], begin), r(w[2], begin);
      for (int64_t i = begin; i < end; ++i) {
        out[i] = condition[c.index] ? x[l.index] : y[r.index];
        c.advance(w[0]);
        l.advance(w[1]);
        r.advance(w[2]);
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
