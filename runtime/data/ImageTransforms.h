//===- ImageTransforms.h - torchvision's image transforms, seeded ----------===//
//
// What an image folder does to a decoded image before it becomes a sample:
// the training transform (RandomResizedCrop, RandomHorizontalFlip) or the
// evaluation one (Resize of the shorter side, CenterCrop), then ToTensor and
// Normalize into a CHW float sample. Each follows torchvision 0.14's
// definition (the parameters' distributions and roundings), with the random
// draws made from (seed, epoch, sample) by counter-based random numbers
// instead of a global generator, so a sample is the same on any thread.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DATA_IMAGETRANSFORMS_H
#define AMPC_RUNTIME_DATA_IMAGETRANSFORMS_H

#include "runtime/data/ImageDecode.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

namespace ampc::data {

/// A crop box inside an image: rows [top, top + height), columns [left,
/// left + width). In a centre crop larger than the image, top or left is
/// negative: the rows or columns outside the image are zero (torchvision
/// pads them so).
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

/// torchvision's RandomResizedCrop.get_params for an image of
/// `width` x `height`: up to 10 tries of an area fraction uniform in `scale`
/// and a log-uniform aspect ratio in `ratio`, then the centre crop clamped to
/// the ratio range. `uniform(k)` gives the k-th uniform [0, 1) draw.
template <typename Uniform>
CropBox randomResizedCropBox(int64_t width, int64_t height, std::array<double, 2> scale,
                             std::array<double, 2> ratio, Uniform &&uniform);

/// torchvision's Resize(shorter): the size the shorter side becomes
/// `shorter`, the longer int(shorter x long / short).
std::pair<int64_t, int64_t> resizedForShorterSide(int64_t width, int64_t height, int64_t shorter);

/// torchvision's CenterCrop of `height` x `width` from an image.
CropBox centerCropBox(int64_t imageWidth, int64_t imageHeight, int64_t height, int64_t width);

/// The crop box of `image` (zero outside it) as a new image.
RgbImage cropPadded(const RgbImage &image, const CropBox &box);

/// torchvision's Grayscale(1), which is PIL's convert("L"): every pixel
/// becomes its luma (R 19595 + G 38470 + B 7471 + 2^15) >> 16, kept in all
/// three channels, so the crops and resizes after it treat the image as
/// they treat an RGB one (each channel alike).
void toGrayscale(RgbImage &image);

/// ToTensor + Normalize: out[c][y][x] = (pixel / 255 - mean[c]) / std[c]
/// for the first `channels` channels (3, or 1 of a grayscale image),
/// columns mirrored when `flip` (RandomHorizontalFlip). `out` holds
/// channels x height x width floats.
void toNormalizedChw(const RgbImage &image, bool flip, const std::array<float, 3> &mean,
                     const std::array<float, 3> &stdev, float *out, int channels = 3);

// --- template definition ---------------------------------------------------

template <typename Uniform>
CropBox randomResizedCropBox(int64_t width, int64_t height, std::array<double, 2> scale,
                             std::array<double, 2> ratio, Uniform &&uniform) {
  double area = static_cast<double>(width) * static_cast<double>(height);
  double logLow = std::log(ratio[0]), logHigh = std::log(ratio[1]);
  int draw = 0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target = area * (scale[0] + (scale[1] - scale[0]) * uniform(draw++));
    double aspect = std::exp(logLow + (logHigh - logLow) * uniform(draw++));
    auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    double rowDraw = uniform(draw++), columnDraw = uniform(draw++);
    if (w > 0 && w <= width && h > 0 && h <= height) {
      // randint(0, height - h + 1): uniform over [0, height - h].
      auto top = std::min(height - h, static_cast<int64_t>(rowDraw * double(height - h + 1)));
      auto left = std::min(width - w, static_cast<int64_t>(columnDraw * double(width - w + 1)));
      return {top, left, h, w};
    }
  }
  double inRatio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (inRatio < ratio[0])
    h = static_cast<int64_t>(std::nearbyint(double(w) / ratio[0]));
  else if (inRatio > ratio[1])
    w = static_cast<int64_t>(std::nearbyint(double(h) * ratio[1]));
  return {(height - h) / 2, (width - w) / 2, h, w};
}

} // namespace ampc::data

#endif
