//===- LoopKernels.h - What the rest of the project may ask about the loop kernels -*- C++ -*-===//
//
// The loop kernels themselves are internal to kernels/cpu (LoopSupport.h);
// this header lets tests tell a prepared loop kernel from a reference
// fallback and run the loops without their AVX-512 copies.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_LOOPKERNELS_H
#define AMPC_KERNELS_CPU_LOOPKERNELS_H

#include "kernels/KernelArgs.h"
#include "kernels/common/CpuFeatures.h"

namespace ampc::kernels::cpu {

/// True when `k` is one of our own loop kernels (prepareLoopKernel made it).
bool isLoopKernel(const NodeKernel &k);

/// Whether the CPU running this has the AVX-512 subset the loops' wide copies
/// use (kernels/common/CpuFeatures.h).
using kernels::cpuHasAvx512;

/// For tests: false makes every loop run its baseline (non-AVX-512) copy, so
/// both copies can be checked against the reference on one machine. Default
/// true (the wide copy wherever cpuHasAvx512()).
void setLoopWideVectorsAllowed(bool allowed);

/// For tests: false makes bf16 attention run its exact loops (the
/// reference's bits) on CPUs whose bf16 dot products it would otherwise use
/// (kernels/cpu/LoopAttentionBf16.cpp). Default true.
void setAttentionDotProductsAllowed(bool allowed);

/// Whether this CPU has the bf16 dot products (AVX512_BF16) that bf16
/// attention uses when allowed.
bool cpuHasBf16DotProducts();

} // namespace ampc::kernels::cpu

#endif
