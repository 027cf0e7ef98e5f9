//===- FuzzTextualIR.cpp - The textual IR parser and verifier --------------===//
//
// ampc-opt parses, then verifies (the parser records result types as written
// and leaves type checks to the verifier), so both run on every input. A
// graph that verifies must print, and print -> parse -> print is the identity.
//
//===----------------------------------------------------------------------===//
#include "FuzzUtil.h"

#include "ir/Diagnostics.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ampc::DiagnosticEngine diag;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::unique_ptr<ampc::Graph> g = ampc::parseGraph(text, "fuzz.ir", diag);
  if (!g || !ampc::verifyGraph(*g, diag)) {
    if (!diag.diagnostics().empty())
      ampc::fuzz::verbose(diag.diagnostics().front().str());
    return 0;
  }
  std::string printed = ampc::printGraphToString(*g);
  ampc::DiagnosticEngine again;
  std::unique_ptr<ampc::Graph> g2 = ampc::parseGraph(printed, "printed.ir", again);
  if (!g2 || ampc::printGraphToString(*g2) != printed) {
    again.print(llvm::errs());
    llvm::errs() << "textual IR does not round-trip:\n" << printed;
    __builtin_trap();
  }
  return 0;
}
