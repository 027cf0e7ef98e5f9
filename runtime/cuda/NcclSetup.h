//===- NcclSetup.h - The NCCL communicator of a data-parallel job -*- C++ -*-===//
//
// The CUDA backend runs a job's collectives with NCCL on its stream
// (kernels/cuda/NcclKernels.cpp) when every rank has a GPU of its own; NCCL
// cannot put two ranks on one GPU, so ranks that share one (or AMPC_NCCL=0)
// stage the collectives through the host over the job's MPI communicator
// instead. The NCCL communicator is set up over that MPI communicator: the
// ranks compare their GPUs, and rank 0's NCCL id reaches the others in a
// broadcast. docs/distributed.md, "On GPUs".
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_CUDA_NCCLSETUP_H
#define AMPC_RUNTIME_CUDA_NCCLSETUP_H

#include "kernels/cuda/CudaContext.h"

#include <string>

namespace ampc::dist {
class Communicator;
}

namespace ampc::cuda {

/// What setUpNccl decided.
enum class NcclRoute {
  Device, ///< ctx.nccl is set: collectives run on the GPU
  Host,   ///< no NCCL (not built, AMPC_NCCL=0, ranks sharing a GPU): `why`
  Failed, ///< setting NCCL up failed: `err`
};

/// Decides, with the other ranks of `comm` (every rank must call it, with
/// the same environment), whether this job's collectives run through NCCL,
/// and if so creates ctx.nccl on ctx.device. Collective over `comm`.
NcclRoute setUpNccl(CudaContext &ctx, dist::Communicator &comm, std::string &why);

/// Destroys ctx.nccl, if any.
void tearDownNccl(CudaContext &ctx);

} // namespace ampc::cuda

#endif
