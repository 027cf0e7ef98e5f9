//===- ImageResize.h - PIL-compatible bilinear resampling and cropping ------===//
//
// torchvision's Resize and RandomResizedCrop on PIL images call
// Image.resize(size, Image.BILINEAR), which is not textbook bilinear
// interpolation: PIL convolves each axis with a triangle filter whose
// support widens with the downscale factor (so downscaling antialiases),
// in 22-bit fixed point, rounding to 8 bits after each pass. This file
// repeats that arithmetic so resized images match PIL's bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DATA_IMAGERESIZE_H
#define AMPC_RUNTIME_DATA_IMAGERESIZE_H

#include "runtime/data/ImageDecode.h"

#include <cstdint>

namespace ampc::data {

/// `src` resampled to outWidth x outHeight with PIL 9.4's
/// Image.resize(..., Image.BILINEAR): separable convolution with the
/// triangle filter, support 1 widened by the downscale factor, the
/// horizontal pass then the vertical pass, each rounded to 8 bits, only the
/// passes whose size changes (an unchanged size returns a copy). Both
/// images are non-empty.
RgbImage resizeBilinear(const RgbImage &src, int64_t outWidth, int64_t outHeight);

/// The loops resizeBilinear runs: the fastest the CPU has (AVX2 on x86-64
/// where present), SSE2 only, or plain scalar ones. Every choice gives the
/// same bits; tests compare them.
enum class ResizeLoops { Fastest, Sse2, Scalar };
RgbImage resizeBilinear(const RgbImage &src, int64_t outWidth, int64_t outHeight,
                        ResizeLoops loops);

/// The crop [left, left+width) x [top, top+height) of src (inside it, and
/// non-empty), as a new image.
RgbImage crop(const RgbImage &src, int64_t left, int64_t top, int64_t width, int64_t height);

} // namespace ampc::data

#endif // AMPC_RUNTIME_DATA_IMAGERESIZE_H
