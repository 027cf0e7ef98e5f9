//===- TensorFile.cpp - Readers of named tensors, by file extension --------===//
#include "ir/support/TensorFile.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Path.h"

#include <mutex>

namespace ampc {

namespace {
struct Registry {
  std::mutex mutex;
  llvm::StringMap<TensorFileReader> readers;
};
Registry &registry() {
  static Registry r;
  return r;
}
} // namespace

void registerTensorFileReader(llvm::StringRef extension, TensorFileReader reader) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.readers[extension.lower()] = reader;
}

bool readNamedTensor(llvm::StringRef path, llvm::StringRef name, NpyArray &out, std::string &err) {
  std::string ext = llvm::sys::path::extension(path).ltrim('.').lower();
  TensorFileReader reader = nullptr;
  {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.readers.find(ext);
    if (it != r.readers.end())
      reader = it->second;
  }
  if (!reader) {
    err = "no reader for tensors in '." + ext + "' files (this build reads named tensors from: ";
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    bool first = true;
    for (const auto &e : r.readers) {
      err += (first ? "." : ", .") + e.getKey().str();
      first = false;
    }
    err += first ? "none)" : ")";
    return false;
  }
  return reader(path, name, out, err);
}

} // namespace ampc
