//===- KernelArgs.h - How every backend calls an op's kernel --------------===//
//
// A kernel gets its node (for attributes), its input and output buffers with
// their types, and the step number (for seeded randomness such as dropout).
// Shapes were verified when the graph was compiled, so kernels do not fail.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_KERNELARGS_H
#define AMPC_KERNELS_KERNELARGS_H

#include "ir/Graph.h"
#include "ir/TensorType.h"

#include "llvm/ADT/ArrayRef.h"

namespace ampc::kernels {

/// A tensor's storage: elements in C order, in the storage format of
/// type->dtype() (f16 and bf16 as their 16-bit patterns).
struct TensorArg {
  void *data = nullptr;
  const TensorType *type = nullptr;

  template <class T> T *as() const { return static_cast<T *>(data); }
  int64_t numElements() const { return type->numElements(); }
  DType dtype() const { return type->dtype(); }
  llvm::ArrayRef<int64_t> dims() const { return type->dims(); }
};

struct KernelArgs {
  const Node *node = nullptr;
  llvm::ArrayRef<TensorArg> inputs;
  llvm::ArrayRef<TensorArg> outputs;
  /// Training step, counted from 0; seeds per-step random streams.
  uint64_t step = 0;
  /// The run's seed (train.seed); random ops mix it with their own `seed`
  /// attribute, so a new run seed gives new dropout masks everywhere.
  uint64_t runSeed = 0;

  const TensorArg &in(unsigned i) const { return inputs[i]; }
  const TensorArg &out(unsigned i = 0) const { return outputs[i]; }
  const Attribute &attr(llvm::StringRef name) const { return node->attr(name); }
};

using KernelFn = void (*)(const KernelArgs &args);

} // namespace ampc::kernels

#endif
