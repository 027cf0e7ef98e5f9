//===- NpyData.cpp - One .npy file per graph input ---------------------------===//
//
// train.data.<input name> names a file of shape [N, sample dims...] for each
// input. The per-sample element count must match the input (the sample dims
// themselves may differ: [N, 784] feeds [B, 1, 28, 28]). Values convert to
// the input's dtype; u8 stays 0..255 (only IDX images are scaled to [0, 1]).
// An optional input (createDataSource) may have no file.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/DataInternal.h"

#include "ir/Graph.h"
#include "ir/support/NpyFile.h"

#include "llvm/ADT/Twine.h"

namespace ampc::data {

/// NpyFile's messages start with "path: "; the data source's say
/// "data file 'path': ", so keep only the problem.
static std::string npyProblem(llvm::StringRef path, llvm::StringRef msg) {
  std::string prefix = path.str() + ": ";
  return msg.startswith(prefix) ? msg.drop_front(prefix.size()).str() : msg.str();
}

std::unique_ptr<DataSource> createNpySource(const Graph &g, llvm::ArrayRef<InputInfo> inputs,
                                            llvm::StringRef modelDir, llvm::StringRef key,
                                            std::string &err) {
  // A missing key is a model-file problem: report it before reading any file.
  // An optional input may have none (its rows stay zero).
  for (const InputInfo &in : inputs)
    if (!g.meta().count(key.str() + "." + in.name().str()) && !in.optional) {
      err = "npy data has no file for input '" + in.name().str() + "'";
      return nullptr;
    }
  std::vector<SampleArray> arrays;
  for (const InputInfo &in : inputs) {
    std::string metaKey = key.str() + "." + in.name().str();
    SampleArray a;
    if (!g.meta().count(metaKey)) {
      a.absent = true;
      arrays.push_back(std::move(a));
      continue;
    }
    a.path = resolvePath(modelDir, metaString(g, metaKey, ""));
    NpyArray npy;
    std::string readErr;
    if (!readNpy(a.path, npy, readErr)) {
      err = fileError(a.path, npyProblem(a.path, readErr));
      return nullptr;
    }
    if (npy.shape.empty()) {
      err = fileError(a.path,
                      "holds a scalar; expected an array [N, ...] of samples for " + in.describe());
      return nullptr;
    }
    a.dtype = npy.dtype;
    a.isUint8 = npy.isUint8;
    a.numSamples = npy.shape[0];
    a.sampleElements = 1;
    for (int64_t d : llvm::ArrayRef<int64_t>(npy.shape).drop_front())
      a.sampleElements *= d;
    a.bytes = std::move(npy.data);
    arrays.push_back(std::move(a));
  }
  return createArraySource("npy", inputs, std::move(arrays), err, nonFiniteDataPolicy(g));
}

} // namespace ampc::data
