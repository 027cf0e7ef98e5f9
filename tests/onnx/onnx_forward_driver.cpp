//===- onnx_forward_driver.cpp - Run an imported ONNX model on given inputs ===//
//
// ampc-onnx-forward-driver MODEL.onnx IN_DIR OUT_DIR [--opt-level O0..O3]
//                          [--device cpu|cpu-ref] [--half-type f16|bf16] [--emit]
//                          [--batch N] [--fix-input NAME=FILE.npy]...
// ampc-onnx-forward-driver --list-onnx-ops
//
// A test-only tool for tests/onnx/check_onnx.py: imports MODEL.onnx with the
// ONNX frontend, runs the forward pipeline at the given opt level (O0 by
// default, half type f16), compiles it on the device (cpu by default), fills every graph
// input from IN_DIR/<input name>.npy, runs one step and writes graph output
// i to OUT_DIR/out<i>.npy (as f32). --emit prints the rewritten graph's
// textual IR to stdout. --batch N binds a symbolic (or any) first input
// dim to N, as `ampc --batch N model.onnx` does (an exported model run at
// another batch). --fix-input NAME=FILE holds graph input NAME constant at
// import, as `ampc --fix-input` does. Exit codes as ampc's: 2 bad input, 1 failure.
// --list-onnx-ops prints the ONNX op types the frontend's table maps, one a
// line (tests/onnx/check_conformance.py picks the node tests to run by it).
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxImporter.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "ir/support/NpyFile.h"
#include "kernels/common/Storage.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <string>
#include <vector>

using namespace ampc;

namespace {

enum ExitCode { kSuccess = 0, kRuntimeFailure = 1, kBadInput = 2 };

std::string joinPath(llvm::StringRef dir, llvm::StringRef file) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, file);
  return std::string(path);
}

/// Copies <dir>/<name>.npy into the program's storage of input `v`,
/// converting to its dtype.
bool loadInput(Program &program, const Value *v, llvm::StringRef dir) {
  std::string path = joinPath(dir, (v->name() + ".npy").str());
  NpyArray array;
  std::string err;
  if (!readNpy(path, array, err)) {
    llvm::errs() << "error: " << err << "\n";
    return false;
  }
  if (array.isUint8 || llvm::ArrayRef<int64_t>(array.shape) != v->type().dims()) {
    llvm::errs() << "error: '" << path << "' does not hold " << v->type().str() << "\n";
    return false;
  }
  void *dst = program.data(v);
  for (int64_t i = 0; i < array.numElements(); ++i)
    kernels::storeFromDouble(v->dtype(), dst, i,
                             kernels::loadAsDouble(array.dtype, array.data.data(), i));
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && llvm::StringRef(argv[1]) == "--list-onnx-ops") {
    for (const std::string &type : supportedOnnxOpTypes())
      llvm::outs() << type << "\n";
    return kSuccess;
  }
  if (argc < 4) {
    llvm::errs() << "usage: ampc-onnx-forward-driver MODEL.onnx IN_DIR OUT_DIR [--opt-level O1] "
                    "[--device cpu|cpu-ref] [--emit] [--batch N] [--fix-input NAME=FILE]\n"
                    "       ampc-onnx-forward-driver --list-onnx-ops\n";
    return kBadInput;
  }
  std::string modelPath = argv[1], inDir = argv[2], outDir = argv[3];
  std::string optLevel = "O0", device = "cpu", halfType = "f16";
  bool emit = false;
  int64_t batch = 0;
  LoadOptions load;
  for (int i = 4; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if (a == "--opt-level" && i + 1 < argc)
      optLevel = argv[++i];
    else if (a == "--half-type" && i + 1 < argc)
      halfType = argv[++i];
    else if (a == "--device" && i + 1 < argc)
      device = argv[++i];
    else if (a == "--emit")
      emit = true;
    else if (a == "--fix-input" && i + 1 < argc && llvm::StringRef(argv[i + 1]).contains('=')) {
      auto [name, file] = llvm::StringRef(argv[++i]).split('=');
      load.fixedInputs.emplace_back(name.str(), file.str());
    } else if (a == "--batch" && i + 1 < argc && llvm::to_integer(argv[i + 1], batch) &&
               batch > 0) {
      load.batchOverride = batch;
      ++i;
    } else {
      llvm::errs() << "error: unknown argument '" << a << "'\n";
      return kBadInput;
    }
  }
  DiagnosticEngine diag;
  std::unique_ptr<Graph> graph = loadOnnxModel(modelPath, diag, load);
  if (!graph || !setPolicyOverride(graph->meta(), "opt_level", optLevel, diag) ||
      !setPolicyOverride(graph->meta(), "half_type", halfType, diag) ||
      !resolvePolicy(graph->meta(), diag)) {
    diag.print(llvm::errs());
    return kBadInput;
  }
  std::string err;
  std::unique_ptr<Backend> backend = createBackend(device, err);
  if (!backend) {
    llvm::errs() << "error: " << err << "\n";
    return kBadInput;
  }
  PassManager pm;
  pm.setTarget(backend.get());
  if (!addStandardPipeline(pm, PipelineStage::Forward, diag) || !pm.run(*graph, diag) ||
      !verifyGraph(*graph, diag)) {
    diag.print(llvm::errs());
    return kBadInput;
  }
  if (emit)
    printGraph(*graph, llvm::outs());
  llvm::StringRef dir = llvm::sys::path::parent_path(modelPath);
  CompileOptions options;
  options.baseDir = dir.empty() ? "." : dir.str();
  std::unique_ptr<Program> program = Program::compile(*graph, *backend, diag, options);
  if (!program) {
    diag.print(llvm::errs());
    return kBadInput;
  }
  for (const Value *v : graph->inputs())
    if (!loadInput(*program, v, inDir))
      return kBadInput;
  program->run(0);
  if (!program->measure().guardsIntact) {
    llvm::errs() << "error: a kernel wrote past the end of an arena\n";
    return kRuntimeFailure;
  }
  for (size_t i = 0; i < graph->outputs().size(); ++i) {
    const Value *v = graph->outputs()[i];
    std::vector<float> values(v->type().numElements());
    const void *src = program->data(v);
    for (size_t k = 0; k < values.size(); ++k)
      values[k] = float(kernels::loadAsDouble(v->dtype(), src, int64_t(k)));
    if (!writeNpy(joinPath(outDir, "out" + std::to_string(i) + ".npy"), DType::F32,
                  v->type().dims(), values.data(), err)) {
      llvm::errs() << "error: " << err << "\n";
      return kRuntimeFailure;
    }
  }
  return kSuccess;
}
