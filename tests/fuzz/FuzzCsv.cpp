//===- FuzzCsv.cpp - The CSV data reader on arbitrary bytes ----------------===//
//
// The input is the CSV file of kCsvModel (3 features and an integer label a
// row); the source is created and, when it accepts the file, every sample
// is loaded.
//
//===----------------------------------------------------------------------===//
#include "FuzzModels.h"
#include "FuzzUtil.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<ampc::Graph> g = ampc::fuzz::loadFixedModel(ampc::fuzz::kCsvModel);
  ampc::fuzz::writeScratchFile("data.csv",
                               llvm::StringRef(reinterpret_cast<const char *>(data), size));
  ampc::fuzz::exerciseDataSource(*g);
  return 0;
}
