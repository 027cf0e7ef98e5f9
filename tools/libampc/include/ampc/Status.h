//===- ampc/Status.h - Errors as values ------------------------*- C++ -*-===//
//
// No exception crosses the public API: every operation that can fail on the
// caller's input returns a Status or a Result<T>, which carry diagnostics
// ("model.yaml:12:5: error: unknown op 'lienar'; did you mean 'linear'?").
// A successful Status or Result may still carry warnings.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_STATUS_H
#define AMPC_PUBLIC_STATUS_H

#include "ampc/Export.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ampc::api {

enum class Severity { Error, Warning, Note };

/// One message, with the position in the user's file it is about when there
/// is one (line and column are 1-based; 0 when unknown).
struct AMPC_API Diagnostic {
  Severity severity = Severity::Error;
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
  std::string message;

  /// "file:line:col: error: message" (no position prefix when unknown).
  std::string str() const;
};

/// Success, or failure with the diagnostics that say why.
class AMPC_API Status {
public:
  /// Success.
  Status() = default;
  /// Failure with one error that has no position.
  static Status error(std::string message);
  /// Failure if any of `diags` is an error, else success carrying them.
  static Status fromDiagnostics(std::vector<Diagnostic> diags);

  /// True when no diagnostic is an error.
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }

  /// Every diagnostic (errors, warnings, notes), in the order reported.
  const std::vector<Diagnostic> &diagnostics() const { return diags_; }
  /// Every diagnostic, one a line ("" when there is none).
  std::string message() const;

  /// Appends a diagnostic; an error makes the status a failure.
  void add(Diagnostic d);
  /// Appends every diagnostic of `other`.
  void append(const Status &other);

  /// For a failure: whether the machine lacked the memory the request
  /// needed (rather than the input being wrong). `ampc` exits 1 for it.
  bool outOfMemory() const { return outOfMemory_; }
  void setOutOfMemory(bool v = true) { outOfMemory_ = v; }

private:
  std::vector<Diagnostic> diags_;
  bool failed_ = false;
  bool outOfMemory_ = false;
};

/// A value, or the Status of the failure that prevented it. Reading the
/// value of a failed Result is a programming error: it prints the status
/// and aborts (the API never throws).
template <class T> class Result {
public:
  /// Success (with warnings, if `status` carries any).
  Result(T value, Status status = {}) : value_(std::move(value)), status_(std::move(status)) {}
  /// Failure; `status` must hold an error.
  Result(Status status) : status_(std::move(status)) {
    if (status_.ok())
      status_.add({Severity::Error, "", 0, 0, "internal error: failed Result without an error"});
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status &status() const { return status_; }

  T &value() & { return check(), *value_; }
  const T &value() const & { return check(), *value_; }
  T &&value() && { return check(), std::move(*value_); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

private:
  void check() const {
    if (value_)
      return;
    std::fprintf(stderr, "ampc: value() of a failed Result:\n%s", status_.message().c_str());
    std::abort();
  }
  std::optional<T> value_;
  Status status_;
};

} // namespace ampc::api

#endif
