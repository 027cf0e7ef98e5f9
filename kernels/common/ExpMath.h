//===- ExpMath.h - An f32 exp with the same bits everywhere ---------------===//
//
// e^x from float multiplications, additions and bit operations alone: no
// libm call, so every backend, ISA and C library gives the same bits (libm's
// expf differs between glibc's FMA and SSE2 variants and CUDA's __expf),
// and a loop of it vectorizes (`#pragma omp simd`) where a call to expf
// stays scalar. Kernels whose exp is most of their time (attention) call it
// in the reference and in the fast loops alike, so the loops keep the
// reference's bits. Built with -ffp-contract=off like the rest of the
// element math: the polynomial's multiply-adds must not become fused ones.
//
// Checked over every float in [-110, 90]: within 1.22 ulp of e^x (99.2%
// correctly rounded; glibc's expf: 0.502 ulp), exact at 0, subnormal
// results rounded once, 0 below about -103.97 and infinity above about
// 88.72, NaN passed through.
//
// Header-only and free of LLVM so nvcc can compile it.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_EXPMATH_H
#define AMPC_KERNELS_COMMON_EXPMATH_H

#include "ir/HalfConversion.h"
#include "ir/HostDevice.h"

#include <cstdint>

namespace ampc::kernels {

/// e^x in f32 (see the file comment for its accuracy).
AMPC_HD inline float portableExp(float x) {
  // Clamp to where the result is neither certainly 0 nor certainly
  // infinite; this also makes a NaN a number, restored at the end, so the
  // conversion to an integer below always has a value in range.
  float c = x > -104.0f ? x : -104.0f;
  c = c < 89.0f ? c : 89.0f;
  // x = n ln2 + r with n = round(x log2(e)), |r| <= ln2 / 2: adding and
  // subtracting 1.5 * 2^23 rounds to an integer (round to nearest even).
  // ln2 is split in two; its first part has 9 significant bits, so n times
  // it (n has at most 8) is exact, and r keeps the bits of x that a single
  // rounded ln2 would lose.
  const float kRoundToInteger = 12582912.0f;
  float n = (c * 1.44269504088896341f + kRoundToInteger) - kRoundToInteger;
  float r = (c - n * 0.693359375f) - n * -2.12194440e-4f;
  // e^r by its Taylor series to r^7 (the rest is below 2^-27 for |r| <= ln2 / 2).
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n (n in [-150, 128]) as two normal powers of two, so that a subnormal
  // or infinite result comes from the last multiplication, rounded once.
  int32_t whole = static_cast<int32_t>(n);
  int32_t first = whole / 2, second = whole - first;
  float y = p * bitsToFloat(static_cast<uint32_t>(first + 127) << 23) *
            bitsToFloat(static_cast<uint32_t>(second + 127) << 23);
  return x != x ? x : y;
}

} // namespace ampc::kernels

#endif
