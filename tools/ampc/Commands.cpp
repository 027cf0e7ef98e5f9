//===- Commands.cpp - ampc plan, --run forward, the summary ---------------===//
#include "tools/ampc/Driver.h"

#include "kernels/common/Storage.h"
#include "runtime/data/DataSource.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

namespace ampc::cli {

/// Picks the backend; "auto" says which one it chose.
std::unique_ptr<Backend> selectBackend(const Options &opts) {
  std::string err;
  std::unique_ptr<Backend> backend = createBackend(opts.device, err);
  if (!backend) {
    llvm::errs() << "error: " << err << "\n";
    return nullptr;
  }
  if (opts.device == "auto")
    llvm::outs() << "device: auto -> " << backend->name()
                 << " (no GPU backend is built yet; the CPU runs the model)\n";
  return backend;
}

static uint64_t metaSeed(const Graph &g, const char *key) {
  auto it = g.meta().find(key);
  return it != g.meta().end() && it->second.is(AttrType::Int) ? it->second.getInt() : 0;
}

std::string modelDirOf(llvm::StringRef modelPath) {
  llvm::StringRef dir = llvm::sys::path::parent_path(modelPath);
  return dir.empty() ? "." : dir.str();
}

std::unique_ptr<Program> compileProgram(const Graph &g, Backend &backend, const Options &opts,
                                        DiagnosticEngine &diag) {
  CompileOptions copts;
  copts.initSeed = metaSeed(g, "init.seed");
  copts.runSeed = metaSeed(g, "train.seed");
  copts.baseDir = modelDirOf(opts.model);
  copts.castCache = opts.castCache;
  return Program::compile(g, backend, diag, copts);
}

/// `ampc plan`: the memory plan's table, before anything runs.
int runPlan(const Graph &g, const Options &opts, DiagnosticEngine &diag) {
  std::unique_ptr<Backend> backend = selectBackend(opts);
  if (!backend)
    return kRuntimeFailure;
  showPolicy(g, backend.get());
  std::unique_ptr<Program> program = compileProgram(g, *backend, opts, diag);
  if (!program) {
    diag.print(llvm::errs());
    return kBadInput;
  }
  llvm::outs() << "model " << g.name() << ", opt level " << optLevelOf(g) << ", "
               << program->schedule().size() << " scheduled ops on " << backend->name() << "\n";
  program->plan().print(llvm::outs());
  return kSuccess;
}

/// `--run forward`: one batch through the forward pass and the loss.
int runForward(const Graph &g, const Options &opts, DiagnosticEngine &diag) {
  std::unique_ptr<Backend> backend = selectBackend(opts);
  if (!backend)
    return kRuntimeFailure;
  showPolicy(g, backend.get());
  std::unique_ptr<Program> program = compileProgram(g, *backend, opts, diag);
  std::unique_ptr<DataSource> source =
      program ? createDataSource(g, modelDirOf(opts.model), diag) : nullptr;
  if (!program || !source) {
    diag.print(llvm::errs());
    return kBadInput;
  }
  Batcher batcher(*source, batchOptionsFromMeta(g));
  auto batch = makeBatchTensors(g);
  int64_t rows = 0;
  std::string err;
  if (!batcher.next(batch, rows, err)) {
    llvm::errs() << "error: " << err << "\n";
    return kRuntimeFailure;
  }
  for (size_t i = 0; i < g.inputs().size(); ++i)
    std::memcpy(program->data(g.inputs()[i]), batch[i].data(), batch[i].sizeInBytes());
  program->run(0);
  MeasuredMemory measured = program->measure();
  llvm::outs() << "ran forward on one batch of " << rows << " samples from " << source->kind()
               << " data\n";
  for (const Value *out : g.outputs()) {
    const void *data = program->data(out);
    if (out->type().rank() == 0) {
      llvm::outs() << out->name() << " = "
                   << llvm::format("%.6f", kernels::loadAsDouble(out->dtype(), data, 0)) << "\n";
      continue;
    }
    double sum = 0;
    for (int64_t i = 0; i < out->type().numElements(); ++i)
      sum += kernels::loadAsDouble(out->dtype(), data, i);
    llvm::outs() << out->name() << " : " << out->type().str() << ", mean "
                 << llvm::format("%.6f", sum / out->type().numElements()) << "\n";
  }
  llvm::outs() << "memory: planned " << program->plan().peakBytes() << " B, allocated "
               << measured.allocatedBytes << " B, step arena touched " << measured.touchedStepBytes
               << " of " << program->plan().stepBytes << " B\n";
  printPrecisionFooter(g, program.get(), llvm::outs());
  if (!measured.guardsIntact) {
    llvm::errs() << "error: a kernel wrote past the end of an arena\n";
    return kRuntimeFailure;
  }
  return kSuccess;
}

void printSummary(const Graph &g, const Options &opts, llvm::raw_ostream &os) {
  int64_t paramCount = 0, paramBytes = 0, frozen = 0, buffers = 0;
  for (const Value *v : g.state()) {
    if (v->stateKind() == StateKind::Parameter) {
      paramCount += v->type().numElements();
      paramBytes += v->type().sizeInBytes();
      if (!v->trainable())
        frozen += v->type().numElements();
    } else {
      buffers += v->type().numElements();
    }
  }
  os << "model " << g.name() << ": " << g.inputs().size() << " inputs, " << g.numNodes() << " ops, "
     << paramCount << " parameters (" << paramBytes << " bytes";
  if (frozen)
    os << ", " << frozen << " frozen";
  os << "), " << buffers << " buffer elements\n";
  os << "verified: ok\n";
  showPolicy(g);
  printPrecisionFooter(g, nullptr, os);
  if (!g.meta().count("optimizer"))
    os << "the model has no 'optimizer' section: nothing to train\n";
  os << "use --emit ir or --emit yaml to print the graph, ampc plan for its memory\n";
}

} // namespace ampc::cli
