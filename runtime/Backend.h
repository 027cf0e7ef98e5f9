//===- Backend.h - An execution target -------------------------------------===//
#ifndef AMPC_RUNTIME_BACKEND_H
#define AMPC_RUNTIME_BACKEND_H

#include "ir/BackendCapabilities.h"
#include "ir/Graph.h"
#include "kernels/KernelArgs.h"

#include <cstddef>
#include <memory>
#include <string>

namespace ampc {

/// A backend binds each node to a kernel at compile time and owns the memory
/// its arenas live in. The reference and fast CPU backends use host memory;
/// the CUDA backend device memory.
class Backend : public BackendCapabilities {
public:
  /// The kernel that runs node `n`, or nullptr (compile reports it).
  virtual kernels::KernelFn kernelFor(const Node &n) const = 0;
  /// Prepares node `n`'s kernel once, at compile time (Program::compile
  /// calls it for every scheduled node). The default wraps kernelFor; a
  /// backend with per-node setup (oneDNN primitives) overrides it. Null
  /// when the backend has no kernel for `n`.
  virtual std::unique_ptr<kernels::NodeKernel> prepare(const Node &n) {
    kernels::KernelFn fn = kernelFor(n);
    return fn ? std::make_unique<kernels::FunctionKernel>(fn) : nullptr;
  }
  /// One allocation per arena, aligned to at least 64 bytes.
  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *p) = 0;
  /// Whether arena memory can be read and written by the host directly.
  virtual bool hostAccessible() const = 0;
  /// Bytes currently held through allocate(), as the allocator counts them
  /// (what `ampc` reports as measured, next to the plan's figure).
  virtual uint64_t bytesInUse() const = 0;
};

/// The naive oracle (kernels/reference): every op, f64/f32/f16/bf16.
std::unique_ptr<Backend> createCpuRefBackend();
/// The fast CPU backend (kernels/cpu: oneDNN and OpenMP), falling back to
/// the reference kernels per node.
std::unique_ptr<Backend> createCpuBackend();

/// "cpu-ref" (and, as they land, "cpu", "cuda", "auto"); nullptr with a
/// message in `err` for an unknown or unavailable device.
std::unique_ptr<Backend> createBackend(llvm::StringRef device, std::string &err);

} // namespace ampc

#endif
