//===- ImageDecode.cpp - JPEG and PNG decoding as PIL does it ---------------===//
//
// JPEG: libjpeg(-turbo) with the settings PIL 9.4's JpegDecode.c leaves in
// place (libjpeg's defaults: JDCT_ISLOW, fancy upsampling, block smoothing;
// the color space libjpeg guesses from the markers), asking for grayscale,
// RGB or CMYK output by the number of components as JpegImagePlugin does.
// PIL gives the same library the same requests, so the pixels are the same.
// CMYK and YCCK files come out of libjpeg as CMYK; PIL reads them as
// inverted (Adobe) CMYK ("CMYK;I") and convert("RGB") applies its cmyk2rgb
// formula, repeated here.
//
// PNG: libpng only inflates and de-interlaces (no transforms); the samples
// become RGB here with PIL's rules (PngImagePlugin's mode table, Unpack.c,
// Convert.c): 1/2/4-bit gray scaled to 0..255, 16-bit samples keep their
// high byte, except 16-bit gray, which PIL opens as mode "I" and whose
// convert("RGB") clips the value to 0..255; palettes are PIL's: entries past
// the PLTE chunk are the gray ramp; alpha and tRNS are ignored; no gamma.
//
// Errors: libjpeg's and libpng's error handlers longjmp back to the function
// that called setjmp; that function (runJpeg, runPng) owns no object with a
// destructor, so the jump skips none. Warnings are dropped, as PIL drops them.
// A source that runs out of bytes before the image is complete is an error
// ("truncated ..."), as PIL's "image file is truncated": libjpeg would
// otherwise pad the rest with gray.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/ImageDecode.h"

#include "llvm/Support/MemoryBuffer.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include <jpeglib.h>
// jpeglib.h before jerror.h (ERREXIT needs the structs).
#include <jerror.h>
#include <png.h>

namespace ampc::data {

namespace {

/// How a decode under setjmp ended. The functions that call setjmp build no
/// strings (no object with a destructor lives in their frames); the callers
/// turn the outcome into the message.
enum class Outcome { Decoded, Truncated, Corrupt, TooLarge, Unsupported, OutOfMemory };

std::string tooLargeMessage(int64_t width, int64_t height) {
  return "image too large: " + std::to_string(width) + "x" + std::to_string(height) +
         " pixels (at most " + std::to_string(kMaxImagePixels) + ", PIL's limit)";
}

//===----------------------------------------------------------------------===//
// JPEG
//===----------------------------------------------------------------------===//

struct JpegJob {
  jpeg_decompress_struct cinfo; // first: the callbacks find the job from it
  jpeg_error_mgr errorMgr;
  jpeg_source_mgr source;
  std::jmp_buf jump;
  bool truncated;
  char message[JMSG_LENGTH_MAX]; // libjpeg's, on Corrupt and Unsupported
  int components;
  int64_t width, height;
};

JpegJob &jobOf(j_common_ptr cinfo) {
  // cinfo is the first member of JpegJob (a standard-layout struct).
  return *reinterpret_cast<JpegJob *>(cinfo);
}

void jpegErrorExit(j_common_ptr cinfo) { std::longjmp(jobOf(cinfo).jump, 1); }

void jpegOutputMessage(j_common_ptr) {}

void jpegInitSource(j_decompress_ptr) {}

void jpegTermSource(j_decompress_ptr) {}

/// libjpeg asks for more only when every byte is consumed: the data ended
/// before the image did.
boolean jpegFillInput(j_decompress_ptr cinfo) {
  jobOf(reinterpret_cast<j_common_ptr>(cinfo)).truncated = true;
  ERREXIT(cinfo, JERR_INPUT_EOF);
  return FALSE;
}

void jpegSkipInput(j_decompress_ptr cinfo, long count) {
  if (count <= 0)
    return;
  jpeg_source_mgr *src = cinfo->src;
  if (static_cast<unsigned long>(count) > src->bytes_in_buffer)
    jpegFillInput(cinfo);
  src->next_input_byte += count;
  src->bytes_in_buffer -= static_cast<size_t>(count);
}

/// PIL's MULDIV255 (Convert.c): a * b / 255, rounded, for a, b in 0..255.
inline int mulDiv255(int a, int b) {
  int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

/// libjpeg's CMYK output (K = 0 is black ink) as PIL sees it: inverted on
/// reading ("CMYK;I"), then cmyk2rgb. With c' = 255 - c and k' = 255 - k,
/// cmyk2rgb gives nk - nk * c' / 255 where nk = 255 - k' = k.
void cmykRowToRgb(const uint8_t *in, uint8_t *out, int64_t width) {
  for (int64_t x = 0; x < width; ++x, in += 4, out += 3) {
    int nk = in[3];
    for (int c = 0; c < 3; ++c)
      out[c] = static_cast<uint8_t>(nk - mulDiv255(255 - in[c], nk));
  }
}

/// Every libjpeg call, under one setjmp. Touches C++ objects only through
/// references to the caller's, and never while libjpeg might jump.
Outcome runJpeg(JpegJob &job, llvm::ArrayRef<uint8_t> bytes, RgbImage &out) {
  jpeg_decompress_struct &cinfo = job.cinfo;
  if (setjmp(job.jump)) {
    if (job.truncated)
      return Outcome::Truncated;
    job.errorMgr.format_message(reinterpret_cast<j_common_ptr>(&cinfo), job.message);
    switch (job.errorMgr.msg_code) {
    case JERR_OUT_OF_MEMORY:
      return Outcome::OutOfMemory;
    case JERR_BAD_PRECISION:
      return Outcome::Unsupported;
    default:
      return Outcome::Corrupt;
    }
  }
  cinfo.err = jpeg_std_error(&job.errorMgr);
  job.errorMgr.error_exit = jpegErrorExit;
  job.errorMgr.output_message = jpegOutputMessage;
  jpeg_create_decompress(&cinfo);
  job.source.next_input_byte = bytes.data();
  job.source.bytes_in_buffer = bytes.size();
  job.source.init_source = jpegInitSource;
  job.source.fill_input_buffer = jpegFillInput;
  job.source.skip_input_data = jpegSkipInput;
  job.source.resync_to_restart = jpeg_resync_to_restart;
  job.source.term_source = jpegTermSource;
  cinfo.src = &job.source;

  // As PIL: a tables-only datastream may come first.
  while (jpeg_read_header(&cinfo, FALSE) == JPEG_HEADER_TABLES_ONLY) {
  }
  const int components = job.components = cinfo.num_components;
  // JpegImagePlugin's modes: 1 layer is L, 3 RGB, 4 CMYK; others refused.
  if (components != 1 && components != 3 && components != 4)
    return Outcome::Unsupported;
  job.width = cinfo.image_width;
  job.height = cinfo.image_height;
  if (job.width * job.height > kMaxImagePixels)
    return Outcome::TooLarge;
  cinfo.out_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_start_decompress(&cinfo);
  const int64_t width = cinfo.output_width, height = cinfo.output_height;
  JSAMPARRAY cmykRow = nullptr;
  if (components == 4)
    cmykRow = cinfo.mem->alloc_sarray(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE,
                                      static_cast<JDIMENSION>(width * 4), 1);
  out.width = width;
  out.height = height;
  out.pixels.clear();
  // Reserved, not sized: a header may promise far more pixels than the data
  // holds, and rows are only written (and the memory touched) as decoded.
  out.pixels.reserve(static_cast<size_t>(width * height * 3));
  const size_t stride = static_cast<size_t>(width) * 3;
  while (cinfo.output_scanline < cinfo.output_height) {
    size_t y = cinfo.output_scanline;
    out.pixels.resize((y + 1) * stride);
    uint8_t *row = out.pixels.data() + y * stride;
    JSAMPROW target = components == 4 ? cmykRow[0] : row;
    if (jpeg_read_scanlines(&cinfo, &target, 1) != 1)
      return Outcome::Truncated; // a suspending source only; not this one
    if (components == 4) {
      cmykRowToRgb(cmykRow[0], row, width);
    } else if (components == 1) {
      // Gray in the row's first third, replicated from the end backwards.
      for (int64_t x = width - 1; x >= 0; --x)
        row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = row[x];
    }
  }
  // No jpeg_finish_decompress: PIL ignores its outcome once every scanline
  // is in, so what follows the image's data is not read.
  return Outcome::Decoded;
}

bool decodeJpeg(llvm::ArrayRef<uint8_t> bytes, RgbImage &out, std::string &err) {
  JpegJob job;
  std::memset(&job, 0, sizeof(job)); // jpeg_destroy_decompress is safe on it
  Outcome outcome;
  try {
    outcome = runJpeg(job, bytes, out);
  } catch (const std::bad_alloc &) {
    outcome = Outcome::OutOfMemory;
  }
  jpeg_destroy_decompress(&job.cinfo);
  switch (outcome) {
  case Outcome::Decoded:
    return true;
  case Outcome::Truncated:
    err = "truncated JPEG data";
    return false;
  case Outcome::Corrupt:
    err = std::string("corrupt JPEG data: ") + job.message;
    return false;
  case Outcome::TooLarge:
    err = tooLargeMessage(job.width, job.height);
    return false;
  case Outcome::Unsupported:
    err = job.message[0]
              ? std::string("unsupported JPEG: ") + job.message
              : "unsupported JPEG: " + std::to_string(job.components) + " color components";
    return false;
  case Outcome::OutOfMemory:
    err = "out of memory decoding JPEG data";
    return false;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// PNG
//===----------------------------------------------------------------------===//

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

struct PngJob {
  png_structp png;
  png_infop info;
  const uint8_t *data;
  size_t size, pos;
  bool truncated;
  char message[256]; // libpng's, on Corrupt
  int64_t width, height;
};

void pngError(png_structp png, png_const_charp message) {
  auto *job = static_cast<PngJob *>(png_get_error_ptr(png));
  std::snprintf(job->message, sizeof(job->message), "%s", message ? message : "unknown error");
  png_longjmp(png, 1);
}

void pngWarning(png_structp, png_const_charp) {}

void pngRead(png_structp png, png_bytep dst, png_size_t count) {
  auto *job = static_cast<PngJob *>(png_get_io_ptr(png));
  if (count > job->size - job->pos) {
    job->truncated = true;
    png_error(png, "truncated");
  }
  std::memcpy(dst, job->data + job->pos, count);
  job->pos += count;
}

/// The layout of one decoded row and PIL's rules for turning it into RGB.
struct PngFormat {
  int colorType, depth;
  uint8_t palette[256 * 3];
};

/// Sample x of a row of 1/2/4-bit samples, most significant bits first.
inline unsigned subByteSample(const uint8_t *row, int64_t x, int depth) {
  int64_t bit = x * depth;
  unsigned shift = 8 - depth - static_cast<unsigned>(bit & 7);
  return (row[bit >> 3] >> shift) & ((1u << depth) - 1);
}

void pngRowToRgb(const PngFormat &fmt, const uint8_t *in, uint8_t *out, int64_t width) {
  switch (fmt.colorType) {
  case PNG_COLOR_TYPE_GRAY:
    for (int64_t x = 0; x < width; ++x, out += 3) {
      unsigned v;
      if (fmt.depth == 16) {
        // Mode "I" to RGB (Convert.c i2rgb): clipped, not scaled.
        unsigned wide = (unsigned(in[2 * x]) << 8) | in[2 * x + 1];
        v = wide >= 255 ? 255 : wide;
      } else if (fmt.depth == 8) {
        v = in[x];
      } else {
        // "1", "L;2", "L;4" (Unpack.c): 0/255, x 0x55, x 0x11.
        unsigned s = subByteSample(in, x, fmt.depth);
        v = fmt.depth == 1 ? (s ? 255 : 0) : fmt.depth == 2 ? s * 0x55 : s * 0x11;
      }
      out[0] = out[1] = out[2] = static_cast<uint8_t>(v);
    }
    return;
  case PNG_COLOR_TYPE_PALETTE:
    for (int64_t x = 0; x < width; ++x, out += 3) {
      unsigned index = fmt.depth == 8 ? in[x] : subByteSample(in, x, fmt.depth);
      std::memcpy(out, &fmt.palette[3 * index], 3);
    }
    return;
  case PNG_COLOR_TYPE_RGB:
    if (fmt.depth == 8) {
      std::memcpy(out, in, static_cast<size_t>(width) * 3);
      return;
    }
    for (int64_t x = 0; x < width; ++x, in += 6, out += 3) {
      out[0] = in[0];
      out[1] = in[2];
      out[2] = in[4];
    }
    return;
  case PNG_COLOR_TYPE_GRAY_ALPHA: {
    const int step = fmt.depth == 16 ? 4 : 2;
    for (int64_t x = 0; x < width; ++x, in += step, out += 3)
      out[0] = out[1] = out[2] = in[0];
    return;
  }
  case PNG_COLOR_TYPE_RGB_ALPHA: {
    const int sample = fmt.depth == 16 ? 2 : 1;
    for (int64_t x = 0; x < width; ++x, in += 4 * sample, out += 3) {
      out[0] = in[0];
      out[1] = in[sample];
      out[2] = in[2 * sample];
    }
    return;
  }
  default:
    return; // libpng refuses other color types in png_read_info
  }
}

/// Every libpng call, under one setjmp (as runJpeg). `rowBuffer` and
/// `rowPointers` are the caller's, sized here.
Outcome runPng(PngJob &job, PngFormat &fmt, RgbImage &out, std::vector<uint8_t> &rowBuffer,
               std::vector<png_bytep> &rowPointers) {
  png_structp png = job.png;
  png_infop info = job.info;
  if (setjmp(png_jmpbuf(png)))
    return job.truncated ? Outcome::Truncated : Outcome::Corrupt;
  png_set_read_fn(png, &job, pngRead);
  png_read_info(png, info);
  png_uint_32 width32 = 0, height32 = 0;
  int interlace = PNG_INTERLACE_NONE;
  png_get_IHDR(png, info, &width32, &height32, &fmt.depth, &fmt.colorType, &interlace, nullptr,
               nullptr);
  const int64_t width = job.width = width32, height = job.height = height32;
  if (width * height > kMaxImagePixels)
    return Outcome::TooLarge;
  if (fmt.colorType == PNG_COLOR_TYPE_PALETTE) {
    // PIL's palette: a gray ramp (ImagingPaletteNew) under the PLTE entries.
    for (int i = 0; i < 256; ++i)
      fmt.palette[3 * i] = fmt.palette[3 * i + 1] = fmt.palette[3 * i + 2] = uint8_t(i);
    png_colorp entries = nullptr;
    int count = 0;
    if (png_get_PLTE(png, info, &entries, &count) == PNG_INFO_PLTE) {
      for (int i = 0; i < count && i < 256; ++i) {
        fmt.palette[3 * i] = entries[i].red;
        fmt.palette[3 * i + 1] = entries[i].green;
        fmt.palette[3 * i + 2] = entries[i].blue;
      }
    }
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const size_t rowBytes = png_get_rowbytes(png, info);
  const size_t stride = static_cast<size_t>(width) * 3;
  out.width = width;
  out.height = height;
  out.pixels.clear();
  out.pixels.reserve(stride * static_cast<size_t>(height));
  if (interlace != PNG_INTERLACE_NONE) {
    // Adam7 fills every row in each of 7 passes: the whole image first.
    rowBuffer.resize(rowBytes * static_cast<size_t>(height));
    rowPointers.resize(static_cast<size_t>(height));
    for (int64_t y = 0; y < height; ++y)
      rowPointers[y] = rowBuffer.data() + static_cast<size_t>(y) * rowBytes;
    png_read_image(png, rowPointers.data());
    out.pixels.resize(stride * static_cast<size_t>(height));
    for (int64_t y = 0; y < height; ++y)
      pngRowToRgb(fmt, rowPointers[y], out.pixels.data() + y * stride, width);
    return Outcome::Decoded;
  }
  const bool direct = fmt.colorType == PNG_COLOR_TYPE_RGB && fmt.depth == 8;
  if (!direct)
    rowBuffer.resize(rowBytes);
  for (int64_t y = 0; y < height; ++y) {
    out.pixels.resize(static_cast<size_t>(y + 1) * stride);
    uint8_t *row = out.pixels.data() + y * stride;
    png_read_row(png, direct ? row : rowBuffer.data(), nullptr);
    if (!direct)
      pngRowToRgb(fmt, rowBuffer.data(), row, width);
  }
  // No png_read_end: like PIL, what follows the image data (IEND, trailing
  // chunks) is not needed.
  return Outcome::Decoded;
}

bool decodePng(llvm::ArrayRef<uint8_t> bytes, RgbImage &out, std::string &err) {
  PngJob job;
  std::memset(&job, 0, sizeof(job));
  job.data = bytes.data();
  job.size = bytes.size();
  job.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, pngError, pngWarning);
  if (job.png)
    job.info = png_create_info_struct(job.png);
  if (!job.png || !job.info) {
    png_destroy_read_struct(job.png ? &job.png : nullptr, nullptr, nullptr);
    err = "out of memory decoding PNG data";
    return false;
  }
  PngFormat fmt;
  std::memset(&fmt, 0, sizeof(fmt));
  std::vector<uint8_t> rowBuffer;
  std::vector<png_bytep> rowPointers;
  Outcome outcome;
  try {
    outcome = runPng(job, fmt, out, rowBuffer, rowPointers);
  } catch (const std::bad_alloc &) {
    outcome = Outcome::OutOfMemory;
  }
  png_destroy_read_struct(&job.png, &job.info, nullptr);
  switch (outcome) {
  case Outcome::Decoded:
    return true;
  case Outcome::Truncated:
    err = "truncated PNG data";
    return false;
  case Outcome::Corrupt:
  case Outcome::Unsupported: // libpng reports both through its error handler
    err = std::string("corrupt PNG data: ") + job.message;
    return false;
  case Outcome::TooLarge:
    err = tooLargeMessage(job.width, job.height);
    return false;
  case Outcome::OutOfMemory:
    err = "out of memory decoding PNG data";
    return false;
  }
  return false;
}

} // namespace

bool decodeImage(llvm::ArrayRef<uint8_t> bytes, RgbImage &out, std::string &err) {
  out = RgbImage();
  bool ok = false;
  if (bytes.empty()) {
    err = "empty file";
  } else if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    ok = decodeJpeg(bytes, out, err);
  } else if (bytes.size() >= sizeof(kPngSignature) &&
             std::memcmp(bytes.data(), kPngSignature, sizeof(kPngSignature)) == 0) {
    ok = decodePng(bytes, out, err);
  } else {
    err = "not a JPEG or PNG image";
  }
  if (!ok)
    out = RgbImage();
  return ok;
}

bool decodeImageFile(const std::string &path, RgbImage &out, std::string &err) {
  auto buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) {
    out = RgbImage();
    err = "cannot read: " + buffer.getError().message();
    return false;
  }
  llvm::StringRef data = (*buffer)->getBuffer();
  return decodeImage(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(data.data()), data.size()), out,
      err);
}

} // namespace ampc::data
