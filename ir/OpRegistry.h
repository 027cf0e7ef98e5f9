//===- OpRegistry.h - The single source of truth about ops -----------------===//
//
// One OpInfo per op: operands, attributes with types and defaults, shape/dtype
// inference, precision category and the gradient rule. Kernels are not here:
// the reference backend maps every OpKind to its kernel in a switch without
// `default:` (kernels/reference/ReferenceKernels.cpp), so a new op fails to
// compile until it has one; the fast backends take the ops they have kernels
// for and fall back to the reference for the rest. Passes ask the registry;
// they never switch over op names.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_OPREGISTRY_H
#define AMPC_IR_OPREGISTRY_H

#include "ir/Attribute.h"
#include "ir/TensorType.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampc {

enum class OpKind : uint16_t {
#define AMPC_OP(Id, Name, Category) Id,
#include "ir/Ops.def"
  /// An op registered at run time by a host program.
  Custom,
};

/// How mixed precision treats an op (DESIGN.md, "Precision categories").
enum class PrecisionCategory : uint8_t {
  Half,    ///< worth running in f16/bf16
  Fp32,    ///< needs fp32 range or accuracy
  Promote, ///< mixed inputs are cast to the widest
  Follow,  ///< runs in whatever dtype it is fed
  Banned,  ///< unsafe in half: an error under O1 unless overridden
};
llvm::StringRef categoryName(PrecisionCategory c);

struct OperandSpec {
  std::string name;
  bool optional = false; ///< may be omitted (only trailing operands)
  bool variadic = false; ///< one or more values (only the last operand)
  /// Stays fp32 when the op runs in half (batchnorm statistics and affine
  /// parameters, as cuDNN and Apex's keep_batchnorm_fp32 want).
  bool keepFp32 = false;
  /// Integer indices/labels: never cast, never differentiated.
  bool integral = false;
};

struct AttrSpec {
  std::string name;
  AttrType type;
  /// nullopt: the attribute is required.
  std::optional<Attribute> defaultValue;
};

class InferContext;
class GradientBuilder;
class Node;
class Value;
/// Builds the backward of one forward node: given the gradients of its results
/// (nullptr for a result nothing depends on), sets operandGrads[i] to the
/// gradient of operand i, or leaves it nullptr when operand i has none
/// (labels, indices) or when it is not needed (gb.needsGradient(i) is false).
/// Nodes are created through the builder, which reports failures.
/// A std::function, not a function pointer, so that a host program's custom
/// op (OpRegistry::addCustomOp) can register a closure over its own state.
using GradientFn = std::function<void(GradientBuilder &gb, const Node &forward,
                                      llvm::ArrayRef<Value *> resultGrads,
                                      llvm::MutableArrayRef<Value *> operandGrads)>;

/// Computes the result types of a node from its operand types and (defaulted)
/// attributes. Returns false after reporting an error through the context.
/// A std::function for the same reason as GradientFn.
using InferFn = std::function<bool(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results)>;

/// Floating-point operations one run of a node does (multiply and add
/// counted apart), for profiles' GFLOP/s; ops without one (the memory-bound
/// rest) are measured in bytes moved instead.
using FlopsFn = double (*)(const Node &node);

struct OpInfo {
  OpKind kind = OpKind::Custom;
  std::string name;
  PrecisionCategory category = PrecisionCategory::Follow;
  std::vector<OperandSpec> operands;
  std::vector<AttrSpec> attrs;
  InferFn infer = nullptr;
  /// Ops whose results may be dropped only if unused and which change no state.
  bool hasSideEffects = false;
  /// A result that is the next value of a state operand may share that
  /// operand's buffer: every kernel of the op computes each element of it from
  /// the same-index elements of its operands, read before it is written. The
  /// memory planner then updates the state in place instead of double
  /// buffering it (runtime/MemoryPlanner.cpp).
  bool updatesStateInPlace = false;
  /// The result is operand 0's bytes unchanged under another shape (reshape,
  /// flatten): the memory planner gives it operand 0's buffer where that
  /// buffer is a step value, and the kernels then find nothing to copy.
  bool resultViewsOperand = false;
  /// Elementwise: each result element is a function of the same-index
  /// elements of the operands (which have the result's shape, or broadcast
  /// to it) and of the attributes alone, with no state, randomness or side
  /// effects. A backend may then run a chain of such nodes in one pass over
  /// the elements (Backend::prepareFused, runtime/Program.cpp).
  bool elementwise = false;
  /// A collective across the ranks of a data-parallel job (all_reduce): the
  /// runtime binds it to its communicator (runtime/dist/) instead of asking
  /// the backend for a kernel, and no pass may drop it (every rank must
  /// take part), so it also has side effects.
  bool collective = false;
  /// A form of the op that reads its operands permuted: a node whose
  /// attribute `attr` is `from` and whose every operand is permute(x_i,
  /// dims) computes the same with operands x_i and `attr` = `to`, and its
  /// results are then the old ones permuted by `dims` (attention in layout
  /// bshd instead of bhsd: dims [0, 2, 1, 3]). The fold-permutes pass uses it
  /// to drop the permutes, which copy whole tensors, around such a node.
  struct PermutedForm {
    std::vector<int64_t> dims;
    std::string attr, from, to;
  };
  std::optional<PermutedForm> permutedForm;
  /// Operands the op can read transposed in place: when operand `operand`
  /// is a permute that swaps its last two dims (and keeps the rest), the
  /// node computes the same from the permute's input with its bool
  /// attribute `attr` negated (matmul's transpose_b). fold-permutes uses it
  /// for the weight transposes of PyTorch's ONNX exports (nn.Linear on a 3-D
  /// input is MatMul(x, Transpose(W))), which copy every weight and its
  /// gradient each step.
  struct TransposedOperand {
    unsigned operand;
    std::string attr;
  };
  std::vector<TransposedOperand> transposedOperands;
  /// The gradient rule; nullptr for ops that are not differentiated (backward
  /// and optimizer ops themselves).
  GradientFn gradient = nullptr;
  /// The op's arithmetic, for the dense ops (GEMMs, convolutions,
  /// attention); nullptr for the rest.
  FlopsFn flops = nullptr;

  const AttrSpec *findAttr(llvm::StringRef n) const;
  /// The position of the operand named `n` in the row, if it has one (the
  /// passes find an update's `grad` or `skip` by name).
  std::optional<unsigned> operandIndex(llvm::StringRef n) const;
  /// Smallest and largest operand count the signature allows (max = ~0u if variadic).
  unsigned minOperands() const;
  unsigned maxOperands() const;
  /// The spec that describes operand i (the variadic one for i past the end).
  const OperandSpec *operandSpec(unsigned i) const;
};

/// What an InferFn sees: operand types, attributes with defaults filled in,
/// and a way to report an error at the node's location.
class InferContext {
public:
  InferContext(const OpInfo &op, llvm::ArrayRef<TensorType> operands, const AttrMap &attrs)
      : op_(op), operands_(operands), attrs_(attrs) {}

  const OpInfo &op() const { return op_; }
  llvm::ArrayRef<TensorType> operands() const { return operands_; }
  const TensorType &operand(unsigned i) const { return operands_[i]; }
  unsigned numOperands() const { return operands_.size(); }

  /// Attribute values; every declared attribute is present (defaults applied).
  int64_t getInt(llvm::StringRef n) const;
  double getFloat(llvm::StringRef n) const;
  bool getBool(llvm::StringRef n) const;
  const std::string &getString(llvm::StringRef n) const;
  const std::vector<int64_t> &getInts(llvm::StringRef n) const;
  DType getDType(llvm::StringRef n) const;
  const Attribute &attr(llvm::StringRef n) const;
  const AttrMap &attrs() const { return attrs_; }

  /// Record an error ("linear: weight has 3 dims, expected 2"); returns false.
  bool error(const llvm::Twine &msg);
  const std::string &errorMessage() const { return error_; }

private:
  const OpInfo &op_;
  llvm::ArrayRef<TensorType> operands_;
  const AttrMap &attrs_;
  std::string error_;
};

/// The table of ops. builtin() holds every op of Ops.def; a host program may
/// add custom ops (addCustomOp) before it builds graphs that use them.
/// Lookups are safe from many threads once registration is done.
class OpRegistry {
public:
  static OpRegistry &builtin();

  const OpInfo *lookup(llvm::StringRef name) const;
  const OpInfo &get(OpKind kind) const;
  /// Every op, built-ins in Ops.def order, then custom ops in registration order.
  std::vector<const OpInfo *> all() const;

  /// Registers a host program's op with its precision category. The
  /// category is a parameter of its own, not OpInfo's default, so that no
  /// custom op silently becomes `follow`: the caller must decide. Returns an
  /// error message on failure (no name, an invalid or duplicate name, no
  /// inference rule, an operand list the built-ins would not allow). Not
  /// safe while other threads look ops up: register at start-up.
  std::optional<std::string> addCustomOp(OpInfo info, PrecisionCategory category);

  /// Used while filling the built-in table (ir/ops/*.cpp).
  OpInfo &define(OpKind kind);

private:
  OpRegistry();
  std::vector<std::unique_ptr<OpInfo>> builtins_;
  std::vector<std::unique_ptr<OpInfo>> customs_;
  llvm::StringMap<const OpInfo *> byName_;
};

/// Row-building helpers for ir/ops/*.cpp: keep each row readable.
class OpRow {
public:
  explicit OpRow(OpInfo &info) : info_(info) {}
  OpRow &operand(llvm::StringRef name) { return add({name.str()}); }
  OpRow &optionalOperand(llvm::StringRef name) { return add({name.str(), true}); }
  OpRow &variadicOperand(llvm::StringRef name) { return add({name.str(), false, true}); }
  OpRow &fp32Operand(llvm::StringRef name) { return add({name.str(), false, false, true}); }
  OpRow &indexOperand(llvm::StringRef name) { return add({name.str(), false, false, false, true}); }
  OpRow &attr(llvm::StringRef name, AttrType type) {
    info_.attrs.push_back({name.str(), type, std::nullopt});
    return *this;
  }
  OpRow &attr(llvm::StringRef name, AttrType type, Attribute def) {
    info_.attrs.push_back({name.str(), type, std::move(def)});
    return *this;
  }
  OpRow &infer(InferFn fn) {
    info_.infer = fn;
    return *this;
  }
  OpRow &gradient(GradientFn fn) {
    info_.gradient = fn;
    return *this;
  }
  OpRow &flops(FlopsFn fn) {
    info_.flops = fn;
    return *this;
  }
  OpRow &sideEffects() {
    info_.hasSideEffects = true;
    return *this;
  }
  OpRow &updatesStateInPlace() {
    info_.updatesStateInPlace = true;
    return *this;
  }
  OpRow &viewsOperand() {
    info_.resultViewsOperand = true;
    return *this;
  }
  OpRow &collective() {
    info_.collective = true;
    info_.hasSideEffects = true;
    return *this;
  }
  OpRow &elementwise() {
    info_.elementwise = true;
    return *this;
  }
  OpRow &readsTransposed(unsigned operand, llvm::StringRef attr) {
    info_.transposedOperands.push_back({operand, attr.str()});
    return *this;
  }
  OpRow &readsPermuted(std::vector<int64_t> dims, llvm::StringRef attr, llvm::StringRef from,
                       llvm::StringRef to) {
    info_.permutedForm = OpInfo::PermutedForm{std::move(dims), attr.str(), from.str(), to.str()};
    return *this;
  }

private:
  OpRow &add(OperandSpec s) {
    info_.operands.push_back(std::move(s));
    return *this;
  }
  OpInfo &info_;
};

} // namespace ampc

#endif
