//===- Location.h - Source positions ---------------------------------------===//
#ifndef AMPC_IR_LOCATION_H
#define AMPC_IR_LOCATION_H

#include <cstdint>
#include <memory>
#include <string>

namespace ampc {

/// A position in a user's file (1-based line and column). Nodes keep the
/// location of the model-file entry they came from, through every rewrite, so
/// diagnostics point at the user's file. The file name is shared, not copied.
class Location {
public:
  Location() = default;
  Location(std::shared_ptr<const std::string> file, uint32_t line, uint32_t col)
      : file_(std::move(file)), line_(line), col_(col) {}
  static Location inFile(const std::string &file, uint32_t line, uint32_t col) {
    return Location(std::make_shared<const std::string>(file), line, col);
  }
  /// Same file, another position: shares the file name.
  Location at(uint32_t line, uint32_t col) const { return Location(file_, line, col); }

  bool known() const { return file_ != nullptr; }
  const std::string &file() const;
  uint32_t line() const { return line_; }
  uint32_t col() const { return col_; }
  const std::shared_ptr<const std::string> &fileRef() const { return file_; }

  /// "file:line:col", or "<unknown>".
  std::string str() const;

  friend bool operator==(const Location &a, const Location &b) {
    if (a.known() != b.known())
      return false;
    return (!a.known() || a.file() == b.file()) && a.line_ == b.line_ && a.col_ == b.col_;
  }

private:
  std::shared_ptr<const std::string> file_;
  uint32_t line_ = 0;
  uint32_t col_ = 0;
};

} // namespace ampc

#endif
