//===- data_driver.cpp - Dump a model's data samples for the Python checks ===//
//
// ampc-data-driver MODEL.yaml EPOCH COUNT OUTDIR [KEY]
//   loads the model file, opens its data source (KEY: train.data), and
//   writes samples 0..COUNT-1 (all of them when COUNT is 0) as drawn in EPOCH
//   (-1: the evaluation draw) to OUTDIR/<input>.npy, f32 or i64, plus
//   OUTDIR/names.txt (one sample name a line) and OUTDIR/info.txt
//   ("samples N"). Errors go to stderr, exit 2.
// ampc-data-driver --bench MODEL.yaml BATCHES
//   times BATCHES training batches made as the trainer makes a batch the
//   prefetcher has not (Batcher::next: rows on every OpenMP thread) and
//   prints "images/s X" (bench/data_pipeline.py).
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/ModelLoader.h"
#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/support/NpyFile.h"
#include "runtime/data/DataSource.h"

#include "llvm/Support/Path.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

using namespace ampc;

static int bench(const std::string &model, int64_t batches) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelFile(model, diag);
  std::unique_ptr<DataSource> source;
  if (g)
    source = createDataSource(*g, llvm::sys::path::parent_path(model), diag);
  if (!source) {
    for (const Diagnostic &d : diag.diagnostics())
      std::cerr << d.str() << "\n";
    return 2;
  }
  Batcher batcher(*source, batchOptionsFromMeta(*g));
  auto batch = makeBatchTensors(*g);
  std::string err;
  int64_t rows = 0, images = 0;
  if (!batcher.next(batch, rows, err)) { // warm-up: page cache, thread pool
    std::cerr << err << "\n";
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < batches; ++b) {
    if (!batcher.next(batch, rows, err)) {
      std::cerr << err << "\n";
      return 2;
    }
    images += rows;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "images/s " << double(images) / seconds << "\n";
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && std::string(argv[1]) == "--bench")
    return bench(argv[2], std::atoll(argv[3]));
  if (argc < 5) {
    std::cerr << "usage: ampc-data-driver MODEL.yaml EPOCH COUNT OUTDIR [KEY]\n";
    return 2;
  }
  std::string model = argv[1], outDir = argv[4], key = argc > 5 ? argv[5] : "train.data";
  int64_t epoch = std::atoll(argv[2]), count = std::atoll(argv[3]);
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelFile(model, diag);
  std::unique_ptr<DataSource> source;
  if (g)
    source = createDataSource(*g, llvm::sys::path::parent_path(model), diag, key);
  for (const Diagnostic &d : diag.diagnostics())
    std::cerr << d.str() << "\n";
  if (!source)
    return 2;
  int64_t n = count > 0 ? std::min(count, source->numSamples()) : source->numSamples();
  std::vector<HostTensor> rows;
  std::vector<std::vector<char>> all(g->inputs().size());
  for (const Value *v : g->inputs()) {
    llvm::SmallVector<int64_t, 4> dims(v->type().dims().begin(), v->type().dims().end());
    dims[0] = 1;
    rows.emplace_back(TensorType(v->dtype(), dims));
  }
  std::ofstream names(outDir + "/names.txt");
  for (int64_t i = 0; i < n; ++i) {
    std::string err;
    if (!source->loadDrawnSample(i, epoch, rows, 0, err)) {
      std::cerr << err << "\n";
      return 2;
    }
    for (size_t k = 0; k < rows.size(); ++k) {
      const char *p = static_cast<const char *>(std::as_const(rows[k]).data());
      all[k].insert(all[k].end(), p, p + rows[k].type().sizeInBytes());
    }
    names << source->sampleName(i) << "\n";
  }
  for (size_t k = 0; k < rows.size(); ++k) {
    const Value *v = g->inputs()[k];
    std::vector<int64_t> shape(v->type().dims().begin(), v->type().dims().end());
    shape[0] = n;
    std::string bytes, err;
    if (!encodeNpy(v->name().str(), v->dtype(), shape, all[k].data(), bytes, err)) {
      std::cerr << err << "\n";
      return 2;
    }
    std::ofstream(outDir + "/" + v->name().str() + ".npy", std::ios::binary) << bytes;
  }
  std::ofstream(outDir + "/info.txt")
      << "samples " << source->numSamples() << "\nskipped " << source->skippedSamples() << "\n";
  return 0;
}
