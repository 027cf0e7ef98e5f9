//===- ProgramTiming.h - Timing one compiled program (bench tools) --------===//
//
// What ampc-gemm-ceiling and ampc-step-floor share: inputs filled with
// values that slow nothing down, and the median time of a program's runs
// after the runs that pay for JIT compilation and first touches.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_BENCH_PROGRAMTIMING_H
#define AMPC_BENCH_PROGRAMTIMING_H

#include "kernels/common/Storage.h"
#include "runtime/Program.h"

#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

namespace ampc::bench {

/// Floating inputs uniform in [-1, 1) (no denormals, no infinities),
/// integer ones 0 (a valid index anywhere).
inline void fillInputs(Program &program, llvm::ArrayRef<Value *> inputs) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (Value *in : inputs) {
    void *data = program.data(in);
    bool floating = isFloating(in->dtype());
    for (int64_t i = 0; i < in->type().numElements(); ++i)
      kernels::storeFromDouble(in->dtype(), data, i, floating ? uniform(rng) : 0.0);
  }
}

/// The median wall time in ms of `reps` runs, after two unmeasured ones.
inline double medianRunMs(Program &program, int reps) {
  for (int i = 0; i < 2; ++i)
    program.run(0);
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    program.run(0);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

} // namespace ampc::bench

#endif
