//===- FuzzYamlModel.cpp - The model-file frontend on arbitrary bytes ------===//
//
// Any input must give a graph or diagnostics, never a crash, leak or hang.
// Small limits keep the fuzzer on malformed files rather than on huge legal
// ones (a 1e9-element tensor is not a bug, only slow).
//
//===----------------------------------------------------------------------===//
#include "FuzzUtil.h"
#include "frontends/yaml/ModelLoader.h"

#include "ir/Diagnostics.h"
#include "ir/Printer.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ampc::LoadOptions opts;
  opts.maxElements = int64_t(1) << 20;
  opts.maxNodes = 10000;
  opts.maxYamlNodes = 100000;
  opts.maxNesting = 50;
  ampc::DiagnosticEngine diag;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  // init.from folders resolve against a directory that holds no model's
  // parameters, so a load never reads files the fuzzer did not write.
  std::unique_ptr<ampc::Graph> g =
      ampc::loadModelString(text, "fuzz.yaml", diag, opts, "/nonexistent-ampc-fuzz");
  if (!g) {
    if (!diag.diagnostics().empty())
      ampc::fuzz::verbose(diag.diagnostics().front().str());
    return 0;
  }
  // The loader has verified the graph; printing it walks every attribute
  // and type the file could produce.
  (void)ampc::printGraphToString(*g);
  return 0;
}
