//===- FuzzUtil.cpp ---------------------------------------------------------===//
#include "FuzzUtil.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/Diagnostics.h"
#include "runtime/data/DataSource.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ampc::fuzz {

namespace {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    llvm::SmallString<128> p;
    if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("ampc-fuzz", p)) {
      llvm::errs() << "fuzz harness: cannot create a scratch directory: " << ec.message() << "\n";
      std::abort();
    }
    path = std::string(p);
  }
  ~ScratchDir() { llvm::sys::fs::remove_directories(path); }
};

} // namespace

const std::string &scratchDir() {
  static ScratchDir dir;
  return dir.path;
}

std::string writeScratchFile(llvm::StringRef name, llvm::StringRef data) {
  llvm::SmallString<128> path(scratchDir());
  llvm::sys::path::append(path, name);
  std::FILE *f = std::fopen(path.c_str(), "wb");
  bool ok = f && (data.empty() || std::fwrite(data.data(), 1, data.size(), f) == data.size());
  if (!f || std::fclose(f) != 0 || !ok) {
    llvm::errs() << "fuzz harness: cannot write " << path << "\n";
    std::abort();
  }
  return std::string(path);
}

std::unique_ptr<Graph> loadFixedModel(llvm::StringRef yaml) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelString(yaml, "<fuzz model>", diag, {}, scratchDir());
  if (!g) {
    diag.print(llvm::errs());
    std::abort();
  }
  return g;
}

std::pair<llvm::StringRef, llvm::StringRef> splitTwoFiles(const uint8_t *data, size_t size) {
  llvm::StringRef all(reinterpret_cast<const char *>(data), size);
  if (size < 4)
    return {all, llvm::StringRef()};
  uint32_t first = 0;
  std::memcpy(&first, data, 4);
  all = all.drop_front(4);
  size_t n = std::min<size_t>(first, all.size());
  return {all.take_front(n), all.drop_front(n)};
}

void verbose(const llvm::Twine &msg) {
  static const bool on = std::getenv("AMPC_FUZZ_VERBOSE") != nullptr;
  if (on)
    llvm::errs() << "  " << msg << "\n";
}

void exerciseDataSource(const Graph &g) {
  DiagnosticEngine diag;
  std::unique_ptr<DataSource> source = createDataSource(g, scratchDir(), diag);
  if (!source) {
    if (!diag.diagnostics().empty())
      verbose(diag.diagnostics().front().str());
    return;
  }
  llvm::SmallVector<HostTensor, 4> batch = makeBatchTensors(g);
  std::string err;
  // Every sample once (the inputs are small, so this bound is never the
  // corpus's limit), then batches across an epoch boundary.
  int64_t n = std::min<int64_t>(source->numSamples(), 4096);
  for (int64_t i = 0; i < n; ++i)
    if (!source->loadSample(i, batch, /*row=*/0, err))
      return verbose(err);
  BatchOptions opts = batchOptionsFromMeta(g);
  Batcher batcher(*source, opts);
  int64_t rows = 0;
  for (int i = 0; i < 4; ++i)
    if (!batcher.next(batch, rows, err))
      return verbose(err);
  verbose("read " + llvm::Twine(source->numSamples()) + " samples");
}

} // namespace ampc::fuzz
