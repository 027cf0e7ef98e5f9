//===- ThreadGovernor.h - The kernels' team sized to the cores it gets -----===//
//
// The kernels run on one OpenMP team whose parallel regions end in
// barriers. On cores another process also wants, a thread of the team is
// preempted for a time slice at a time, and every region waits for it: the
// threads that arrive spin, and two spinning teams can fall into step with
// each other, so a 4 ms step took 300 ms (measured on 2 cores next to
// another ampc run, docs/performance.md). A team no larger than the cores
// it actually gets has no preempted member to wait for, and its step slows
// in proportion to the cores it lost.
//
// The governor measures that between steps. Shrinking is driven by how
// long the team's threads were runnable but waiting for a core (the
// kernel's per-thread run delay, /proc/self/task/*/schedstat), which only
// contention causes; growing back by the idle time of the cores this
// process may use (/proc/stat), checked again by the run delay once grown,
// with a backoff that doubles after each grow that had to be undone.
//
// The policy is a plain class fed with measurements, so tests drive it
// with made-up ones; the governor adds the reading of /proc and the
// setting of the team size.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_THREADGOVERNOR_H
#define AMPC_RUNTIME_THREADGOVERNOR_H

#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

namespace ampc {

/// One window of measurements.
struct TeamWindow {
  double wallMs = 0;      ///< how long the window lasted
  double runDelayMs = 0;  ///< summed over the team's threads: runnable, not running
  double idleCoreMs = -1; ///< summed over the allowed cores: idle; < 0 unknown
};

class TeamPolicy {
public:
  /// A team of at most `maxThreads` (and never fewer than 1).
  explicit TeamPolicy(int maxThreads);

  /// The team size for the next window, given the last one at the current
  /// size (threads()).
  int decide(const TeamWindow &w);
  int threads() const { return threads_; }
  int maxThreads() const { return maxThreads_; }
  /// The wait before the next grow; doubles after a grow that was undone.
  double backoffMs() const { return backoffMs_; }

  /// A team waiting for cores more than this share of its time is larger
  /// than the cores it gets.
  static constexpr double kShrinkAt = 0.2;
  /// Idle cores (in cores, averaged over the window) that make room for
  /// another thread.
  static constexpr double kIdleToGrow = 0.75;
  static constexpr double kFirstBackoffMs = 250, kMaxBackoffMs = 30000;

private:
  int maxThreads_, threads_;
  bool justGrew_ = false;
  double backoffMs_ = kFirstBackoffMs;
  double sinceShrinkMs_ = 1e30;
};

class ThreadGovernor {
public:
  /// Governs the kernels' team up to `maxThreads` threads, starting there.
  /// Inactive (never changes the team) when maxThreads is 1 or this
  /// system does not report run delays.
  explicit ThreadGovernor(int maxThreads);
  ~ThreadGovernor();
  ThreadGovernor(const ThreadGovernor &) = delete;
  ThreadGovernor &operator=(const ThreadGovernor &) = delete;

  bool active() const { return active_; }
  /// Call between steps (with the team idle); it may change the team size
  /// for the steps after.
  void afterStep();
  /// The team size now.
  int threads() const { return policy_.threads(); }
  /// Steps run at each team size, and how many times the size changed.
  const std::map<int, int64_t> &stepsAtThreads() const { return stepsAt_; }
  int changes() const { return changes_; }

private:
  void watchTeam();
  double teamRunDelayMs();
  double idleCoreMs();

  TeamPolicy policy_;
  bool active_ = false;
  std::vector<int> schedstatFiles_; ///< one per team thread
  std::vector<int> allowedCpus_;
  int statFile_ = -1;
  std::chrono::steady_clock::time_point windowStart_;
  double windowRunDelay_ = 0, windowIdle_ = -1;
  bool discardWindow_ = true; ///< the first window at a new size (its set-up)
  std::map<int, int64_t> stepsAt_;
  int changes_ = 0;
};

} // namespace ampc

#endif
