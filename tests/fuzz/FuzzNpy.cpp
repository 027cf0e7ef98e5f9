//===- FuzzNpy.cpp - The .npy reader and the npy data source ---------------===//
//
// The input holds two .npy files (FuzzUtil.h, splitTwoFiles), x and y, read
// by kNpyModel (features and labels) and kNpyEmbeddingModel (token indices
// and labels). The first is also read alone, header only and
// whole, as init.from reads parameter files.
//
//===----------------------------------------------------------------------===//
#include "FuzzModels.h"
#include "FuzzUtil.h"

#include "ir/support/NpyFile.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<ampc::Graph> features = ampc::fuzz::loadFixedModel(ampc::fuzz::kNpyModel);
  static std::unique_ptr<ampc::Graph> tokens =
      ampc::fuzz::loadFixedModel(ampc::fuzz::kNpyEmbeddingModel);
  auto [x, y] = ampc::fuzz::splitTwoFiles(data, size);
  std::string xPath = ampc::fuzz::writeScratchFile("x.npy", x);
  ampc::fuzz::writeScratchFile("y.npy", y);
  ampc::NpyArray array;
  std::string err;
  ampc::readNpyHeader(xPath, array, err);
  ampc::readNpy(xPath, array, err);
  ampc::fuzz::exerciseDataSource(*features);
  ampc::fuzz::exerciseDataSource(*tokens);
  return 0;
}
