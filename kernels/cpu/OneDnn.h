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

/// How bf16 GEMMs (linear, matmul, batch_matmul) and convolutions run where
/// oneDNN has bf16 primitives: in bf16 (dot products into f32), or as f32
/// primitives on exactly widened operands, rounded once (the same products
/// and f32 sums, in oneDNN's f32 order). Widened (all but the smallest
/// GEMMs, see bf16GemmRunsWidened) wherever bf16 is not the faster of the
/// two: everywhere but CPUs with AMX and AMD's with AVX512-BF16 (Zen 4 and
/// later). The environment variable AMPC_CPU_BF16_GEMMS overrides it for
/// the process: `native` (none widened), `widened` (every one: WidenedAll)
/// or `auto`.
enum class Bf16GemmMode { Native, Widened, WidenedAll };
Bf16GemmMode bf16GemmMode();

/// bf16GemmMode() != Native.
bool bf16GemmsRunWidened();

/// Whether bf16 node `n` (a GEMM or convolution) takes the widened
/// primitive: under WidenedAll always; under Widened unless it is a GEMM
/// so small for its operands (FLOPs per element read or written under 128:
/// an attention's per-head products) that the conversions cost more than
/// the f32 kernel saves.
bool bf16GemmRunsWidened(const Node &n);

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
