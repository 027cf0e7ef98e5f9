//===- CudaContext.h - What every CUDA node kernel shares -----------------===//
//
// The stream every kernel, copy and library call goes to (one stream: the
// schedule is sequential), the cuBLAS and cuDNN handles bound to it, a
// workspace sized at compile time for the largest cuDNN need, and the device
// word holding the current step (kernels read the step there, so a captured
// CUDA graph replays with the current one).
//
// Errors: every CUDA, cuBLAS and cuDNN status is checked. At compile time
// (prepare) a failure is reported and the node gets no kernel; during a
// step there is no way back to the caller, so cuda::fatal prints which call
// failed on which node and exits with status 1.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CUDA_CUDACONTEXT_H
#define AMPC_KERNELS_CUDA_CUDACONTEXT_H

#include "ir/Graph.h"
#include "kernels/KernelArgs.h"
#include "kernels/cuda/CudaKernels.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct ncclComm; // nccl.h's ncclComm_t points to it

namespace ampc::cuda {

struct CudaContext;

[[noreturn]] void fatal(const std::string &message);

std::string errorText(cudaError_t e);
std::string errorText(cublasStatus_t s);
std::string errorText(cudnnStatus_t s);

/// Exits with a message naming `what` (and `node`, when given) unless ok;
/// while `capture` (setCapture) is capturing a step, records the failure in
/// it instead (the step is then run eagerly).
void check(cudaError_t e, const char *what, const Node *node = nullptr);
void check(cublasStatus_t s, const char *what, const Node *node = nullptr);
void check(cudnnStatus_t s, const char *what, const Node *node = nullptr);
/// What check() does with a failure: `status` is the library's own text
/// (for libraries without a check() overload here, such as NCCL).
void reportFailure(const char *what, const std::string &status, const Node *node = nullptr);
/// The context whose capture check() reports to on this thread (null: none).
void setCapture(CudaContext *capture);

struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  /// The current step, on the device.
  uint64_t *deviceStep = nullptr;
  /// cuBLAS's own workspace (set with cublasSetWorkspace: no allocation
  /// inside a captured graph).
  void *cublasWorkspace = nullptr;
  /// Shared cuDNN workspace, grown at compile time (never during a step).
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// Workspaces outgrown since: CUDA graphs captured earlier still point
  /// into them, so they live as long as the backend.
  std::vector<void *> retiredWorkspaces;
  bool allowTf32 = false;
  /// Set while a step is being captured into a CUDA graph: a node kernel
  /// that cannot be captured (the host fallback) sets captureFailed and
  /// does nothing; the backend then runs the step eagerly.
  bool capturing = false;
  bool captureFailed = false;
  /// The first failure check() saw during the capture: while capturing, a
  /// failing call is recorded here instead of ending the process, and the
  /// backend falls back to running the step eagerly, where a real error is
  /// then reported against its op.
  std::string captureError;

  kernels::cuda::Launch launch() const { return {stream, deviceStep}; }
  /// Makes the shared workspace at least `bytes` (compile time only).
  bool reserveWorkspace(size_t bytes, std::string &err);
  /// The NCCL communicator of a data-parallel job (CudaBackend creates it
  /// with the first collective; kernels/cuda/NcclKernels.cpp uses it), and
  /// its number of ranks. Declared, not included: only the NCCL files see
  /// nccl.h.
  ::ncclComm *nccl = nullptr;
  int ncclRanks = 0;
  /// The stream NCCL's all-reduces run on, beside `stream` (created with
  /// the communicator): a bucket's reduction overlaps the backward's
  /// kernels that do not need it.
  cudaStream_t ncclStream = nullptr;
  /// Device scratch for one node (freed with the kernel).
  static void *allocateScratch(size_t bytes, const Node &n);
};

/// Device scratch owned by a node kernel.
struct DeviceScratch {
  void *ptr = nullptr;
  DeviceScratch() = default;
  DeviceScratch(size_t bytes, const Node &n) : ptr(CudaContext::allocateScratch(bytes, n)) {}
  DeviceScratch(const DeviceScratch &) = delete;
  DeviceScratch &operator=(const DeviceScratch &) = delete;
  ~DeviceScratch();
};

/// The CUDA node kernel for `n`, or nullptr where the op has no CUDA kernel
/// for these dtypes/attributes (the backend then runs the reference kernel
/// on host copies: makeHostFallback, runtime/cuda/CudaBackend.cpp).
/// CudaKernelTable.cpp; GEMMs in GemmKernels.cpp; cuDNN in CudnnKernels.cpp.
std::unique_ptr<kernels::NodeKernel> prepareCudaKernel(CudaContext &ctx, const Node &n);
std::unique_ptr<kernels::NodeKernel> prepareGemmKernel(CudaContext &ctx, const Node &n);
std::unique_ptr<kernels::NodeKernel> prepareCudnnKernel(CudaContext &ctx, const Node &n);
/// The kernel of collective node `n` (all_reduce) through NCCL over
/// ctx.nccl, on ctx.stream; null with `err` when it cannot be (no
/// communicator, another number of ranks, a dtype NCCL does not reduce).
/// Built with NCCL only (AMPC_HAVE_NCCL; NcclKernels.cpp).
std::unique_ptr<kernels::NodeKernel> prepareNcclKernel(CudaContext &ctx, const Node &n,
                                                       std::string &err);

/// Helpers for the tables.
inline kernels::cuda::Tensor tensorOf(const kernels::TensorArg &t) {
  return {t.data, t.dtype(), t.numElements()};
}
inline kernels::cuda::MutableTensor mutableOf(const kernels::TensorArg &t) {
  return {t.data, t.dtype(), t.numElements()};
}
inline kernels::cuda::Scalar scalarOf(const kernels::TensorArg &t) { return {t.data, t.dtype()}; }

} // namespace ampc::cuda

#endif
