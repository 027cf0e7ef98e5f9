//===- StandaloneMain.cpp - Runs a fuzz target over files, once each -------===//
//
// The regression mode of the fuzz targets, for builds without libFuzzer
// (GCC, as CI builds): every argument is a file or a directory of files, and
// each file is handed to LLVMFuzzerTestOneInput once, in sorted order. A
// crash, a sanitizer report or an abort fails the run; the input that did it
// is printed first. With libFuzzer (AMPC_FUZZ=ON) this file is not linked.
//
//===----------------------------------------------------------------------===//
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
// Optional, as with libFuzzer.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

namespace {

bool collect(const std::string &arg, std::vector<std::string> &files) {
  if (!llvm::sys::fs::is_directory(arg)) {
    files.push_back(arg);
    return true;
  }
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(arg, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::sys::fs::is_regular_file(it->path()))
      files.push_back(it->path());
  if (ec)
    llvm::errs() << arg << ": " << ec.message() << "\n";
  return !ec;
}

} // namespace

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i)
    if (!collect(argv[i], files))
      return 1;
  if (files.empty()) {
    llvm::errs() << "usage: " << argv[0] << " FILE|DIR...  (runs each input once)\n";
    return 1;
  }
  std::sort(files.begin(), files.end());
  auto start = std::chrono::steady_clock::now();
  for (const std::string &file : files) {
    auto buf = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    if (!buf) {
      llvm::errs() << file << ": " << buf.getError().message() << "\n";
      return 1;
    }
    // Said before running, so the last line names the input that crashed.
    llvm::errs() << "running " << file << "\n";
    // A copy of exactly the input's size, so a read past its end is caught
    // under ASan as it is with libFuzzer.
    std::vector<uint8_t> bytes((*buf)->getBufferStart(), (*buf)->getBufferEnd());
    LLVMFuzzerTestOneInput(bytes.empty() ? nullptr : bytes.data(), bytes.size());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  llvm::outs() << "ran " << files.size() << " inputs in " << llvm::format("%.2f", secs) << " s\n";
  return 0;
}
