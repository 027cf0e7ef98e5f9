//===- main.cpp - The ampc command line -------------------------------------===//
//
// ampc [options] model.yaml
//
// Imports a model file, verifies it, and emits the graph. The training and
// mixed-precision pipelines hang off the same command as they land.
// Exit codes: 0 success, 2 bad usage or bad input, 1 runtime failure
// (docs/cli.md).
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/GraphYamlEmitter.h"
#include "frontends/yaml/ModelLoader.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "ir/support/AtomicFile.h"
#include "passes/PassManager.h"
#include "runtime/Program.h"
#include "runtime/data/DataSource.h"
#include "kernels/common/Storage.h"

#include "CLI/CLI.hpp"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstring>

using namespace ampc;

namespace {

enum ExitCode { kSuccess = 0, kRuntimeFailure = 1, kBadInput = 2 };

struct Options {
  std::string model;
  std::string optLevel = "O0";
  std::string emit;
  std::string output;
  int64_t maxElements = int64_t(1) << 32;
  int64_t batch = 0;
  bool verifyEach = false;
  std::string printAfter;
  bool timePasses = false;
  std::string run;             ///< "" or "forward"
  std::string device = "auto"; ///< auto, cpu, cpu-ref, cuda
  bool planOnly = false;       ///< `ampc plan`
};

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

uint64_t initSeedOf(const Graph &g) {
  auto it = g.meta().find("init.seed");
  return it != g.meta().end() && it->second.is(AttrType::Int) ? it->second.getInt() : 0;
}

std::string modelDirOf(llvm::StringRef modelPath) {
  llvm::StringRef dir = llvm::sys::path::parent_path(modelPath);
  return dir.empty() ? "." : dir.str();
}

std::unique_ptr<Program> compileProgram(const Graph &g, Backend &backend, const Options &opts,
                                        DiagnosticEngine &diag) {
  CompileOptions copts;
  copts.initSeed = initSeedOf(g);
  copts.baseDir = modelDirOf(opts.model);
  return Program::compile(g, backend, diag, copts);
}

/// `ampc plan`: the memory plan's table, before anything runs.
int runPlan(const Graph &g, const Options &opts, DiagnosticEngine &diag) {
  std::unique_ptr<Backend> backend = selectBackend(opts);
  if (!backend)
    return kRuntimeFailure;
  std::unique_ptr<Program> program = compileProgram(g, *backend, opts, diag);
  if (!program) {
    diag.print(llvm::errs());
    return kBadInput;
  }
  llvm::outs() << "model " << g.name() << ", opt level " << opts.optLevel << ", "
               << program->schedule().size() << " scheduled ops on " << backend->name()
               << "\n";
  program->plan().print(llvm::outs());
  return kSuccess;
}

/// `--run forward`: one batch through the forward pass and the loss.
int runForward(const Graph &g, const Options &opts, DiagnosticEngine &diag) {
  std::unique_ptr<Backend> backend = selectBackend(opts);
  if (!backend)
    return kRuntimeFailure;
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
  llvm::outs() << "ran forward on one batch of " << rows << " samples from "
               << source->kind() << " data\n";
  for (const Value *out : g.outputs()) {
    const void *data = program->data(out);
    if (out->type().rank() == 0) {
      llvm::outs() << out->name() << " = "
                   << llvm::format("%.6f", kernels::loadAsDouble(out->dtype(), data, 0))
                   << "\n";
      continue;
    }
    double sum = 0;
    for (int64_t i = 0; i < out->type().numElements(); ++i)
      sum += kernels::loadAsDouble(out->dtype(), data, i);
    llvm::outs() << out->name() << " : " << out->type().str() << ", mean "
                 << llvm::format("%.6f", sum / out->type().numElements()) << "\n";
  }
  llvm::outs() << "memory: planned " << program->plan().peakBytes() << " B, allocated "
               << measured.allocatedBytes << " B, step arena touched "
               << measured.touchedStepBytes << " of " << program->plan().stepBytes << " B\n";
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
  os << "model " << g.name() << ": " << g.inputs().size() << " inputs, " << g.numNodes()
     << " ops, " << paramCount << " parameters (" << paramBytes << " bytes";
  if (frozen)
    os << ", " << frozen << " frozen";
  os << "), " << buffers << " buffer elements\n";
  os << "verified: ok\n";
  os << "opt level " << opts.optLevel
     << ": no mixed-precision passes exist yet; the graph is shown as imported\n";
  os << "use --emit ir or --emit yaml to print the graph\n";
}

} // namespace

int main(int argc, char **argv) {
  Options opts;
  CLI::App app{"ampc: mixed-precision model-rewriting compiler"};
  app.set_version_flag("--version", std::string("ampc ") + AMPC_VERSION);
  app.add_option("model", opts.model, "model file (.yaml)")->required();
  app.add_option("--opt-level,-O", opts.optLevel, "optimization level (Apex semantics)")
      ->check(CLI::IsMember({"O0", "O1", "O2", "O3"}));
  app.add_option("--emit", opts.emit, "print the graph as textual IR or YAML")
      ->check(CLI::IsMember({"ir", "yaml"}));
  app.add_option("-o,--output", opts.output, "write the emitted graph to FILE (atomically)");
  app.add_option("--batch", opts.batch, "override the model's batch size")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-elements", opts.maxElements,
                 "largest element count allowed for one tensor")
      ->check(CLI::PositiveNumber);
  app.add_flag("--verify-each", opts.verifyEach, "verify the graph after every pass");
  app.add_option("--print-after", opts.printAfter, "print the IR after these passes (or all)");
  app.add_flag("--time-passes", opts.timePasses, "print each pass's time");
  app.add_option("--run", opts.run, "run the model: forward = one batch through forward + loss")
      ->check(CLI::IsMember({"forward"}));
  app.add_option("--device", opts.device, "where to run: auto, cpu, cpu-ref, cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cpu-ref", "cuda"}));

  // `ampc plan MODEL` is the plan command; everything else is the main one.
  std::vector<char *> args(argv, argv + argc);
  if (argc > 1 && std::string(argv[1]) == "plan") {
    opts.planOnly = true;
    args.erase(args.begin() + 1);
    app.name("ampc plan");
    app.description("print the memory plan of a model: peak bytes by what they hold");
  }
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? kSuccess : kBadInput;
  }

  DiagnosticEngine diag;
  LoadOptions load;
  load.maxElements = opts.maxElements;
  if (opts.batch > 0)
    load.batchOverride = opts.batch;
  std::unique_ptr<Graph> graph = loadModelFile(opts.model, diag, load);
  auto flushDiagnostics = [&] { diag.print(llvm::errs()); };
  if (!graph || !verifyGraph(*graph, diag)) {
    flushDiagnostics();
    return kBadInput;
  }

  PassManager pm;
  pm.setVerifyEach(opts.verifyEach);
  pm.setTimePasses(opts.timePasses);
  if (!opts.printAfter.empty())
    pm.setPrintAfter({opts.printAfter});
  if (!pm.run(*graph, diag)) {
    flushDiagnostics();
    return kBadInput;
  }
  flushDiagnostics(); // warnings, if any
  diag.clear();

  if (opts.planOnly)
    return runPlan(*graph, opts, diag);
  if (opts.run == "forward")
    return runForward(*graph, opts, diag);

  if (opts.emit.empty()) {
    if (!opts.output.empty()) {
      llvm::errs() << "error: -o needs --emit ir or --emit yaml\n";
      return kBadInput;
    }
    printSummary(*graph, opts, llvm::outs());
    return kSuccess;
  }
  std::string text = opts.emit == "ir" ? printGraphToString(*graph) : emitGraphYaml(*graph);
  if (opts.output.empty() || opts.output == "-") {
    llvm::outs() << text;
    return kSuccess;
  }
  std::string err;
  if (!writeFileAtomically(opts.output, text, err)) {
    llvm::errs() << "error: " << err << "\n";
    return kRuntimeFailure;
  }
  return kSuccess;
}
