//===- OneDnn.h - What the rest of the project may ask about oneDNN kernels -*- C++ -*-===//
//
// The oneDNN kernels themselves are internal to kernels/cpu (see
// OneDnnContext.h); this header does not include oneDNN, so tests and tools
// can ask which prepared kernels are oneDNN primitives without linking it.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_ONEDNN_H
#define AMPC_KERNELS_CPU_ONEDNN_H

#include "kernels/KernelArgs.h"

#include <string>

namespace ampc::kernels::cpu {

/// True when `k` is a oneDNN primitive (prepareOneDnnKernel made it), so a
/// test can tell a fast kernel from a reference fallback.
bool isOneDnnKernel(const NodeKernel &k);

/// Whether this CPU's oneDNN has bf16 primitives (AVX-512 and later). Where
/// it has none, bf16 GEMMs and convolutions run its f32 primitives on
/// exactly widened operands.
bool oneDnnHasBf16();

/// oneDNN's name for the implementation behind `k` (e.g. "brg:avx512_core_bf16"),
/// or "" when `k` is not a oneDNN kernel. For diagnostics, not for dispatch.
std::string oneDnnImplementation(const NodeKernel &k);

/// What `k`'s last run did with its operands' reorders into the primitive's
/// layout: how many it has, and how many it skipped because the operand's
/// kept copy was current (TensorArg::stableVersion). Zeros when `k` is not
/// a oneDNN kernel.
struct OneDnnReorderCounts {
  unsigned operands = 0, skipped = 0;
};
OneDnnReorderCounts oneDnnReorderCounts(const NodeKernel &k);

} // namespace ampc::kernels::cpu

#endif
