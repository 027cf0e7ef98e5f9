//===- HalfConversionTest.cpp - Exact f32 <-> f16/bf16 ---------------------===//
//
// Known bit patterns, then exhaustive checks over all 65,536 half values: each
// converts exactly to f32 and back; midpoints between neighbours round to the
// even one; values just off a midpoint round to the nearer one. f16 is also
// compared with the compiler's own _Float16 conversion as an independent oracle.
//
//===----------------------------------------------------------------------===//
#include "ir/HalfConversion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace ampc;

namespace {

float f(uint32_t bits) { return bitsToFloat(bits); }

bool isHalfNaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool isBf16NaN(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

TEST(HalfConversion, KnownF16Patterns) {
  EXPECT_EQ(floatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(floatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalfBits(0.5f), 0x3800);
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7bff); // largest finite
  EXPECT_EQ(floatToHalfBits(65519.0f), 0x7bff); // below the midpoint
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7c00); // tie with odd 65504 -> inf
  EXPECT_EQ(floatToHalfBits(1e10f), 0x7c00);    // overflow to inf
  EXPECT_EQ(floatToHalfBits(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -14)), 0x0400); // smallest normal
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -25)), 0x0000); // tie -> even (zero)
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToHalfBits(std::ldexp(3.0f, -25)), 0x0002); // 1.5 units: tie -> even 2
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(floatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00); // tie -> even
  EXPECT_EQ(floatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalfBits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(floatToHalfBits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(isHalfNaN(floatToHalfBits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(isHalfNaN(floatToHalfBits(f(0x7f800001u))));       // signalling, tiny payload
  EXPECT_EQ(floatToHalfBits(f(0xffc00000u)) & 0x8000u, 0x8000u); // sign kept

  EXPECT_EQ(halfBitsToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfBitsToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfBitsToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfBitsToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(halfBitsToFloat(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(halfBitsToFloat(0x8000)));
  EXPECT_TRUE(std::isinf(halfBitsToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(halfBitsToFloat(0x7e00)));
}

TEST(HalfConversion, KnownBf16Patterns) {
  EXPECT_EQ(floatToBf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16Bits(-1.0f), 0xbf80);
  EXPECT_EQ(floatToBf16Bits(f(0x3f808000u)), 0x3f80); // tie -> even
  EXPECT_EQ(floatToBf16Bits(f(0x3f818000u)), 0x3f82); // tie -> even (up)
  EXPECT_EQ(floatToBf16Bits(f(0x3f808001u)), 0x3f81); // just above the tie
  EXPECT_EQ(floatToBf16Bits(f(0x7f7fffffu)), 0x7f80); // max float rounds to inf
  EXPECT_EQ(floatToBf16Bits(f(0x00000001u)), 0x0000); // smallest f32 subnormal
  EXPECT_EQ(floatToBf16Bits(f(0x00008000u)), 0x0000); // tie -> even
  EXPECT_EQ(floatToBf16Bits(f(0x00018000u)), 0x0002);
  EXPECT_EQ(floatToBf16Bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(isBf16NaN(floatToBf16Bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(isBf16NaN(floatToBf16Bits(f(0x7f800001u)))); // payload only in low bits
  EXPECT_EQ(bf16BitsToFloat(0x4049), f(0x40490000u));
}

// Every half value converts to f32 and back unchanged (NaNs stay NaN).
TEST(HalfConversion, F16ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float x = halfBitsToFloat(static_cast<uint16_t>(h));
    if (isHalfNaN(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(std::isnan(x)) << std::hex << h;
      ASSERT_TRUE(isHalfNaN(floatToHalfBits(x))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(floatToHalfBits(x), h) << std::hex << h;
  }
}

// Between each pair of adjacent finite non-negative halves: the exact midpoint
// rounds to the even neighbour and the f32 values on either side of it round
// to the nearer neighbour.
TEST(HalfConversion, F16ExhaustiveMidpoints) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      double lo = halfBitsToFloat(static_cast<uint16_t>(h | sign));
      double hi = halfBitsToFloat(static_cast<uint16_t>((h + 1) | sign));
      float mid = static_cast<float>((lo + hi) / 2); // exact: halves have 11 bits
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
      uint32_t even = (h & 1u) ? h + 1 : h;
      ASSERT_EQ(floatToHalfBits(mid), even | sign) << std::hex << h;
      float below = std::nextafter(mid, static_cast<float>(lo));
      float above = std::nextafter(mid, static_cast<float>(hi));
      ASSERT_EQ(floatToHalfBits(below), h | sign) << std::hex << h;
      ASSERT_EQ(floatToHalfBits(above), (h + 1) | sign) << std::hex << h;
    }
  }
}

#if defined(__FLT16_MAX__)
// The compiler's _Float16 conversion is an independent, correctly rounded
// oracle. Every half bit pattern's neighbourhood plus a million random floats.
TEST(HalfConversion, F16AgreesWithCompilerFloat16) {
  std::mt19937 rng(12345);
  auto check = [](float x) {
    _Float16 h = static_cast<_Float16>(x);
    uint16_t bits;
    std::memcpy(&bits, &h, sizeof bits);
    if (std::isnan(x))
      return isHalfNaN(floatToHalfBits(x));
    return floatToHalfBits(x) == bits;
  };
  for (int i = 0; i < 1000000; ++i) {
    uint32_t bits = rng();
    // Bias towards the half range: keep the exponent within [-30, 20].
    if (i % 2)
      bits = (bits & 0x807fffffu) | ((97u + rng() % 50u) << 23);
    ASSERT_TRUE(check(f(bits))) << std::hex << bits;
  }
}
#endif

TEST(HalfConversion, Bf16ExhaustiveRoundTripAndMidpoints) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float x = bf16BitsToFloat(static_cast<uint16_t>(b));
    if (isBf16NaN(static_cast<uint16_t>(b))) {
      ASSERT_TRUE(isBf16NaN(floatToBf16Bits(x)));
      continue;
    }
    ASSERT_EQ(floatToBf16Bits(x), b) << std::hex << b;
    if ((b & 0x7fffu) >= 0x7f7fu)
      continue; // no finite upper neighbour
    uint32_t bits = b << 16;
    uint32_t even = (b & 1u) ? b + 1 : b;
    ASSERT_EQ(floatToBf16Bits(f(bits + 0x8000u)), even) << std::hex << b;
    ASSERT_EQ(floatToBf16Bits(f(bits + 0x7fffu)), b) << std::hex << b;
    ASSERT_EQ(floatToBf16Bits(f(bits + 0x8001u)), b + 1) << std::hex << b;
  }
}

TEST(HalfConversion, RoundHelpers) {
  EXPECT_EQ(roundToHalf(0.1f), halfBitsToFloat(0x2e66));
  EXPECT_EQ(roundToBf16(0.1f), bf16BitsToFloat(0x3dcd));
}

} // namespace
