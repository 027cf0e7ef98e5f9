//===- CudaBackend.h - The CUDA backend ("cuda") ---------------------------===//
//
// Built only with the CUDA toolkit (AMPC_HAVE_CUDA); runtime/Devices.cpp is
// the only caller. docs/cuda.md describes what runs where.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_CUDA_CUDABACKEND_H
#define AMPC_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Backend.h"

#include <memory>
#include <string>

namespace ampc::cuda {

/// Whether a CUDA device answers. Never fails hard: without a driver
/// cudaGetDeviceCount returns an error (35, "CUDA driver version is
/// insufficient") and `why` says so. On success `description`, when given,
/// names device 0 ("NVIDIA H100 80GB HBM3, sm_90, 79 GiB"). Probed once.
bool probeDevice(std::string &why, std::string *description);

/// Switches, from the environment (docs/cuda.md):
///  AMPC_CUDA_TF32=1    f32 GEMMs and convolutions may use TF32 tensor cores
///                      (off by default: f32 means f32);
///  AMPC_CUDA_GRAPHS=0  no CUDA-graph capture of steps (on by default);
///  AMPC_CUDA_SYNC=1    (or CUDA_LAUNCH_BLOCKING=1) wait after every node
///                      and check for faults, so that one is reported
///                      against its op; no graphs;
///  AMPC_CUDA_DEVICE=i  run on device i (default: 0, or under mpirun the
///                      rank's index on its machine modulo the devices);
///  AMPC_NCCL=0         a data-parallel job's collectives through the host
///                      over MPI instead of NCCL (runtime/cuda/NcclSetup.h).
struct CudaOptions {
  /// -1: chosen as above; -2: AMPC_CUDA_DEVICE was not an index.
  int device = -1;
  bool allowTf32 = false;
  bool cudaGraphs = true;
  bool syncEachNode = false;
  static CudaOptions fromEnvironment();
};

/// The backend on device 0; call after probeDevice succeeded.
std::unique_ptr<Backend>
createCudaBackend(const CudaOptions &opts = CudaOptions::fromEnvironment());

} // namespace ampc::cuda

#endif
