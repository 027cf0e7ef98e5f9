//===- Status.cpp - Errors as values, types, version ----------------------===//
#include "Internal.h"

#include "ir/DType.h"

namespace ampc::api {

std::string Diagnostic::str() const {
  std::string s;
  if (!file.empty()) {
    s = file;
    if (line) {
      s += ":" + std::to_string(line);
      if (column)
        s += ":" + std::to_string(column);
    }
    s += ": ";
  }
  switch (severity) {
  case Severity::Error:
    s += "error: ";
    break;
  case Severity::Warning:
    s += "warning: ";
    break;
  case Severity::Note:
    s += "note: ";
    break;
  }
  return s + message;
}

Status Status::error(std::string message) {
  Status s;
  s.add({Severity::Error, "", 0, 0, std::move(message)});
  return s;
}

Status Status::fromDiagnostics(std::vector<Diagnostic> diags) {
  Status s;
  for (Diagnostic &d : diags)
    s.add(std::move(d));
  return s;
}

std::string Status::message() const {
  std::string s;
  for (const Diagnostic &d : diags_)
    s += d.str() + "\n";
  return s;
}

void Status::add(Diagnostic d) {
  failed_ |= d.severity == Severity::Error;
  diags_.push_back(std::move(d));
}

void Status::append(const Status &other) {
  for (const Diagnostic &d : other.diags_)
    add(d);
  outOfMemory_ = outOfMemory_ || other.outOfMemory_;
}

Diagnostic toPublic(const ampc::Diagnostic &d) {
  Diagnostic out;
  switch (d.severity) {
  case ampc::Severity::Error:
    out.severity = Severity::Error;
    break;
  case ampc::Severity::Warning:
    out.severity = Severity::Warning;
    break;
  case ampc::Severity::Note:
    out.severity = Severity::Note;
    break;
  }
  if (d.loc.known()) {
    out.file = d.loc.file();
    out.line = d.loc.line();
    out.column = d.loc.col();
  }
  out.message = d.message;
  return out;
}

Status toStatus(const DiagnosticEngine &diag) {
  Status s;
  for (const ampc::Diagnostic &d : diag.diagnostics())
    s.add(toPublic(d));
  // What DiagnosticEngine::print adds when the engine stopped recording
  // errors (it records up to its limit, so the recorded ones are the first).
  unsigned recorded = 0;
  for (const ampc::Diagnostic &d : diag.diagnostics())
    recorded += d.severity == ampc::Severity::Error;
  if (diag.numErrors() > recorded)
    s.add({Severity::Error, "", 0, 0,
           "too many errors (" + std::to_string(diag.numErrors()) + "), the first " +
               std::to_string(recorded) + " are shown"});
  return s;
}

std::string_view dtypeName(DType t) {
  llvm::StringRef n = ampc::dtypeName(toInternal(t));
  return {n.data(), n.size()};
}

std::optional<DType> parseDType(std::string_view name) {
  std::optional<ampc::DType> t = ampc::parseDType(llvm::StringRef(name.data(), name.size()));
  if (!t)
    return std::nullopt;
  return toPublic(*t);
}

bool isHalf(DType t) { return ampc::isHalfType(toInternal(t)); }
int64_t dtypeSize(DType t) { return ampc::dtypeSize(toInternal(t)); }

std::string_view roleName(NodeRole r) {
  llvm::StringRef n = ampc::roleName(static_cast<ampc::NodeRole>(r));
  return {n.data(), n.size()};
}

std::string_view categoryName(Category c) {
  llvm::StringRef n = ampc::categoryName(static_cast<ampc::PrecisionCategory>(c));
  return {n.data(), n.size()};
}

ampc::Attribute toInternal(const AttrValue &v) {
  return std::visit(
      [](const auto &x) -> ampc::Attribute {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, DType>)
          return ampc::Attribute(toInternal(x));
        else
          return ampc::Attribute(x);
      },
      v);
}

AttrValue toPublic(const ampc::Attribute &a) {
  switch (a.type()) {
  case AttrType::Int:
    return a.getInt();
  case AttrType::Float:
    return a.getFloat();
  case AttrType::Bool:
    return a.getBool();
  case AttrType::String:
    return a.getString();
  case AttrType::Ints:
    return a.getInts();
  case AttrType::Floats:
    return a.getFloats();
  case AttrType::DType:
    return toPublic(a.getDType());
  }
  return int64_t(0);
}

} // namespace ampc::api
