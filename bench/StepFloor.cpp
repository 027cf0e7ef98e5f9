//===- StepFloor.cpp - What a training step cannot go below ---------------===//
//
//   ampc-step-floor MODEL.yaml LEVEL [REPS]      (REPS default 10)
//
// The floor bench/compare_pytorch.py prints each ampc level against: the
// step's dense kernels (every node the registry counts FLOPs for: linear,
// matmul, convolutions and their gradients, attention) each timed alone,
// plus the optimizer's memory traffic at this machine's copy bandwidth.
//
// Each dense node of LEVEL's training graph becomes a graph of its own --
// its operands as inputs, the node with its attributes, compiled for the
// `cpu` backend like any graph, so the same kernel dispatch (oneDNN
// primitives, ampc's loops) -- and runs REPS times after two unmeasured
// runs (JIT, first touches); its median counts, once per occurrence in the
// step. The optimizer's traffic is every byte its nodes read and write
// (parameters, gradients, moments, masters), each once, at the bandwidth
// of a multi-threaded copy of 256 MiB. What the floor leaves out -- the
// elementwise ops, normalisation, casts, the loss -- is what fusing and
// better kernels could at best hide, so "x floor" says how far a level is
// from a step made of its dense kernels and one pass over the optimizer
// state. Prints:
//
//   dense kernels=N distinct=D flops=F ms=X   (F: the registry's count)
//   optimizer bytes=B bandwidth_gbs=G ms=Y
//   floor ms=X+Y
//
// The thread count is OpenMP's (OMP_NUM_THREADS); the script sets it.
//
//===----------------------------------------------------------------------===//
#include "ProgramTiming.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/Builder.h"
#include "ir/OpRegistry.h"
#include "kernels/common/Storage.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace ampc;

namespace {

double medianMs(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// The median time of `n` alone: its operands as the inputs of a graph of
/// one node. Negative when it does not compile alone.
double timeAlone(const Node &n, Backend &backend, int reps) {
  Graph g("alone");
  std::vector<Value *> operands;
  for (unsigned i = 0; i < n.numOperands(); ++i)
    operands.push_back(g.addInput("in" + std::to_string(i), n.operand(i)->type()));
  DiagnosticEngine diag;
  Node *copy = buildNode(g, n.op(), operands, n.attrs(), Location(), diag);
  if (!copy)
    return -1;
  for (unsigned r = 0; r < copy->numResults(); ++r)
    g.addOutput(copy->result(r));
  std::unique_ptr<Program> program = Program::compile(g, backend, diag);
  if (!program)
    return -1;
  bench::fillInputs(*program, operands);
  return bench::medianRunMs(*program, reps);
}

/// The key of what a node computes alone: op, operand types, attributes.
std::string signature(const Node &n) {
  std::string s = n.opName().str();
  for (const Value *v : n.operands())
    s += " " + v->type().str();
  for (const auto &[name, value] : n.attrs())
    s += " " + name.str() + "=" + value.str();
  return s;
}

/// GB/s of a multi-threaded copy of 256 MiB (read + write counted).
double copyBandwidthGBs() {
  const size_t bytes = size_t(256) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    auto start = std::chrono::steady_clock::now();
    const int64_t chunks = 64;
    const size_t chunk = bytes / chunks;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c)
      std::memcpy(b.data() + c * chunk, a.data() + c * chunk, chunk);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  return 2.0 * double(bytes) / (medianMs(ms) * 1e6);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    llvm::errs() << "usage: ampc-step-floor MODEL.yaml LEVEL [REPS]\n";
    return 2;
  }
  int reps = argc == 4 ? std::atoi(argv[3]) : 10;
  if (reps <= 0) {
    llvm::errs() << "error: REPS must be positive\n";
    return 2;
  }
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelFile(argv[1], diag);
  std::string unavailable;
  std::unique_ptr<Backend> backend = createBackend("cpu", unavailable);
  if (!g || !backend || !setPolicyOverride(g->meta(), "opt_level", argv[2], diag)) {
    diag.print(llvm::errs());
    llvm::errs() << unavailable;
    return 2;
  }
  PassManager pm;
  pm.setTarget(backend.get());
  if (!addStandardPipeline(pm, PipelineStage::Train, diag) || !pm.run(*g, diag)) {
    diag.print(llvm::errs());
    return 2;
  }

  std::map<std::string, double> alone;
  size_t dense = 0;
  double denseMs = 0, denseFlops = 0;
  uint64_t optimizerBytes = 0;
  for (const Node &n : g->nodes()) {
    if (n.role() == NodeRole::Optimizer) {
      for (const Value *v : n.operands())
        optimizerBytes += static_cast<uint64_t>(std::max<int64_t>(0, v->type().sizeInBytes()));
      for (unsigned r = 0; r < n.numResults(); ++r)
        optimizerBytes +=
            static_cast<uint64_t>(std::max<int64_t>(0, n.result(r)->type().sizeInBytes()));
    }
    if (!n.op().flops || n.op().flops(n) <= 0)
      continue;
    std::string key = signature(n);
    auto it = alone.find(key);
    if (it == alone.end()) {
      double ms = timeAlone(n, *backend, reps);
      if (ms < 0) {
        llvm::errs() << "error: " << n.opName() << " %" << n.result()->name()
                     << " does not compile alone\n";
        return 1;
      }
      it = alone.emplace(key, ms).first;
    }
    ++dense;
    denseMs += it->second;
    denseFlops += n.op().flops(n);
  }
  double bandwidth = copyBandwidthGBs();
  double optimizerMs = double(optimizerBytes) / (bandwidth * 1e6);
  llvm::outs() << "dense kernels=" << dense << " distinct=" << alone.size()
               << llvm::format(" flops=%.6g ms=%.3f", denseFlops, denseMs) << "\n";
  llvm::outs() << "optimizer bytes=" << optimizerBytes
               << llvm::format(" bandwidth_gbs=%.1f ms=%.3f", bandwidth, optimizerMs) << "\n";
  llvm::outs() << llvm::format("floor ms=%.3f", denseMs + optimizerMs) << "\n";
  return 0;
}
