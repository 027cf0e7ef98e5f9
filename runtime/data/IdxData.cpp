//===- IdxData.cpp - IDX files (the MNIST format) ----------------------------===//
//
// An IDX file: a big-endian magic (two zero bytes, an element type code,
// the rank), one big-endian u32 per dimension, then the elements. Images are
// unsigned bytes [N, rows, cols] (magic 0x00000803), scaled to [0, 1] and fed
// to the first floating input; labels are unsigned bytes [N] (0x00000801),
// fed to the first integer input.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/DataInternal.h"

#include "ir/Graph.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

namespace ampc::data {
namespace {

uint32_t readBigEndian32(const unsigned char *p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string hex32(uint32_t v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format_hex(v, 10);
  return os.str();
}

/// Reads an unsigned-byte IDX file of the given rank into `out`.
bool readIdx(const std::string &path, unsigned rank, const char *what, SampleArray &out,
             std::string &err) {
  auto buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) {
    err = fileError(path, "cannot open: " + buffer.getError().message());
    return false;
  }
  llvm::StringRef bytes = (*buffer)->getBuffer();
  auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
  uint32_t expectedMagic = 0x800u | rank;
  if (bytes.size() >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
    err = fileError(path, "is gzip-compressed; decompress it first (gunzip)");
    return false;
  }
  if (bytes.size() < 4) {
    err = fileError(path, "truncated: " + llvm::Twine(bytes.size()) +
                              " bytes, too short for an IDX magic number");
    return false;
  }
  uint32_t magic = readBigEndian32(p);
  if (magic != expectedMagic) {
    err = fileError(path, "wrong magic " + hex32(magic) + "; expected " + hex32(expectedMagic) +
                              " (IDX unsigned-byte " + what + ")");
    return false;
  }
  uint64_t headerBytes = 4 + 4 * uint64_t(rank);
  if (bytes.size() < headerBytes) {
    err = fileError(path, "truncated: " + llvm::Twine(bytes.size()) + " bytes, shorter than its " +
                              llvm::Twine(headerBytes) + "-byte header");
    return false;
  }
  // No file is 2^40 bytes: stop before a product of dims could overflow.
  // The bound is on the nonzero dims, because [0, 2^32-1, 2^32-1] holds no
  // data yet its per-sample count, (2^32-1)^2, overflows int64.
  uint64_t elements = 1, nonzero = 1;
  llvm::SmallVector<uint32_t, 3> dims;
  for (unsigned i = 0; i < rank; ++i) {
    uint32_t d = readBigEndian32(p + 4 + 4 * i);
    dims.push_back(d);
    if (d != 0 && nonzero > (uint64_t(1) << 40) / d) {
      err = fileError(path, "implausible dimensions in the header");
      return false;
    }
    nonzero *= d == 0 ? 1 : d;
    elements *= d;
  }
  uint64_t expectedSize = headerBytes + elements;
  if (bytes.size() != expectedSize) {
    err = fileError(path, (bytes.size() < expectedSize ? "truncated: " : "size mismatch: ") +
                              llvm::Twine("the header announces ") + llvm::Twine(elements) +
                              " bytes of data (file size " + llvm::Twine(expectedSize) +
                              "), found a file of " + llvm::Twine(bytes.size()) + " bytes");
    return false;
  }
  out.path = path;
  out.isUint8 = true;
  out.dtype = DType::Bool;
  out.numSamples = dims[0];
  out.sampleElements = 1;
  for (uint32_t d : llvm::ArrayRef<uint32_t>(dims).drop_front())
    out.sampleElements *= d;
  out.bytes.assign(bytes.begin() + headerBytes, bytes.end());
  return true;
}

} // namespace

std::unique_ptr<DataSource> createIdxSource(const Graph &g, llvm::ArrayRef<InputInfo> inputs,
                                            llvm::StringRef modelDir, llvm::StringRef key,
                                            std::string &err) {
  int imageInput = -1, labelInput = -1;
  for (const InputInfo &in : inputs) {
    if (in.isFloating() && imageInput < 0)
      imageInput = in.index;
    else if (!in.isFloating() && labelInput < 0)
      labelInput = in.index;
    else {
      err = "idx data feeds one floating image input and one integer label input; " +
            in.describe() + " would get no data";
      return nullptr;
    }
  }
  if (imageInput < 0 || labelInput < 0) {
    err = "idx data needs a floating image input and an integer label input";
    return nullptr;
  }
  std::vector<SampleArray> arrays(inputs.size());
  SampleArray &images = arrays[imageInput], &labels = arrays[labelInput];
  // Labels an optional label input may do without (predicting).
  std::string labelsKey = (key + ".labels").str();
  labels.absent = inputs[labelInput].optional && !g.meta().count(labelsKey);
  if (!readIdx(resolvePath(modelDir, metaString(g, (key + ".images").str(), "")), 3, "images",
               images, err) ||
      (!labels.absent &&
       !readIdx(resolvePath(modelDir, metaString(g, labelsKey, "")), 1, "labels", labels, err)))
    return nullptr;
  images.scale = 1.0 / 255.0;
  return createArraySource("idx", inputs, std::move(arrays), err, nonFiniteDataPolicy(g));
}

} // namespace ampc::data
