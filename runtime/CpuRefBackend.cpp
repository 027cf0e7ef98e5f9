//===- CpuRefBackend.cpp - The reference backend ---------------------------===//
#include "runtime/Backend.h"

#include "llvm/ADT/DenseMap.h"

#include "kernels/reference/ReferenceKernels.h"

#include <cstdlib>

namespace ampc {
namespace {

class CpuRefBackend final : public Backend {
public:
  llvm::StringRef name() const override { return "cpu-ref"; }
  bool supports(const OpInfo &op, DType dtype) const override {
    return kernels::referenceSupports(op, dtype);
  }
  kernels::KernelFn kernelFor(const Node &n) const override {
    return kernels::referenceKernel(n.kind());
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

std::unique_ptr<Backend> createBackend(llvm::StringRef device, std::string &err) {
  // "auto" is the CPU until the CUDA backend lands; the call site says so.
  if (device == "cpu-ref")
    return createCpuRefBackend();
  if (device == "cpu" || device == "auto")
    return createCpuBackend();
  if (device == "cuda") {
    err = "device 'cuda' is not available: the CUDA backend is not built yet";
    return nullptr;
  }
  err = "unknown device '" + device.str() + "' (known: auto, cpu, cpu-ref, cuda)";
  return nullptr;
}

} // namespace ampc
