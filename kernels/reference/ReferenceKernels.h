//===- ReferenceKernels.h - The oracle: naive kernels for every op --------===//
//
// Obviously correct loops, no tricks. f64 computes in double; f32 in float;
// f16 and bf16 are emulated exactly: inputs widened to f32, f32 accumulation
// for matmul/conv/reductions, each stored result rounded to nearest even.
// Every other backend is tested against these.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_REFERENCE_REFERENCEKERNELS_H
#define AMPC_KERNELS_REFERENCE_REFERENCEKERNELS_H

#include "kernels/KernelArgs.h"

namespace ampc::kernels {

/// The reference kernel of a built-in op (custom ops bring their own).
KernelFn referenceKernel(OpKind kind);

/// Whether the reference backend runs `op` in compute precision `dtype`
/// (f64, f32, f16 and bf16 for every built-in op).
bool referenceSupports(const OpInfo &op, DType dtype);

} // namespace ampc::kernels

#endif
