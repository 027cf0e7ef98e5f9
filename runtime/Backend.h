//===- Backend.h - An execution target -------------------------------------===//
#ifndef AMPC_RUNTIME_BACKEND_H
#define AMPC_RUNTIME_BACKEND_H

#include "ir/BackendCapabilities.h"
#include "ir/Graph.h"
#include "kernels/KernelArgs.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace ampc {

namespace dist {
class Communicator;
}

/// How a device backend issued one step (Backend::runStep).
enum class StepLaunch {
  Direct,   ///< a host backend: the kernels ran as they were called
  Eager,    ///< launched one by one
  Captured, ///< launched one by one while being captured into a CUDA graph
  Replayed, ///< one launch of a graph captured earlier
};

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
  /// `host`, a kernel that reads and writes host memory (a collective's,
  /// runtime/dist/CollectiveKernel.h), made to run on this backend's
  /// buffers: as it is where the host addresses them; a device backend
  /// stages the operands and results through host memory (its host
  /// fallback: slow, and never captured into a CUDA graph). Null when
  /// `host` is.
  virtual std::unique_ptr<kernels::NodeKernel>
  hostKernel(const Node &n, std::unique_ptr<kernels::NodeKernel> host) {
    return host;
  }
  /// The kernel of collective node `n` (OpInfo::collective) on this
  /// backend's own buffers, when the backend has a collective engine of its
  /// own (the CUDA backend: NCCL, on its stream); `comm` is the job's
  /// communicator, which such an engine may use to set itself up. Null
  /// without `err` where the backend has none (the default): Program then
  /// binds the communicator's host kernel through hostKernel. Null with
  /// `err` where it has one and setting it up failed.
  virtual std::unique_ptr<kernels::NodeKernel>
  deviceCollective(const Node &n, dist::Communicator &comm, std::string &err) {
    return nullptr;
  }
  /// Whether `n` may be part of a chain given to prepareFused: an
  /// elementwise op (OpInfo::elementwise) with the dtypes and attributes the
  /// backend's fused kernel takes. False by default (no fusion).
  virtual bool fusable(const Node &n) const { return false; }
  /// One kernel for a chain of fusable nodes, adjacent in the schedule, of
  /// one result shape, each node's result the only use of it being an
  /// operand of the next (runtime/Program.cpp finds them). It runs in the
  /// last node's place with that node's result as its one output and as its
  /// inputs, in order, every operand of the chain's nodes that is not the
  /// previous node's result; the intermediate results are not written. It
  /// must give the last result's bits that running the nodes one by one
  /// gives. Null (the default): the nodes run one by one.
  virtual std::unique_ptr<kernels::NodeKernel> prepareFused(llvm::ArrayRef<const Node *> chain) {
    return nullptr;
  }
  /// One allocation per arena, aligned to at least 64 bytes.
  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *p) = 0;
  /// Whether arena memory can be read and written by the host directly.
  virtual bool hostAccessible() const = 0;
  /// Bytes currently held through allocate(), as the allocator counts them
  /// (what `ampc` reports as measured, next to the plan's figure).
  virtual uint64_t bytesInUse() const = 0;
  /// Bytes a new program could still get on this device now: the host's
  /// available memory (what the kernel could hand out without swapping), a
  /// GPU's free memory; 0 when the system does not say.
  virtual uint64_t availableMemoryBytes() const { return 0; }

  // Memory the host cannot address directly (hostAccessible() false). The
  // Program moves inputs, state and outputs through these; host backends
  // keep the defaults (memcpy, run `issue` as it is, nothing to wait for).

  /// Host memory for a value the host rewrites every step (a batch input).
  /// A device backend may hand out page-locked memory, which copyToBackend
  /// then sends without staging it first.
  virtual void *allocateHostBuffer(size_t bytes) { return std::malloc(bytes ? bytes : 1); }
  virtual void freeHostBuffer(void *p) { std::free(p); }

  /// Host memory -> allocate()d memory. May return before the copy is done
  /// but not before `hostSrc` may be reused -- except from memory that
  /// allocateHostBuffer gave, which the copy may still be reading until
  /// synchronize() (the end of every Program::run).
  virtual void copyToBackend(void *dst, const void *hostSrc, size_t bytes) {
    if (bytes)
      std::memcpy(dst, hostSrc, bytes);
  }
  /// allocate()d memory -> host memory, after every kernel issued so far;
  /// returns when the bytes are on the host.
  virtual void copyToHost(void *hostDst, const void *src, size_t bytes) {
    if (bytes)
      std::memcpy(hostDst, src, bytes);
  }
  /// Within allocate()d memory, ordered after the kernels issued so far.
  virtual void copyWithin(void *dst, const void *src, size_t bytes) {
    if (bytes)
      std::memcpy(dst, src, bytes);
  }
  /// Runs one step of `program` (an identity only): `issue` launches the
  /// kernels of the schedule positions `positions` (those the cast cache did
  /// not serve) and the state-update copies. A device backend may capture
  /// what `issue` launches once and replay it while the same positions run
  /// (CUDA graphs); `step` is the step number kernels see. Says how it ran
  /// the step.
  virtual StepLaunch runStep(const void *program, uint64_t step, llvm::ArrayRef<unsigned> positions,
                             llvm::function_ref<void()> issue) {
    issue();
    return StepLaunch::Direct;
  }
  /// `program` is going away: drop what runStep kept for it.
  virtual void forgetProgram(const void *program) {}
  /// Waits for everything issued to finish (the end of Program::run).
  virtual void synchronize() {}
};

/// The naive oracle (kernels/reference): every op, f64/f32/f16/bf16.
std::unique_ptr<Backend> createCpuRefBackend();
/// The fast CPU backend (kernels/cpu: oneDNN and OpenMP), falling back to
/// the reference kernels per node.
std::unique_ptr<Backend> createCpuBackend();

/// The CUDA backend (runtime/cuda) when it is built and a device is present;
/// else nullptr with the reason in `err` ("device 'cuda' is not available:
/// ..."). runtime/Devices.cpp.
std::unique_ptr<Backend> createCudaBackend(std::string &err);

/// Whether `--device cuda` can run here: a CUDA backend is built and a
/// device answers. Otherwise false with the reason in `why`, e.g. "no CUDA
/// device (cudaGetDeviceCount: error 35, CUDA driver version is insufficient
/// for CUDA runtime version)" or "the CUDA backend is not built".
bool cudaDeviceAvailable(std::string &why);

/// "auto", "cpu", "cpu-ref" or "cuda"; nullptr with a message in `err` for
/// an unknown or unavailable device. "auto" is cuda when a CUDA device is
/// present, else cpu; `autoNote`, when given, receives one line saying what
/// auto picked and why ("device: auto -> cpu (no CUDA device (...))").
std::unique_ptr<Backend> createBackend(llvm::StringRef device, std::string &err,
                                       std::string *autoNote = nullptr);

} // namespace ampc

#endif
