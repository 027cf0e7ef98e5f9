//===- GradSpatialTest.cpp - Gradients of pad and resize -------------------===//
//
// Finite-difference checks (f64) of pad (constant, cropping, reflect, edge)
// and resize (nearest, linear and cubic in every coordinate mode, up and
// down, cubic with and without exclude_outside), then
// hand-computed and f32/f16/bf16 vs f64 checks of pad_grad and
// resize_grad.
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"
#include "KernelTestUtil.h"

#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::allClose;
using ampc::testing::checkGradients;
using ampc::testing::defaultTolerance;
using ampc::testing::KernelRun;
using ampc::testing::matchesF64;
using ampc::testing::randomValues;
using ampc::testing::runKernel;

using Ints = std::vector<int64_t>;
using Floats = std::vector<double>;

TensorType f64(std::vector<int64_t> dims) { return TensorType(DType::F64, dims); }

constexpr DType kLowDTypes[] = {DType::F32, DType::F16, DType::BF16};

// --- pad -----------------------------------------------------------------------

TEST(GradSpatial, PadEveryMode) {
  // Constant: the gradient is cropped (a pad by the negated pads); a
  // cropping pad's gradient is padded with zeros.
  EXPECT_TRUE(checkGradients("pad", {{f64({2, 3, 4})}}, {{"pads", Ints{0, 1, 2, 1, 0, 3}}}));
  EXPECT_TRUE(
      checkGradients("pad", {{f64({2, 5})}}, {{"pads", Ints{-1, 2, 0, -2}}, {"value", 4.0}}));
  // Reflect and edge: each gradient element goes to the element it read.
  EXPECT_TRUE(checkGradients("pad", {{f64({1, 2, 4, 5})}},
                             {{"pads", Ints{0, 0, 3, 1, 0, 0, 2, 4}}, {"mode", "reflect"}}));
  EXPECT_TRUE(checkGradients("pad", {{f64({1, 2, 3, 2})}},
                             {{"pads", Ints{0, 1, 2, 0, 0, 0, 4, 3}}, {"mode", "edge"}}));
}

TEST(GradSpatial, PadGradHandComputed) {
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t).str());
    // [1, 2, 3, 4] padded (2, 3): reflect reads 2 1 0 1 2 3 2 1 0, edge
    // 0 0 0 1 2 3 3 3 3; a gradient of ones counts the reads.
    std::vector<double> ones(9, 1);
    KernelRun reflect = runKernel("pad_grad", {TensorType(t, {1, 9})}, {ones},
                                  {{"pads", Ints{0, 2, 0, 3}}, {"mode", "reflect"}});
    ASSERT_TRUE(reflect.ok) << reflect.error;
    EXPECT_TRUE(allClose(reflect.outputs[0], {2, 3, 3, 1}, 0));
    KernelRun edge = runKernel("pad_grad", {TensorType(t, {1, 9})}, {ones},
                               {{"pads", Ints{0, 2, 0, 3}}, {"mode", "edge"}});
    ASSERT_TRUE(edge.ok) << edge.error;
    EXPECT_TRUE(allClose(edge.outputs[0], {3, 1, 1, 4}, 0));
  }
}

TEST(GradSpatial, PadGradMatchesF64) {
  for (const char *mode : {"constant", "reflect", "edge"}) {
    SCOPED_TRACE(mode);
    AttrMap attrs{{"pads", Ints{0, 1, 3, 2, 0, 0, 2, 3}}, {"mode", mode}};
    TensorType dy = f64({2, 3, 9, 9}); // [2, 2, 4, 4] padded
    std::vector<double> values = randomValues(dy.numElements(), 1, -2, 2);
    for (DType t : kLowDTypes)
      EXPECT_TRUE(matchesF64("pad_grad", {dy}, {values}, attrs, t, defaultTolerance(t)));
  }
}

// --- resize --------------------------------------------------------------------

TEST(GradSpatial, ResizeNearest) {
  EXPECT_TRUE(checkGradients("resize", {{f64({1, 2, 3, 4})}},
                             {{"size", Ints{6, 8}},
                              {"scales", Floats{2, 2}},
                              {"coordinate_mode", "asymmetric"},
                              {"nearest_mode", "floor"}}));
  // Down: some inputs are read by no output and get no gradient.
  EXPECT_TRUE(checkGradients("resize", {{f64({2, 1, 6, 5})}},
                             {{"size", Ints{4, 2}}, {"coordinate_mode", "half_pixel"}}));
}

TEST(GradSpatial, ResizeLinearEveryCoordinateMode) {
  for (const char *coords : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
    SCOPED_TRACE(coords);
    EXPECT_TRUE(
        checkGradients("resize", {{f64({1, 2, 3, 4})}},
                       {{"size", Ints{7, 5}}, {"mode", "linear"}, {"coordinate_mode", coords}}));
    EXPECT_TRUE(
        checkGradients("resize", {{f64({2, 1, 6, 7})}},
                       {{"size", Ints{4, 3}}, {"mode", "linear"}, {"coordinate_mode", coords}}));
  }
  EXPECT_TRUE(checkGradients("resize", {{f64({1, 1, 3, 5})}},
                             {{"size", Ints{4, 7}},
                              {"scales", Floats{1.5, 1.5}},
                              {"mode", "linear"},
                              {"coordinate_mode", "pytorch_half_pixel"}}));
}

TEST(GradSpatial, ResizeCubicEveryCoordinateMode) {
  for (const char *coords : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"})
    for (bool exclude : {false, true}) {
      SCOPED_TRACE(std::string(coords) + (exclude ? " exclude_outside" : ""));
      // Up (the edge taps clamp or drop out) and down (taps skip inputs).
      EXPECT_TRUE(checkGradients("resize", {{f64({1, 2, 3, 4})}},
                                 {{"size", Ints{7, 9}},
                                  {"mode", "cubic"},
                                  {"coordinate_mode", coords},
                                  {"exclude_outside", exclude}}));
      EXPECT_TRUE(checkGradients("resize", {{f64({2, 1, 7, 6})}},
                                 {{"size", Ints{4, 3}},
                                  {"mode", "cubic"},
                                  {"cubic_coeff_a", -0.5},
                                  {"coordinate_mode", coords},
                                  {"exclude_outside", exclude}}));
    }
  // A 1-wide input: every tap of that dim reads the one element.
  EXPECT_TRUE(checkGradients("resize", {{f64({1, 1, 3, 1})}},
                             {{"size", Ints{5, 2}},
                              {"scales", Floats{1.5, 2}},
                              {"mode", "cubic"},
                              {"coordinate_mode", "pytorch_half_pixel"}}));
}

TEST(GradSpatial, ResizeGradHandComputed) {
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t).str());
    // [0, 4] to 4 wide, align_corners=False: outputs 0..3 read x0 with
    // weights 1, 0.75, 0.25, 0 (checked against PyTorch's backward).
    KernelRun linear = runKernel("resize_grad", {TensorType(t, {1, 1, 1, 4})}, {{1, 2, 3, 4}},
                                 {{"size", Ints{1, 4}},
                                  {"mode", "linear"},
                                  {"coordinate_mode", "pytorch_half_pixel"},
                                  {"input_shape", Ints{1, 1, 1, 2}}});
    ASSERT_TRUE(linear.ok) << linear.error;
    EXPECT_TRUE(allClose(linear.outputs[0], {3.25, 6.75}, 0));
    // Nearest doubling: each input is read by a 2x2 block.
    KernelRun nearest =
        runKernel("resize_grad", {TensorType(t, {1, 1, 2, 4})}, {{1, 2, 3, 4, 5, 6, 7, 8}},
                  {{"size", Ints{2, 4}},
                   {"scales", Floats{2, 2}},
                   {"coordinate_mode", "asymmetric"},
                   {"nearest_mode", "floor"},
                   {"input_shape", Ints{1, 1, 1, 2}}});
    ASSERT_TRUE(nearest.ok) << nearest.error;
    EXPECT_TRUE(allClose(nearest.outputs[0], {14, 22}, 0));
  }
  for (DType t : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtypeName(t).str());
    // Bicubic 4 -> 8, align_corners=False, of dy = 1..8 (PyTorch's
    // backward; the edge taps' weights go to the edge elements).
    KernelRun cubic =
        runKernel("resize_grad", {TensorType(t, {1, 1, 1, 8})}, {{1, 2, 3, 4, 5, 6, 7, 8}},
                  {{"size", Ints{1, 8}},
                   {"mode", "cubic"},
                   {"coordinate_mode", "pytorch_half_pixel"},
                   {"input_shape", Ints{1, 1, 1, 4}}});
    ASSERT_TRUE(cubic.ok) << cubic.error;
    EXPECT_TRUE(allClose(cubic.outputs[0], {2.734375, 7.0, 11.31640625, 14.94921875}, 0));
    // ONNX's A = -0.5 with exclude_outside (numpy: the transposed weights).
    KernelRun excluded =
        runKernel("resize_grad", {TensorType(t, {1, 1, 1, 8})}, {{1, 2, 3, 4, 5, 6, 7, 8}},
                  {{"size", Ints{1, 8}},
                   {"mode", "cubic"},
                   {"cubic_coeff_a", -0.5},
                   {"exclude_outside", true},
                   {"input_shape", Ints{1, 1, 1, 4}}});
    ASSERT_TRUE(excluded.ok) << excluded.error;
    EXPECT_TRUE(allClose(
        excluded.outputs[0],
        {2.974357887726607, 6.913171190949495, 10.852123946858232, 15.260346974465664}, 1e-6));
  }
}

TEST(GradSpatial, ResizeGradMatchesF64) {
  TensorType dy = f64({2, 3, 7, 9});
  std::vector<double> values = randomValues(dy.numElements(), 2, -2, 2);
  for (const char *coords : {"half_pixel", "align_corners", "asymmetric"})
    for (DType t : kLowDTypes)
      EXPECT_TRUE(matchesF64("resize_grad", {dy}, {values},
                             {{"size", Ints{7, 9}},
                              {"mode", "linear"},
                              {"coordinate_mode", coords},
                              {"input_shape", Ints{2, 3, 4, 5}}},
                             t, defaultTolerance(t)))
          << coords;
  for (const char *coords : {"half_pixel", "align_corners"})
    for (DType t : kLowDTypes)
      EXPECT_TRUE(matchesF64("resize_grad", {dy}, {values},
                             {{"size", Ints{7, 9}},
                              {"mode", "cubic"},
                              {"coordinate_mode", coords},
                              {"exclude_outside", std::string(coords) == "half_pixel"},
                              {"input_shape", Ints{2, 3, 4, 5}}},
                             t, defaultTolerance(t)))
          << coords << " cubic";
  // Nearest halving (exact coordinates).
  TensorType half = f64({2, 3, 2, 3});
  for (DType t : kLowDTypes)
    EXPECT_TRUE(matchesF64("resize_grad", {half}, {randomValues(36, 3)},
                           {{"size", Ints{2, 3}}, {"input_shape", Ints{2, 3, 4, 6}}}, t,
                           defaultTolerance(t)));
}

} // namespace
