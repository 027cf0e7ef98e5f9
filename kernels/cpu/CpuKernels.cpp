//===- CpuKernels.cpp - Which op gets which fast CPU kernel ---------------===//
#include "kernels/cpu/CpuKernels.h"

#include <omp.h>

namespace ampc::kernels::cpu {

std::unique_ptr<NodeKernel> prepareCpuKernel(const Node &n) {
  // Filled op by op; everything else falls back to the reference kernels.
  (void)n;
  return nullptr;
}

int cpuThreads() { return omp_get_max_threads(); }

} // namespace ampc::kernels::cpu
