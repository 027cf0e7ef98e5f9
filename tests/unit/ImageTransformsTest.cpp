//===- ImageTransformsTest.cpp - torchvision's transform parameters --------===//
#include "runtime/data/ImageTransforms.h"

#include "kernels/common/Random.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace ampc::data;

namespace {

TEST(ImageTransforms, ResizeAndCenterCropFollowTorchvisionsRoundings) {
  // Resize(256): the shorter side 256, the longer int(256 * long / short).
  EXPECT_EQ(resizedForShorterSide(500, 375, 256), std::make_pair(int64_t(341), int64_t(256)));
  EXPECT_EQ(resizedForShorterSide(375, 500, 256), std::make_pair(int64_t(256), int64_t(341)));
  EXPECT_EQ(resizedForShorterSide(300, 300, 256), std::make_pair(int64_t(256), int64_t(256)));
  // CenterCrop: int(round((size - crop) / 2.0)), half to even as Python rounds.
  CropBox box = centerCropBox(341, 256, 224, 224);
  EXPECT_EQ(box.top, 16);
  EXPECT_EQ(box.left, 58); // round(58.5) = 58
  // A crop larger than the image pads: (crop - size) / 2 before.
  box = centerCropBox(20, 30, 32, 25);
  EXPECT_EQ(box.top, -1);
  EXPECT_EQ(box.left, -2);
  RgbImage image;
  image.width = 2;
  image.height = 1;
  image.pixels = {1, 2, 3, 4, 5, 6};
  RgbImage padded = cropPadded(image, {-1, -1, 3, 4});
  ASSERT_EQ(padded.pixels.size(), 36u);
  EXPECT_EQ(padded.pixels[(1 * 4 + 1) * 3], 1);
  EXPECT_EQ(padded.pixels[(1 * 4 + 2) * 3 + 2], 6);
  EXPECT_EQ(padded.pixels[0], 0);
}

TEST(ImageTransforms, RandomResizedCropFollowsItsDistributions) {
  // torchvision's rules, checked as distributions over a fixed seed's draws
  // where every try fits (so no redraw skews them): the area fraction
  // uniform in scale (a square image at ratio 1), the log aspect ratio
  // uniform in log(ratio) (small areas), the offset uniform over the
  // positions that fit.
  const int n = 20000;
  auto uniformOf = [](int s) {
    return [s](int k) { return ampc::kernels::uniform01Double(7, uint64_t(s), uint64_t(k)); };
  };
  int bins[10] = {};
  double areaSum = 0;
  for (int s = 0; s < n; ++s) {
    CropBox b = randomResizedCropBox(1000, 1000, {0.08, 1.0}, {1.0, 1.0}, uniformOf(s));
    ASSERT_EQ(b.width, b.height);
    double fraction = double(b.width * b.height) / 1e6;
    areaSum += fraction;
    bins[std::min(9, int((fraction - 0.08) / 0.92 * 10))]++;
  }
  EXPECT_NEAR(areaSum / n, 0.54, 0.01);
  for (int b : bins)
    EXPECT_NEAR(b, n / 10, n / 40);
  const int64_t w = 400, h = 300;
  double logRatioSum = 0, logRatioSquares = 0;
  int64_t leftSum = 0, slack = 0;
  for (int s = 0; s < n; ++s) {
    CropBox b = randomResizedCropBox(w, h, {0.2, 0.25}, {3.0 / 4.0, 4.0 / 3.0}, uniformOf(s));
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, h);
    ASSERT_LE(b.left + b.width, w);
    double lr = std::log(double(b.width) / double(b.height));
    logRatioSum += lr;
    logRatioSquares += lr * lr;
    leftSum += b.left;
    slack += w - b.width;
  }
  // log(4/3) = 0.2877: uniform on [-0.2877, 0.2877] has mean 0 and
  // variance 0.2877^2 / 3 = 0.0276 (rounding to whole pixels blurs it a
  // little).
  EXPECT_NEAR(logRatioSum / n, 0.0, 0.005);
  EXPECT_NEAR(logRatioSquares / n, 0.0276, 0.002);
  // The left edge is uniform over [0, w - width]: its mean is half the slack.
  EXPECT_NEAR(double(leftSum) / double(slack), 0.5, 0.02);
}

TEST(ImageTransforms, RandomResizedCropFallsBackToTheCentreClampedToTheRatio) {
  // Draws that never fit (an area of the whole image at an extreme ratio)
  // end in the fallback: a 1000x100 image is wider than 4:3, so the crop is
  // the full height at 4:3, centred.
  auto never = [](int k) { return k % 4 < 2 ? 0.999 : 0.5; };
  CropBox b = randomResizedCropBox(1000, 100, {1.0, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, never);
  EXPECT_EQ(b.height, 100);
  EXPECT_EQ(b.width, 133);
  EXPECT_EQ(b.left, (1000 - 133) / 2);
  EXPECT_EQ(b.top, 0);
}

TEST(ImageTransforms, NormalizeWritesChwAndMirrorsWhenFlipped) {
  RgbImage image;
  image.width = 2;
  image.height = 1;
  image.pixels = {0, 51, 255, 255, 102, 0};
  float out[6], flipped[6];
  toNormalizedChw(image, false, {0.5f, 0, 0}, {0.5f, 1, 2}, out);
  toNormalizedChw(image, true, {0.5f, 0, 0}, {0.5f, 1, 2}, flipped);
  EXPECT_FLOAT_EQ(out[0], -1.0f); // (0 / 255 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(out[1], 1.0f);
  EXPECT_FLOAT_EQ(out[2], 0.2f);
  EXPECT_FLOAT_EQ(out[4], 0.5f); // 255 / 255 / 2
  EXPECT_FLOAT_EQ(flipped[0], out[1]);
  EXPECT_FLOAT_EQ(flipped[1], out[0]);
  EXPECT_FLOAT_EQ(flipped[5], out[4]);
}

// PIL's convert("L") luma in integers: a grey pixel stays itself, pure red,
// green and blue give 76, 150 and 29 (Pillow's 19595, 38470, 7471 / 2^16).
TEST(ImageTransforms, GrayscaleIsPilsLumaInEveryChannel) {
  RgbImage image;
  image.width = 5;
  image.height = 1;
  image.pixels = {128, 128, 128, 255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 200, 30};
  toGrayscale(image);
  std::vector<uint8_t> want = {128, 128, 128, 76, 76, 76, 150, 150, 150, 29, 29, 29};
  // (10 x 19595 + 200 x 38470 + 30 x 7471 + 32768) >> 16 = 124
  for (int i = 0; i < 3; ++i)
    want.push_back(124);
  EXPECT_EQ(image.pixels, want);
  float one[5];
  toNormalizedChw(image, false, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}, one, /*channels=*/1);
  EXPECT_FLOAT_EQ(one[3], (29.0f / 255.0f - 0.5f) / 0.5f);
}

} // namespace
