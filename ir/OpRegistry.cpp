//===- OpRegistry.cpp -------------------------------------------------------===//
#include "ir/OpRegistry.h"
#include "ir/OpAttrs.h"

#include "ir/ops/OpFamilies.h"

#include <cassert>
#include <cctype>

namespace ampc {

llvm::StringRef categoryName(PrecisionCategory c) {
  switch (c) {
  case PrecisionCategory::Half:
    return "half";
  case PrecisionCategory::Fp32:
    return "fp32";
  case PrecisionCategory::Promote:
    return "promote";
  case PrecisionCategory::Follow:
    return "follow";
  case PrecisionCategory::Banned:
    return "banned";
  }
  return "follow";
}

const AttrSpec *OpInfo::findAttr(llvm::StringRef n) const {
  for (const AttrSpec &a : attrs)
    if (a.name == n)
      return &a;
  return nullptr;
}

std::optional<unsigned> OpInfo::operandIndex(llvm::StringRef n) const {
  for (unsigned i = 0; i < operands.size(); ++i)
    if (operands[i].name == n)
      return i;
  return std::nullopt;
}

unsigned OpInfo::minOperands() const {
  unsigned n = 0;
  for (const OperandSpec &o : operands)
    if (!o.optional)
      ++n;
  return n;
}

unsigned OpInfo::maxOperands() const {
  if (!operands.empty() && operands.back().variadic)
    return ~0u;
  return operands.size();
}

const OperandSpec *OpInfo::operandSpec(unsigned i) const {
  if (i < operands.size())
    return &operands[i];
  if (!operands.empty() && operands.back().variadic)
    return &operands.back();
  return nullptr;
}

//===----------------------------------------------------------------------===//
// InferContext
//===----------------------------------------------------------------------===//

const Attribute &InferContext::attr(llvm::StringRef n) const {
  auto it = attrs_.find(n);
  if (it != attrs_.end())
    return it->second;
  const AttrSpec *spec = op_.findAttr(n);
  assert(spec && spec->defaultValue && "inference read an undeclared or missing attribute");
  return *spec->defaultValue;
}

int64_t InferContext::getInt(llvm::StringRef n) const { return attr(n).getInt(); }
double InferContext::getFloat(llvm::StringRef n) const { return attr(n).getNumber(); }
bool InferContext::getBool(llvm::StringRef n) const { return attr(n).getBool(); }
const std::string &InferContext::getString(llvm::StringRef n) const { return attr(n).getString(); }
const std::vector<int64_t> &InferContext::getInts(llvm::StringRef n) const {
  return attr(n).getInts();
}
DType InferContext::getDType(llvm::StringRef n) const { return attr(n).getDType(); }

bool InferContext::error(const llvm::Twine &msg) {
  error_ = msg.str();
  return false;
}

//===----------------------------------------------------------------------===//
// OpRegistry
//===----------------------------------------------------------------------===//

OpRegistry &OpRegistry::builtin() {
  // Built on first use (no static constructors); thread-safe by C++ rules.
  static OpRegistry registry;
  return registry;
}

OpRegistry::OpRegistry() {
#define AMPC_OP(Id, Name, Category)                                                                \
  {                                                                                                \
    auto info = std::make_unique<OpInfo>();                                                        \
    info->kind = OpKind::Id;                                                                       \
    info->name = Name;                                                                             \
    info->category = PrecisionCategory::Category;                                                  \
    info->attrs = attrs::declaredSpecs(OpKind::Id);                                                \
    builtins_.push_back(std::move(info));                                                          \
  }
#include "ir/Ops.def"
  registerAllOpFamilies(*this);
  for (auto &info : builtins_) {
    assert(info->infer && "built-in op without an inference rule");
    byName_[info->name] = info.get();
  }
}

OpInfo &OpRegistry::define(OpKind kind) {
  assert(static_cast<size_t>(kind) < builtins_.size() && "not a built-in op");
  return *builtins_[static_cast<size_t>(kind)];
}

const OpInfo *OpRegistry::lookup(llvm::StringRef name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second;
}

const OpInfo &OpRegistry::get(OpKind kind) const {
  assert(kind != OpKind::Custom && "custom ops are looked up by name");
  return *builtins_[static_cast<size_t>(kind)];
}

std::vector<const OpInfo *> OpRegistry::all() const {
  std::vector<const OpInfo *> out;
  for (auto &i : builtins_)
    out.push_back(i.get());
  for (auto &i : customs_)
    out.push_back(i.get());
  return out;
}

std::optional<std::string> OpRegistry::addCustomOp(OpInfo info, PrecisionCategory category) {
  if (info.name.empty())
    return std::string("custom op has no name");
  // Model files and the textual IR spell op names as plain identifiers.
  for (char c : info.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'))
      return "custom op name '" + info.name +
             "' is not an identifier (letters, digits, '_' and '.')";
  if (byName_.count(info.name))
    return "op '" + info.name + "' is already registered";
  if (!info.infer)
    return "custom op '" + info.name + "' has no shape inference rule";
  for (size_t i = 0; i < info.operands.size(); ++i) {
    const OperandSpec &o = info.operands[i];
    if (o.variadic && i + 1 != info.operands.size())
      return "custom op '" + info.name + "': only the last operand may be variadic";
    if (o.optional && i + 1 < info.operands.size() && !info.operands[i + 1].optional &&
        !info.operands[i + 1].variadic)
      return "custom op '" + info.name + "': only trailing operands may be optional";
  }
  info.kind = OpKind::Custom;
  info.category = category;
  customs_.push_back(std::make_unique<OpInfo>(std::move(info)));
  byName_[customs_.back()->name] = customs_.back().get();
  return std::nullopt;
}

} // namespace ampc
