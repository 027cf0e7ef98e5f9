//===- NcclSetup.cpp - Whether and how a job's collectives use NCCL --------===//
#include "runtime/cuda/NcclSetup.h"

#include "ir/support/Hash.h"
#include "runtime/dist/Communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include <unistd.h>

#if AMPC_HAVE_NCCL
#include "kernels/cuda/NcclLibrary.h"
#endif

namespace ampc::cuda {

namespace {

bool ncclSwitchedOff() {
  const char *v = std::getenv("AMPC_NCCL");
  return v &&
         (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "false") == 0);
}

/// This rank's GPU, as a number the same on every rank that uses it: the
/// host's name and the device's PCI bus id, hashed (never 0).
bool gpuIdentity(int device, int64_t &id, std::string &err) {
  char bus[64] = {};
  cudaError_t e = cudaDeviceGetPCIBusId(bus, sizeof bus, device);
  if (e != cudaSuccess) {
    err = "cudaDeviceGetPCIBusId: " + errorText(e);
    return false;
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string key = std::string(host) + "/" + bus;
  id = static_cast<int64_t>(fnv1a(key.data(), key.size()) | 1);
  return true;
}

} // namespace

NcclRoute setUpNccl(CudaContext &ctx, dist::Communicator &comm, std::string &why) {
#if !AMPC_HAVE_NCCL
  why = "this build has no NCCL (configure found no nccl.h next to the CUDA toolkit)";
  return NcclRoute::Host;
#else
  if (ncclSwitchedOff()) {
    why = "AMPC_NCCL=0";
    return NcclRoute::Host;
  }
  // Whether NCCL opens is agreed below with the GPUs (a rank without it
  // contributes 0), so that every rank takes the same route.
  std::string missing;
  const NcclLibrary *nccl = ncclLibrary(missing);
  // Every rank learns every rank's GPU (one all-reduce: each fills its own
  // slot), so all of them take the same route.
  std::vector<int64_t> gpus(size_t(comm.size()), 0);
  if (!gpuIdentity(ctx.device, gpus[size_t(comm.rank())], why))
    return NcclRoute::Failed;
  if (!nccl)
    gpus[size_t(comm.rank())] = 0;
  if (!comm.allReduce(gpus.data(), int64_t(gpus.size()), DType::I64, dist::ReduceOp::Sum, why))
    return NcclRoute::Failed;
  if (std::count(gpus.begin(), gpus.end(), 0)) {
    why = nccl ? "NCCL does not open on every rank" : missing;
    return NcclRoute::Host;
  }
  if (std::set<int64_t>(gpus.begin(), gpus.end()).size() != gpus.size()) {
    why = "ranks share a GPU, and NCCL needs one GPU per rank";
    return NcclRoute::Host;
  }

  // Rank 0's id, with whether rank 0 got one, so that a failure there ends
  // every rank's set-up instead of leaving them waiting.
  struct Id {
    int32_t ok;
    ncclUniqueId id;
  } shared{};
  ncclResult_t r = ncclSuccess;
  if (comm.rank() == 0) {
    r = nccl->getUniqueId(&shared.id);
    shared.ok = r == ncclSuccess;
  }
  if (!comm.broadcast(&shared, sizeof shared, 0, why))
    return NcclRoute::Failed;
  if (!shared.ok) {
    why = comm.rank() == 0 ? "ncclGetUniqueId: " + nccl->describe(r, nullptr)
                           : "rank 0 could not create NCCL's id";
    return NcclRoute::Failed;
  }
  ncclComm_t made = nullptr;
  {
    // Waits for every rank: under the job's collective timeout.
    dist::WatchedWait wait(&comm, "setting NCCL up (ncclCommInitRank)");
    r = nccl->commInitRank(&made, comm.size(), shared.id, comm.rank());
  }
  if (r != ncclSuccess) {
    why = "ncclCommInitRank: " + nccl->describe(r, nullptr);
    return NcclRoute::Failed;
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    cudaGetLastError();
    nccl->commDestroy(made);
    why = "cudaStreamCreate (NCCL's stream): " + errorText(e);
    return NcclRoute::Failed;
  }
  ctx.nccl = made;
  ctx.ncclRanks = comm.size();
  ctx.ncclStream = stream;
  return NcclRoute::Device;
#endif
}

void tearDownNccl(CudaContext &ctx) {
#if AMPC_HAVE_NCCL
  std::string unused;
  if (ctx.ncclStream)
    cudaStreamSynchronize(ctx.ncclStream);
  if (ctx.nccl)
    if (const NcclLibrary *nccl = ncclLibrary(unused))
      nccl->commDestroy(ctx.nccl);
  if (ctx.ncclStream)
    cudaStreamDestroy(ctx.ncclStream);
#endif
  ctx.nccl = nullptr;
  ctx.ncclRanks = 0;
  ctx.ncclStream = nullptr;
}

} // namespace ampc::cuda
