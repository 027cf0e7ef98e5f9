//===- RefSpatialTest.cpp - Reference pad and resize -----------------------===//
//
// Hand-computed values (checked against PyTorch's F.pad and F.interpolate,
// or for ONNX-only resize options against a numpy version of ONNX's rules),
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

// Cubic: torch's bicubic (A = -0.75, taps outside the input read the edge
// element) where torch has the mode, else ONNX Resize-13's definition
// computed in numpy (exclude_outside, other A); f64 and f32 (the values are
// not all exact in f16/bf16: RandomAgainstF64 covers those).
TEST(RefResize, CubicHandComputed) {
  for (DType t : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType row(t, {1, 1, 1, 4});
    Values squares{{0, 1, 4, 9}};
    // F.interpolate(size=(1, 8), mode="bicubic", align_corners=False): every
    // weight a multiple of 1/256, so the results are exact.
    AttrMap bicubic{
        {"size", Ints{1, 8}}, {"mode", "cubic"}, {"coordinate_mode", "pytorch_half_pixel"}};
    expectResults("resize", {row}, squares, bicubic,
                  {{-0.10546875, 0.12109375, 0.45703125, 1.609375, 2.828125, 5.44921875, 7.97265625,
                    9.52734375}});
    // ONNX with A = -0.5 and exclude_outside: the outer taps of the first
    // and last two outputs get no weight, the rest are renormalised.
    AttrMap excluded{{"size", Ints{1, 8}},
                     {"mode", "cubic"},
                     {"cubic_coeff_a", -0.5},
                     {"exclude_outside", true}};
    expectResults("resize", {row}, squares, excluded,
                  {{-0.08823529411764706, 0.1240875912408759, 0.5725190839694656, 1.5625, 3.0625,
                    5.312977099236641, 8.116788321167883, 9.441176470588234}},
                  1e-6);
    // Down to 3 (half_pixel reads 0.1667, 1.5, 2.8333), with and without.
    AttrMap down{{"size", Ints{1, 3}}, {"mode", "cubic"}};
    expectResults("resize", {row}, squares, down, {{0.09143518518518667, 2.125, 8.33449074074074}},
                  1e-6);
    down["exclude_outside"] = true;
    expectResults("resize", {row}, squares, down, {{0.08413205537806312, 2.125, 8.387646432374865}},
                  1e-6);
    // 2-D, separable: [[0, 1, 4], [9, 16, 25]] to 3 x 4, against torch's
    // bicubic with align_corners False and True.
    TensorType plane(t, {1, 1, 2, 3});
    Values x{{0, 1, 4, 9, 16, 25}};
    bicubic["size"] = Ints{3, 4};
    expectResults("resize", {plane}, x, bicubic,
                  {{-0.8156433105468733, -0.7471211751302058, 0.6439310709635458,
                    2.3550313313802134, 4.212890625, 6.3994140625, 11.1015625, 14.9306640625,
                    9.241424560546877, 13.545949300130214, 21.55919392903646, 27.506296793619796}},
                  1e-6);
    bicubic["coordinate_mode"] = "align_corners";
    expectResults("resize", {plane}, x, bicubic,
                  {{0, 0.35185185185185164, 2.0555555555555562, 4, 4.5, 6.574074074074073,
                    10.833333333333336, 14.5, 9, 12.796296296296294, 19.611111111111114, 25}},
                  1e-6);
    // ONNX asymmetric with exclude_outside (numpy).
    AttrMap asymmetric{{"size", Ints{3, 4}},
                       {"mode", "cubic"},
                       {"coordinate_mode", "asymmetric"},
                       {"exclude_outside", true}};
    expectResults("resize", {plane}, x, asymmetric,
                  {{0, 0.44150943396226416, 2.714285714285714, 4.409090909090909, 6.142857142857143,
                    9.226954177897573, 15.526530612244896, 19.3008658008658, 10.459459459459453,
                    15.400509943906162, 24.529729729729713, 29.76535626535625}},
                  1e-6);
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
    for (bool exclude : {false, true}) {
      expectAllPrecisions("resize", types, {x},
                          {{"size", Ints{7, 11}},
                           {"mode", "cubic"},
                           {"coordinate_mode", coords},
                           {"exclude_outside", exclude}});
      expectAllPrecisions("resize", types, {x},
                          {{"size", Ints{3, 4}},
                           {"mode", "cubic"},
                           {"cubic_coeff_a", -0.5},
                           {"coordinate_mode", coords},
                           {"exclude_outside", exclude}});
    }
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
