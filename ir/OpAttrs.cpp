//===- OpAttrs.cpp - Attribute specs from OpAttrs.def ---------------------===//
#include "ir/OpAttrs.h"

#include "llvm/Support/ErrorHandling.h"

namespace ampc::attrs {

const Attribute &detail::lookup(const AttrMap &m, llvm::StringRef name, const Attribute *def) {
  auto it = m.find(name);
  if (it != m.end())
    return it->second;
  if (!def)
    llvm::report_fatal_error(llvm::Twine("required attribute '") + name + "' is not set");
  return *def;
}

std::vector<AttrSpec> declaredSpecs(OpKind kind) {
  std::vector<AttrSpec> out;
  switch (kind) {
#define AMPC_ATTRS(Op) case OpKind::Op: {
#define AMPC_ATTR(Name, CppType, Default)                                                          \
  out.push_back(                                                                                   \
      {#Name, AttrTraits<CppType>::kind, AttrTraits<CppType>::toAttribute(CppType(Default))});
#define AMPC_ATTR_REQUIRED(Name, CppType)                                                          \
  out.push_back({#Name, AttrTraits<CppType>::kind, std::nullopt});
#define AMPC_END_ATTRS                                                                             \
  break;                                                                                           \
  }
#define AMPC_ATTRS_ALIAS(Op, Other)                                                                \
  case OpKind::Op:                                                                                 \
    return declaredSpecs(OpKind::Other);
#include "ir/OpAttrs.def"
  default:
    break;
  }
  return out;
}

} // namespace ampc::attrs
