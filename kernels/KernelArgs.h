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

#include <cstdint>

namespace ampc::kernels {

/// A tensor's storage: elements in C order, in the storage format of
/// type->dtype() (f16 and bf16 as their 16-bit patterns).
struct TensorArg {
  void *data = nullptr;
  const TensorType *type = nullptr;
  /// Inputs only, where the runtime knows it: the bytes at `data` change
  /// only between runs and only when *stableVersion changes (a state tensor
  /// the program never updates, or a cached cast of one). A kernel may then
  /// keep something derived from them - oneDNN kernels keep weights
  /// reordered into the primitive's layout - for as long as `data` and
  /// *stableVersion stay as they were. Null: may change on every run.
  const uint64_t *stableVersion = nullptr;

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
  /// Where a kernel reports that this step left its state results equal to
  /// its state operands (an update op on a mid-accumulation micro-step or a
  /// skipped step copies them through). The runtime then skips copying
  /// back the state updates this node feeds and keeps those tensors'
  /// versions, so cached casts of them stay valid. Null where nobody tracks
  /// it; the runtime clears it before each call.
  bool *stateUnchanged = nullptr;

  const TensorArg &in(unsigned i) const { return inputs[i]; }
  const TensorArg &out(unsigned i = 0) const { return outputs[i]; }
  const Attribute &attr(llvm::StringRef name) const { return node->attr(name); }
  /// For kernels: see stateUnchanged. Report it only when every result that
  /// may feed a state update equals the operand holding that state.
  void reportStateUnchanged() const {
    if (stateUnchanged)
      *stateUnchanged = true;
  }
};

using KernelFn = void (*)(const KernelArgs &args);

/// A node's kernel as a backend prepared it at compile time: what it could
/// set up once for this node's shapes, dtypes and attributes (oneDNN
/// primitives and memory descriptors, cuDNN plans, scratch sizes) lives in
/// the object, so run() does only the step's work. Stateless kernels are a
/// KernelFn wrapped by FunctionKernel.
class NodeKernel {
public:
  virtual ~NodeKernel() = default;
  virtual void run(const KernelArgs &args) = 0;
  /// Memory the kernel holds between runs outside the program's arenas (say,
  /// weights kept reordered; TensorArg::stableVersion), in bytes.
  virtual uint64_t heldBytes() const { return 0; }
  /// True for a device backend's host fallback: the op runs on host copies
  /// of its operands (slow; Program::deviceActivity counts them).
  virtual bool runsOnHost() const { return false; }
  /// True for a kernel whose run() may only start its work, to go on beside
  /// the nodes after it (a collective on a stream of its own): Program then
  /// calls finish() with the same node's arguments before the first later
  /// node that reads one of its results runs, and at the end of the step at
  /// the latest. finish() must make the results ready for what runs next.
  virtual bool finishesLater() const { return false; }
  virtual void finish(const KernelArgs &args) {}
};

class FunctionKernel final : public NodeKernel {
public:
  explicit FunctionKernel(KernelFn fn) : fn_(fn) {}
  void run(const KernelArgs &args) override { fn_(args); }

private:
  KernelFn fn_;
};

} // namespace ampc::kernels

#endif
