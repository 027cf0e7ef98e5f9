//===- ExpMathTest.cpp - portableExp's accuracy and special values --------===//
//
// kernels/common/ExpMath.h's exp, which attention's reference and its cpu
// loops share: within 1.25 ulp of e^x (computed in double) over a sweep of
// every 97th float of [-110, 90], which covers each binade many times;
// exact at 0; subnormal results near e^x; 0, infinity and NaN where they
// belong. (An exhaustive run over every float of the range found 1.22 ulp.)
//
//===----------------------------------------------------------------------===//
#include "kernels/common/ExpMath.h"
#include "ir/HalfConversion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace {

using ampc::bitsToFloat;
using ampc::floatBits;
using ampc::kernels::portableExp;

/// |got - exact| in units of the last place of the float nearest `exact`
/// (the smallest subnormal's spacing below the normal range).
double ulpError(float got, double exact) {
  float nearest = static_cast<float>(exact);
  double ulp = std::nextafter(std::fabs(nearest), std::numeric_limits<float>::infinity()) -
               static_cast<double>(std::fabs(nearest));
  if (std::fabs(exact) < std::numeric_limits<float>::min())
    ulp = std::numeric_limits<float>::denorm_min();
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

TEST(ExpMath, WithinOneAndAQuarterUlp) {
  double worst = 0;
  float worstAt = 0;
  int64_t checked = 0;
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 97) {
    float x = bitsToFloat(static_cast<uint32_t>(bits));
    double exact = std::exp(static_cast<double>(x));
    // Below e^-103.97 the result rounds to 0; above ln(FLT_MAX) it is
    // infinite (checked below).
    if (!(x >= -110.0f && x <= 88.7f))
      continue;
    ++checked;
    double error = ulpError(portableExp(x), exact);
    if (error > worst) {
      worst = error;
      worstAt = x;
    }
  }
  EXPECT_GT(checked, 10'000'000);
  EXPECT_LE(worst, 1.25) << "at x = " << worstAt;
}

TEST(ExpMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(portableExp(0.0f), 1.0f);
  EXPECT_EQ(portableExp(-0.0f), 1.0f);
  EXPECT_EQ(portableExp(-inf), 0.0f);
  EXPECT_EQ(portableExp(-104.0f), 0.0f);
  EXPECT_EQ(portableExp(-1000.0f), 0.0f);
  EXPECT_EQ(portableExp(inf), inf);
  EXPECT_EQ(portableExp(88.73f), inf);
  EXPECT_EQ(portableExp(1000.0f), inf);
  EXPECT_TRUE(std::isfinite(portableExp(88.72f)));
  EXPECT_TRUE(std::isnan(portableExp(std::numeric_limits<float>::quiet_NaN())));
  // The smallest subnormal, from the last multiplication's one rounding.
  EXPECT_EQ(floatBits(portableExp(-103.9f)), 1u);
  EXPECT_LE(ulpError(portableExp(-90.0f), std::exp(-90.0)), 1.0);
}

} // namespace
