//===- AtomicFile.cpp -------------------------------------------------------===//
#include "ir/support/AtomicFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
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

/// Where the bytes for an output path go.
struct Target {
  /// The file to replace (the symlink's target when one was followed).
  std::string path;
  /// A device or FIFO: written into, not replaced.
  bool inPlace = false;
};

const char *specialKind(mode_t mode) {
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  return nullptr;
}

/// Follows `path` per `special` to what will be written.
bool resolveTarget(llvm::StringRef path, SpecialOutputs special, Target &t, std::string &err) {
  if (path.empty())
    return fail(err, path, "empty file name");
  std::string current = path.str();
  // Symlink chains are followed by hand (a dangling link names a new file);
  // 40 hops is the kernel's own limit.
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(current.c_str(), &st) != 0) {
      if (errno != ENOENT)
        return fail(err, path, std::strerror(errno));
      t.path = current;
      return true;
    }
    if (S_ISREG(st.st_mode)) {
      t.path = current;
      return true;
    }
    if (S_ISDIR(st.st_mode))
      return fail(err, path, "it is a directory");
    bool through = special == SpecialOutputs::WriteThrough;
    if (S_ISLNK(st.st_mode)) {
      if (!through)
        return fail(err, path,
                    "it is a symbolic link, which an output never replaces (--write-through "
                    "writes to its target)");
      char buffer[4096];
      ssize_t n = ::readlink(current.c_str(), buffer, sizeof buffer);
      if (n < 0)
        return fail(err, path, std::strerror(errno));
      if (size_t(n) == sizeof buffer)
        return fail(err, path, "the symbolic link's target is too long");
      llvm::SmallString<256> link(llvm::StringRef(buffer, size_t(n)));
      if (llvm::sys::path::is_relative(link)) {
        llvm::SmallString<256> joined(llvm::sys::path::parent_path(current));
        llvm::sys::path::append(joined, link);
        link = joined;
      }
      current = std::string(link);
      continue;
    }
    const char *kind = specialKind(st.st_mode);
    if (S_ISSOCK(st.st_mode) || !through)
      return fail(err, path,
                  std::string("it is ") + kind + ", which an output never replaces" +
                      (S_ISSOCK(st.st_mode) ? "" : " (--write-through writes into it)"));
    t.path = current;
    t.inPlace = true;
    return true;
  }
  return fail(err, path, "too many levels of symbolic links");
}

llvm::SmallString<256> directoryOf(llvm::StringRef path) {
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(path));
  if (dir.empty())
    dir = ".";
  return dir;
}

/// The prefix of our temporary files for `path`: ".NAME.tmp-".
std::string tempPrefix(llvm::StringRef path) {
  return "." + llvm::sys::path::filename(path).str() + ".tmp-";
}

/// Removes ".NAME.tmp-PID-XXXXXXXX" files next to `path` whose process is
/// gone: what a writer killed outright (SIGKILL, power loss) left behind.
/// Another live process's temporary file is left alone.
void removeStaleTemporaries(llvm::StringRef path) {
  llvm::SmallString<256> dir = directoryOf(path);
  std::string prefix = tempPrefix(path);
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.consume_front(prefix))
      continue;
    auto [pidText, rest] = name.split('-');
    long long pid = 0;
    if (rest.empty() || pidText.getAsInteger(10, pid) || pid <= 0)
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      llvm::sys::fs::remove(it->path());
  }
}

/// Creates a new temporary file beside `path`, registered for removal
/// should a signal end the process before it is renamed.
std::error_code createTemporary(llvm::StringRef path, int &fd, llvm::SmallString<256> &tmpPath) {
  llvm::SmallString<256> model = directoryOf(path);
  llvm::sys::path::append(model, tempPrefix(path) + std::to_string(::getpid()) + "-%%%%%%%%");
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, tmpPath))
    return ec;
  std::string ignored;
  llvm::sys::RemoveFileOnSignal(tmpPath, &ignored);
  return {};
}

void discardTemporary(llvm::StringRef tmpPath) {
  llvm::sys::fs::remove(tmpPath);
  llvm::sys::DontRemoveFileOnSignal(tmpPath);
}

bool writeInPlace(llvm::StringRef shownPath, const Target &t, llvm::StringRef contents,
                  std::string &err) {
  int fd = ::open(t.path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(err, shownPath, std::strerror(errno));
  bool ok = writeAll(fd, contents);
  int savedErrno = errno;
  ::close(fd);
  if (!ok)
    return fail(err, shownPath, std::strerror(savedErrno));
  return true;
}

} // namespace

bool checkOutputPath(llvm::StringRef path, std::string &err, SpecialOutputs special) {
  Target t;
  if (!resolveTarget(path, special, t, err))
    return false;
  if (t.inPlace) {
    // Opening a FIFO would wait for a reader; asking is as far as we go.
    if (::access(t.path.c_str(), W_OK) != 0)
      return fail(err, path, std::strerror(errno));
    return true;
  }
  removeStaleTemporaries(t.path);
  int fd = -1;
  llvm::SmallString<256> probe;
  if (std::error_code ec = createTemporary(t.path, fd, probe))
    return fail(err, path, ec.message());
  ::close(fd);
  discardTemporary(probe);
  return true;
}

bool writeFileAtomically(llvm::StringRef path, llvm::StringRef contents, std::string &err,
                         SpecialOutputs special) {
  Target t;
  if (!resolveTarget(path, special, t, err))
    return false;
  if (t.inPlace)
    return writeInPlace(path, t, contents, err);
  removeStaleTemporaries(t.path);

  int fd = -1;
  llvm::SmallString<256> tmpPath;
  if (std::error_code ec = createTemporary(t.path, fd, tmpPath))
    return fail(err, path, ec.message());

  auto abandon = [&](const std::string &why) {
    if (fd >= 0)
      ::close(fd);
    discardTemporary(tmpPath);
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
  if (std::error_code ec = llvm::sys::fs::rename(tmpPath, t.path))
    return abandon(ec.message());
  llvm::sys::DontRemoveFileOnSignal(tmpPath);
  syncDirectory(directoryOf(t.path));
  return true;
}

} // namespace ampc
