//===- Attribute.h - Typed node attributes ---------------------------------===//
#ifndef AMPC_IR_ATTRIBUTE_H
#define AMPC_IR_ATTRIBUTE_H

#include "ir/DType.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace ampc {

enum class AttrType : uint8_t { Int, Float, Bool, String, Ints, Floats, DType };

llvm::StringRef attrTypeName(AttrType t);

/// One attribute value. The variant's alternatives follow AttrType's order.
class Attribute {
public:
  using Storage = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                               std::vector<double>, DType>;

  Attribute() : v_(int64_t(0)) {}
  Attribute(int64_t i) : v_(i) {}
  Attribute(int i) : v_(int64_t(i)) {}
  Attribute(double d) : v_(d) {}
  Attribute(bool b) : v_(b) {}
  Attribute(std::string s) : v_(std::move(s)) {}
  Attribute(const char *s) : v_(std::string(s)) {}
  Attribute(std::vector<int64_t> v) : v_(std::move(v)) {}
  Attribute(std::vector<double> v) : v_(std::move(v)) {}
  Attribute(DType t) : v_(t) {}

  AttrType type() const { return static_cast<AttrType>(v_.index()); }
  bool is(AttrType t) const { return type() == t; }

  int64_t getInt() const { return std::get<int64_t>(v_); }
  double getFloat() const { return std::get<double>(v_); }
  /// Float attribute, or an Int attribute widened (a user wrote "1" for 1.0).
  double getNumber() const {
    return is(AttrType::Int) ? static_cast<double>(getInt()) : getFloat();
  }
  bool getBool() const { return std::get<bool>(v_); }
  const std::string &getString() const { return std::get<std::string>(v_); }
  const std::vector<int64_t> &getInts() const { return std::get<std::vector<int64_t>>(v_); }
  const std::vector<double> &getFloats() const { return std::get<std::vector<double>>(v_); }
  DType getDType() const { return std::get<DType>(v_); }

  /// The textual IR spelling: 3, 1.0e-05, true, "s", [1, 2], [0.9, 0.999], f16.
  /// Floats print in the shortest form that reads back to the same double and
  /// always carry a '.', 'e', "inf" or "nan" so they never read back as ints.
  std::string str() const;

  friend bool operator==(const Attribute &a, const Attribute &b) { return a.v_ == b.v_; }
  friend bool operator!=(const Attribute &a, const Attribute &b) { return !(a == b); }

private:
  Storage v_;
};

/// Shortest round-tripping decimal for a double, with a '.' or exponent.
std::string formatDouble(double d);

} // namespace ampc

// AttrMap, the attributes by name, comes with the Attribute.
#include "ir/AttrMap.h"

#endif
