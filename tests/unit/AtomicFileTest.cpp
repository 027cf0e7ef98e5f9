//===- AtomicFileTest.cpp - All-or-nothing writes --------------------------===//
#include "ir/support/AtomicFile.h"

#include "TempDir.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

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

} // namespace
