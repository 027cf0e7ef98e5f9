//===- TempDir.h - Scratch directories and file helpers for tests ---------===//
#ifndef AMPC_TESTS_UNIT_TEMPDIR_H
#define AMPC_TESTS_UNIT_TEMPDIR_H

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ampc::testing {

/// A fresh directory, removed with its contents at the end of the test.
struct TempDir {
  llvm::SmallString<128> path;
  TempDir() {
    std::error_code ec = llvm::sys::fs::createUniqueDirectory("ampc-test", path);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec; it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    std::sort(names.begin(), names.end());
    return names;
  }
};

/// The whole file, or a marker that says why it could not be read.
inline std::string readFile(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return "<unreadable: " + buf.getError().message() + ">";
  return (*buf)->getBuffer().str();
}

} // namespace ampc::testing

#endif
