//===- ImageDecodeTest.cpp - JPEG/PNG decoding and PIL resampling ------------===//
//
// Images are encoded here with libjpeg and libpng (the libraries the decoder
// uses), so every case is built from known pixels. Bit-exactness against PIL
// itself is tests/data/check_images_vs_pil.py's job.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/ImageDecode.h"
#include "runtime/data/ImageResize.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

using namespace ampc::data;

namespace {

//===----------------------------------------------------------------------===//
// Encoders
//===----------------------------------------------------------------------===//

struct PngSpec {
  int width = 0, height = 0;
  int colorType = PNG_COLOR_TYPE_RGB;
  int depth = 8;
  bool interlaced = false;
  std::vector<png_color> palette;
};

void pngWriteToVector(png_structp png, png_bytep data, png_size_t size) {
  auto *out = static_cast<std::vector<uint8_t> *>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + size);
}

void pngFlushNothing(png_structp) {}

/// `rows`: height packed rows as the PNG stores them (big-endian 16-bit
/// samples, sub-byte samples packed from the most significant bit).
std::vector<uint8_t> encodePng(const PngSpec &spec, const std::vector<std::vector<uint8_t>> &rows) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    ADD_FAILURE() << "libpng could not encode the test image";
    return {};
  }
  png_set_write_fn(png, &out, pngWriteToVector, pngFlushNothing);
  png_set_IHDR(png, info, spec.width, spec.height, spec.depth, spec.colorType,
               spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!spec.palette.empty()) {
    png_set_PLTE(png, info, spec.palette.data(), static_cast<int>(spec.palette.size()));
    png_set_check_for_invalid_index(png, 0); // off: indices past the palette are tested
  }
  png_write_info(png, info);
  std::vector<png_bytep> pointers;
  for (const auto &row : rows)
    pointers.push_back(const_cast<png_bytep>(row.data()));
  png_write_image(png, pointers.data());
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return out;
}

/// An 8-bit RGB PNG of `image`.
std::vector<uint8_t> encodeRgbPng(const RgbImage &image, bool interlaced = false) {
  PngSpec spec;
  spec.width = static_cast<int>(image.width);
  spec.height = static_cast<int>(image.height);
  spec.interlaced = interlaced;
  std::vector<std::vector<uint8_t>> rows;
  for (int64_t y = 0; y < image.height; ++y)
    rows.emplace_back(image.pixels.begin() + y * image.width * 3,
                      image.pixels.begin() + (y + 1) * image.width * 3);
  return encodePng(spec, rows);
}

struct JpegSpec {
  int quality = 90;
  int components = 3; // 1 gray, 3 RGB (stored YCbCr), 4 CMYK
  bool subsample = true;
  bool progressive = false;
};

/// `samples`: width * height * components interleaved bytes.
std::vector<uint8_t> encodeJpeg(const JpegSpec &spec, int width, int height,
                                const std::vector<uint8_t> &samples) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char *buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = spec.components;
  cinfo.in_color_space = spec.components == 1   ? JCS_GRAYSCALE
                         : spec.components == 3 ? JCS_RGB
                                                : JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, spec.quality, TRUE);
  if (spec.components == 3 && !spec.subsample)
    cinfo.comp_info[0].h_samp_factor = cinfo.comp_info[0].v_samp_factor = 1;
  if (spec.progressive)
    jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(
        &samples[static_cast<size_t>(cinfo.next_scanline) * width * spec.components]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> out(buffer, buffer + size);
  std::free(buffer);
  return out;
}

RgbImage gradientImage(int64_t width, int64_t height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width * height * 3));
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) {
      uint8_t *p = &image.pixels[(y * width + x) * 3];
      p[0] = static_cast<uint8_t>(255 * x / std::max<int64_t>(width - 1, 1));
      p[1] = static_cast<uint8_t>(255 * y / std::max<int64_t>(height - 1, 1));
      p[2] = static_cast<uint8_t>(255 * (x + y) / std::max<int64_t>(width + height - 2, 1));
    }
  return image;
}

RgbImage noiseImage(int64_t width, int64_t height, unsigned seed) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width * height * 3));
  std::mt19937 rng(seed);
  for (uint8_t &v : image.pixels)
    v = static_cast<uint8_t>(rng());
  return image;
}

std::vector<uint8_t> rgbJpeg(const RgbImage &image, const JpegSpec &spec = {}) {
  return encodeJpeg(spec, static_cast<int>(image.width), static_cast<int>(image.height),
                    image.pixels);
}

std::string decodeError(const std::vector<uint8_t> &bytes) {
  RgbImage out;
  std::string err;
  if (decodeImage(bytes, out, err)) {
    ADD_FAILURE() << "decoded " << out.width << "x" << out.height << ", expected an error";
    return "";
  }
  EXPECT_EQ(out.width, 0);
  EXPECT_TRUE(out.pixels.empty());
  return err;
}

RgbImage decodeOk(const std::vector<uint8_t> &bytes) {
  RgbImage out;
  std::string err;
  EXPECT_TRUE(decodeImage(bytes, out, err)) << err;
  EXPECT_EQ(out.pixels.size(), static_cast<size_t>(out.width * out.height * 3));
  return out;
}

int maxDifference(const RgbImage &a, const RgbImage &b) {
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  if (a.pixels.size() != b.pixels.size())
    return 256;
  int most = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i)
    most = std::max(most, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  return most;
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(ImageDecode, EmptyAndNonImageBytesAreRefusedBySignature) {
  EXPECT_EQ(decodeError({}), "empty file");
  std::string text = "label,pixel0\n3,255\n";
  EXPECT_EQ(decodeError(std::vector<uint8_t>(text.begin(), text.end())), "not a JPEG or PNG image");
  std::string gif = "GIF89a\x01\x00\x01\x00";
  EXPECT_EQ(decodeError(std::vector<uint8_t>(gif.begin(), gif.end())), "not a JPEG or PNG image");
  // A JPEG's bytes under a .png name, or the reverse, decode by content.
  RgbImage image = gradientImage(16, 8);
  EXPECT_EQ(decodeOk(rgbJpeg(image)).width, 16);
  EXPECT_EQ(decodeOk(encodeRgbPng(image)).width, 16);
  // Two bytes of a signature are not enough.
  EXPECT_EQ(decodeError({0xFF, 0xD8}), "not a JPEG or PNG image");
}

TEST(ImageDecode, TruncatedJpegIsAnErrorNotGrayPadding) {
  RgbImage image = gradientImage(64, 48);
  for (bool progressive : {false, true}) {
    JpegSpec spec;
    spec.progressive = progressive;
    std::vector<uint8_t> jpeg = rgbJpeg(image, spec);
    for (size_t keep : {jpeg.size() / 2, jpeg.size() - 100, jpeg.size() - 2}) {
      std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + static_cast<ptrdiff_t>(keep));
      EXPECT_EQ(decodeError(cut), "truncated JPEG data") << keep << " progressive " << progressive;
    }
    // Only the header: truncated too.
    EXPECT_EQ(decodeError(std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + 20)),
              "truncated JPEG data");
    // Whatever follows the end of the image is ignored, as PIL ignores it.
    std::vector<uint8_t> longer = jpeg;
    longer.insert(longer.end(), 100, 0x55);
    EXPECT_EQ(maxDifference(decodeOk(longer), decodeOk(jpeg)), 0);
  }
}

TEST(ImageDecode, CorruptJpegAndPngSayWhatIsWrong) {
  // libjpeg's message after "corrupt JPEG data: ".
  std::vector<uint8_t> sosFirst = {0xFF, 0xD8, 0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 63, 0};
  sosFirst.resize(40, 0);
  EXPECT_EQ(decodeError(sosFirst),
            "corrupt JPEG data: Invalid JPEG file structure: SOS before SOF");
  std::vector<uint8_t> badTable = {0xFF, 0xD8, 0xFF, 0xDB, 0, 0x43, 0x35};
  badTable.resize(80, 0);
  EXPECT_EQ(decodeError(badTable), "corrupt JPEG data: Bogus DQT index 5");
  std::string err;
  // A frame header with a bad length.
  std::vector<uint8_t> jpeg = rgbJpeg(gradientImage(16, 16));
  for (size_t i = 2; i + 3 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      jpeg[i + 2] = 0;
      jpeg[i + 3] = 3;
      break;
    }
  err = decodeError(jpeg);
  EXPECT_TRUE(err.rfind("corrupt JPEG data: ", 0) == 0 || err == "truncated JPEG data") << err;

  std::vector<uint8_t> png = encodeRgbPng(gradientImage(16, 16));
  std::vector<uint8_t> badCrc = png;
  badCrc[8 + 8 + 13] ^= 0xFF; // IHDR's CRC
  EXPECT_EQ(decodeError(badCrc), "corrupt PNG data: IHDR: CRC error");
  std::vector<uint8_t> cut(png.begin(), png.begin() + static_cast<ptrdiff_t>(png.size() / 2));
  EXPECT_EQ(decodeError(cut), "truncated PNG data");
  EXPECT_EQ(decodeError(std::vector<uint8_t>(png.begin(), png.begin() + 8)), "truncated PNG data");
  // The image data ends (IEND, trailing chunks) need not be there: PIL
  // does not read them either.
  std::vector<uint8_t> noEnd(png.begin(), png.end() - 12);
  EXPECT_EQ(decodeOk(noEnd).height, 16);
}

TEST(ImageDecode, HugeHeadersAreRefusedBeforeAllocating) {
  // A 30000 x 30000 PNG header (900M pixels, past PIL's limit).
  std::vector<uint8_t> png = encodeRgbPng(gradientImage(4, 4));
  png[16] = 0, png[17] = 0, png[18] = 0x75, png[19] = 0x30; // width
  png[20] = 0, png[21] = 0, png[22] = 0x75, png[23] = 0x30; // height
  uint32_t crc = static_cast<uint32_t>(crc32(0, png.data() + 12, 17));
  for (int i = 0; i < 4; ++i)
    png[29 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  std::string err = decodeError(png);
  EXPECT_EQ(err.rfind("image too large: 30000x30000 pixels", 0), 0u) << err;
}

TEST(ImageDecode, FileErrorsSayCannotRead) {
  RgbImage out;
  std::string err;
  EXPECT_FALSE(decodeImageFile("/nonexistent/dir/x.jpg", out, err));
  EXPECT_EQ(err, "cannot read: No such file or directory");

  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("ampc-image", "png", path));
  std::vector<uint8_t> png = encodeRgbPng(gradientImage(5, 3));
  std::ofstream(path.c_str(), std::ios::binary)
      .write(reinterpret_cast<const char *>(png.data()), static_cast<std::streamsize>(png.size()));
  EXPECT_TRUE(decodeImageFile(path.str().str(), out, err)) << err;
  EXPECT_EQ(maxDifference(out, gradientImage(5, 3)), 0);
  llvm::sys::fs::remove(path);
}

//===----------------------------------------------------------------------===//
// PNG color types, as PIL converts them to RGB
//===----------------------------------------------------------------------===//

TEST(ImageDecode, RgbPngPlainAndInterlacedDecodeExactly) {
  for (auto [w, h] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {61, 43}, {3, 500}}) {
    RgbImage image = noiseImage(w, h, static_cast<unsigned>(w * 1000 + h));
    EXPECT_EQ(maxDifference(decodeOk(encodeRgbPng(image)), image), 0) << w << "x" << h;
    EXPECT_EQ(maxDifference(decodeOk(encodeRgbPng(image, /*interlaced=*/true)), image), 0)
        << w << "x" << h << " interlaced";
  }
}

TEST(ImageDecode, GrayPngReplicatesAndScalesSubByteSamples) {
  // 1-bit: 0/255; 2-bit: x 85; 4-bit: x 17; 8-bit as is (PIL's "1", "L;2",
  // "L;4", "L").
  for (int depth : {1, 2, 4, 8}) {
    for (bool interlaced : {false, true}) {
      PngSpec spec;
      spec.width = 13;
      spec.height = 3;
      spec.colorType = PNG_COLOR_TYPE_GRAY;
      spec.depth = depth;
      spec.interlaced = interlaced;
      const int perByte = 8 / depth, maxSample = (1 << depth) - 1;
      std::vector<std::vector<uint8_t>> rows;
      std::vector<int> samples;
      for (int y = 0; y < spec.height; ++y) {
        std::vector<uint8_t> row((spec.width + perByte - 1) / perByte, 0);
        for (int x = 0; x < spec.width; ++x) {
          int s = (x * 5 + y * 3) % (maxSample + 1);
          samples.push_back(s);
          row[x / perByte] |= static_cast<uint8_t>(s << (8 - depth * (x % perByte + 1)));
        }
        rows.push_back(row);
      }
      RgbImage out = decodeOk(encodePng(spec, rows));
      ASSERT_EQ(out.width, 13);
      for (size_t i = 0; i < samples.size(); ++i) {
        int want = samples[i] * 255 / maxSample;
        for (int c = 0; c < 3; ++c)
          ASSERT_EQ(out.pixels[3 * i + c], want) << "depth " << depth << " pixel " << i;
      }
    }
  }
}

TEST(ImageDecode, SixteenBitPngReducedAsPilDoes) {
  const uint16_t values[] = {0, 1, 127, 254, 255, 256, 300, 4095, 40000, 65535};
  const int n = 10;
  auto bigEndian = [](std::vector<uint8_t> &row, uint16_t v) {
    row.push_back(static_cast<uint8_t>(v >> 8));
    row.push_back(static_cast<uint8_t>(v & 0xFF));
  };
  // Gray: PIL opens mode "I" and convert("RGB") clips to 0..255.
  {
    PngSpec spec;
    spec.width = n;
    spec.height = 1;
    spec.colorType = PNG_COLOR_TYPE_GRAY;
    spec.depth = 16;
    std::vector<uint8_t> row;
    for (uint16_t v : values)
      bigEndian(row, v);
    RgbImage out = decodeOk(encodePng(spec, {row}));
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(out.pixels[3 * i], std::min<int>(values[i], 255)) << values[i];
  }
  // RGB, RGBA, gray + alpha: the high byte of each sample; alpha dropped.
  for (int type : {PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA, PNG_COLOR_TYPE_GRAY_ALPHA}) {
    PngSpec spec;
    spec.width = n;
    spec.height = 1;
    spec.colorType = type;
    spec.depth = 16;
    const int channels = type == PNG_COLOR_TYPE_RGB ? 3 : type == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : 2;
    std::vector<uint8_t> row;
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < channels; ++c)
        bigEndian(row, values[(i + c) % n]);
    RgbImage out = decodeOk(encodePng(spec, {row}));
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < 3; ++c) {
        int source = type == PNG_COLOR_TYPE_GRAY_ALPHA ? 0 : c;
        EXPECT_EQ(out.pixels[3 * i + c], values[(i + source) % n] >> 8)
            << "type " << type << " pixel " << i << " channel " << c;
      }
  }
}

TEST(ImageDecode, PaletteExpandedAndAlphaDroppedWithoutCompositing) {
  // A 3-color palette with indices up to 15: past the palette, PIL's gray
  // ramp (entry i is (i, i, i)).
  PngSpec spec;
  spec.width = 16;
  spec.height = 1;
  spec.colorType = PNG_COLOR_TYPE_PALETTE;
  spec.depth = 4;
  spec.palette = {{200, 10, 20}, {30, 40, 50}, {1, 2, 3}};
  std::vector<uint8_t> row;
  for (int i = 0; i < 16; i += 2)
    row.push_back(static_cast<uint8_t>(i << 4 | (i + 1)));
  RgbImage out = decodeOk(encodePng(spec, {row}));
  ASSERT_EQ(out.width, 16);
  for (int i = 0; i < 16; ++i) {
    uint8_t want[3] = {uint8_t(i), uint8_t(i), uint8_t(i)};
    if (i < 3)
      std::memcpy(want, &spec.palette[i], 3);
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(out.pixels[3 * i + c], want[c]) << "index " << i;
  }
  // RGBA and gray + alpha: alpha discarded, color kept even where alpha is 0.
  PngSpec rgba;
  rgba.width = 2;
  rgba.height = 1;
  rgba.colorType = PNG_COLOR_TYPE_RGB_ALPHA;
  out = decodeOk(encodePng(rgba, {{10, 20, 30, 0, 40, 50, 60, 128}}));
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{10, 20, 30, 40, 50, 60}));
  PngSpec la = rgba;
  la.colorType = PNG_COLOR_TYPE_GRAY_ALPHA;
  out = decodeOk(encodePng(la, {{77, 0, 99, 255}}));
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{77, 77, 77, 99, 99, 99}));
}

//===----------------------------------------------------------------------===//
// JPEG
//===----------------------------------------------------------------------===//

TEST(ImageDecode, JpegColorGrayAndCmyk) {
  RgbImage image = gradientImage(333, 251);
  for (bool subsample : {true, false}) {
    for (bool progressive : {false, true}) {
      JpegSpec spec;
      spec.quality = 95;
      spec.subsample = subsample;
      spec.progressive = progressive;
      RgbImage out = decodeOk(rgbJpeg(image, spec));
      EXPECT_LE(maxDifference(out, image), 24) << subsample << progressive;
    }
  }
  // Gray: replicated.
  std::vector<uint8_t> gray(64 * 32);
  for (size_t i = 0; i < gray.size(); ++i)
    gray[i] = static_cast<uint8_t>(i % 64 * 4);
  JpegSpec graySpec;
  graySpec.components = 1;
  RgbImage out = decodeOk(encodeJpeg(graySpec, 64, 32, gray));
  ASSERT_EQ(out.width, 64);
  for (size_t i = 0; i < gray.size(); ++i) {
    EXPECT_EQ(out.pixels[3 * i], out.pixels[3 * i + 1]);
    EXPECT_EQ(out.pixels[3 * i], out.pixels[3 * i + 2]);
    EXPECT_LE(std::abs(int(out.pixels[3 * i]) - int(gray[i])), 12) << i;
  }
  // CMYK as libjpeg writes it (Adobe marker, stored as given): PIL reads the
  // samples inverted and converts with R = k - k * (255 - c) / 255.
  std::vector<uint8_t> cmyk;
  for (int i = 0; i < 16 * 16; ++i)
    cmyk.insert(cmyk.end(), {255, 128, 0, 200});
  JpegSpec cmykSpec;
  cmykSpec.components = 4;
  cmykSpec.quality = 100;
  out = decodeOk(encodeJpeg(cmykSpec, 16, 16, cmyk));
  ASSERT_EQ(out.width, 16);
  const int want[3] = {200, 200 - (200 * 127 + 127) / 255, 0};
  for (int c = 0; c < 3; ++c)
    EXPECT_LE(std::abs(int(out.pixels[c]) - want[c]), 2) << c;
}

//===----------------------------------------------------------------------===//
// Robustness
//===----------------------------------------------------------------------===//

/// Decodes `bytes`; whatever the result, it must be consistent.
void decodeAnything(const std::vector<uint8_t> &bytes) {
  RgbImage out;
  std::string err;
  if (decodeImage(bytes, out, err)) {
    ASSERT_GT(out.width, 0);
    ASSERT_EQ(out.pixels.size(), static_cast<size_t>(out.width * out.height * 3));
  } else {
    ASSERT_FALSE(err.empty());
    ASSERT_TRUE(out.pixels.empty());
  }
}

TEST(ImageDecode, NeverCrashesOnDamagedBytes) {
  const auto start = std::chrono::steady_clock::now();
  std::mt19937 rng(12345);
  RgbImage image = noiseImage(40, 24, 7);
  JpegSpec progressive;
  progressive.progressive = true;
  JpegSpec gray;
  gray.components = 1;
  std::vector<uint8_t> grayPixels(40 * 24, 99);
  const std::vector<std::vector<uint8_t>> valid = {
      rgbJpeg(image), rgbJpeg(image, progressive), encodeJpeg(gray, 40, 24, grayPixels),
      encodeRgbPng(image), encodeRgbPng(image, /*interlaced=*/true)};
  for (const auto &file : valid) {
    decodeAnything(file);
    // Every truncation at a multiple of 37 bytes.
    for (size_t keep = 0; keep < file.size(); keep += 37)
      decodeAnything(
          std::vector<uint8_t>(file.begin(), file.begin() + static_cast<ptrdiff_t>(keep)));
    // Single and multiple bit flips, and overwritten bytes.
    for (int trial = 0; trial < 1500; ++trial) {
      std::vector<uint8_t> damaged = file;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        size_t at = rng() % damaged.size();
        if (trial % 3 == 0)
          damaged[at] = static_cast<uint8_t>(rng());
        else
          damaged[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
      decodeAnything(damaged);
    }
  }
  // Random bytes, bare and behind each signature.
  const std::vector<std::vector<uint8_t>> prefixes = {
      {},
      {0xFF, 0xD8, 0xFF},
      {0xFF, 0xD8, 0xFF, 0xC0},
      {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}};
  for (const auto &prefix : prefixes) {
    for (int trial = 0; trial < 1000; ++trial) {
      std::vector<uint8_t> bytes = prefix;
      size_t extra = rng() % 300;
      for (size_t i = 0; i < extra; ++i)
        bytes.push_back(static_cast<uint8_t>(rng()));
      decodeAnything(bytes);
    }
  }
  // A PNG header with random chunks after it.
  std::vector<uint8_t> png = encodeRgbPng(image);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<uint8_t> bytes(png.begin(), png.begin() + 33);
    size_t extra = rng() % 400;
    for (size_t i = 0; i < extra; ++i)
      bytes.push_back(static_cast<uint8_t>(rng()));
    decodeAnything(bytes);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0) << "the fuzz loop is meant to take well under 2 s";
}

TEST(ImageDecode, DecodesOnSeveralThreadsAtOnce) {
  const std::vector<std::vector<uint8_t>> files = {
      rgbJpeg(gradientImage(120, 80)), encodeRgbPng(noiseImage(90, 70, 3), true),
      rgbJpeg(noiseImage(64, 64, 4)), std::vector<uint8_t>{0xFF, 0xD8, 0xFF, 0xE0, 0, 16}};
  std::vector<RgbImage> expected;
  for (const auto &file : files) {
    RgbImage out;
    std::string err;
    decodeImage(file, out, err);
    expected.push_back(out);
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        size_t which = static_cast<size_t>(t + i) % files.size();
        RgbImage out;
        std::string err;
        decodeImage(files[which], out, err);
        if (out.pixels != expected[which].pixels)
          ++mismatches[t];
      }
    });
  for (auto &thread : threads)
    thread.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
}

//===----------------------------------------------------------------------===//
// Resizing and cropping
//===----------------------------------------------------------------------===//

RgbImage constantImage(int64_t width, int64_t height, uint8_t r, uint8_t g, uint8_t b) {
  RgbImage image;
  image.width = width;
  image.height = height;
  for (int64_t i = 0; i < width * height; ++i)
    image.pixels.insert(image.pixels.end(), {r, g, b});
  return image;
}

TEST(ImageResize, SameSizeReturnsTheSamePixels) {
  RgbImage image = noiseImage(37, 23, 1);
  RgbImage out = resizeBilinear(image, 37, 23);
  EXPECT_EQ(out.width, 37);
  EXPECT_EQ(out.height, 23);
  EXPECT_EQ(out.pixels, image.pixels);
}

TEST(ImageResize, ConstantImageStaysConstant) {
  RgbImage image = constantImage(97, 61, 0, 137, 255);
  for (auto [w, h] : {std::pair<int64_t, int64_t>{224, 224},
                      {13, 7},
                      {1, 1},
                      {97, 300},
                      {500, 61},
                      {12, 61},
                      {97, 8}}) {
    RgbImage out = resizeBilinear(image, w, h);
    ASSERT_EQ(out.width, w);
    ASSERT_EQ(out.height, h);
    EXPECT_EQ(out.pixels, constantImage(w, h, 0, 137, 255).pixels) << w << "x" << h;
  }
}

TEST(ImageResize, MatchesPilsTriangleFilterOnKnownValues) {
  // PIL 9.4: Image.fromarray(row of 0, 80, 160, 240).resize((2, 1) / (7, 1),
  // Image.BILINEAR): the 2x downscale spans 4 inputs (antialiased), the
  // upscale interpolates between neighbours.
  RgbImage row;
  row.width = 4;
  row.height = 1;
  for (uint8_t v : {0, 80, 160, 240})
    row.pixels.insert(row.pixels.end(), {v, v, v});
  RgbImage down = resizeBilinear(row, 2, 1);
  EXPECT_EQ(down.pixels, (std::vector<uint8_t>{57, 57, 57, 183, 183, 183}));
  RgbImage up = resizeBilinear(row, 7, 1);
  const uint8_t want[7] = {0, 29, 74, 120, 166, 211, 240};
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ(up.pixels[3 * i], want[i]) << i;
  // The same along y.
  RgbImage column = row;
  column.width = 1;
  column.height = 4;
  EXPECT_EQ(resizeBilinear(column, 1, 2).pixels, down.pixels);
}

TEST(ImageResize, EveryOutputLiesWithinTheInputsRange) {
  // Non-negative weights summing to 1: each output within the inputs' range
  // and the mean roughly kept, for ratios that give every window size the
  // SIMD paths unroll and more (down 1.3x to 7.5x and 170x, up 2.2x).
  RgbImage image = noiseImage(500, 375, 9);
  for (uint8_t &v : image.pixels)
    v = static_cast<uint8_t>(60 + v % 131); // 60..190
  double meanIn = 0;
  for (uint8_t v : image.pixels)
    meanIn += v;
  meanIn /= static_cast<double>(image.pixels.size());
  for (auto [w, h] : {std::pair<int64_t, int64_t>{224, 224},
                      {67, 50},
                      {385, 288},
                      {1100, 800},
                      {250, 188},
                      {125, 94},
                      {100, 75},
                      {83, 62},
                      {3, 2}}) {
    RgbImage out = resizeBilinear(image, w, h);
    ASSERT_EQ(out.pixels.size(), static_cast<size_t>(w * h * 3));
    double meanOut = 0;
    for (uint8_t v : out.pixels) {
      ASSERT_GE(v, 60) << w << "x" << h;
      ASSERT_LE(v, 190) << w << "x" << h;
      meanOut += v;
    }
    meanOut /= static_cast<double>(out.pixels.size());
    EXPECT_NEAR(meanOut, meanIn, 3.0) << w << "x" << h;
  }
}

/// PIL 9.4's Resample.c for BILINEAR, transcribed plainly (per-output tap
/// lists, scalar loops, both passes over whole images).
RgbImage pilResizeReference(const RgbImage &src, int outWidth, int outHeight) {
  struct Taps {
    std::vector<int> first, count;
    std::vector<std::vector<int32_t>> k;
  };
  auto taps = [](int inSize, int outSize) {
    Taps t;
    double scale = static_cast<double>(static_cast<float>(inSize)) / outSize;
    double filterscale = std::max(scale, 1.0), support = filterscale;
    for (int xx = 0; xx < outSize; ++xx) {
      double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
      int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
      int xmax = std::min(static_cast<int>(center + support + 0.5), inSize) - xmin;
      std::vector<double> w(static_cast<size_t>(xmax));
      for (int x = 0; x < xmax; ++x) {
        double v = std::abs((x + xmin - center + 0.5) * ss);
        w[x] = v < 1.0 ? 1.0 - v : 0.0;
        ww += w[x];
      }
      std::vector<int32_t> k;
      for (double v : w)
        k.push_back(static_cast<int32_t>(0.5 + (ww != 0.0 ? v / ww : v) * (1 << 22)));
      t.first.push_back(xmin);
      t.count.push_back(xmax);
      t.k.push_back(k);
    }
    return t;
  };
  auto clip = [](int32_t s) { return static_cast<uint8_t>(std::clamp(s >> 22, 0, 255)); };
  RgbImage image = src;
  if (outWidth != src.width) {
    Taps t = taps(static_cast<int>(image.width), outWidth);
    RgbImage next;
    next.width = outWidth;
    next.height = image.height;
    next.pixels.resize(static_cast<size_t>(outWidth * image.height * 3));
    for (int64_t y = 0; y < image.height; ++y)
      for (int xx = 0; xx < outWidth; ++xx)
        for (int c = 0; c < 3; ++c) {
          int32_t s = 1 << 21;
          for (int x = 0; x < t.count[xx]; ++x)
            s += image.pixels[(y * image.width + t.first[xx] + x) * 3 + c] * t.k[xx][x];
          next.pixels[(y * outWidth + xx) * 3 + c] = clip(s);
        }
    image = next;
  }
  if (outHeight != src.height) {
    Taps t = taps(static_cast<int>(image.height), outHeight);
    RgbImage next;
    next.width = image.width;
    next.height = outHeight;
    next.pixels.resize(static_cast<size_t>(image.width * outHeight * 3));
    for (int yy = 0; yy < outHeight; ++yy)
      for (int64_t i = 0; i < image.width * 3; ++i) {
        int32_t s = 1 << 21;
        for (int y = 0; y < t.count[yy]; ++y)
          s += image.pixels[(t.first[yy] + y) * image.width * 3 + i] * t.k[yy][y];
        next.pixels[yy * image.width * 3 + i] = clip(s);
      }
    image = next;
  }
  return image;
}

TEST(ImageResize, MatchesAPlainTranscriptionOfPilsLoops) {
  // Every set of loops (AVX2, SSE2, scalar; windows unrolled or not, odd and
  // even, the last row's scalar loop, row tails) against PIL's, bit for bit.
  std::mt19937 rng(77);
  for (int trial = 0; trial < 150; ++trial) {
    int64_t w = 1 + rng() % 90, h = 1 + rng() % 90;
    int outW = static_cast<int>(1 + rng() % 200), outH = static_cast<int>(1 + rng() % 200);
    if (trial % 3 == 0)
      outW = static_cast<int>(w); // one pass only
    RgbImage image = noiseImage(w, h, static_cast<unsigned>(trial));
    if (w == outW && h == outH)
      continue;
    RgbImage slow = pilResizeReference(image, outW, outH);
    for (ResizeLoops loops : {ResizeLoops::Fastest, ResizeLoops::Sse2, ResizeLoops::Scalar})
      ASSERT_EQ(resizeBilinear(image, outW, outH, loops).pixels, slow.pixels)
          << w << "x" << h << " -> " << outW << "x" << outH << " loops " << int(loops);
  }
  RgbImage big = noiseImage(500, 375, 5);
  for (auto [w, h] : {std::pair<int, int>{224, 224}, {67, 50}, {1100, 825}, {13, 400}}) {
    RgbImage slow = pilResizeReference(big, w, h);
    for (ResizeLoops loops : {ResizeLoops::Fastest, ResizeLoops::Sse2, ResizeLoops::Scalar})
      ASSERT_EQ(resizeBilinear(big, w, h, loops).pixels, slow.pixels)
          << w << "x" << h << " loops " << int(loops);
  }
}

TEST(ImageResize, CropTakesTheRectangle) {
  RgbImage image = gradientImage(50, 40);
  RgbImage part = crop(image, 7, 5, 20, 30);
  ASSERT_EQ(part.width, 20);
  ASSERT_EQ(part.height, 30);
  for (int64_t y = 0; y < 30; ++y)
    for (int64_t x = 0; x < 20; ++x)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(part.pixels[(y * 20 + x) * 3 + c], image.pixels[((y + 5) * 50 + x + 7) * 3 + c]);
  EXPECT_EQ(crop(image, 0, 0, 50, 40).pixels, image.pixels);
  RgbImage corner = crop(image, 49, 39, 1, 1);
  EXPECT_EQ(corner.pixels, std::vector<uint8_t>(image.pixels.end() - 3, image.pixels.end()));
}

} // namespace
