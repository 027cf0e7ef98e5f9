//===- CpuKernels.h - The fast CPU backend's kernels ------------*- C++ -*-===//
//
// Kernels of the `cpu` backend: oneDNN primitives for the dense ops (created
// once per node, at compile time) and our own vectorised OpenMP loops for
// the rest. An op or dtype without a fast kernel here runs the reference
// kernel (the backend falls back per node), so the backend is complete from
// the start and gets faster op by op.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_CPUKERNELS_H
#define AMPC_KERNELS_CPU_CPUKERNELS_H

#include "kernels/KernelArgs.h"

#include <memory>

namespace ampc::kernels::cpu {

/// The fast kernel for `n`, prepared for its shapes and dtypes, or null when
/// there is none (the caller then uses the reference kernel).
std::unique_ptr<NodeKernel> prepareCpuKernel(const Node &n);

/// Whether `n` can be part of a fused elementwise chain: an elementwise op
/// (OpInfo::elementwise) the fused loops have an element function for, in
/// dtypes they take (kernels/cpu/LoopFused.cpp).
bool fusableCpuNode(const Node &n);
/// One kernel running `chain` in a single blocked pass (the contract of
/// Backend::prepareFused), or null when some node is not fusableCpuNode or
/// the nodes are not a same-shape chain.
std::unique_ptr<NodeKernel> prepareFusedCpuKernel(llvm::ArrayRef<const Node *> chain);

/// Threads the CPU kernels use (OpenMP's and oneDNN's).
int cpuThreads();

} // namespace ampc::kernels::cpu

#endif
