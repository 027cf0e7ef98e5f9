//===- CpuKernels.cpp - Which op gets which fast CPU kernel ---------------===//
#include "kernels/cpu/CpuKernels.h"

#include "kernels/cpu/Families.h"

#include <omp.h>

namespace ampc::kernels::cpu {

std::unique_ptr<NodeKernel> prepareCpuKernel(const Node &n) {
  // oneDNN first (dense linear algebra, convolution), then our own loops;
  // whatever neither takes falls back to the reference kernel.
  if (std::unique_ptr<NodeKernel> k = prepareOneDnnKernel(n))
    return k;
  return prepareLoopKernel(n);
}

int cpuThreads() { return omp_get_max_threads(); }

} // namespace ampc::kernels::cpu
