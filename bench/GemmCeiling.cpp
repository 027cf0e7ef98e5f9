//===- GemmCeiling.cpp - The GEMM speed the cpu backend reaches -----------===//
//
//   ampc-gemm-ceiling [M K N [REPS]]     (default 2048 2048 2048 10)
//
// The ceiling that bench/compare_pytorch.py measures achieved GFLOP/s
// against: one big linear (y[M,N] = x[M,K] w[N,K]^T, no bias) compiled for
// ampc's `cpu` backend like any graph, so it runs through the same kernel
// dispatch (oneDNN's matmul where the backend takes it) as a training step.
// Prints one line per dtype:
//
//   f32 gflops=<median GFLOP/s> ms=<median ms> m=M k=K n=N reps=REPS
//   bf16 ...
//
// The thread count is OpenMP's (OMP_NUM_THREADS); the script sets it.
//
//===----------------------------------------------------------------------===//
#include "ProgramTiming.h"

#include "ir/Builder.h"
#include "ir/OpRegistry.h"
#include "kernels/common/Storage.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

using namespace ampc;

namespace {

/// The median wall time of `reps` runs of one linear in `dtype`, after two
/// unmeasured runs (first touches, oneDNN's JIT); negative on failure.
double medianLinearMs(DType dtype, int64_t m, int64_t k, int64_t n, int reps) {
  Graph g("gemm_ceiling");
  Value *x = g.addInput("x", TensorType(dtype, {m, k}));
  Value *w = g.addInput("w", TensorType(dtype, {n, k}));
  DiagnosticEngine diag;
  Node *linear =
      buildNode(g, OpRegistry::builtin().get(OpKind::Linear), {x, w}, {}, Location(), diag, {"y"});
  if (!linear) {
    diag.print(llvm::errs());
    return -1;
  }
  g.addOutput(linear->result());
  std::unique_ptr<Backend> backend = createCpuBackend();
  std::unique_ptr<Program> program = Program::compile(g, *backend, diag);
  if (!program) {
    diag.print(llvm::errs());
    return -1;
  }
  bench::fillInputs(*program, {x, w});
  return bench::medianRunMs(*program, reps);
}

} // namespace

int main(int argc, char **argv) {
  int64_t m = 2048, k = 2048, n = 2048;
  int reps = 10;
  if (argc != 1 && argc != 4 && argc != 5) {
    llvm::errs() << "usage: ampc-gemm-ceiling [M K N [REPS]]\n";
    return 2;
  }
  if (argc >= 4) {
    m = std::atoll(argv[1]);
    k = std::atoll(argv[2]);
    n = std::atoll(argv[3]);
  }
  if (argc == 5)
    reps = std::atoi(argv[4]);
  if (m <= 0 || k <= 0 || n <= 0 || reps <= 0) {
    llvm::errs() << "error: sizes and repetitions must be positive\n";
    return 2;
  }
  double flops = 2.0 * double(m) * double(k) * double(n);
  for (DType dtype : {DType::F32, DType::BF16}) {
    double ms = medianLinearMs(dtype, m, k, n, reps);
    if (ms < 0)
      return 1;
    llvm::outs() << dtypeName(dtype) << llvm::format(" gflops=%.1f ms=%.3f", flops / (ms * 1e6), ms)
                 << " m=" << m << " k=" << k << " n=" << n << " reps=" << reps << "\n";
  }
  return 0;
}
