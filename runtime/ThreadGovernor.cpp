//===- ThreadGovernor.cpp ---------------------------------------------------===//
#include "runtime/ThreadGovernor.h"

#include "runtime/Threads.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ampc {

//===----------------------------------------------------------------------===//
// The policy
//===----------------------------------------------------------------------===//

TeamPolicy::TeamPolicy(int maxThreads)
    : maxThreads_(std::max(1, maxThreads)), threads_(maxThreads_) {}

int TeamPolicy::decide(const TeamWindow &w) {
  if (w.wallMs <= 0)
    return threads_;
  double waiting = w.runDelayMs / (threads_ * w.wallMs);
  if (threads_ > 1 && waiting > kShrinkAt) {
    // A grow the run delay undoes at once was a wrong guess from idle
    // time (another process's idle moments, a container's view of the
    // host): the next try waits twice as long.
    if (justGrew_)
      backoffMs_ = std::min(backoffMs_ * 2, kMaxBackoffMs);
    justGrew_ = false;
    // The threads that got a core, on average.
    int target = static_cast<int>(std::lround(threads_ * (1 - waiting)));
    threads_ = std::clamp(target, 1, threads_ - 1);
    sinceShrinkMs_ = 0;
    return threads_;
  }
  sinceShrinkMs_ += w.wallMs;
  if (justGrew_) {
    justGrew_ = false;
    backoffMs_ = kFirstBackoffMs; // the grow held
  }
  if (threads_ < maxThreads_ && w.idleCoreMs >= 0 && sinceShrinkMs_ >= backoffMs_) {
    double idleCores = w.idleCoreMs / w.wallMs;
    if (idleCores >= kIdleToGrow) {
      int more = std::max(1, static_cast<int>(std::floor(idleCores + 0.25)));
      threads_ = std::min(maxThreads_, threads_ + more);
      justGrew_ = true;
    }
  }
  return threads_;
}

//===----------------------------------------------------------------------===//
// Reading /proc
//===----------------------------------------------------------------------===//

namespace {

/// How long a window lasts at least: /proc/stat counts in clock ticks (10
/// ms), so shorter windows see idle time too coarsely.
constexpr double kWindowMs = 100;

/// The file's text from its start (procfs regenerates it on each read).
bool readFrom(int fd, char *buf, size_t size, ssize_t &n) {
  n = pread(fd, buf, size - 1, 0);
  if (n <= 0)
    return false;
  buf[n] = 0;
  return true;
}

} // namespace

ThreadGovernor::ThreadGovernor(int maxThreads) : policy_(maxThreads) {
  if (maxThreads <= 1)
    return;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        allowedCpus_.push_back(c);
  statFile_ = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  watchTeam();
  active_ = !schedstatFiles_.empty() && teamRunDelayMs() >= 0;
  windowStart_ = std::chrono::steady_clock::now();
  windowRunDelay_ = active_ ? teamRunDelayMs() : 0;
  windowIdle_ = idleCoreMs();
}

ThreadGovernor::~ThreadGovernor() {
  for (int fd : schedstatFiles_)
    close(fd);
  if (statFile_ >= 0)
    close(statFile_);
  // Whatever runs next (evaluation, another run) starts with the whole team.
  if (active_ && policy_.threads() != policy_.maxThreads())
    setKernelThreads(policy_.maxThreads());
}

void ThreadGovernor::watchTeam() {
  for (int fd : schedstatFiles_)
    close(fd);
  schedstatFiles_.clear();
  int n = policy_.threads();
  std::vector<long> tids(static_cast<size_t>(n), 0);
#pragma omp parallel num_threads(n)
  tids[static_cast<size_t>(omp_get_thread_num())] = syscall(SYS_gettid);
  for (long tid : tids) {
    if (!tid)
      continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      for (int f : schedstatFiles_)
        close(f);
      schedstatFiles_.clear();
      return;
    }
    schedstatFiles_.push_back(fd);
  }
}

double ThreadGovernor::teamRunDelayMs() {
  // "on-cpu-ns run-delay-ns timeslices"
  double sum = 0;
  for (int fd : schedstatFiles_) {
    char buf[128];
    ssize_t n;
    unsigned long long onCpu = 0, delay = 0;
    if (!readFrom(fd, buf, sizeof buf, n) || std::sscanf(buf, "%llu %llu", &onCpu, &delay) != 2)
      return -1;
    sum += static_cast<double>(delay) * 1e-6;
  }
  return sum;
}

double ThreadGovernor::idleCoreMs() {
  if (statFile_ < 0)
    return -1;
  // "cpuN user nice system idle iowait ...", in clock ticks; N over the
  // cores this process may run on.
  static thread_local std::vector<char> buf(1 << 16);
  ssize_t n;
  if (!readFrom(statFile_, buf.data(), buf.size(), n))
    return -1;
  double ticks = 0;
  const char *p = buf.data();
  while ((p = std::strstr(p, "\ncpu")) != nullptr) {
    p += 4;
    int cpu;
    unsigned long long user, nice, system, idle, iowait;
    if (std::sscanf(p, "%d %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system, &idle,
                    &iowait) != 6)
      continue;
    if (std::binary_search(allowedCpus_.begin(), allowedCpus_.end(), cpu))
      ticks += static_cast<double>(idle + iowait);
  }
  static const double msPerTick = 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  return ticks * msPerTick;
}

void ThreadGovernor::afterStep() {
  ++stepsAt_[policy_.threads()];
  if (!active_)
    return;
  auto now = std::chrono::steady_clock::now();
  double wall = std::chrono::duration<double, std::milli>(now - windowStart_).count();
  if (wall < kWindowMs)
    return;
  double delay = teamRunDelayMs(), idle = idleCoreMs();
  TeamWindow w;
  w.wallMs = wall;
  w.runDelayMs = std::max(0.0, delay - windowRunDelay_);
  w.idleCoreMs = idle >= 0 && windowIdle_ >= 0 ? std::max(0.0, idle - windowIdle_) : -1;
  windowStart_ = now;
  windowRunDelay_ = delay;
  windowIdle_ = idle;
  if (delay < 0) { // a team thread went away: watch the team anew
    watchTeam();
    windowRunDelay_ = teamRunDelayMs();
    discardWindow_ = true;
    return;
  }
  if (discardWindow_) {
    discardWindow_ = false;
    return;
  }
  int before = policy_.threads();
  int after = policy_.decide(w);
  if (after == before)
    return;
  setKernelThreads(after);
  ++changes_;
  watchTeam();
  windowStart_ = std::chrono::steady_clock::now();
  windowRunDelay_ = teamRunDelayMs();
  windowIdle_ = idleCoreMs();
  discardWindow_ = true;
}

} // namespace ampc
