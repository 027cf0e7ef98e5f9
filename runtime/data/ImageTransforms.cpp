//===- ImageTransforms.cpp ----------------------------------------------------===//
#include "runtime/data/ImageTransforms.h"

#include <cstring>

namespace ampc::data {

std::pair<int64_t, int64_t> resizedForShorterSide(int64_t width, int64_t height, int64_t shorter) {
  // torchvision: new_long = int(new_short * long / short), the division in
  // floating point and truncated.
  if (width <= height)
    return {shorter, static_cast<int64_t>(double(shorter) * double(height) / double(width))};
  return {static_cast<int64_t>(double(shorter) * double(width) / double(height)), shorter};
}

CropBox centerCropBox(int64_t imageWidth, int64_t imageHeight, int64_t height, int64_t width) {
  // A crop larger than the image pads it first, (crop - size) / 2 before,
  // the rest after; the padded side is then taken whole. Otherwise the
  // offset is int(round((size - crop) / 2.0)).
  auto offset = [](int64_t size, int64_t crop) {
    if (crop > size)
      return -((crop - size) / 2);
    return static_cast<int64_t>(std::nearbyint(double(size - crop) / 2.0));
  };
  return {offset(imageHeight, height), offset(imageWidth, width), height, width};
}

RgbImage cropPadded(const RgbImage &image, const CropBox &box) {
  RgbImage out;
  out.width = box.width;
  out.height = box.height;
  out.pixels.assign(static_cast<size_t>(box.width * box.height * 3), 0);
  int64_t x0 = std::max<int64_t>(0, box.left), x1 = std::min(image.width, box.left + box.width);
  if (x1 <= x0)
    return out;
  for (int64_t y = 0; y < box.height; ++y) {
    int64_t sy = box.top + y;
    if (sy < 0 || sy >= image.height)
      continue;
    std::memcpy(&out.pixels[static_cast<size_t>((y * box.width + (x0 - box.left)) * 3)],
                &image.pixels[static_cast<size_t>((sy * image.width + x0) * 3)],
                static_cast<size_t>((x1 - x0) * 3));
  }
  return out;
}

void toGrayscale(RgbImage &image) {
  for (size_t i = 0; i + 2 < image.pixels.size(); i += 3) {
    uint32_t luma = (uint32_t(image.pixels[i]) * 19595u + uint32_t(image.pixels[i + 1]) * 38470u +
                     uint32_t(image.pixels[i + 2]) * 7471u + 0x8000u) >>
                    16;
    image.pixels[i] = image.pixels[i + 1] = image.pixels[i + 2] = static_cast<uint8_t>(luma);
  }
}

void toNormalizedChw(const RgbImage &image, bool flip, const std::array<float, 3> &mean,
                     const std::array<float, 3> &stdev, float *out, int channels) {
  int64_t w = image.width, h = image.height;
  // ToTensor divides by 255, Normalize subtracts and divides: in float, as
  // torchvision does (x / 255 - m) / s.
  for (int c = 0; c < channels; ++c) {
    float m = mean[c], s = stdev[c];
    float *plane = out + c * h * w;
    for (int64_t y = 0; y < h; ++y) {
      const uint8_t *row = &image.pixels[static_cast<size_t>(y * w * 3)];
      float *dst = plane + y * w;
      for (int64_t x = 0; x < w; ++x) {
        int64_t sx = flip ? w - 1 - x : x;
        dst[x] = (static_cast<float>(row[sx * 3 + c]) / 255.0f - m) / s;
      }
    }
  }
}

} // namespace ampc::data
