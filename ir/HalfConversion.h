//===- HalfConversion.h - Exact f32 <-> f16 / bf16 conversion -------------===//
//
// Bit-exact IEEE conversions used by the IR (constants), the reference
// backend (f16/bf16 emulation) and, through AMPC_HD, the CUDA kernels.
// Narrowing rounds to nearest, ties to even; overflow goes to infinity;
// subnormals are produced and consumed exactly; NaN stays NaN (quiet) with
// its sign and as much payload as fits.
//
// Header-only and free of LLVM so nvcc can compile it.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_HALFCONVERSION_H
#define AMPC_IR_HALFCONVERSION_H

#include "ir/HostDevice.h"

#include <cstdint>
#include <cstring>

namespace ampc {

AMPC_HD inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

AMPC_HD inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// f32 -> IEEE binary16 bits, round to nearest even.
AMPC_HD inline uint16_t floatToHalfBits(float value) {
  uint32_t x = floatBits(value);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absX = x & 0x7fffffffu;
  if (absX >= 0x7f800000u) { // inf or NaN
    if (absX == 0x7f800000u)
      return static_cast<uint16_t>(sign | 0x7c00u);
    // Keep the top payload bits, force the quiet bit so it stays a NaN.
    return static_cast<uint16_t>(sign | 0x7e00u | ((absX >> 13) & 0x3ffu));
  }
  // 65520 = largest value that rounds to 65504 (max half) is just below this.
  if (absX >= 0x477ff000u)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absX >= 0x38800000u) { // normal half range (>= 2^-14)
    uint32_t mant = absX & 0x7fffffu;
    uint32_t exp = (absX >> 23) - 127 + 15;
    uint32_t half = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu; // 13 dropped bits
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
      ++half; // may carry into the exponent; that is the correct result
    return static_cast<uint16_t>(sign | half);
  }
  // Subnormal half or zero: value = m * 2^-24 with m < 1024.
  if (absX < 0x33000000u) // < 2^-25: rounds to zero (2^-25 itself is a tie to 0)
    return static_cast<uint16_t>(sign);
  uint32_t exp = absX >> 23;               // biased f32 exponent, 102..112
  uint32_t mant = (absX & 0x7fffffu) | 0x800000u; // with the implicit bit
  uint32_t shift = 126 - exp;              // 14..24: bits to drop to reach 2^-24 units
  uint32_t half = mant >> shift;
  uint32_t rest = mant & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u)))
    ++half;
  return static_cast<uint16_t>(sign | half);
}

/// IEEE binary16 bits -> f32 (exact).
AMPC_HD inline float halfBitsToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) // inf / NaN
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (exp != 0)
    return bitsToFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
  if (mant == 0)
    return bitsToFloat(sign);
  // Subnormal: normalise.
  int e = -14;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  mant &= 0x3ffu;
  return bitsToFloat(sign | (static_cast<uint32_t>(e + 127) << 23) | (mant << 13));
}

/// f32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN.
AMPC_HD inline uint16_t floatToBf16Bits(float value) {
  uint32_t x = floatBits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

/// bfloat16 bits -> f32 (exact).
AMPC_HD inline float bf16BitsToFloat(uint16_t b) {
  return bitsToFloat(static_cast<uint32_t>(b) << 16);
}

/// Round an f32 through f16 and back: what storing in f16 does to a value.
AMPC_HD inline float roundToHalf(float v) { return halfBitsToFloat(floatToHalfBits(v)); }
/// Round an f32 through bf16 and back.
AMPC_HD inline float roundToBf16(float v) { return bf16BitsToFloat(floatToBf16Bits(v)); }

} // namespace ampc

#endif
