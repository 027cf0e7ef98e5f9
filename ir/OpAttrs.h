//===- OpAttrs.h - Typed views of op attributes, from OpAttrs.def ----------===//
//
// One class per op with attributes, generated from ir/OpAttrs.def:
//
//   attrs::BatchNorm2d bn(node);          // or (attrMap), e.g. ctx.attrs()
//   double eps = bn.eps();                // Float: a double
//   if (attrs::Gelu(node).approximate() == GeluApproximate::Tanh) ...
//
// Each accessor reads the attribute under its declared name, falling back to
// the declared default (the registry's, which OpRegistry::define takes from
// the same table). Ints read as const std::vector<int64_t> &, Floats as
// const std::vector<double> &; enums declared in the table as their enum.
// `nameAttr()` gives the raw Attribute, for code that copies an attribute
// onto another node.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_OPATTRS_H
#define AMPC_IR_OPATTRS_H

#include "ir/Attribute.h"
#include "ir/Graph.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace ampc {

// The enums of string attributes with a fixed set of spellings.
#define AMPC_ENUM_BEGIN(E) enum class E : uint8_t {
#define AMPC_ENUM_VALUE(V, Spelling) V,
#define AMPC_ENUM_END(E)                                                                           \
  }                                                                                                \
  ;
#include "ir/OpAttrs.def"

namespace attrs {

using Ints = std::vector<int64_t>;
using Floats = std::vector<double>;
inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

template <class E> struct EnumEntry {
  E value;
  const char *spelling;
};
template <class E> struct EnumTraits { static constexpr bool isEnum = false; };
#define AMPC_ENUM_BEGIN(E)                                                                         \
  template <> struct EnumTraits<E> {                                                               \
    static constexpr bool isEnum = true;                                                           \
    using Enum = E;                                                                                \
    static constexpr EnumEntry<E> entries[] = {
#define AMPC_ENUM_VALUE(V, Spelling) {Enum::V, Spelling},
#define AMPC_ENUM_END(E)                                                                           \
  }                                                                                                \
  ;                                                                                                \
  }                                                                                                \
  ;
#include "ir/OpAttrs.def"

/// The enum value spelled `s`, or nullopt.
template <class E> std::optional<E> parseEnum(llvm::StringRef s) {
  for (const auto &e : EnumTraits<E>::entries)
    if (s == e.spelling)
      return e.value;
  return std::nullopt;
}
/// The spelling of an enum value.
template <class E> llvm::StringRef enumSpelling(E v) {
  for (const auto &e : EnumTraits<E>::entries)
    if (e.value == v)
      return e.spelling;
  return "";
}

/// How a C++ attribute type is stored: its AttrType, how it is read from an
/// Attribute and how a default becomes one.
template <class T, class = void> struct AttrTraits;
template <> struct AttrTraits<int64_t> {
  static constexpr AttrType kind = AttrType::Int;
  static int64_t get(const Attribute &a) { return a.getInt(); }
  static Attribute toAttribute(int64_t v) { return Attribute(v); }
};
template <> struct AttrTraits<double> {
  static constexpr AttrType kind = AttrType::Float;
  /// getNumber: an Int written for a Float reads widened, as before.
  static double get(const Attribute &a) { return a.getNumber(); }
  static Attribute toAttribute(double v) { return Attribute(v); }
};
template <> struct AttrTraits<bool> {
  static constexpr AttrType kind = AttrType::Bool;
  static bool get(const Attribute &a) { return a.getBool(); }
  static Attribute toAttribute(bool v) { return Attribute(v); }
};
template <> struct AttrTraits<std::string> {
  static constexpr AttrType kind = AttrType::String;
  static const std::string &get(const Attribute &a) { return a.getString(); }
  static Attribute toAttribute(std::string v) { return Attribute(std::move(v)); }
};
template <> struct AttrTraits<Ints> {
  static constexpr AttrType kind = AttrType::Ints;
  static const Ints &get(const Attribute &a) { return a.getInts(); }
  static Attribute toAttribute(Ints v) { return Attribute(std::move(v)); }
};
template <> struct AttrTraits<Floats> {
  static constexpr AttrType kind = AttrType::Floats;
  static const Floats &get(const Attribute &a) { return a.getFloats(); }
  static Attribute toAttribute(Floats v) { return Attribute(std::move(v)); }
};
template <> struct AttrTraits<DType> {
  static constexpr AttrType kind = AttrType::DType;
  static DType get(const Attribute &a) { return a.getDType(); }
  static Attribute toAttribute(DType v) { return Attribute(v); }
};
template <class E> struct AttrTraits<E, std::enable_if_t<EnumTraits<E>::isEnum>> {
  static constexpr AttrType kind = AttrType::String;
  /// The verifier (the op's inference rule) refused other spellings.
  static E get(const Attribute &a) { return *parseEnum<E>(a.getString()); }
  static Attribute toAttribute(E v) { return Attribute(enumSpelling(v).str()); }
};

namespace detail {
/// The attribute `name` of `m`, else *def; a required attribute that is
/// missing is a fatal error (the verifier makes it impossible).
const Attribute &lookup(const AttrMap &m, llvm::StringRef name, const Attribute *def);

class View {
protected:
  explicit View(const AttrMap &m) : m_(&m) {}
  const Attribute &get(llvm::StringRef name, const Attribute *def) const {
    return lookup(*m_, name, def);
  }

private:
  const AttrMap *m_;
};
} // namespace detail

#define AMPC_ATTRS(Op)                                                                             \
  class Op : public detail::View {                                                                 \
  public:                                                                                          \
    explicit Op(const AttrMap &m) : View(m) {}                                                     \
    explicit Op(const Node &n) : View(n.attrs()) {}
#define AMPC_ATTR(Name, CppType, Default)                                                          \
  const Attribute &Name##Attr() const {                                                            \
    static const Attribute def = AttrTraits<CppType>::toAttribute(CppType(Default));               \
    return get(#Name, &def);                                                                       \
  }                                                                                                \
  decltype(AttrTraits<CppType>::get(Attribute())) Name() const {                                   \
    return AttrTraits<CppType>::get(Name##Attr());                                                 \
  }
#define AMPC_ATTR_REQUIRED(Name, CppType)                                                          \
  const Attribute &Name##Attr() const { return get(#Name, nullptr); }                              \
  decltype(AttrTraits<CppType>::get(Attribute())) Name() const {                                   \
    return AttrTraits<CppType>::get(Name##Attr());                                                 \
  }
#define AMPC_END_ATTRS                                                                             \
  }                                                                                                \
  ;
#define AMPC_ATTRS_ALIAS(Op, Other) using Op = Other;
#include "ir/OpAttrs.def"

/// The attribute specs OpAttrs.def declares for a built-in op (empty for an
/// op without a block), in table order. OpRegistry::define installs them.
std::vector<AttrSpec> declaredSpecs(OpKind kind);

} // namespace attrs
} // namespace ampc

#endif
