//===- PipelineBench.cpp - The compiler's own speed -----------------------===//
//
// Times the standard training pipeline (passes/StandardPipeline.h: the
// precision passes, autodiff, the optimizer lowering, master weights, loss
// scaling, cast optimisation, dce) on generated models of about 1k, 10k,
// 100k and 200k forward nodes, at O1 and O2.
//
// `ampc-bench-pipeline --print-model N` prints the model of about N forward
// nodes instead, so that bench/pipeline_work.py counts the instructions of
// the very graphs timed here.
//
// The model is a chain of residual blocks, x + relu(linear(x)), three nodes
// each, closed by an MSE loss and SGD: the shape of graph whose size grows
// with depth, which is where a pass that walks use lists or rescans the
// graph per node shows up. Each iteration imports the model afresh with the
// timer paused (the passes rewrite the graph in place), so only the passes
// are timed.
//
// The heap is kept warm at every size: glibc hands a freed block of more
// than its thresholds (128 KiB at first) back to the kernel, so each
// iteration at 100k-200k nodes rebuilt its graph in fresh pages, which the
// kernel faults in and zeroes (0.8 us a node, a tenth of the time), while
// a 1k-node graph always reuses the memory of the iteration before. main()
// raises the thresholds (mallopt) so that every size reuses its memory and
// the ratio between sizes is the pipeline's own. `--cold-heap` keeps glibc's
// defaults: the figures of a process that compiles one big model once.
//
// Counters, per iteration:
//   nodes        forward nodes the import produced (the size argument)
//   train_nodes  nodes of the training graph the pipeline produced
//   ns_per_node  pipeline time / forward nodes: constant when the pipeline
//                grows linearly
//   <pass>_ms    each pass's share, to name the one that does not
//   walk_ns      one walk of the training graph's node list, per node
//                (untimed by the benchmark): memory's part, see timeListWalk
//   index_walk_ns  the same nodes read through an array in list order
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/ModelLoader.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/Backend.h"

#include "benchmark/benchmark.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace ampc;

namespace {

constexpr int kNodesPerBlock = 3; // linear, relu, add
constexpr int kWidth = 8;         // features: small, the passes never look at sizes

/// The model as YAML: `blocks` residual blocks after one input layer.
std::string chainModel(int64_t blocks) {
  std::string s = "model: chain\nbatch: 4\n"
                  "inputs:\n"
                  "  x: {shape: [B, " +
                  std::to_string(kWidth) +
                  "]}\n"
                  "  y: {shape: [B, " +
                  std::to_string(kWidth) +
                  "]}\n"
                  "blocks:\n"
                  "  res:\n"
                  "    layers:\n"
                  "      - linear: {out_features: " +
                  std::to_string(kWidth) +
                  ", name: fc}\n"
                  "      - relu: {name: act}\n"
                  "      - add: {inputs: [block_in, act]}\n"
                  "layers:\n";
  s.reserve(s.size() + blocks * 32);
  for (int64_t b = 0; b < blocks; ++b)
    s += "  - res: {name: r" + std::to_string(b) + "}\n";
  s += "loss: {mse_loss: {input: r" + std::to_string(blocks - 1) +
       ", target: y}}\n"
       "optimizer: {sgd: {lr: 0.01, momentum: 0.9}}\n"
       "train: {steps: 10}\n";
  return s;
}

std::unique_ptr<Graph> importChain(const std::string &text, const char *level) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelString(text, "chain.yaml", diag);
  if (!g || !setPolicyOverride(g->meta(), "opt_level", level, diag)) {
    diag.print(llvm::errs());
    std::abort();
  }
  return g;
}

double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// One walk of the node list reading each node's op, the least a pass that
/// looks at every node does: its time per node is the memory's part of the
/// pipeline's, which a bigger graph cannot keep flat (the list is a chain
/// of pointers, each node's address known only once the one before it is
/// read, and passes insert nodes far from their neighbours in memory).
double timeListWalk(const Graph &g) {
  auto start = std::chrono::steady_clock::now();
  uint64_t sum = 0;
  for (const Node &n : g.nodes())
    sum += static_cast<uint64_t>(n.kind());
  benchmark::DoNotOptimize(sum);
  return msSince(start);
}

/// The same walk through an array of the nodes in list order (made before
/// the clock starts): the addresses are known up front, so the reads
/// overlap. Its distance to timeListWalk is what chasing the list costs.
/// (Both start with the graph as the walk before left it in the caches:
/// all of it at 1k nodes, its last tens of MiB at 200k.)
double timeIndexWalk(const Graph &g) {
  std::vector<const Node *> order;
  order.reserve(g.numNodes());
  for (const Node &n : g.nodes())
    order.push_back(&n);
  auto start = std::chrono::steady_clock::now();
  uint64_t sum = 0;
  for (const Node *n : order)
    sum += static_cast<uint64_t>(n->kind());
  benchmark::DoNotOptimize(sum);
  return msSince(start);
}

void BM_TrainPipeline(benchmark::State &state) {
  int64_t targetNodes = state.range(0);
  const char *level = state.range(1) == 1 ? "O1" : "O2";
  std::string text = chainModel(targetNodes / kNodesPerBlock);
  std::string unavailable;
  std::unique_ptr<Backend> target = createBackend("cpu", unavailable);

  std::map<std::string, double> passMs;
  double totalMs = 0, walkMs = 0, indexWalkMs = 0;
  size_t forwardNodes = 0, trainNodes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<Graph> g = importChain(text, level);
    forwardNodes = g->numNodes();
    DiagnosticEngine diag;
    PassManager pm;
    pm.setTarget(target.get());
    if (!addStandardPipeline(pm, PipelineStage::Train, diag))
      std::abort();
    // Each pass's time: from the previous pass's end (or the start) to the
    // hook that runs right after it.
    auto last = std::chrono::steady_clock::now();
    pm.setAfterPassHook([&](llvm::StringRef name, const Graph &) {
      auto now = std::chrono::steady_clock::now();
      passMs[name.str()] += std::chrono::duration<double, std::milli>(now - last).count();
      last = now;
    });
    state.ResumeTiming();

    auto start = std::chrono::steady_clock::now();
    last = start;
    bool ok = pm.run(*g, diag);
    totalMs += msSince(start);

    state.PauseTiming();
    if (!ok) {
      diag.print(llvm::errs());
      std::abort();
    }
    trainNodes = g->numNodes();
    walkMs += timeListWalk(*g);
    indexWalkMs += timeIndexWalk(*g);
    g.reset(); // freeing a 100k-node graph is not the pipeline's time
    state.ResumeTiming();
  }
  double iterations = static_cast<double>(state.iterations());
  state.counters["nodes"] = static_cast<double>(forwardNodes);
  state.counters["train_nodes"] = static_cast<double>(trainNodes);
  state.counters["ns_per_node"] = totalMs * 1e6 / iterations / static_cast<double>(forwardNodes);
  state.counters["walk_ns"] = walkMs * 1e6 / iterations / static_cast<double>(trainNodes);
  state.counters["index_walk_ns"] =
      indexWalkMs * 1e6 / iterations / static_cast<double>(trainNodes);
  for (const auto &[name, ms] : passMs)
    state.counters[name + "_ms"] = ms / iterations;
}

} // namespace

// Size (forward nodes) x level (1 = O1, 2 = O2).
BENCHMARK(BM_TrainPipeline)
    ->ArgNames({"nodes", "O"})
    ->ArgsProduct({{1000, 10000, 100000, 200000}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

int main(int argc, char **argv) {
  if (argc == 3 && std::string(argv[1]) == "--print-model") {
    char *end = nullptr;
    long long nodes = std::strtoll(argv[2], &end, 10);
    if (*argv[2] == '\0' || *end != '\0' || nodes < kNodesPerBlock) {
      std::fprintf(stderr, "error: --print-model wants a node count of at least %d, not '%s'\n",
                   kNodesPerBlock, argv[2]);
      return 2;
    }
    std::fputs(chainModel(nodes / kNodesPerBlock).c_str(), stdout);
    return 0;
  }
  bool coldHeap = false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cold-heap") == 0) {
      coldHeap = true;
      std::copy(argv + i + 1, argv + argc, argv + i);
      --argc;
      break;
    }
#ifdef __GLIBC__
  // The largest mmap threshold glibc takes on 64-bit (32 MiB: bigger
  // blocks are still mapped and unmapped), no trimming of the heap top, and
  // the heap grown 64 MiB at a time (fewer, larger extensions).
  if (!coldHeap) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_TOP_PAD, 64 << 20);
  }
#endif
  benchmark::AddCustomContext("heap", coldHeap ? "cold (glibc defaults)"
                                               : "warm (kept between iterations)");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
