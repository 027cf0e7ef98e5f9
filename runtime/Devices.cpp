//===- Devices.cpp - Device names -> backends ("auto", "cpu", "cuda") ------===//
//
// "auto" is cuda when the CUDA backend is built and a device answers, else
// cpu, and says which and why in one line. "cuda" where it cannot run is an
// error that names the reason (the CLI exits with 1). The CUDA backend lives
// in runtime/cuda and is compiled in only when CMake found nvcc, cuBLAS and
// cuDNN (AMPC_HAVE_CUDA); without a driver, discovery fails gracefully:
// cudaGetDeviceCount returns an error (35 here) and nothing else is touched.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"

#ifdef AMPC_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

namespace ampc {

bool cudaDeviceAvailable(std::string &why) {
#ifdef AMPC_HAVE_CUDA
  return cuda::probeDevice(why, nullptr);
#else
  why = "the CUDA backend is not built (configure with nvcc, cuBLAS and cuDNN; docs/cuda.md)";
  return false;
#endif
}

std::unique_ptr<Backend> createCudaBackend(std::string &err) {
  std::string why;
#ifdef AMPC_HAVE_CUDA
  if (cuda::probeDevice(why, nullptr))
    return cuda::createCudaBackend();
#else
  cudaDeviceAvailable(why);
#endif
  err = "device 'cuda' is not available: " + why;
  return nullptr;
}

std::unique_ptr<Backend> createBackend(llvm::StringRef device, std::string &err,
                                       std::string *autoNote) {
  if (device == "cpu-ref")
    return createCpuRefBackend();
  if (device == "cpu")
    return createCpuBackend();
  if (device == "cuda")
    return createCudaBackend(err);
  if (device == "auto") {
    std::string why;
#ifdef AMPC_HAVE_CUDA
    std::string description;
    if (cuda::probeDevice(why, &description)) {
      if (autoNote)
        *autoNote = "device: auto -> cuda (" + description + ")";
      return cuda::createCudaBackend();
    }
#else
    cudaDeviceAvailable(why);
#endif
    // The driver's own words ("cudaGetDeviceCount: error 35, ...") are for
    // --device cuda, which fails with them; here the user asked for nothing
    // in particular.
    if (size_t detail = why.find(" ("); detail != std::string::npos)
      why.resize(detail);
    if (autoNote)
      *autoNote = "device: auto -> cpu (" + why + "; the CPU runs the model)";
    return createCpuBackend();
  }
  err = "unknown device '" + device.str() + "' (known: auto, cpu, cpu-ref, cuda)";
  return nullptr;
}

} // namespace ampc
