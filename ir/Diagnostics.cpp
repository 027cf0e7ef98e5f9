//===- Diagnostics.cpp ------------------------------------------------------===//
#include "ir/Diagnostics.h"

namespace ampc {

const std::string &Location::file() const {
  static const std::string unknown = "<unknown>";
  return file_ ? *file_ : unknown;
}

std::string Location::str() const {
  if (!known())
    return "<unknown>";
  // Line 0: a place without lines, e.g. an ONNX node ("m.onnx: node 'x' (op Conv, opset 17)").
  if (line_ == 0)
    return *file_;
  return *file_ + ":" + std::to_string(line_) + ":" + std::to_string(col_);
}

static const char *severityName(Severity s) {
  switch (s) {
  case Severity::Error:
    return "error";
  case Severity::Warning:
    return "warning";
  case Severity::Note:
    return "note";
  }
  return "error";
}

std::string Diagnostic::str() const {
  std::string s;
  if (loc.known())
    s = loc.str() + ": ";
  s += severityName(severity);
  s += ": ";
  s += message;
  return s;
}

void DiagnosticEngine::add(Severity s, const Location &loc, const llvm::Twine &msg) {
  if (s == Severity::Error) {
    ++numErrors_;
    if (numErrors_ > errorLimit_)
      return;
  }
  diags_.push_back({s, loc, msg.str()});
}

void DiagnosticEngine::print(llvm::raw_ostream &os) const {
  for (const Diagnostic &d : diags_)
    os << d.str() << "\n";
  if (numErrors_ > errorLimit_)
    os << "error: too many errors (" << numErrors_ << "), the first " << errorLimit_
       << " are shown\n";
}

} // namespace ampc
