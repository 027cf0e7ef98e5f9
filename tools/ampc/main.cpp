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

#include "CLI/CLI.hpp"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

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
};

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

  try {
    app.parse(argc, argv);
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
