//===- MakeSeeds.cpp - Writes the binary seed inputs of the fuzz targets ---===//
//
//   ampc-fuzz-seeds OUTDIR
//
// Writes valid checkpoint, .npy, IDX and CSV inputs for the targets' fixed
// models (FuzzModels.h) with the project's own writers, into
// OUTDIR/{checkpoint,npy,idx,csv}/. tests/fuzz/make-corpus.sh runs it; the
// results are committed under tests/fuzz/corpus/, so rerun it only when a
// format or a fixed model changes.
//
//===----------------------------------------------------------------------===//
#include "FuzzModels.h"
#include "FuzzUtil.h"

#include "ir/Diagnostics.h"
#include "ir/support/NpyFile.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"
#include "runtime/train/Checkpoint.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace ampc;

namespace {

std::string outDir;

[[noreturn]] void die(const std::string &msg) {
  llvm::errs() << "ampc-fuzz-seeds: " << msg << "\n";
  std::exit(1);
}

void put(llvm::StringRef sub, llvm::StringRef name, llvm::StringRef bytes) {
  llvm::SmallString<128> path(outDir);
  llvm::sys::path::append(path, sub);
  if (std::error_code ec = llvm::sys::fs::create_directories(path))
    die(std::string(path) + ": " + ec.message());
  llvm::sys::path::append(path, name);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    die(std::string(path) + ": " + ec.message());
  os << bytes;
}

std::string slurp(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    die(path + ": " + buf.getError().message());
  return (*buf)->getBuffer().str();
}

/// Two files in the targets' two-file form (FuzzUtil.h, splitTwoFiles).
std::string twoFiles(const std::string &first, const std::string &second) {
  uint32_t n = first.size();
  std::string s(reinterpret_cast<const char *>(&n), sizeof n);
  return s + first + second;
}

template <class T> std::string npy(DType dtype, std::vector<int64_t> shape, std::vector<T> values) {
  std::string path = fuzz::scratchDir() + "/seed.npy", err;
  if (!writeNpy(path, dtype, shape, values.data(), err))
    die(err);
  return slurp(path);
}

std::string npyU8(std::vector<int64_t> shape, std::vector<uint8_t> values) {
  std::string path = fuzz::scratchDir() + "/seed.npy", err;
  if (!writeNpyUint8(path, shape, values.data(), err))
    die(err);
  return slurp(path);
}

/// A big-endian unsigned-byte IDX file.
std::string idx(std::vector<uint32_t> dims, const std::vector<uint8_t> &values) {
  std::string s = {0, 0, 8, char(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      s += char((d >> shift) & 0xff);
  return s + std::string(values.begin(), values.end());
}

void writeCheckpoints() {
  std::unique_ptr<Graph> g = fuzz::loadFixedModel(fuzz::kCheckpointModel);
  std::unique_ptr<Backend> backend = createCpuRefBackend();
  DiagnosticEngine diag;
  std::unique_ptr<Program> program = Program::compile(*g, *backend, diag);
  if (!program) {
    diag.print(llvm::errs());
    die("cannot compile the checkpoint model");
  }
  CheckpointInfo info;
  info.model = g->name();
  info.modelHash = modelHash(*g);
  info.optLevel = "O0";
  for (uint64_t step : {0, 3}) {
    info.step = info.microStep = step;
    std::string path = fuzz::scratchDir() + "/seed.ckpt", err;
    if (!saveCheckpoint(path, *program, info, err))
      die(err);
    put("checkpoint", "step" + std::to_string(step) + ".ckpt", slurp(path));
  }
}

void writeNpySeeds() {
  put("npy", "f32-i64.bin",
      twoFiles(npy<float>(DType::F32, {2, 3}, {0.5f, -1, 2, 3, 4.25f, -5}),
               npy<int64_t>(DType::I64, {2}, {1, 3})));
  put("npy", "f64-i32.bin",
      twoFiles(npy<double>(DType::F64, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
               npy<int32_t>(DType::I32, {3}, {0, 2, 1})));
  // f16 bits of 1.0, -2.0, 0.5 and so on; u8 labels.
  put("npy", "f16-u8.bin",
      twoFiles(npy<uint16_t>(DType::F16, {1, 3}, {0x3c00, 0xc000, 0x3800}), npyU8({1}, {2})));
  // Token indices for the embedding model (8 rows).
  put("npy", "i32-i64.bin",
      twoFiles(npy<int32_t>(DType::I32, {2, 3}, {0, 7, 3, 1, 6, 2}),
               npy<int64_t>(DType::I64, {2}, {0, 3})));
  put("npy", "u8-bool-scalar.bin",
      twoFiles(npyU8({2, 1, 3}, {0, 1, 2, 253, 254, 255}), npy<uint8_t>(DType::Bool, {}, {1})));
}

void writeIdxSeeds() {
  std::vector<uint8_t> pixels(3 * 16);
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = uint8_t(i * 37);
  put("idx", "three.bin", twoFiles(idx({3, 4, 4}, pixels), idx({3}, {7, 0, 9})));
  put("idx", "empty.bin", twoFiles(idx({0, 4, 4}, {}), idx({0}, {})));
}

void writeCsvSeeds() {
  put("csv", "plain.csv", "0.5,1,2,0\n-1,2.5e3,3,3\n4,5,6,1\n");
  put("csv", "spaces-crlf.csv", " 1 , 2 ,3, 2\r\n\r\n4,5,6 , 1\r\n");
  put("csv", "one-row.csv", "1e-3,-0,7,3");
  // For the regression model: a header, the target first.
  put("csv", "header.csv", "target,a,b,c\n0.5,1,2,3\n-1,4,5,6\n1e2,7,8,9\n2,0,0,1\n");
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2)
    die("usage: ampc-fuzz-seeds OUTDIR");
  outDir = argv[1];
  writeCheckpoints();
  writeNpySeeds();
  writeIdxSeeds();
  writeCsvSeeds();
  return 0;
}
