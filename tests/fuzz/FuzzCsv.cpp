//===- FuzzCsv.cpp - The CSV data reader on arbitrary bytes ----------------===//
//
// The input is a CSV file, read as kCsvModel's (3 features and an integer
// label a row) and as kCsvRegressionModel's (a header, then the target and 3
// features); when a source accepts it, every sample is loaded.
//
//===----------------------------------------------------------------------===//
#include "FuzzModels.h"
#include "FuzzUtil.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<ampc::Graph> classifier =
      ampc::fuzz::loadFixedModel(ampc::fuzz::kCsvModel);
  static std::unique_ptr<ampc::Graph> regression =
      ampc::fuzz::loadFixedModel(ampc::fuzz::kCsvRegressionModel);
  ampc::fuzz::writeScratchFile("data.csv",
                               llvm::StringRef(reinterpret_cast<const char *>(data), size));
  ampc::fuzz::exerciseDataSource(*classifier);
  ampc::fuzz::exerciseDataSource(*regression);
  return 0;
}
