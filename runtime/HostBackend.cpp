//===- HostBackend.cpp ------------------------------------------------------===//
#include "runtime/HostBackend.h"

#include "kernels/custom/CustomKernels.h"
#include "kernels/reference/ReferenceKernels.h"

#include <cstdlib>

namespace ampc {

bool HostBackend::supports(const OpInfo &op, DType dtype) const {
  // A host program's op: its registered kernels say (kernels/custom).
  if (op.kind == OpKind::Custom)
    return kernels::customKernelSupports(op, dtype);
  return kernels::referenceSupports(op, dtype);
}

kernels::KernelFn HostBackend::kernelFor(const Node &n) const {
  return kernels::referenceKernel(n.kind());
}

std::unique_ptr<kernels::NodeKernel> HostBackend::prepare(const Node &n) {
  if (n.kind() == OpKind::Custom)
    return kernels::prepareCustomCpuKernel(n);
  return Backend::prepare(n);
}

void *HostBackend::allocate(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment; 0 bytes still gets a block.
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (p) {
    sizes_[p] = bytes;
    inUse_ += bytes;
  }
  return p;
}

void HostBackend::deallocate(void *p) {
  auto it = sizes_.find(p);
  if (it != sizes_.end()) {
    inUse_ -= it->second;
    sizes_.erase(it);
  }
  std::free(p);
}

} // namespace ampc
