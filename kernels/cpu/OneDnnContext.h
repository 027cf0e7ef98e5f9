//===- OneDnnContext.h - oneDNN engine, stream and the primitive kernel -*- C++ -*-===//
//
// What every oneDNN kernel of the cpu backend shares: the CPU engine, a
// stream, the DType mapping, and OneDnnPrimitiveKernel, which holds one
// primitive created at compile time together with the memory objects it
// reads and writes. run() only points those memory objects at the step's
// buffers and executes, so no descriptor or primitive is built per step.
//
// Internal to kernels/cpu (it includes oneDNN's header); the rest of the
// project sees only kernels/cpu/OneDnn.h.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_ONEDNNCONTEXT_H
#define AMPC_KERNELS_CPU_ONEDNNCONTEXT_H

#include "kernels/KernelArgs.h"

#include "llvm/ADT/SmallVector.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace ampc::kernels::cpu {

/// The process's oneDNN CPU engine.
const dnnl::engine &oneDnnEngine();

/// A stream on oneDnnEngine() for the calling thread (oneDNN streams are
/// not safe to share between threads).
dnnl::stream &oneDnnStream();

/// oneDNN's type for a tensor of `t`, or none where the cpu backend leaves
/// the op to the reference kernels (f16 runs by conversion there; f64 and
/// integers have no oneDNN primitives).
std::optional<dnnl::memory::data_type> oneDnnType(DType t);

/// The strides of a C-order ("row-major") tensor of `dims`.
dnnl::memory::dims denseStrides(llvm::ArrayRef<int64_t> dims);

/// A plain C-order memory descriptor of `dims`.
dnnl::memory::desc plainDesc(llvm::ArrayRef<int64_t> dims, dnnl::memory::data_type type);

/// Which of a node's tensors a oneDNN argument is.
struct OneDnnBinding {
  int argument;  ///< DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, ...
  bool isOutput; ///< a result of the node, else an operand
  unsigned index;
  dnnl::memory::desc desc; ///< how our buffer is laid out (shapes, strides)
  /// The layout the primitive wants when it is not `desc` (a blocked one it
  /// picked): the kernel then reorders through a staging buffer.
  dnnl::memory::desc primitiveDesc = {};
};

/// A node's kernel as one oneDNN primitive over the node's own buffers.
///
/// Scratch memory (the primitive's scratchpad and the staging buffers of
/// reordered arguments) lives in a per-thread workspace shared by all
/// kernels, sized for the largest of them: kernels run one at a time, so a
/// program holds the biggest scratch once instead of the sum over its nodes.
class OneDnnPrimitiveKernel final : public NodeKernel {
public:
  /// `pd` must have been created with userScratchpadAttr().
  OneDnnPrimitiveKernel(const dnnl::primitive_desc &pd, dnnl::primitive primitive,
                        llvm::ArrayRef<OneDnnBinding> bindings);
  void run(const KernelArgs &args) override;
  /// oneDNN's name for the implementation it picked (e.g. "brg:avx512_core").
  const std::string &implementation() const { return implementation_; }
  /// How many arguments go through a reorder (0 on plain layouts).
  unsigned numReorders() const { return reorders_.size(); }

private:
  struct Bound {
    bool isOutput;
    unsigned index;
    dnnl::memory memory; ///< wraps the node's buffer
  };
  /// A memory object over a workspace slot, pointed there before each run.
  struct Scratch {
    unsigned slot;
    size_t bytes;
    dnnl::memory memory;
  };
  /// user -> staging before the primitive (operands), staging -> user after
  /// it (results).
  struct Reorder {
    bool afterPrimitive;
    dnnl::primitive primitive;
    std::unordered_map<int, dnnl::memory> arguments;
  };
  dnnl::primitive primitive_;
  llvm::SmallVector<Bound, 4> bound_;
  llvm::SmallVector<Scratch, 4> scratch_;
  llvm::SmallVector<Reorder, 3> reorders_;
  /// What execute() takes: the memory objects above (memory is a shared
  /// handle, so pointing those at new buffers updates these) by argument.
  std::unordered_map<int, dnnl::memory> arguments_;
  std::string implementation_;
};

/// A primitive attribute with the user scratchpad mode, so the scratchpad
/// comes from the shared workspace instead of oneDNN allocating one per
/// primitive.
dnnl::primitive_attr userScratchpadAttr();

// The primitives by family (null when oneDNN cannot take the node).
std::unique_ptr<NodeKernel> prepareOneDnnLinear(const Node &n);
std::unique_ptr<NodeKernel> prepareOneDnnMatMul(const Node &n);
std::unique_ptr<NodeKernel> prepareOneDnnBatchMatMul(const Node &n);
std::unique_ptr<NodeKernel> prepareOneDnnConv2d(const Node &n);
std::unique_ptr<NodeKernel> prepareOneDnnConv2dGradInput(const Node &n);
std::unique_ptr<NodeKernel> prepareOneDnnConv2dGradWeight(const Node &n);

} // namespace ampc::kernels::cpu

#endif
