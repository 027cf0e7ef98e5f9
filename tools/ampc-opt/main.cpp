//===- ampc-opt - Parse a graph, run named passes, print it ----------------===//
//
//   ampc-opt FILE [--passes=a,b] [--verify-each] [--print-after=NAME,...]
//            [--time-passes] [--no-locs] [-o FILE] [--version]
//
// FILE is textual IR (.ir, or - for stdin) or a model file (.yaml/.yml). The
// graph is verified after loading, the passes run in order, and the result is
// printed as textual IR. This is the tool the golden tests (tests/lit) drive.
//
// Exit codes: 0 success; 2 bad usage or bad input (parse or verifier errors,
// unknown pass, a pass that rejects the input); 1 an internal failure (a pass
// left an invalid graph, the output could not be written).
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/ModelLoader.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "ir/support/AtomicFile.h"
#include "passes/PassManager.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <CLI/CLI.hpp>

#include <exception>
#include <set>
#include <string>
#include <vector>

using namespace ampc;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;

struct Options {
  std::string input;
  std::string passes;
  bool verifyEach = false;
  std::vector<std::string> printAfter;
  bool timePasses = false;
  bool noLocs = false;
  std::string output;
  bool writeThrough = false;
};

SpecialOutputs specialOutputs(const Options &opts) {
  return opts.writeThrough ? SpecialOutputs::WriteThrough : SpecialOutputs::Refuse;
}

int reportAndExit(const DiagnosticEngine &diag, int code) {
  diag.print(llvm::errs());
  return code;
}

std::string knownPassList() {
  std::string list;
  for (const std::string &name : registeredPassNames())
    list += (list.empty() ? "" : ", ") + name;
  return list;
}

bool isModelFile(llvm::StringRef path) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  return ext == ".yaml" || ext == ".yml";
}

std::unique_ptr<Graph> loadInput(llvm::StringRef path, DiagnosticEngine &diag) {
  if (path != "-" && isModelFile(path))
    return loadModelFile(path, diag);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (std::error_code ec = buffer.getError()) {
    diag.error(Location(), "cannot read '" + path + "': " + ec.message());
    return nullptr;
  }
  return parseGraph((*buffer)->getBuffer(), path == "-" ? "<stdin>" : path, diag);
}

int run(const Options &opts) {
  DiagnosticEngine diag;

  // An output that cannot be written is reported before any work.
  if (!opts.output.empty() && opts.output != "-") {
    std::string err;
    if (!checkOutputPath(opts.output, err, specialOutputs(opts))) {
      llvm::errs() << "error: " << err << "\n";
      return kExitBadInput;
    }
  }

  // Check the pass names before doing any work, so that a typo is reported
  // even when the input is broken too.
  PassManager pm;
  llvm::SmallVector<llvm::StringRef, 8> passNames;
  llvm::StringRef(opts.passes).split(passNames, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef name : passNames) {
    name = name.trim();
    if (std::unique_ptr<Pass> pass = createPass(name))
      pm.add(std::move(pass));
    else
      diag.error(Location(), "unknown pass '" + name + "' (known passes: " + knownPassList() + ")");
  }
  std::set<std::string> printAfter;
  for (const std::string &name : opts.printAfter) {
    if (name != "all" && !createPass(name))
      diag.error(Location(), "--print-after names an unknown pass '" + name +
                                 "' (known passes: " + knownPassList() + ", or all)");
    printAfter.insert(name);
  }
  if (diag.hasErrors())
    return reportAndExit(diag, kExitBadInput);

  std::unique_ptr<Graph> graph = loadInput(opts.input, diag);
  if (!graph || diag.hasErrors())
    return reportAndExit(diag, kExitBadInput);
  if (!verifyGraph(*graph, diag))
    return reportAndExit(diag, kExitBadInput);

  if (pm.size() > 0) {
    pm.setVerifyEach(opts.verifyEach);
    pm.setPrintAfter(std::move(printAfter));
    pm.setTimePasses(opts.timePasses);
    if (!pm.run(*graph, diag)) {
      // A pass that rejects its input leaves a valid graph behind; an invalid
      // graph after a pass is a bug in that pass.
      DiagnosticEngine scratch;
      return reportAndExit(diag, verifyGraph(*graph, scratch) ? kExitBadInput : kExitInternal);
    }
    if (!opts.verifyEach && !verifyGraph(*graph, diag)) {
      diag.error(Location(), "the graph is invalid after the passes");
      return reportAndExit(diag, kExitInternal);
    }
  }
  // Warnings are worth seeing even on success.
  diag.print(llvm::errs());

  PrintOptions printOpts;
  printOpts.locations = !opts.noLocs;
  if (opts.output.empty() || opts.output == "-") {
    printGraph(*graph, llvm::outs(), printOpts);
    llvm::outs().flush();
    return kExitOk;
  }
  std::string err;
  if (!writeFileAtomically(opts.output, printGraphToString(*graph, printOpts), err,
                           specialOutputs(opts))) {
    llvm::errs() << "error: " << err << "\n";
    return kExitInternal;
  }
  return kExitOk;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"ampc-opt: parse textual IR or a model file, run named passes, print the IR"};
  Options opts;
  app.add_option("FILE", opts.input, "textual IR (.ir, or - for stdin) or a model file (.yaml)")
      ->required();
  app.add_option("--passes", opts.passes,
                 "comma-separated passes to run in order (known: " + knownPassList() + ")");
  app.add_flag("--verify-each", opts.verifyEach, "run the verifier after every pass");
  app.add_option("--print-after", opts.printAfter,
                 "print the IR to stderr after the named passes (comma-separated, or all)")
      ->delimiter(',');
  app.add_flag("--time-passes", opts.timePasses, "print each pass's wall time to stderr");
  app.add_flag("--no-locs", opts.noLocs, "print without loc(...) annotations");
  app.add_option("-o", opts.output, "write the IR to this file (atomically) instead of stdout");
  app.add_flag("--write-through", opts.writeThrough,
               "let -o follow a symlink to its target or write into a device or FIFO (refused "
               "by default)");
  app.set_version_flag("--version", "ampc-opt version " AMPC_VERSION);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }

  try {
    return run(opts);
  } catch (const std::exception &e) {
    // Nothing in ampc throws across an API; this catches allocation failures
    // and library bugs so the user sees a message rather than an abort.
    llvm::errs() << "error: internal failure: " << e.what() << "\n";
    return kExitInternal;
  }
}
