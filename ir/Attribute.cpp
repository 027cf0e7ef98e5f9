//===- Attribute.cpp --------------------------------------------------------===//
#include "ir/Attribute.h"

#include <charconv>
#include <cmath>

namespace ampc {

llvm::StringRef attrTypeName(AttrType t) {
  switch (t) {
  case AttrType::Int:
    return "int";
  case AttrType::Float:
    return "float";
  case AttrType::Bool:
    return "bool";
  case AttrType::String:
    return "string";
  case AttrType::Ints:
    return "int list";
  case AttrType::Floats:
    return "float list";
  case AttrType::DType:
    return "dtype";
  }
  return "?";
}

std::string formatDouble(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

static std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string Attribute::str() const {
  switch (type()) {
  case AttrType::Int:
    return std::to_string(getInt());
  case AttrType::Float:
    return formatDouble(getFloat());
  case AttrType::Bool:
    return getBool() ? "true" : "false";
  case AttrType::String:
    return quote(getString());
  case AttrType::Ints: {
    std::string s = "[";
    const auto &v = getInts();
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }
  case AttrType::Floats: {
    std::string s = "[";
    const auto &v = getFloats();
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + formatDouble(v[i]);
    return s + "]";
  }
  case AttrType::DType:
    return dtypeName(getDType()).str();
  }
  return "?";
}

} // namespace ampc
