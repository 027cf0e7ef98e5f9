//===- GeluMathTest.cpp - gelu's f32 math against f64 ---------------------===//
//
// The f32 gelu (erf form) and its gradient are float arithmetic and
// portableExp (kernels/common/ActivationMath.h, normalCdf), not libm's erf,
// so that their loops vectorize. Checked here against the f64 formulas with
// std::erf: the normal CDF within 3e-7 absolute and, in the lower tail
// (where gelu's value is x Phi), 5e-6 relative down to x = -6; gelu and its
// gradient; the special values.
//
//===----------------------------------------------------------------------===//
#include "kernels/common/ActivationMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace ampc::kernels;

namespace {
double exactCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
} // namespace

TEST(GeluMath, NormalCdfMatchesF64InBothTails) {
  // In the far tail -z^2 in f32 carries a relative error of 6e-8 of a
  // large number into the exponent: 1e-5 relative at x = -20, where Phi is
  // 3e-89 and gelu's value -6e-88.
  double worstAbs = 0, worstTailRel = 0, worstFarTailRel = 0;
  for (int i = -200000; i <= 200000; ++i) {
    float x = static_cast<float>(i) * 1e-4f; // [-20, 20]
    double exact = exactCdf(x);
    double got = normalCdf(x);
    worstAbs = std::max(worstAbs, std::fabs(got - exact));
    double rel = exact > 0 ? std::fabs(got - exact) / exact : 0;
    if (x < 0 && x >= -6)
      worstTailRel = std::max(worstTailRel, rel);
    else if (x < -6 && exact > 1e-37)
      worstFarTailRel = std::max(worstFarTailRel, rel);
  }
  EXPECT_LT(worstAbs, 3e-7);
  EXPECT_LT(worstTailRel, 5e-6);
  EXPECT_LT(worstFarTailRel, 5e-5);
}

TEST(GeluMath, GeluAndItsGradientMatchF64) {
  for (int i = -12000; i <= 12000; ++i) {
    float x = static_cast<float>(i) * 1e-3f; // [-12, 12]
    double cdf = exactCdf(x);
    double pdf = std::exp(-0.5 * double(x) * x) / std::sqrt(2 * M_PI);
    double gelu = double(x) * cdf, grad = cdf + double(x) * pdf;
    EXPECT_NEAR(geluErfOp(x), gelu, 3e-7 * std::max(1.0, std::fabs(double(x)))) << x;
    EXPECT_NEAR(geluErfGradOp(1.0f, x), grad, 1e-6 * std::max(1.0, std::fabs(double(x)))) << x;
  }
}

TEST(GeluMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(normalCdf(0.0f), 0.5f);
  EXPECT_EQ(normalCdf(inf), 1.0f);
  EXPECT_EQ(normalCdf(-inf), 0.0f);
  EXPECT_EQ(geluErfOp(inf), inf);
  EXPECT_EQ(geluErfOp(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(geluErfOp(std::nanf(""))));
  EXPECT_TRUE(std::isnan(geluErfGradOp(1.0f, std::nanf(""))));
  // Far in the lower tail gelu is a tiny negative number, never NaN.
  EXPECT_LE(geluErfOp(-30.0f), 0.0f);
  EXPECT_FALSE(std::isnan(geluErfOp(-30.0f)));
}
