//===- FuzzOnnx.cpp - The ONNX frontend: protobuf, checker, lowering -------===//
//
// The input is an ONNX file. It is imported (protobuf parse, checker,
// version conversion, lowering through the op table with
// constant folding and pattern recognition) with small limits, and a graph
// that imports is compiled on the reference backend, which initialises every
// parameter from the file through the tensor reader (raw data, typed
// fields). Nothing may crash, hang or read out of bounds, whatever the bytes.
//
//===----------------------------------------------------------------------===//
#include "FuzzUtil.h"

#include "frontends/onnx/OnnxImporter.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = ampc::fuzz::writeScratchFile(
      "model.onnx", llvm::StringRef(reinterpret_cast<const char *>(data), size));
  ampc::DiagnosticEngine diag;
  ampc::LoadOptions load;
  load.maxElements = int64_t(1) << 20;
  load.maxNodes = 10000;
  std::unique_ptr<ampc::Graph> g = ampc::loadOnnxModel(path, diag, load);
  if (!g) {
    ampc::fuzz::verbose("rejected: " + (diag.diagnostics().empty()
                                            ? std::string("(no message)")
                                            : diag.diagnostics().front().str()));
    return 0;
  }
  static std::unique_ptr<ampc::Backend> backend = ampc::createCpuRefBackend();
  ampc::CompileOptions opts;
  opts.baseDir = ampc::fuzz::scratchDir();
  opts.maxPlannedBytes = uint64_t(64) << 20;
  std::unique_ptr<ampc::Program> program = ampc::Program::compile(*g, *backend, diag, opts);
  ampc::fuzz::verbose(program ? "imported and compiled" : "imported; compile refused");
  return 0;
}
