//===- Diagnostics.h - Errors as values ------------------------------------===//
//
// User-caused failures are collected as diagnostics and returned, never thrown
// across a layer. Each prints as "file:line:col: error: message".
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_DIAGNOSTICS_H
#define AMPC_IR_DIAGNOSTICS_H

#include "ir/Location.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace ampc {

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity;
  Location loc;
  std::string message;
  /// "file:line:col: error: message" (no location prefix when unknown).
  std::string str() const;
};

class DiagnosticEngine {
public:
  void error(const Location &loc, const llvm::Twine &msg) { add(Severity::Error, loc, msg); }
  void warning(const Location &loc, const llvm::Twine &msg) { add(Severity::Warning, loc, msg); }
  void note(const Location &loc, const llvm::Twine &msg) { add(Severity::Note, loc, msg); }
  void add(Severity s, const Location &loc, const llvm::Twine &msg);

  bool hasErrors() const { return numErrors_ > 0; }
  unsigned numErrors() const { return numErrors_; }
  const std::vector<Diagnostic> &diagnostics() const { return diags_; }
  /// Stop recording after this many errors (a broken file can produce many).
  void setErrorLimit(unsigned n) { errorLimit_ = n; }
  void clear() {
    diags_.clear();
    numErrors_ = 0;
  }

  /// Print every diagnostic, one a line, in the order they were reported.
  void print(llvm::raw_ostream &os) const;

private:
  std::vector<Diagnostic> diags_;
  unsigned numErrors_ = 0;
  unsigned errorLimit_ = 50;
};

} // namespace ampc

#endif
