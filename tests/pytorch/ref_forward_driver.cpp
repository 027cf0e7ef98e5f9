//===- ref_forward_driver.cpp - Run one graph on the reference backend -----===//
//
// ampc-ref-forward-driver MODEL.ir OUT_DIR [STEP]
//
// A test-only tool for tests/pytorch/compare_forward.py: parses textual IR,
// verifies it, compiles it on the reference backend (state files named by
// `init file("...")` are resolved against the IR file's folder), fills every
// graph input from <IR folder>/<input name>.npy, runs one step (number STEP,
// default 0, which seeds dropout) and writes every graph output to
// OUT_DIR/<output name>.npy. Exit codes as ampc's: 2 bad input, 1 failure.
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "ir/support/NpyFile.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace ampc;

namespace {

enum ExitCode { kSuccess = 0, kRuntimeFailure = 1, kBadInput = 2 };

std::string joinPath(llvm::StringRef dir, llvm::StringRef file) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, file);
  return std::string(path);
}

/// Copies <dir>/<name>.npy into the program's storage of graph input `v`.
bool loadInput(Program &program, const Value *v, llvm::StringRef dir) {
  std::string path = joinPath(dir, (v->name() + ".npy").str());
  NpyArray array;
  std::string err;
  if (!readNpy(path, array, err)) {
    llvm::errs() << "error: " << err << "\n";
    return false;
  }
  if (array.isUint8 || array.dtype != v->dtype() ||
      llvm::ArrayRef<int64_t>(array.shape) != v->type().dims()) {
    llvm::errs() << "error: '" << path << "' does not hold " << v->type().str() << "\n";
    return false;
  }
  std::memcpy(program.data(v), array.data.data(), v->type().sizeInBytes());
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    llvm::errs() << "usage: ampc-ref-forward-driver MODEL.ir OUT_DIR [STEP]\n";
    return kBadInput;
  }
  llvm::StringRef irPath = argv[1], outDir = argv[2];
  uint64_t step = 0;
  if (argc == 4 && !llvm::to_integer(argv[3], step)) {
    llvm::errs() << "error: STEP must be a non-negative integer, got '" << argv[3] << "'\n";
    return kBadInput;
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text = llvm::MemoryBuffer::getFile(irPath);
  if (!text) {
    llvm::errs() << "error: cannot open '" << irPath << "': " << text.getError().message() << "\n";
    return kBadInput;
  }
  DiagnosticEngine diag;
  std::unique_ptr<Graph> graph = parseGraph((*text)->getBuffer(), irPath, diag);
  if (!graph || !verifyGraph(*graph, diag)) {
    diag.print(llvm::errs());
    return kBadInput;
  }

  llvm::StringRef dir = llvm::sys::path::parent_path(irPath);
  CompileOptions options;
  options.baseDir = dir.empty() ? "." : dir.str();
  std::unique_ptr<Backend> backend = createCpuRefBackend();
  std::unique_ptr<Program> program = Program::compile(*graph, *backend, diag, options);
  if (!program) {
    diag.print(llvm::errs());
    return kBadInput;
  }
  for (const Value *v : graph->inputs())
    if (!loadInput(*program, v, options.baseDir))
      return kBadInput;

  program->run(step);
  if (!program->measure().guardsIntact) {
    llvm::errs() << "error: a kernel wrote past the end of an arena\n";
    return kRuntimeFailure;
  }
  for (const Value *v : graph->outputs()) {
    std::string err;
    if (!writeNpy(joinPath(outDir, (v->name() + ".npy").str()), v->dtype(), v->type().dims(),
                  program->data(v), err)) {
      llvm::errs() << "error: " << err << "\n";
      return kRuntimeFailure;
    }
  }
  return kSuccess;
}
