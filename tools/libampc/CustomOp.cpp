//===- CustomOp.cpp - Registering a host program's op ---------------------===//
//
// Translates a CustomOpSpec into a registry row (ir/OpRegistry) whose shape
// and gradient rules call the host's closures through the public context
// types, and into an entry of the custom-kernel table (kernels/custom) that
// the CPU backends consult for OpKind::Custom nodes.
//
//===----------------------------------------------------------------------===//
#include "Internal.h"

#include "ir/Builder.h"
#include "ir/GradientBuilder.h"
#include "kernels/common/Storage.h"
#include "kernels/custom/CustomKernels.h"

namespace ampc::api {

//===----------------------------------------------------------------------===//
// ShapeContext
//===----------------------------------------------------------------------===//

size_t ShapeContext::numInputs() const { return ctx_.numOperands(); }

TensorInfo ShapeContext::input(size_t i) const {
  const TensorType &t = ctx_.operand(i);
  return {toPublic(t.dtype()), {t.dims().begin(), t.dims().end()}};
}

AttrValue ShapeContext::attr(std::string_view name) const {
  return toPublic(ctx_.attr(llvm::StringRef(name.data(), name.size())));
}

int64_t ShapeContext::intAttr(std::string_view name) const {
  return ctx_.getInt(llvm::StringRef(name.data(), name.size()));
}

double ShapeContext::floatAttr(std::string_view name) const {
  return ctx_.getFloat(llvm::StringRef(name.data(), name.size()));
}

//===----------------------------------------------------------------------===//
// GradientContext
//===----------------------------------------------------------------------===//

namespace {
llvm::ArrayRef<ampc::Value *> &resultGradsOf(void *p) {
  return *static_cast<llvm::ArrayRef<ampc::Value *> *>(p);
}
llvm::MutableArrayRef<ampc::Value *> &operandGradsOf(void *p) {
  return *static_cast<llvm::MutableArrayRef<ampc::Value *> *>(p);
}
} // namespace

NodeView GradientContext::forward() const { return Access::node(&forward_); }

ValueView GradientContext::input(unsigned i) const {
  return i < forward_.numOperands() ? Access::value(forward_.operand(i)) : ValueView();
}

ValueView GradientContext::output(unsigned i) const {
  return i < forward_.numResults() ? Access::value(forward_.result(i)) : ValueView();
}

ValueView GradientContext::outputGrad(unsigned i) const {
  llvm::ArrayRef<ampc::Value *> grads = resultGradsOf(resultGrads_);
  return i < grads.size() ? Access::value(grads[i]) : ValueView();
}

bool GradientContext::needsGradient(unsigned i) const { return gb_.needsGradient(i); }

Result<std::vector<ValueView>> GradientContext::build(std::string_view op,
                                                      std::vector<ValueView> operands,
                                                      std::map<std::string, AttrValue> attrs) {
  const OpInfo *info = OpRegistry::builtin().lookup(llvm::StringRef(op.data(), op.size()));
  if (!info)
    return Status::error("gradient of " + forward_.opName().str() + ": unknown op '" +
                         std::string(op) + "'");
  llvm::SmallVector<ampc::Value *, 4> ins;
  for (const ValueView &v : operands)
    ins.push_back(const_cast<ampc::Value *>(Access::get(v)));
  AttrMap am;
  for (auto &[k, v] : attrs)
    am[k] = toInternal(v);
  unsigned errors = gb_.diag().numErrors();
  llvm::SmallVector<ampc::Value *, 3> results = gb_.build(*info, ins, std::move(am));
  if (gb_.failed()) {
    // The builder's diagnostics stay with the autodiff pass, which reports
    // them; the rule gets the first new one to decide what to do.
    const auto &d = gb_.diag().diagnostics();
    return Status::error(gb_.diag().numErrors() > errors && !d.empty()
                             ? d.back().message
                             : "cannot build " + std::string(op));
  }
  std::vector<ValueView> out;
  for (ampc::Value *v : results)
    out.push_back(Access::value(v));
  return out;
}

ValueView GradientContext::build1(std::string_view op, std::vector<ValueView> operands,
                                  std::map<std::string, AttrValue> attrs) {
  Result<std::vector<ValueView>> r = build(op, std::move(operands), std::move(attrs));
  return r && !r->empty() ? r->front() : ValueView();
}

void GradientContext::setInputGrad(unsigned i, ValueView grad) {
  llvm::MutableArrayRef<ampc::Value *> grads = operandGradsOf(operandGrads_);
  if (i < grads.size())
    grads[i] = const_cast<ampc::Value *>(Access::get(grad));
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

double TensorRef::get(int64_t i) const {
  return kernels::loadAsDouble(toInternal(dtype_), data_, i);
}

void TensorRef::set(int64_t i, double v) const {
  kernels::storeFromDouble(toInternal(dtype_), data_, i, v);
}

NodeView KernelContext::node() const { return Access::node(args_->node); }

AttrValue KernelContext::attr(std::string_view name) const {
  return toPublic(args_->attr(llvm::StringRef(name.data(), name.size())));
}

int64_t KernelContext::intAttr(std::string_view name) const {
  return args_->attr(llvm::StringRef(name.data(), name.size())).getInt();
}

double KernelContext::floatAttr(std::string_view name) const {
  return args_->attr(llvm::StringRef(name.data(), name.size())).getNumber();
}

KernelContext Access::kernelContext(const kernels::KernelArgs &args) {
  KernelContext ctx;
  ctx.args_ = &args;
  ctx.step_ = args.step;
  auto ref = [](const kernels::TensorArg &t) {
    TensorRef r;
    r.data_ = t.data;
    r.dtype_ = toPublic(t.dtype());
    r.shape_.assign(t.dims().begin(), t.dims().end());
    r.numElements_ = t.numElements();
    return r;
  };
  for (const kernels::TensorArg &t : args.inputs)
    ctx.inputs_.push_back(ref(t));
  for (const kernels::TensorArg &t : args.outputs)
    ctx.outputs_.push_back(ref(t));
  return ctx;
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

static AttrType toInternal(AttrKind k) { return static_cast<AttrType>(k); }
static_assert(static_cast<int>(AttrType::DType) == static_cast<int>(AttrKind::DType));

Status registerCustomOp(CustomOpSpec spec) {
  std::string what = "custom op '" + spec.name + "'";
  if (spec.name.empty())
    return Status::error("custom op has no name");
  if (!spec.category)
    return Status::error(what + " declares no precision category; set CustomOpSpec::category to "
                                "half, fp32, promote, follow or banned (ops are never 'follow' by "
                                "default)");
  if (!spec.shape)
    return Status::error(what + " has no shape rule (CustomOpSpec::shape)");
  if (!spec.cpuKernel)
    return Status::error(what + " has no CPU kernel (CustomOpSpec::cpuKernel)");
  if (OpRegistry::builtin().lookup(spec.name))
    return Status::error("op '" + spec.name + "' is already registered");
  if (spec.kernelDTypes.empty())
    return Status::error(what + " lists no dtype its kernels handle (CustomOpSpec::kernelDTypes)");
  for (DType t : spec.kernelDTypes)
    if (!isFloating(toInternal(t)))
      return Status::error(what + ": kernel dtype " + std::string(dtypeName(t)) +
                           " is not a floating type");

  OpInfo info;
  info.name = spec.name;
  for (const OperandDecl &o : spec.inputs)
    info.operands.push_back({o.name, o.optional, o.variadic, o.keepFp32, o.integral});
  for (const AttrDecl &a : spec.attrs) {
    std::optional<Attribute> def;
    if (a.defaultValue) {
      def = toInternal(*a.defaultValue);
      // An int default of a float attribute is what a user means by 1 for 1.0.
      if (a.kind == AttrKind::Float && def->is(AttrType::Int))
        def = Attribute(static_cast<double>(def->getInt()));
      if (def->type() != toInternal(a.kind))
        return Status::error(what + ": the default of attribute '" + a.name + "' is " +
                             attrTypeName(def->type()).str() + ", not " +
                             attrTypeName(toInternal(a.kind)).str());
    }
    info.attrs.push_back({a.name, toInternal(a.kind), std::move(def)});
  }
  info.hasSideEffects = spec.sideEffects;
  info.infer = [shape = spec.shape](InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
    std::vector<TensorInfo> out;
    Status s = shape(Access::shapeContext(ctx), out);
    if (!s) {
      std::string msg;
      for (const Diagnostic &d : s.diagnostics())
        if (d.severity == Severity::Error)
          msg += (msg.empty() ? "" : "; ") + d.message;
      return ctx.error(msg);
    }
    if (out.empty())
      return ctx.error("the shape rule gave no result");
    for (const TensorInfo &t : out) {
      for (int64_t d : t.shape)
        if (d < 0)
          return ctx.error("the shape rule gave a negative dimension");
      results.push_back(TensorType(toInternal(t.dtype), t.shape));
    }
    return true;
  };
  if (spec.gradient)
    info.gradient = [rule = spec.gradient](GradientBuilder &gb, const ampc::Node &forward,
                                           llvm::ArrayRef<ampc::Value *> resultGrads,
                                           llvm::MutableArrayRef<ampc::Value *> operandGrads) {
      GradientContext ctx = Access::gradientContext(gb, forward, &resultGrads, &operandGrads);
      unsigned errors = gb.diag().numErrors();
      Status s = rule(ctx);
      if (s || gb.diag().numErrors() > errors)
        return; // a failed build was reported already
      for (const Diagnostic &d : s.diagnostics())
        if (d.severity == Severity::Error)
          gb.diag().error(forward.loc(), "gradient of " + forward.opName() + ": " + d.message);
      gb.fail(); // the autodiff pass stops on a failed builder
    };

  const OpInfo *registered = nullptr;
  if (std::optional<std::string> err = OpRegistry::builtin().addCustomOp(
          std::move(info), static_cast<PrecisionCategory>(*spec.category)))
    return Status::error(*err);
  registered = OpRegistry::builtin().lookup(spec.name);

  kernels::CustomKernels k;
  auto wrap = [](KernelFn fn) -> kernels::CustomKernelFn {
    if (!fn)
      return {};
    return
        [fn = std::move(fn)](const kernels::KernelArgs &args) { fn(Access::kernelContext(args)); };
  };
  k.cpu = wrap(spec.cpuKernel);
  k.cuda = wrap(spec.cudaKernel);
  k.dtypes.clear();
  for (DType t : spec.kernelDTypes)
    k.dtypes.push_back(toInternal(t));
  if (std::optional<std::string> err = kernels::registerCustomKernels(*registered, std::move(k)))
    return Status::error(*err);
  return {};
}

bool isRegisteredOp(std::string_view name) {
  return OpRegistry::builtin().lookup(llvm::StringRef(name.data(), name.size())) != nullptr;
}

} // namespace ampc::api
