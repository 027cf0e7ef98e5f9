//===- RefSpatialTest.cpp - Reference pad and resize -----------------------===//
//
// Hand-computed values (checked against PyTorch's F.pad and F.interpolate),
// random values in f32/f16/bf16 against f64, and exact half emulation.
// Nearest resizing is compared with f64 only where every coordinate is
// exact in both (scales of 2 and 1/2): elsewhere f32 and f64 may round a
// coordinate that lands on an integer to different sides, as PyTorch's f32
// and f64 kernels do.
//
//===----------------------------------------------------------------------===//
#include "RefCaseUtil.h"

#include <string>
#include <vector>

namespace {

using namespace ampc;
using namespace ampc::testing::refcases;

using Ints = std::vector<int64_t>;
using Floats = std::vector<double>;

// --- pad -------------------------------------------------------------------------

TEST(RefPad, HandComputed) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType row(t, {1, 4});
    // F.pad(x, (2, 3), mode=...) of [1, 2, 3, 4].
    expectResults("pad", {row}, {{1, 2, 3, 4}}, {{"pads", Ints{0, 2, 0, 3}}, {"mode", "reflect"}},
                  {{3, 2, 1, 2, 3, 4, 3, 2, 1}});
    expectResults("pad", {row}, {{1, 2, 3, 4}}, {{"pads", Ints{0, 2, 0, 3}}, {"mode", "edge"}},
                  {{1, 1, 1, 2, 3, 4, 4, 4, 4}});
    // Constant, on the first dim before and the second after.
    expectResults("pad", {TensorType(t, {2, 2})}, {{1, 2, 3, 4}},
                  {{"pads", Ints{1, 0, 0, 1}}, {"value", 9.0}}, {{9, 9, 9, 1, 2, 9, 3, 4, 9}});
    // Negative pads crop, and mix with padding on the other side.
    expectResults("pad", {TensorType(t, {1, 5})}, {{1, 2, 3, 4, 5}}, {{"pads", Ints{0, -1, 0, -2}}},
                  {{2, 3}});
    expectResults("pad", {TensorType(t, {1, 3})}, {{1, 2, 3}}, {{"pads", Ints{0, -1, 0, 2}}},
                  {{2, 3, 0, 0}});
    // Reflect in two dims: [[1, 2], [3, 4]] padded by one on every side.
    expectResults("pad", {TensorType(t, {2, 2})}, {{1, 2, 3, 4}},
                  {{"pads", Ints{1, 1, 1, 1}}, {"mode", "reflect"}},
                  {{4, 3, 4, 3, 2, 1, 2, 1, 4, 3, 4, 3, 2, 1, 2, 1}});
  }
}

TEST(RefPad, MovesAnyDType) {
  expectResults("pad", {TensorType(DType::I64, {2})}, {{-5, 8}},
                {{"pads", Ints{1, 1}}, {"value", 7.0}}, {{7, -5, 8, 7}});
  expectResults("pad", {TensorType(DType::Bool, {1, 2})}, {{1, 0}},
                {{"pads", Ints{0, 1, 0, 0}}, {"mode", "edge"}}, {{1, 1, 0}});
}

TEST(RefPad, RandomAgainstF64) {
  TypesAt types = [](DType t) { return std::vector<TensorType>{TensorType(t, {2, 3, 5, 4})}; };
  std::vector<double> x = randomValues(120, 1);
  expectAllPrecisions("pad", types, {x},
                      {{"pads", Ints{0, 0, 2, 1, 0, 0, 1, 3}}, {"mode", "reflect"}});
  expectAllPrecisions("pad", types, {x},
                      {{"pads", Ints{0, 1, 2, 0, 0, 0, 3, 1}}, {"mode", "edge"}});
  expectAllPrecisions("pad", types, {x},
                      {{"pads", Ints{0, -1, 1, 2, 0, 0, -2, 1}}, {"value", -0.375}});
}

// --- resize ----------------------------------------------------------------------

TEST(RefResize, NearestHandComputed) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // F.interpolate(scale_factor=2, mode="nearest"): asymmetric, floor.
    AttrMap torchNearest{{"size", Ints{4, 4}},
                         {"scales", Floats{2, 2}},
                         {"coordinate_mode", "asymmetric"},
                         {"nearest_mode", "floor"}};
    expectResults("resize", {TensorType(t, {1, 1, 2, 2})}, {{1, 2, 3, 4}}, torchNearest,
                  {{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}});
    // Halving [1, 2, 3, 4]: asymmetric floor reads 0 and 2; half_pixel
    // lands on 0.5 and 2.5, a tie each, which round_prefer_floor and
    // round_prefer_ceil break apart.
    TensorType row(t, {1, 1, 1, 4});
    AttrMap half{
        {"size", Ints{1, 2}}, {"coordinate_mode", "asymmetric"}, {"nearest_mode", "floor"}};
    expectResults("resize", {row}, {{1, 2, 3, 4}}, half, {{1, 3}});
    half["coordinate_mode"] = "half_pixel";
    half["nearest_mode"] = "round_prefer_floor";
    expectResults("resize", {row}, {{1, 2, 3, 4}}, half, {{1, 3}});
    half["nearest_mode"] = "round_prefer_ceil";
    expectResults("resize", {row}, {{1, 2, 3, 4}}, half, {{2, 4}});
    half["nearest_mode"] = "ceil";
    expectResults("resize", {row}, {{1, 2, 3, 4}}, half, {{2, 4}});
    // align_corners maps the ends onto the ends: 4 -> 3 reads 0, 1.5, 3.
    half = {{"size", Ints{1, 3}}, {"coordinate_mode", "align_corners"}};
    expectResults("resize", {row}, {{1, 2, 3, 4}}, half, {{1, 2, 4}});
  }
}

TEST(RefResize, LinearHandComputed) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // F.interpolate(size=(4, 4), mode="bilinear", align_corners=False):
    // coordinates -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1).
    AttrMap bilinear{
        {"size", Ints{4, 4}}, {"mode", "linear"}, {"coordinate_mode", "pytorch_half_pixel"}};
    expectResults("resize", {TensorType(t, {1, 1, 2, 2})}, {{0, 4, 8, 12}}, bilinear,
                  {{0, 1, 3, 4, 2, 3, 5, 6, 6, 7, 9, 10, 8, 9, 11, 12}});
    // align_corners=True: [0, 3] to 3 wide reads 0, 0.5, 1 (one row: the
    // row coordinate is 0).
    expectResults("resize", {TensorType(t, {1, 1, 1, 2})}, {{0, 3}},
                  {{"size", Ints{1, 3}}, {"mode", "linear"}, {"coordinate_mode", "align_corners"}},
                  {{0, 1.5, 3}});
    // pytorch_half_pixel maps a size-1 output to 0, half_pixel to the
    // middle (coordinate 0.5 of 2 elements).
    AttrMap single{
        {"size", Ints{1, 1}}, {"mode", "linear"}, {"coordinate_mode", "pytorch_half_pixel"}};
    expectResults("resize", {TensorType(t, {1, 1, 1, 2})}, {{2, 6}}, single, {{2}});
    single["coordinate_mode"] = "half_pixel";
    expectResults("resize", {TensorType(t, {1, 1, 1, 2})}, {{2, 6}}, single, {{4}});
  }
}

TEST(RefResize, RandomAgainstF64) {
  TypesAt types = [](DType t) { return std::vector<TensorType>{TensorType(t, {2, 3, 5, 6})}; };
  std::vector<double> x = randomValues(180, 2);
  for (const char *coords : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
    SCOPED_TRACE(coords);
    expectAllPrecisions("resize", types, {x},
                        {{"size", Ints{7, 11}}, {"mode", "linear"}, {"coordinate_mode", coords}});
    expectAllPrecisions("resize", types, {x},
                        {{"size", Ints{3, 4}}, {"mode", "linear"}, {"coordinate_mode", coords}});
  }
  // Nearest where coordinates are exact: doubling and halving.
  expectAllPrecisions("resize", types, {x},
                      {{"size", Ints{10, 12}},
                       {"scales", Floats{2, 2}},
                       {"coordinate_mode", "asymmetric"},
                       {"nearest_mode", "floor"}});
  TypesAt even = [](DType t) { return std::vector<TensorType>{TensorType(t, {2, 3, 4, 6})}; };
  expectAllPrecisions("resize", even, {randomValues(144, 3)},
                      {{"size", Ints{2, 3}}, {"coordinate_mode", "half_pixel"}});
}

} // namespace
