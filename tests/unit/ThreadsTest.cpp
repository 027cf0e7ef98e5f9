//===- ThreadsTest.cpp - The cpu device's thread count ---------------------===//
#include "runtime/Threads.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

TEST(Threads, SetAndReadBackAndWarnPastTheAllowedCores) {
  int cores = allowedCores();
  ASSERT_GE(cores, 1);
  int before = kernelThreads();
  setKernelThreads(1);
  EXPECT_EQ(kernelThreads(), 1);
  setKernelThreads(before);
  EXPECT_EQ(kernelThreads(), before);
  // One thread always fits (at least one core counts as free).
  EXPECT_EQ(threadOversubscription(1), "");
  std::string warning = threadOversubscription(cores + 1);
  EXPECT_NE(warning.find(std::to_string(cores + 1) +
                         " threads asked for, but this process may use " + std::to_string(cores)),
            std::string::npos)
      << warning;
  EXPECT_NE(warning.find("--threads " + std::to_string(cores)), std::string::npos) << warning;
}

} // namespace
