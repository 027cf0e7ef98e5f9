//===- image_driver.cpp - Decode or resize one image for the PIL check ------===//
//
// ampc-image-driver decode FILE OUT.raw
// ampc-image-driver resize FILE W H OUT.raw
// ampc-image-driver time FILE W H REPEATS
//
// A test-only tool for tests/data/check_images_vs_pil.py: decodes FILE
// (runtime/data/ImageDecode.h), optionally resizes it to W x H with PIL's
// bilinear filter (ImageResize.h), and writes the width and height as two
// little-endian int64 followed by the RGB bytes (HWC). `time` prints the mean
// decode and resize times over REPEATS runs. A file that does not decode:
// the message on stderr, exit code 2.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/ImageDecode.h"
#include "runtime/data/ImageResize.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

using namespace ampc::data;

namespace {

enum ExitCode { kSuccess = 0, kFailure = 1, kBadInput = 2 };

int usage() {
  std::fprintf(stderr, "usage: ampc-image-driver decode FILE OUT.raw\n"
                       "       ampc-image-driver resize FILE W H OUT.raw\n"
                       "       ampc-image-driver time FILE W H REPEATS\n");
  return kFailure;
}

bool parseSize(const char *text, int64_t &value) {
  return llvm::to_integer(llvm::StringRef(text), value, 10) && value > 0;
}

void putInt64(std::ofstream &out, int64_t value) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
  out.write(reinterpret_cast<const char *>(bytes), 8);
}

int writeRaw(const RgbImage &image, const char *path) {
  std::ofstream out(path, std::ios::binary);
  putInt64(out, image.width);
  putInt64(out, image.height);
  out.write(reinterpret_cast<const char *>(image.pixels.data()),
            static_cast<std::streamsize>(image.pixels.size()));
  if (!out) {
    std::fprintf(stderr, "%s: cannot write\n", path);
    return kFailure;
  }
  return kSuccess;
}

int timeIt(const char *file, int64_t width, int64_t height, int64_t repeats) {
  auto buffer = llvm::MemoryBuffer::getFile(file, false, false);
  if (!buffer) {
    std::fprintf(stderr, "%s: cannot read: %s\n", file, buffer.getError().message().c_str());
    return kBadInput;
  }
  llvm::ArrayRef<uint8_t> bytes(reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
                                (*buffer)->getBufferSize());
  using Clock = std::chrono::steady_clock;
  RgbImage image;
  std::string err;
  double decodeSeconds = 0, resizeSeconds = 0;
  uint64_t checksum = 0;
  for (int64_t i = 0; i < repeats; ++i) {
    auto t0 = Clock::now();
    if (!decodeImage(bytes, image, err)) {
      std::fprintf(stderr, "%s: %s\n", file, err.c_str());
      return kBadInput;
    }
    auto t1 = Clock::now();
    RgbImage resized = resizeBilinear(image, width, height);
    auto t2 = Clock::now();
    checksum += resized.pixels[static_cast<size_t>(i) % resized.pixels.size()];
    decodeSeconds += std::chrono::duration<double>(t1 - t0).count();
    resizeSeconds += std::chrono::duration<double>(t2 - t1).count();
  }
  std::printf("%lldx%lld -> %lldx%lld: decode %.3f ms, resize %.3f ms (mean of %lld; %llu)\n",
              static_cast<long long>(image.width), static_cast<long long>(image.height),
              static_cast<long long>(width), static_cast<long long>(height),
              1e3 * decodeSeconds / repeats, 1e3 * resizeSeconds / repeats,
              static_cast<long long>(repeats), static_cast<unsigned long long>(checksum));
  return kSuccess;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usage();
  const char *command = argv[1];
  int64_t width = 0, height = 0, repeats = 0;
  if (std::strcmp(command, "time") == 0) {
    if (argc != 6 || !parseSize(argv[3], width) || !parseSize(argv[4], height) ||
        !parseSize(argv[5], repeats))
      return usage();
    return timeIt(argv[2], width, height, repeats);
  }
  const bool resize = std::strcmp(command, "resize") == 0;
  if (!(resize && argc == 6) && !(std::strcmp(command, "decode") == 0 && argc == 4))
    return usage();
  if (resize && (!parseSize(argv[3], width) || !parseSize(argv[4], height)))
    return usage();
  RgbImage image;
  std::string err;
  if (!decodeImageFile(argv[2], image, err)) {
    std::fprintf(stderr, "%s: %s\n", argv[2], err.c_str());
    return kBadInput;
  }
  if (resize)
    image = resizeBilinear(image, width, height);
  return writeRaw(image, argv[argc - 1]);
}
