//===- TensorType.cpp -------------------------------------------------------===//
#include "ir/TensorType.h"

#include "llvm/Support/MathExtras.h"

namespace ampc {

int64_t TensorType::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims_)
    n *= d;
  return n;
}

std::optional<int64_t> TensorType::checkedNumElements() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0)
      return std::nullopt;
    if (__builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  }
  return n;
}

std::string TensorType::str() const {
  std::string s(dtypeName(dtype_));
  s += '[';
  for (unsigned i = 0; i < dims_.size(); ++i) {
    if (i)
      s += ',';
    s += std::to_string(dims_[i]);
  }
  s += ']';
  return s;
}

} // namespace ampc
