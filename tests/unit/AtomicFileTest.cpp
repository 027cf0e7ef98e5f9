//===- AtomicFileTest.cpp - All-or-nothing writes --------------------------===//
#include "ir/support/AtomicFile.h"

#include "TempDir.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace ampc;
using ampc::testing::readFile;
using ampc::testing::TempDir;

namespace {

TEST(AtomicFile, WritesANewFile) {
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFileAtomically(dir.file("out.ir"), "graph @g {\n}\n", err)) << err;
  EXPECT_EQ(err, "");
  EXPECT_EQ(readFile(dir.file("out.ir")), "graph @g {\n}\n");
  // The temporary file is gone: only the target is left.
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.ir"});
}

TEST(AtomicFile, ReplacesAnExistingFileWhole) {
  TempDir dir;
  std::string err;
  std::string big(1 << 20, 'x');
  ASSERT_TRUE(writeFileAtomically(dir.file("out.ir"), big, err)) << err;
  ASSERT_TRUE(writeFileAtomically(dir.file("out.ir"), "short", err)) << err;
  EXPECT_EQ(readFile(dir.file("out.ir")), "short");
  ASSERT_TRUE(writeFileAtomically(dir.file("out.ir"), "", err)) << err;
  EXPECT_EQ(readFile(dir.file("out.ir")), "");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.ir"});
}

TEST(AtomicFile, FailsCleanlyWhenTheDirectoryIsMissing) {
  TempDir dir;
  std::string err;
  std::string path = dir.file("no-such-dir/out.ir");
  EXPECT_FALSE(writeFileAtomically(path, "data", err));
  EXPECT_EQ(err.rfind("cannot write '" + path + "': ", 0), 0u) << err;
  EXPECT_FALSE(llvm::sys::fs::exists(path));
  EXPECT_TRUE(dir.entries().empty());
}

TEST(AtomicFile, RefusesToReplaceADirectory) {
  TempDir dir;
  ASSERT_FALSE(llvm::sys::fs::create_directory(dir.file("sub")));
  std::string err;
  EXPECT_FALSE(writeFileAtomically(dir.file("sub"), "data", err));
  EXPECT_NE(err.find("is a directory"), std::string::npos) << err;
  EXPECT_TRUE(llvm::sys::fs::is_directory(dir.file("sub")));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"sub"});
}

TEST(AtomicFile, LeavesTheOldFileWhenTheDirectoryIsReadOnly) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root ignores directory permissions";
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFileAtomically(dir.file("out.ir"), "old", err)) << err;
  ASSERT_EQ(::chmod(dir.path.c_str(), 0555), 0);
  EXPECT_FALSE(writeFileAtomically(dir.file("out.ir"), "new", err));
  ::chmod(dir.path.c_str(), 0755);
  EXPECT_EQ(readFile(dir.file("out.ir")), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.ir"});
}

TEST(AtomicFile, WritesIntoTheCurrentDirectoryForABareName) {
  TempDir dir;
  llvm::SmallString<128> oldCwd;
  ASSERT_FALSE(llvm::sys::fs::current_path(oldCwd));
  ASSERT_FALSE(llvm::sys::fs::set_current_path(dir.path));
  std::string err;
  bool ok = writeFileAtomically("bare.ir", "text", err);
  ASSERT_FALSE(llvm::sys::fs::set_current_path(oldCwd));
  ASSERT_TRUE(ok) << err;
  EXPECT_EQ(readFile(dir.file("bare.ir")), "text");
}

// Special files and symlinks are never replaced unless asked: as root,
// `-o /dev/null` used to turn the system's /dev/null into a regular file.
TEST(AtomicFile, RefusesToReplaceASymlinkAndLeavesItsTarget) {
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFileAtomically(dir.file("target"), "kept", err)) << err;
  ASSERT_FALSE(llvm::sys::fs::create_link("target", dir.file("link")));
  EXPECT_FALSE(writeFileAtomically(dir.file("link"), "new", err));
  EXPECT_NE(err.find("symbolic link"), std::string::npos) << err;
  EXPECT_FALSE(checkOutputPath(dir.file("link"), err));
  EXPECT_TRUE(llvm::sys::fs::is_symlink_file(dir.file("link")));
  EXPECT_EQ(readFile(dir.file("target")), "kept");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"link", "target"}));
}

TEST(AtomicFile, WriteThroughReplacesASymlinksTargetAtomically) {
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFileAtomically(dir.file("target"), "old", err)) << err;
  ASSERT_FALSE(llvm::sys::fs::create_link("target", dir.file("link")));
  ASSERT_TRUE(checkOutputPath(dir.file("link"), err, SpecialOutputs::WriteThrough)) << err;
  ASSERT_TRUE(writeFileAtomically(dir.file("link"), "new", err, SpecialOutputs::WriteThrough))
      << err;
  EXPECT_TRUE(llvm::sys::fs::is_symlink_file(dir.file("link")));
  EXPECT_EQ(readFile(dir.file("target")), "new");
  // A dangling link names the file to create.
  ASSERT_FALSE(llvm::sys::fs::create_link("fresh", dir.file("dangling")));
  ASSERT_TRUE(writeFileAtomically(dir.file("dangling"), "made", err, SpecialOutputs::WriteThrough))
      << err;
  EXPECT_EQ(readFile(dir.file("fresh")), "made");
}

TEST(AtomicFile, RefusesToReplaceAFifoAndWritesIntoItWhenAsked) {
  TempDir dir;
  std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string err;
  EXPECT_FALSE(writeFileAtomically(fifo, "data", err));
  EXPECT_NE(err.find("it is a FIFO"), std::string::npos) << err;
  EXPECT_FALSE(checkOutputPath(fifo, err));
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"pipe"});

  // Asked to write through, the bytes go into the FIFO for its reader.
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(writeFileAtomically(fifo, "through", err, SpecialOutputs::WriteThrough)) << err;
  char buffer[16] = {};
  EXPECT_EQ(::read(reader, buffer, sizeof buffer), 7);
  ::close(reader);
  EXPECT_EQ(std::string(buffer), "through");
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST(AtomicFile, RefusesToReplaceACharacterDevice) {
  std::string err;
  EXPECT_FALSE(writeFileAtomically("/dev/null", "data", err));
  EXPECT_EQ(err, "cannot write '/dev/null': it is a character device, which an output never "
                 "replaces (--write-through writes into it)");
  struct stat st;
  ASSERT_EQ(::lstat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_TRUE(writeFileAtomically("/dev/null", "data", err, SpecialOutputs::WriteThrough)) << err;
}

TEST(AtomicFile, CheckOutputPathFindsAMissingDirectoryAndAnEmptyName) {
  TempDir dir;
  std::string err;
  EXPECT_FALSE(checkOutputPath(dir.file("missing/out.ckpt"), err));
  EXPECT_NE(err.find("No such file or directory"), std::string::npos) << err;
  EXPECT_FALSE(checkOutputPath("", err));
  EXPECT_EQ(err, "cannot write '': empty file name");
  EXPECT_FALSE(checkOutputPath(dir.path.str().str(), err));
  EXPECT_NE(err.find("is a directory"), std::string::npos) << err;
  // A good path is checked without leaving anything behind.
  EXPECT_TRUE(checkOutputPath(dir.file("out.ckpt"), err)) << err;
  EXPECT_TRUE(dir.entries().empty());
}

// A writer killed outright (SIGKILL) leaves its temporary file; the next
// write of the same path removes it, but not a live process's.
TEST(AtomicFile, RemovesTemporariesOfDeadWritersOnly) {
  TempDir dir;
  std::string err;
  // PID 2^22 + 1 is above Linux's pid_max ceiling, so no process has it.
  std::string dead = dir.file(".out.ir.tmp-4194305-abcdefgh");
  std::string live = dir.file(".out.ir.tmp-" + std::to_string(::getpid()) + "-abcdefgh");
  std::string other = dir.file(".other.ir.tmp-4194305-abcdefgh");
  for (const std::string &p : {dead, live, other})
    ASSERT_TRUE(writeFileAtomically(p, "partial", err)) << err;
  ASSERT_TRUE(writeFileAtomically(dir.file("out.ir"), "done", err)) << err;
  EXPECT_FALSE(llvm::sys::fs::exists(dead));
  EXPECT_TRUE(llvm::sys::fs::exists(live));
  EXPECT_TRUE(llvm::sys::fs::exists(other));
  EXPECT_EQ(readFile(dir.file("out.ir")), "done");
}

} // namespace
