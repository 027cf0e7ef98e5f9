//===- InferenceBench.cpp - Evaluation steps with weights kept reordered --===//
//
// Times one evaluation batch of the seed ConvNet (bench/models/convnet.yaml,
// batch 32; the graph the trainer's evaluation runs: inference mode, the
// forward pipeline, the loss) on the `cpu` backend, with the convolution
// weights kept in oneDNN's layout between runs (CompileOptions::
// markStableInputs, the default) and without (every run reorders them).
//
// Counter: held_MiB, what the kernels hold outside the arenas (the kept
// weights; 0 without keeping).
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/ModelLoader.h"
#include "kernels/common/Storage.h"
#include "passes/EvalMode.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include "benchmark/benchmark.h"

#include <cmath>
#include <cstdlib>
#include <random>

using namespace ampc;

namespace {

struct Compiled {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Program> program;
};

/// The ConvNet's evaluation graph at `level`, compiled for the cpu backend,
/// its inputs filled with values in [0, 1) and labels in [0, 10).
Compiled compileEval(const char *level, bool markStable) {
  Compiled c;
  DiagnosticEngine diag;
  c.graph = loadModelFile(AMPC_BENCH_MODELS "/convnet.yaml", diag);
  if (!c.graph || !setPolicyOverride(c.graph->meta(), "opt_level", level, diag)) {
    diag.print(llvm::errs());
    std::abort();
  }
  c.backend = createCpuBackend();
  PassManager pm;
  pm.setTarget(c.backend.get());
  pm.add(std::make_unique<EvalModePass>());
  CompileOptions opts;
  opts.markStableInputs = markStable;
  if (!addStandardPipeline(pm, PipelineStage::Forward, diag) || !pm.run(*c.graph, diag) ||
      !(c.program = Program::compile(*c.graph, *c.backend, diag, opts))) {
    diag.print(llvm::errs());
    std::abort();
  }
  std::mt19937 rng(0);
  for (const Value *in : c.graph->inputs()) {
    bool labels = !isFloating(in->dtype());
    std::uniform_real_distribution<double> dist(0.0, labels ? 10.0 : 1.0);
    void *data = c.program->data(in);
    for (int64_t i = 0; i < in->type().numElements(); ++i)
      kernels::storeFromDouble(in->dtype(), data, i, labels ? std::floor(dist(rng)) : dist(rng));
  }
  return c;
}

void BM_ConvNetEval(benchmark::State &state) {
  const char *level = state.range(0) == 0 ? "O0" : "O2";
  bool keep = state.range(1) == 1;
  Compiled c = compileEval(level, keep);
  c.program->run(0); // first touches, oneDNN's JIT, the kept copies
  for (auto _ : state)
    c.program->run(0);
  state.counters["held_MiB"] =
      static_cast<double>(c.program->measure().kernelHeldBytes) / (1024.0 * 1024.0);
}

} // namespace

// level (0 = O0 f32, 2 = O2 bf16) x keep (1 = weights kept reordered).
BENCHMARK(BM_ConvNetEval)
    ->ArgNames({"O", "keep"})
    ->ArgsProduct({{0, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

BENCHMARK_MAIN();
