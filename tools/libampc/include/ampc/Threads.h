//===- ampc/Threads.h - Threads of the CPU backend --------------*- C++ -*-===//
//
// The `cpu` device's kernels run on one process-wide thread team (OpenMP,
// which oneDNN shares). By default it has one thread per core the process
// may use (its CPU affinity), or OMP_NUM_THREADS when that is set.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_THREADS_H
#define AMPC_PUBLIC_THREADS_H

#include "ampc/Export.h"

#include <string>

namespace ampc::api {

/// The cores this process may run on (its CPU affinity); at least 1.
AMPC_API int availableCores();

/// Sets the thread count of the CPU kernels for every Program run from now
/// on (process-wide; call it between runs, not during one). n >= 1.
AMPC_API void setThreads(int n);
/// The thread count the CPU kernels use now.
AMPC_API int threads();

/// "" when `n` threads fit the cores that are free right now, else one line
/// saying how many are free and what to ask for instead: more threads than
/// free cores make every step wait for a preempted thread.
AMPC_API std::string threadsWarning(int n);

} // namespace ampc::api

#endif
