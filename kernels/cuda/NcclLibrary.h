//===- NcclLibrary.h - NCCL, loaded when a job first needs it ---*- C++ -*-===//
//
// NCCL is opened with dlopen, not linked: it is a 200 MB library that only a
// data-parallel job on GPUs uses, so every other run of every binary starts
// without loading it, and a machine whose CUDA install lacks it still runs
// everything else (its collectives then go through the host). The build
// needs only nccl.h. The functions are nccl.h's, called through pointers.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CUDA_NCCLLIBRARY_H
#define AMPC_KERNELS_CUDA_NCCLLIBRARY_H

#include <nccl.h>

#include <string>

namespace ampc::cuda {

struct NcclLibrary {
  decltype(&::ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&::ncclCommInitRank) commInitRank = nullptr;
  decltype(&::ncclCommDestroy) commDestroy = nullptr;
  decltype(&::ncclAllReduce) allReduce = nullptr;
  decltype(&::ncclGetErrorString) getErrorString = nullptr;
  decltype(&::ncclGetLastError) getLastError = nullptr;
  decltype(&::ncclGetVersion) getVersion = nullptr;

  /// `r` as text, with NCCL's last message for `comm` when it has one.
  std::string describe(ncclResult_t r, ncclComm_t comm) const;
};

/// NCCL, opened on first call (libnccl.so.2 from the loader's path, then
/// the one configure found next to the CUDA toolkit); null with `why` when
/// neither opens or a function is missing.
const NcclLibrary *ncclLibrary(std::string &why);

} // namespace ampc::cuda

#endif
