//===- CudaTestUtil.h - A fake device for testing the device paths --------===//
//
// cpu-ref's kernels behind the copy hooks of Backend.h, reporting memory the
// host may not address: a Program on it takes every path a CUDA Program
// takes between host and device, on any machine.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TESTS_UNIT_CUDATESTUTIL_H
#define AMPC_TESTS_UNIT_CUDATESTUTIL_H

#include "runtime/Backend.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

/// Skips the current test, naming the reason ("no CUDA device (...)"),
/// where no CUDA device answers.
#define AMPC_REQUIRE_CUDA_DEVICE()                                                                 \
  do {                                                                                             \
    std::string why_;                                                                              \
    if (!::ampc::cudaDeviceAvailable(why_))                                                        \
      GTEST_SKIP() << why_;                                                                        \
  } while (0)

namespace ampc::testing {

/// cpu-ref's kernels on memory the Program must treat as device memory:
/// everything between host and arenas goes through the copy hooks.
class FakeDeviceBackend final : public Backend {
public:
  FakeDeviceBackend() : host_(createCpuRefBackend()) {}
  llvm::StringRef name() const override { return "fake-device"; }
  bool supports(const OpInfo &op, DType dtype) const override { return host_->supports(op, dtype); }
  kernels::KernelFn kernelFor(const Node &n) const override { return host_->kernelFor(n); }
  std::unique_ptr<kernels::NodeKernel> prepare(const Node &n) override { return host_->prepare(n); }
  void *allocate(size_t bytes) override {
    void *p = host_->allocate(bytes);
    allocations.push_back({static_cast<char *>(p), bytes});
    return p;
  }
  void deallocate(void *p) override { host_->deallocate(p); }
  bool hostAccessible() const override { return false; }
  uint64_t bytesInUse() const override { return host_->bytesInUse(); }
  void *allocateHostBuffer(size_t bytes) override {
    void *p = Backend::allocateHostBuffer(bytes);
    hostBuffers[static_cast<const char *>(p)] = bytes;
    return p;
  }
  void freeHostBuffer(void *p) override {
    hostBuffers.erase(static_cast<const char *>(p));
    Backend::freeHostBuffer(p);
  }
  void copyToBackend(void *dst, const void *src, size_t bytes) override {
    ++toDevice;
    auto *from = static_cast<const char *>(src);
    for (const auto &[buffer, size] : hostBuffers)
      if (from >= buffer && from + bytes <= buffer + size)
        ++fromHostBuffers;
    std::memcpy(dst, src, bytes);
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    ++toHost;
    toHostBytes += bytes;
    std::memcpy(dst, src, bytes);
  }
  void copyWithin(void *dst, const void *src, size_t bytes) override {
    ++within;
    std::memcpy(dst, src, bytes);
  }
  StepLaunch runStep(const void *program, uint64_t step, llvm::ArrayRef<unsigned> positions,
                     llvm::function_ref<void()> issue) override {
    ++steps;
    issue();
    return StepLaunch::Eager;
  }
  void synchronize() override { ++syncs; }

  unsigned toDevice = 0, toHost = 0, within = 0, steps = 0, syncs = 0;
  /// Live allocateHostBuffer buffers (start -> bytes), and the copies sent from them.
  std::map<const char *, size_t> hostBuffers;
  unsigned fromHostBuffers = 0;
  uint64_t toHostBytes = 0;
  /// Every arena handed out, in order: (memory, bytes).
  std::vector<std::pair<char *, size_t>> allocations;

private:
  std::unique_ptr<Backend> host_;
};

} // namespace ampc::testing

#endif
