//===- CpuBackend.cpp - The fast CPU backend ("cpu") ----------------------===//
//
// Host memory like the reference backend; per node, the fast kernel from
// kernels/cpu when there is one for its op and dtypes, else the reference
// kernel. So every model runs on `cpu`, and results differ from `cpu-ref`
// only by the summation order of the fast kernels (tested per op).
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"

#include "kernels/cpu/CpuKernels.h"
#include "kernels/custom/CustomKernels.h"
#include "kernels/reference/ReferenceKernels.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdlib>

namespace ampc {
namespace {

class CpuBackend final : public Backend {
public:
  llvm::StringRef name() const override { return "cpu"; }
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
    if (std::unique_ptr<kernels::NodeKernel> fast = kernels::cpu::prepareCpuKernel(n))
      return fast;
    return Backend::prepare(n);
  }
  bool fusable(const Node &n) const override { return kernels::cpu::fusableCpuNode(n); }
  std::unique_ptr<kernels::NodeKernel> prepareFused(llvm::ArrayRef<const Node *> chain) override {
    return kernels::cpu::prepareFusedCpuKernel(chain);
  }
  void *allocate(size_t bytes) override {
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

std::unique_ptr<Backend> createCpuBackend() { return std::make_unique<CpuBackend>(); }

} // namespace ampc
