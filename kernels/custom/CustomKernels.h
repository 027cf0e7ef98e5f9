//===- CustomKernels.h - Kernels of ops a host program registers -----------===//
//
// Built-in ops find their kernels by OpKind (a switch per backend). Ops a
// host program adds at run time (OpRegistry::addCustomOp) all have
// OpKind::Custom, so their kernels live in this table instead, keyed by the
// op's registry entry. It sits in kernels/, not ir/, to keep the layering
// (ir knows no kernels); the backends consult it for OpKind::Custom nodes.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CUSTOM_CUSTOMKERNELS_H
#define AMPC_KERNELS_CUSTOM_CUSTOMKERNELS_H

#include "kernels/KernelArgs.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampc::kernels {

/// A custom kernel may be a closure (the host's own state), unlike KernelFn.
using CustomKernelFn = std::function<void(const KernelArgs &args)>;

struct CustomKernels {
  /// Runs on host memory: the reference kernel, used by the `cpu-ref` and
  /// `cpu` backends. Required.
  CustomKernelFn cpu;
  /// Runs on device memory with device pointers, for the CUDA backend;
  /// empty when the op has none (the CUDA backend then runs `cpu` on host
  /// copies of the operands).
  CustomKernelFn cuda;
  /// The floating compute dtypes the kernels handle. The precision passes
  /// ask the backend, which answers from this list, so an op whose kernels
  /// handle only f32 is never put in half.
  std::vector<DType> dtypes = {DType::F32};
};

/// Registers the kernels of custom op `op` (a registry entry, which lives as
/// long as the registry). Returns an error message when `op` is not a custom
/// op, already has kernels, or `kernels.cpu` is empty. Not safe while
/// programs are being compiled on other threads: register at start-up.
std::optional<std::string> registerCustomKernels(const OpInfo &op, CustomKernels kernels);

/// The kernels of `op`, or null.
const CustomKernels *findCustomKernels(const OpInfo &op);

/// Whether `op` (a custom op) has kernels for compute dtype `dtype`.
bool customKernelSupports(const OpInfo &op, DType dtype);

/// The host kernel for custom node `n`, or null when it has none.
std::unique_ptr<NodeKernel> prepareCustomCpuKernel(const Node &n);
/// The device kernel for custom node `n`, or null when it has none.
std::unique_ptr<NodeKernel> prepareCustomCudaKernel(const Node &n);

} // namespace ampc::kernels

#endif
