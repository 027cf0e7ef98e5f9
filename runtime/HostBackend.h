//===- HostBackend.h - What the cpu and cpu-ref backends share ------------===//
#ifndef AMPC_RUNTIME_HOSTBACKEND_H
#define AMPC_RUNTIME_HOSTBACKEND_H

#include "runtime/Backend.h"

#include "llvm/ADT/DenseMap.h"

namespace ampc {

/// A backend that runs on the host: memory from aligned_alloc (64-byte
/// aligned, counted per block), the reference kernel table for what it
/// supports and runs, and a host program's custom ops through their
/// registered CPU kernels. `cpu-ref` is exactly this; `cpu` puts its fast
/// kernels in front (runtime/CpuBackend.cpp).
class HostBackend : public Backend {
public:
  bool supports(const OpInfo &op, DType dtype) const override;
  kernels::KernelFn kernelFor(const Node &n) const override;
  std::unique_ptr<kernels::NodeKernel> prepare(const Node &n) override;
  void *allocate(size_t bytes) override;
  void deallocate(void *p) override;
  uint64_t bytesInUse() const override { return inUse_; }
  /// /proc/meminfo's MemAvailable, within the cgroup's memory limit.
  uint64_t availableMemoryBytes() const override;
  bool hostAccessible() const override { return true; }

private:
  llvm::DenseMap<void *, uint64_t> sizes_;
  uint64_t inUse_ = 0;
};

} // namespace ampc

#endif
