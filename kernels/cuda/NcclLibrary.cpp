//===- NcclLibrary.cpp - dlopen of NCCL ------------------------------------===//
#include "kernels/cuda/NcclLibrary.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>

namespace ampc::cuda {

std::string NcclLibrary::describe(ncclResult_t r, ncclComm_t comm) const {
  std::string text = "NCCL " + std::to_string(static_cast<int>(r)) + " (" + getErrorString(r) + ")";
  if (const char *last = getLastError(comm); last && *last)
    text += ": " + std::string(last);
  return text;
}

const NcclLibrary *ncclLibrary(std::string &why) {
  static NcclLibrary library;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void *handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#ifdef AMPC_NCCL_CONFIGURED_PATH
    if (!handle)
      handle = dlopen(AMPC_NCCL_CONFIGURED_PATH, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!handle) {
      const char *e = dlerror();
      error = std::string("cannot open NCCL (libnccl.so.2): ") + (e ? e : "not found");
      return;
    }
    auto bind = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      if (!fn && error.empty())
        error = std::string("NCCL (libnccl.so.2) has no ") + name;
    };
    bind(library.getUniqueId, "ncclGetUniqueId");
    bind(library.commInitRank, "ncclCommInitRank");
    bind(library.commDestroy, "ncclCommDestroy");
    bind(library.allReduce, "ncclAllReduce");
    bind(library.getErrorString, "ncclGetErrorString");
    bind(library.getLastError, "ncclGetLastError");
    bind(library.getVersion, "ncclGetVersion");
  });
  if (!error.empty()) {
    why = error;
    return nullptr;
  }
  return &library;
}

} // namespace ampc::cuda
