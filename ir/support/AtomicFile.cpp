//===- AtomicFile.cpp -------------------------------------------------------===//
#include "ir/support/AtomicFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace ampc {

namespace {

bool fail(std::string &err, llvm::StringRef path, const std::string &why) {
  err = "cannot write '" + path.str() + "': " + why;
  return false;
}

bool writeAll(int fd, llvm::StringRef data) {
  const char *p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

/// Makes the rename itself durable. Best effort: some file systems refuse to
/// fsync a directory, and the file's data is already safe by then.
void syncDirectory(llvm::StringRef dir) {
  int fd = ::open(dir.str().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  (void)::fsync(fd);
  ::close(fd);
}

} // namespace

bool writeFileAtomically(llvm::StringRef path, llvm::StringRef contents, std::string &err) {
  if (path.empty())
    return fail(err, path, "empty file name");
  if (llvm::sys::fs::is_directory(path))
    return fail(err, path, "it is a directory");

  llvm::SmallString<256> dir(llvm::sys::path::parent_path(path));
  if (dir.empty())
    dir = ".";
  llvm::SmallString<256> model(dir);
  llvm::sys::path::append(model, "." + llvm::sys::path::filename(path) + ".tmp-%%%%%%%%");

  int fd = -1;
  llvm::SmallString<256> tmpPath;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, tmpPath))
    return fail(err, path, ec.message());

  auto abandon = [&](const std::string &why) {
    if (fd >= 0)
      ::close(fd);
    llvm::sys::fs::remove(tmpPath);
    return fail(err, path, why);
  };
  if (!writeAll(fd, contents))
    return abandon(std::strerror(errno));
  if (::fsync(fd) != 0)
    return abandon(std::strerror(errno));
  int closeResult = ::close(fd);
  fd = -1;
  if (closeResult != 0)
    return abandon(std::strerror(errno));
  if (std::error_code ec = llvm::sys::fs::rename(tmpPath, path))
    return abandon(ec.message());
  syncDirectory(dir);
  return true;
}

} // namespace ampc
