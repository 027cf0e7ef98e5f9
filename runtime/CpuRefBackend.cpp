//===- CpuRefBackend.cpp - The reference backend ---------------------------===//
#include "runtime/Backend.h"

#include "llvm/ADT/DenseMap.h"

#include "kernels/custom/CustomKernels.h"
#include "kernels/reference/ReferenceKernels.h"

#include <cstdlib>

namespace ampc {
namespace {

class CpuRefBackend final : public Backend {
public:
  llvm::StringRef name() const override { return "cpu-ref"; }
  bool supports(const OpInfo &op, DType dtype) const override {
    // A host program's op: its registered kernels say (kernels/custom).
    if (op.kind == OpKind::Custom)
      return kernels::customKernelSupports(op, dtype);
    return kernels::referenceSupports(op, dtype);
  }
  kernels::KernelFn kernelFor(const Node &n) const override {
    return kernels::referenceKernel(n.kind());
  }
  std::unique_ptr<kernels::NodeKernel> prepare(const Node &n) override {
    if (n.kind() == OpKind::Custom)
      return kernels::prepareCustomCpuKernel(n);
    return Backend::prepare(n);
  }
  void *allocate(size_t bytes) override {
    // aligned_alloc wants a multiple of the alignment; 0 bytes still gets a block.
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = std::aligned_alloc(64, rounded ? rounded : 64);
    if (p) {
      sizes_[p] = bytes;
      inUse_ += bytes;
    }
    return p;
  }
  void deallocate(void *p) override {
    auto it = sizes_.find(p);
    if (it != sizes_.end()) {
      inUse_ -= it->second;
      sizes_.erase(it);
    }
    std::free(p);
  }
  uint64_t bytesInUse() const override { return inUse_; }
  bool hostAccessible() const override { return true; }

private:
  llvm::DenseMap<void *, uint64_t> sizes_;
  uint64_t inUse_ = 0;
};

} // namespace

std::unique_ptr<Backend> createCpuRefBackend() { return std::make_unique<CpuRefBackend>(); }

} // namespace ampc
