//===- Threads.cpp ----------------------------------------------------------===//
#include "runtime/Threads.h"

#include <omp.h>

#include <algorithm>
#include <fstream>
#include <sched.h>

namespace ampc {

int allowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return std::max(1, omp_get_num_procs());
  return std::max(1, CPU_COUNT(&set));
}

void setKernelThreads(int n) { omp_set_num_threads(std::max(1, n)); }

int kernelThreads() { return omp_get_max_threads(); }

int otherRunnableTasks() {
  // "0.52 0.58 0.59 3/812 12345": the fourth field is runnable/total
  // scheduling entities now, this process's running thread included.
  std::ifstream in("/proc/loadavg");
  double avg1, avg5, avg15;
  int runnable = 0, total = 0;
  char slash = 0;
  if (!(in >> avg1 >> avg5 >> avg15 >> runnable >> slash >> total) || slash != '/')
    return -1;
  return std::max(0, runnable - 1);
}

std::string threadOversubscription(int threads) {
  int cores = allowedCores();
  if (threads > cores)
    return std::to_string(threads) + " threads asked for, but this process may use " +
           std::to_string(cores) + (cores == 1 ? " core" : " cores") +
           "; steps will be slower than with --threads " + std::to_string(cores);
  int others = otherRunnableTasks();
  if (others < 0)
    return "";
  int free = std::max(1, cores - others);
  if (threads <= free)
    return "";
  return std::to_string(threads) + " threads asked for, but only " + std::to_string(free) + " of " +
         std::to_string(cores) + " cores are free (" + std::to_string(others) +
         (others == 1 ? " other task runs" : " other tasks run") +
         "); a preempted thread stalls every step: --threads " + std::to_string(free) +
         " may be faster";
}

} // namespace ampc
