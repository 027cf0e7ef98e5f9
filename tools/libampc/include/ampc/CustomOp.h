//===- ampc/CustomOp.h - Ops a host program adds at run time --*- C++ -*-===//
//
// A custom op is one registry row like the built-in ops': operands,
// attributes, a shape rule, a precision category, a gradient rule and
// kernels. Once registered, model files (`- my_op: {...}` as a layer), the
// textual IR and every pass treat it like a built-in op: O1 casts around it
// by its category, autodiff calls its gradient rule, the runtime runs its
// kernel. Register at start-up, before loading models that use it, from one
// thread; registration cannot be undone.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_CUSTOMOP_H
#define AMPC_PUBLIC_CUSTOMOP_H

#include "ampc/Export.h"
#include "ampc/Graph.h"
#include "ampc/Status.h"
#include "ampc/Types.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ampc {
class InferContext;
class GradientBuilder;
namespace kernels {
struct KernelArgs;
}
} // namespace ampc

namespace ampc::api {

struct OperandDecl {
  std::string name;
  bool optional = false; ///< may be omitted (trailing operands only)
  bool variadic = false; ///< one or more values (the last operand only)
  /// Stays f32 when the op runs in half (like batchnorm's statistics).
  bool keepFp32 = false;
  /// Integer indices or labels: never cast, never differentiated.
  bool integral = false;
};

struct AttrDecl {
  std::string name;
  AttrKind kind = AttrKind::Float;
  /// nullopt: the attribute is required.
  std::optional<AttrValue> defaultValue;
};

/// What a shape rule sees: the operands' types and the attributes (defaults
/// filled in).
class AMPC_API ShapeContext {
public:
  size_t numInputs() const;
  TensorInfo input(size_t i) const;
  /// An attribute's value (every declared attribute has one).
  AttrValue attr(std::string_view name) const;
  int64_t intAttr(std::string_view name) const;
  double floatAttr(std::string_view name) const;

private:
  friend struct Access;
  explicit ShapeContext(const ampc::InferContext &ctx) : ctx_(ctx) {}
  const ampc::InferContext &ctx_;
};

/// Computes the result types; returns an error Status (its message says
/// what is wrong, e.g. "input has 3 dims, expected 2") for bad operands.
using ShapeFn = std::function<Status(const ShapeContext &ctx, std::vector<TensorInfo> &results)>;

/// What a gradient rule sees and builds with. The rule reads the forward
/// node and the gradients of its results, builds backward nodes (any op,
/// custom ones included) and sets the gradient of each input it is asked
/// for. Gradients have the shapes and dtypes of their values.
class AMPC_API GradientContext {
public:
  NodeView forward() const;
  ValueView input(unsigned i) const;
  ValueView output(unsigned i = 0) const;
  /// The gradient of result i; invalid when nothing depends on it.
  ValueView outputGrad(unsigned i = 0) const;
  /// Whether the rule must set input i's gradient.
  bool needsGradient(unsigned i) const;
  /// Builds a backward node; its results, or an error.
  Result<std::vector<ValueView>> build(std::string_view op, std::vector<ValueView> operands,
                                       std::map<std::string, AttrValue> attrs = {});
  /// Builds a single-result node; an invalid view on error (the pass then
  /// reports it).
  ValueView build1(std::string_view op, std::vector<ValueView> operands,
                   std::map<std::string, AttrValue> attrs = {});
  void setInputGrad(unsigned i, ValueView grad);

private:
  friend struct Access;
  GradientContext(ampc::GradientBuilder &gb, const ampc::Node &forward, void *resultGrads,
                  void *operandGrads)
      : gb_(gb), forward_(forward), resultGrads_(resultGrads), operandGrads_(operandGrads) {}
  ampc::GradientBuilder &gb_;
  const ampc::Node &forward_;
  void *resultGrads_;  // llvm::ArrayRef<Value *> *
  void *operandGrads_; // llvm::MutableArrayRef<Value *> *
};

/// Returns an error Status when the rule cannot build the gradient.
using GradientFn = std::function<Status(GradientContext &ctx)>;

/// A tensor as a kernel sees it: elements in C order in the storage format
/// of its dtype (f16/bf16 as 16-bit patterns; use get/set to convert).
class AMPC_API TensorRef {
public:
  void *data() const { return data_; }
  template <class T> T *as() const { return static_cast<T *>(data_); }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t numElements() const { return numElements_; }
  /// Element i as a double / set from a double (rounded to nearest even for
  /// f16/bf16), whatever the dtype: one kernel body for every precision.
  double get(int64_t i) const;
  void set(int64_t i, double v) const;

private:
  friend struct Access;
  void *data_ = nullptr;
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numElements_ = 0;
};

/// What a kernel gets: its node (for attributes), inputs and outputs, and
/// the step (for seeded randomness).
class AMPC_API KernelContext {
public:
  size_t numInputs() const { return inputs_.size(); }
  size_t numOutputs() const { return outputs_.size(); }
  const TensorRef &input(size_t i) const { return inputs_[i]; }
  const TensorRef &output(size_t i = 0) const { return outputs_[i]; }
  NodeView node() const;
  AttrValue attr(std::string_view name) const;
  int64_t intAttr(std::string_view name) const;
  double floatAttr(std::string_view name) const;
  uint64_t step() const { return step_; }

private:
  friend struct Access;
  const ampc::kernels::KernelArgs *args_ = nullptr;
  std::vector<TensorRef> inputs_, outputs_;
  uint64_t step_ = 0;
};

/// Shapes were checked when the graph was compiled, so kernels do not fail.
using KernelFn = std::function<void(const KernelContext &ctx)>;

struct CustomOpSpec {
  /// A plain identifier, unused by any other op ("swish", "my_lib.gelu2").
  std::string name;
  std::vector<OperandDecl> inputs;
  std::vector<AttrDecl> attrs;
  /// Required: a custom op with no category is refused, never treated as
  /// "follow" by default.
  std::optional<Category> category;
  /// Required.
  ShapeFn shape;
  /// Optional: without one, autodiff reports an error when a parameter's
  /// gradient flows through the op.
  GradientFn gradient;
  /// Required: runs on host memory (the `cpu` and `cpu-ref` devices).
  KernelFn cpuKernel;
  /// Optional: runs on device memory on the `cuda` device.
  KernelFn cudaKernel;
  /// The compute dtypes the kernels handle; the precision passes keep the op
  /// in f32 on a device whose kernels lack the half type.
  std::vector<DType> kernelDTypes = {DType::F32, DType::F16, DType::BF16, DType::F64};
  /// Nodes of the op are kept even when their results are unused.
  bool sideEffects = false;
};

/// Registers `spec`; an error Status (naming the op) when a required part is
/// missing, the name is taken or invalid, or a declaration is malformed.
AMPC_API Status registerCustomOp(CustomOpSpec spec);
/// Whether an op (built-in or custom) of that name exists.
AMPC_API bool isRegisteredOp(std::string_view name);

} // namespace ampc::api

#endif
