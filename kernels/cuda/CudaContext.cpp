//===- CudaContext.cpp - Errors, workspace and scratch of the CUDA kernels -===//
//
// What every CUDA node kernel shares apart from the stream and handles, which
// the backend creates (runtime/cuda/CudaBackend.cpp).
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/CudaContext.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace ampc::cuda {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

void fatal(const std::string &message) {
  llvm::errs() << "error: cuda: " << message << "\n";
  llvm::errs().flush();
  std::exit(1);
}

std::string errorText(cudaError_t e) {
  return "error " + std::to_string(static_cast<int>(e)) + " (" + cudaGetErrorName(e) + ": " +
         cudaGetErrorString(e) + ")";
}

std::string errorText(cublasStatus_t s) {
  return "status " + std::to_string(static_cast<int>(s)) + " (" + cublasGetStatusName(s) + ": " +
         cublasGetStatusString(s) + ")";
}

std::string errorText(cudnnStatus_t s) {
  return "status " + std::to_string(static_cast<int>(s)) + " (" + cudnnGetErrorString(s) + ")";
}

static thread_local CudaContext *capturingContext = nullptr;

void setCapture(CudaContext *capture) { capturingContext = capture; }

void reportFailure(const char *what, const std::string &status, const Node *node) {
  std::string where;
  if (node) {
    where = " on " + node->opName().str();
    if (node->numResults())
      where += " (%" + node->result()->name().str() + ")";
  }
  std::string message = std::string(what) + " failed" + where + ": " + status;
  if (CudaContext *capture = capturingContext; capture && capture->capturing) {
    if (!capture->captureFailed)
      capture->captureError = message;
    capture->captureFailed = true;
    return;
  }
  fatal(message);
}

void check(cudaError_t e, const char *what, const Node *node) {
  if (e != cudaSuccess)
    reportFailure(what, errorText(e), node);
}
void check(cublasStatus_t s, const char *what, const Node *node) {
  if (s != CUBLAS_STATUS_SUCCESS)
    reportFailure(what, errorText(s), node);
}
void check(cudnnStatus_t s, const char *what, const Node *node) {
  if (s != CUDNN_STATUS_SUCCESS)
    reportFailure(what, errorText(s), node);
}

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

bool CudaContext::reserveWorkspace(size_t bytes, std::string &err) {
  if (bytes <= workspaceBytes)
    return true;
  // Not freed: a captured graph of an earlier Program may use it (the lazily
  // built eval program after a captured train step, say).
  if (workspace)
    retiredWorkspaces.push_back(workspace);
  workspace = nullptr;
  workspaceBytes = 0;
  cudaError_t e = cudaMalloc(&workspace, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    err = "cannot allocate " + std::to_string(bytes) + " bytes of cuDNN workspace: " + errorText(e);
    return false;
  }
  workspaceBytes = bytes;
  return true;
}

void *CudaContext::allocateScratch(size_t bytes, const Node &n) {
  void *p = nullptr;
  check(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc (node scratch)", &n);
  return p;
}

DeviceScratch::~DeviceScratch() {
  if (ptr)
    cudaFree(ptr);
}

} // namespace ampc::cuda
