//===- Families.h - The fast CPU kernels, by where they come from -*- C++ -*-===//
#ifndef AMPC_KERNELS_CPU_FAMILIES_H
#define AMPC_KERNELS_CPU_FAMILIES_H

#include "kernels/KernelArgs.h"

#include <memory>

namespace ampc::kernels::cpu {

/// oneDNN primitives (kernels/cpu/OneDnn*.cpp): null when oneDNN has none
/// for this node's op and dtypes.
std::unique_ptr<NodeKernel> prepareOneDnnKernel(const Node &n);

/// Our own vectorised OpenMP loops (kernels/cpu/Loop*.cpp): null when there
/// is none for this node's op and dtypes.
std::unique_ptr<NodeKernel> prepareLoopKernel(const Node &n);

} // namespace ampc::kernels::cpu

#endif
