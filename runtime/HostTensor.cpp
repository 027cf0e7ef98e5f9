//===- HostTensor.cpp -------------------------------------------------------===//
#include "runtime/HostTensor.h"

#include "kernels/common/Storage.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace ampc {

void HostTensor::AlignedFree::operator()(char *p) const {
  ::operator delete(p, std::align_val_t(kAlignment));
}

HostTensor::HostTensor(TensorType type) : type_(std::move(type)) {
  numElements_ = type_.numElements();
  allocate();
}

void HostTensor::allocate() {
  size_t bytes = static_cast<size_t>(sizeInBytes());
  // Round up so a vector loop over the last aligned block never reads past
  // the allocation; allocate at least one block so data() is never null.
  size_t rounded = std::max<size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  storage_.reset(static_cast<char *>(::operator new(rounded, std::align_val_t(kAlignment))));
  std::memset(storage_.get(), 0, rounded);
}

HostTensor::HostTensor(const HostTensor &other) : type_(other.type_) {
  numElements_ = other.numElements_;
  if (!other.storage_)
    return;
  allocate();
  std::memcpy(data(), other.data(), static_cast<size_t>(sizeInBytes()));
}

HostTensor &HostTensor::operator=(const HostTensor &other) {
  if (this == &other)
    return *this;
  HostTensor copy(other);
  *this = std::move(copy);
  return *this;
}

HostTensor &HostTensor::operator=(HostTensor &&other) noexcept {
  type_ = std::move(other.type_);
  numElements_ = other.numElements_;
  storage_ = std::move(other.storage_);
  // Leave the source an empty tensor, not one claiming elements it lacks.
  other.type_ = TensorType();
  other.numElements_ = 0;
  return *this;
}

int64_t HostTensor::rowElements() const {
  int64_t n = 1;
  for (int64_t d : type_.dims().drop_front(type_.rank() ? 1 : 0))
    n *= d;
  return n;
}

double HostTensor::getAsDouble(int64_t i) const {
  assert(i >= 0 && i < numElements_ && "element index out of range");
  return kernels::loadAsDouble(dtype(), data(), i);
}

void HostTensor::setFromDouble(int64_t i, double v) {
  assert(i >= 0 && i < numElements_ && "element index out of range");
  kernels::storeFromDouble(dtype(), data(), i, v);
}

void HostTensor::zeroFrom(int64_t begin) {
  assert(begin >= 0 && begin <= numElements_ && "element index out of range");
  size_t size = dtypeSize(dtype());
  std::memset(static_cast<char *>(data()) + begin * size, 0,
              static_cast<size_t>(numElements_ - begin) * size);
}

} // namespace ampc
