//===- ImageDecode.h - JPEG and PNG decoding as PIL does it -----------------===//
//
// The image-folder data source reads JPEG and PNG files the way torchvision's
// ImageFolder does (PIL's Image.open(f).convert("RGB")), so that a model
// trained here sees the pixels it would see under PyTorch: JPEG through
// libjpeg with PIL's settings (same library, same bits), PNG through libpng
// with PIL's own conversions to RGB (16-bit samples, palettes, alpha).
// tests/data/check_images_vs_pil.py compares the two pixel for pixel.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DATA_IMAGEDECODE_H
#define AMPC_RUNTIME_DATA_IMAGEDECODE_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampc::data {

/// An 8-bit RGB image, row-major, 3 interleaved channels (HWC).
struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;
};

/// The most pixels an image may have: PIL's DecompressionBombError threshold
/// (2 * Image.MAX_IMAGE_PIXELS); a larger one is refused before decoding.
inline constexpr int64_t kMaxImagePixels = 2 * int64_t(89478485);

/// Decodes JPEG or PNG bytes (recognised by their signature, not a file name)
/// into RGB exactly as PIL's Image.open(f).convert("RGB") does: grayscale
/// replicated to 3 channels, palette expanded (indices past the palette get
/// PIL's gray ramp), alpha dropped without compositing, 16-bit PNG samples
/// reduced to 8 bits as PIL does (the high byte, except 16-bit grayscale,
/// which PIL opens as mode "I" and clips to 0..255), CMYK and YCCK JPEG
/// converted with PIL's formula (Adobe's inverted polarity assumed, as PIL
/// does), interlaced PNG and progressive JPEG supported. Warnings (corrupt
/// entropy data, bad CRCs of ancillary PNG chunks) are ignored as PIL
/// ignores them; data ending before the image is complete is an error (PIL
/// with LOAD_TRUNCATED_IMAGES off). False with `err` saying what is wrong
/// ("not a JPEG or PNG image", "truncated JPEG data", "corrupt PNG data:
/// <libpng's message>", ...); `err` does not name the file. Thread-safe.
bool decodeImage(llvm::ArrayRef<uint8_t> bytes, RgbImage &out, std::string &err);

/// Reads the file and decodes it; err like "cannot read: <reason>" or the
/// decode message.
bool decodeImageFile(const std::string &path, RgbImage &out, std::string &err);

} // namespace ampc::data

#endif // AMPC_RUNTIME_DATA_IMAGEDECODE_H
