//===- ThreadGovernorTest.cpp - The team sized to the cores it gets --------===//
//
// The policy on made-up windows (what contention and idle cores look like
// to it), and the governor on this machine: it reads /proc without
// failing and never takes the team above the size it started with.
//
//===----------------------------------------------------------------------===//
#include "runtime/ThreadGovernor.h"

#include "runtime/Threads.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

TeamWindow window(double wallMs, double runDelayMs, double idleCoreMs) {
  TeamWindow w;
  w.wallMs = wallMs;
  w.runDelayMs = runDelayMs;
  w.idleCoreMs = idleCoreMs;
  return w;
}

TEST(TeamPolicy, KeepsTheTeamWhileItsThreadsGetTheirCores) {
  TeamPolicy p(4);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(p.decide(window(100, 4 * 100 * 0.05, 0)), 4);
}

TEST(TeamPolicy, ShrinksToTheThreadsThatGotACore) {
  // Two threads each waiting half the time: one core's worth.
  TeamPolicy two(2);
  EXPECT_EQ(two.decide(window(100, 100, 0)), 1);
  // Never below one, however long the one thread waits.
  EXPECT_EQ(two.decide(window(100, 90, 0)), 1);
  // Eight threads waiting 40 %: about five got cores.
  TeamPolicy eight(8);
  EXPECT_EQ(eight.decide(window(100, 8 * 100 * 0.4, 0)), 5);
  // Waiting just past the threshold still gives a thread back.
  TeamPolicy three(3);
  EXPECT_EQ(three.decide(window(100, 3 * 100 * (TeamPolicy::kShrinkAt + 0.01), 0)), 2);
}

TEST(TeamPolicy, GrowsBackOnIdleCoresAfterTheBackoff) {
  TeamPolicy p(2);
  ASSERT_EQ(p.decide(window(100, 100, 0)), 1);
  // A core is idle, but the backoff since the shrink has not passed.
  double waited = 0;
  while (waited + 100 < TeamPolicy::kFirstBackoffMs) {
    EXPECT_EQ(p.decide(window(100, 0, 100)), 1);
    waited += 100;
  }
  EXPECT_EQ(p.decide(window(100, 0, 100)), 2);
  // Never above the size it started with.
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(p.decide(window(100, 0, 200)), 2);
}

TEST(TeamPolicy, AGrowThatIsUndoneDoublesTheBackoff) {
  TeamPolicy p(2);
  ASSERT_EQ(p.decide(window(100, 100, 0)), 1);
  double backoff = p.backoffMs();
  for (int i = 0; i < 3; ++i)
    p.decide(window(100, 0, 100));
  ASSERT_EQ(p.threads(), 2);
  // The idle time was someone else's pause: the threads wait again.
  EXPECT_EQ(p.decide(window(100, 100, 0)), 1);
  EXPECT_EQ(p.backoffMs(), 2 * backoff);
  // A grow that holds resets it.
  for (int i = 0; i < 10 && p.threads() == 1; ++i)
    p.decide(window(100, 0, 100));
  ASSERT_EQ(p.threads(), 2);
  p.decide(window(100, 0, 0));
  EXPECT_EQ(p.backoffMs(), TeamPolicy::kFirstBackoffMs);
}

TEST(TeamPolicy, UnknownIdleTimeNeverGrows) {
  TeamPolicy p(2);
  ASSERT_EQ(p.decide(window(100, 100, 0)), 1);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(p.decide(window(100, 0, -1)), 1);
}

TEST(ThreadGovernor, ReadsThisMachineAndStaysWithinItsTeam) {
  int before = kernelThreads();
  setKernelThreads(2);
  {
    ThreadGovernor g(2);
    // Linux reports run delays in /proc/self/task/*/schedstat.
    EXPECT_TRUE(g.active());
    for (int i = 0; i < 50; ++i) {
      volatile double x = 0;
      for (int j = 0; j < 100000; ++j)
        x = x + j;
      g.afterStep();
      EXPECT_GE(g.threads(), 1);
      EXPECT_LE(g.threads(), 2);
      EXPECT_EQ(kernelThreads(), g.threads());
    }
    int64_t steps = 0;
    for (auto [threads, n] : g.stepsAtThreads())
      steps += n;
    EXPECT_EQ(steps, 50);
  }
  // The next run starts with the whole team.
  EXPECT_EQ(kernelThreads(), 2);
  setKernelThreads(before);
}

TEST(ThreadGovernor, OneThreadIsNothingToGovern) {
  ThreadGovernor g(1);
  EXPECT_FALSE(g.active());
  g.afterStep();
  EXPECT_EQ(g.threads(), 1);
}

} // namespace
