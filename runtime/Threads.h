//===- Threads.h - How many threads the CPU kernels use ------------------===//
//
// The cpu backend's kernels (oneDNN primitives and our OpenMP loops) run on
// OpenMP's thread team, so its size is the one knob. On a shared machine
// more threads than free cores is what makes a step swing from milliseconds
// to hundreds of them (a preempted thread stalls the whole team), so the
// driver can ask how busy the machine is before choosing.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_THREADS_H
#define AMPC_RUNTIME_THREADS_H

#include <string>

namespace ampc {

/// The cores this process may run on (its CPU affinity mask); at least 1.
int allowedCores();

/// Threads the CPU kernels use from now on; `n` >= 1.
void setKernelThreads(int n);
int kernelThreads();

/// Runnable tasks on the machine besides this process, from the kernel's
/// instantaneous count (/proc/loadavg); -1 when it cannot be read.
int otherRunnableTasks();

/// "" when `threads` fit the cores free now, else a one-line warning (no
/// "warning: " prefix) saying how many are free and what to ask for.
std::string threadOversubscription(int threads);

} // namespace ampc

#endif
