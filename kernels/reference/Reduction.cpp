//===- Reduction.cpp - reduce_sum, reduce_mean, fill -----------------------===//
#include "ir/OpAttrs.h"
#include "kernels/common/ReduceMath.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include "llvm/ADT/SmallBitVector.h"

#include <vector>

namespace ampc::kernels::ref {

namespace {
/// reduce_sum, or reduce_mean when `mean`: each sum divided by its count.
template <DType D> void reduceImpl(const KernelArgs &a, bool mean) {
  const TensorArg &x = a.in(0), &y = a.out();
  llvm::ArrayRef<int64_t> dims = x.dims();
  unsigned rank = dims.size();
  const std::vector<int64_t> &axes = attrs::ReduceSum(*a.node).dims();
  llvm::SmallBitVector reduced(rank, axes.empty());
  for (int64_t d : axes)
    reduced.set(static_cast<unsigned>(d < 0 ? d + rank : d));
  int64_t count = 1;
  for (unsigned k = 0; k < rank; ++k)
    if (reduced[k])
      count *= dims[k];
  // Accumulate every output element in the compute type (f32 for halves).
  std::vector<ComputeT<D>> acc(y.numElements(), ComputeT<D>(0));
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0, n = x.numElements(); i < n; ++i) {
    int64_t out = 0;
    for (unsigned k = 0; k < rank; ++k)
      if (!reduced[k])
        out = out * dims[k] + index[k];
    acc[out] += load<D>(x.data, i);
    for (int k = static_cast<int>(rank) - 1; k >= 0; --k) {
      if (++index[k] < dims[k])
        break;
      index[k] = 0;
    }
  }
  for (size_t i = 0; i < acc.size(); ++i)
    store<D>(y.data, static_cast<int64_t>(i), mean ? meanOfSum(acc[i], count) : acc[i]);
}
} // namespace

void reduceSum(const KernelArgs &a) {
  dispatchFloat(a.in(0).dtype(), [&](auto tag) { reduceImpl<decltype(tag)::value>(a, false); });
}

void reduceMean(const KernelArgs &a) {
  dispatchFloat(a.in(0).dtype(), [&](auto tag) { reduceImpl<decltype(tag)::value>(a, true); });
}

void fill(const KernelArgs &a) {
  const TensorArg &y = a.out();
  double v = attrs::Fill(*a.node).value();
  for (int64_t i = 0, n = y.numElements(); i < n; ++i)
    storeFromDouble(y.dtype(), y.data, i, v);
}

} // namespace ampc::kernels::ref
