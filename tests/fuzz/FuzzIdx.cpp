//===- FuzzIdx.cpp - The IDX (MNIST) data reader on arbitrary bytes --------===//
//
// The input holds two IDX files (FuzzUtil.h, splitTwoFiles): kIdxModel's
// images and labels.
//
//===----------------------------------------------------------------------===//
#include "FuzzModels.h"
#include "FuzzUtil.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<ampc::Graph> g = ampc::fuzz::loadFixedModel(ampc::fuzz::kIdxModel);
  auto [images, labels] = ampc::fuzz::splitTwoFiles(data, size);
  ampc::fuzz::writeScratchFile("images.idx", images);
  ampc::fuzz::writeScratchFile("labels.idx", labels);
  ampc::fuzz::exerciseDataSource(*g);
  return 0;
}
