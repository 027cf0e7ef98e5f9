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
#include "kernels/cpu/OneDnn.h"

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

/// `d` (dims and strides of a plain, possibly strided, layout) holding
/// elements of `type`.
dnnl::memory::desc retypedDesc(const dnnl::memory::desc &d, dnnl::memory::data_type type);

/// Which of a node's tensors a oneDNN argument is.
struct OneDnnBinding {
  int argument;  ///< DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, ...
  bool isOutput; ///< a result of the node, else an operand
  unsigned index;
  dnnl::memory::desc desc; ///< how our buffer is laid out (shapes, strides)
  /// The layout the primitive wants when it is not `desc` (a blocked one it
  /// picked, or f32 for a bf16 tensor): the kernel then converts through a
  /// staging buffer. Between bf16 and f32 our own loops convert (oneDNN
  /// 2.6's reorders between them are scalar, slower than the GEMM they
  /// feed), through a dense f32 copy when the f32 layout is a blocked one.
  dnnl::memory::desc primitiveDesc = {};
};

/// A node's kernel as one oneDNN primitive over the node's own buffers.
///
/// Scratch memory (the primitive's scratchpad and the staging buffers of
/// reordered arguments) lives in a per-thread workspace shared by all
/// kernels, sized for the largest of them: kernels run one at a time, so a
/// program holds the biggest scratch once instead of the sum over its nodes.
///
/// An operand that keeps its bytes between runs (TensorArg::stableVersion:
/// the weights in evaluation and inference, frozen ones in training) is
/// reordered into a buffer of the kernel's own instead, and only when its
/// buffer or version changed: such weights stay in the layout the primitive
/// wants.
class OneDnnPrimitiveKernel final : public NodeKernel {
public:
  /// `pd` must have been created with userScratchpadAttr().
  OneDnnPrimitiveKernel(const dnnl::primitive_desc &pd, dnnl::primitive primitive,
                        llvm::ArrayRef<OneDnnBinding> bindings);
  void run(const KernelArgs &args) override;
  uint64_t heldBytes() const override;
  /// oneDNN's name for the implementation it picked (e.g. "brg:avx512_core").
  const std::string &implementation() const { return implementation_; }
  /// Operands that go through a reorder, and how many of those the last
  /// run() skipped because the operand's kept copy was current.
  OneDnnReorderCounts reorderCounts() const;

private:
  struct Bound {
    bool isOutput;
    unsigned index;
    dnnl::memory memory; ///< wraps the node's buffer
  };
  struct FreeBytes {
    void operator()(std::byte *p) const;
  };
  /// user -> staging before the primitive (operands), staging -> user after
  /// it (results).
  struct Reorder {
    bool afterPrimitive = false;
    /// bf16 <-> f32 element by element (a binding from bf16 to f32), no
    /// primitive: `elements` values.
    bool widenBf16 = false;
    int64_t elements = 0;
    /// With widenBf16 into or out of a blocked f32 layout: the dense f32
    /// copy in between (workspace memory), `primitive` reorders it.
    std::optional<dnnl::memory> dense;
    size_t denseBytes = 0;
    unsigned index = 0; ///< of the operand or result
    dnnl::primitive primitive;
    std::unordered_map<int, dnnl::memory> arguments;
    dnnl::memory staged; ///< the argument in the primitive's layout
    unsigned slot = 0;   ///< the workspace slot `staged` uses
    size_t bytes = 0;
    /// A stable operand's copy in the primitive's layout, and what it was
    /// made from.
    std::unique_ptr<std::byte, FreeBytes> kept;
    const void *keptFrom = nullptr;
    uint64_t keptVersion = 0;
  };
  dnnl::primitive primitive_;
  llvm::SmallVector<Bound, 4> bound_;
  /// The primitive's scratchpad, when it has one (workspace slot 0).
  std::optional<dnnl::memory> scratchpad_;
  size_t scratchpadBytes_ = 0;
  llvm::SmallVector<Reorder, 3> reorders_;
  /// What execute() takes: the memory objects above (memory is a shared
  /// handle, so pointing those at new buffers updates these) by argument.
  std::unordered_map<int, dnnl::memory> arguments_;
  std::string implementation_;
  unsigned reordersSkipped_ = 0;
};

/// A primitive attribute with the user scratchpad mode, so the scratchpad
/// comes from the shared workspace instead of oneDNN allocating one per
/// primitive.
dnnl::primitive_attr userScratchpadAttr();

// The primitives by family (null when oneDNN cannot take the node). With
// `widen`, a bf16 node's primitive computes in f32 on its operands widened
// (exactly) and rounds its results once: for CPUs whose oneDNN has no bf16
// kernels (AVX2), where the alternative is the reference kernel.
std::unique_ptr<NodeKernel> prepareOneDnnLinear(const Node &n, bool widen);
std::unique_ptr<NodeKernel> prepareOneDnnMatMul(const Node &n, bool widen);
std::unique_ptr<NodeKernel> prepareOneDnnBatchMatMul(const Node &n, bool widen);
std::unique_ptr<NodeKernel> prepareOneDnnConv2d(const Node &n, bool widen);
std::unique_ptr<NodeKernel> prepareOneDnnConv2dGradInput(const Node &n, bool widen);
std::unique_ptr<NodeKernel> prepareOneDnnConv2dGradWeight(const Node &n, bool widen);

} // namespace ampc::kernels::cpu

#endif
