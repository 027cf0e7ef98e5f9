//===- Random.h - Counter-based random numbers, identical on every backend ===//
//
// A value depends only on (seed, stream, index), never on evaluation order or
// thread count, so dropout masks and parameter initialisation are the same on
// the reference, CPU and CUDA backends and across runs.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_RANDOM_H
#define AMPC_KERNELS_COMMON_RANDOM_H

#include "ir/HalfConversion.h"
#include "ir/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace ampc::kernels {

/// SplitMix64's finaliser: a bijective 64-bit mixer with full avalanche.
AMPC_HD inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

AMPC_HD inline uint64_t randomBits(uint64_t seed, uint64_t stream, uint64_t index) {
  return mix64(mix64(mix64(seed) ^ stream) ^ index);
}

/// Uniform in [0, 1) with 24 random bits (exactly representable in f32).
AMPC_HD inline float uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<float>(randomBits(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

/// Uniform in [0, 1) with 53 random bits, for initialisation in double.
AMPC_HD inline double uniform01Double(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<double>(randomBits(seed, stream, index) >> 11) * (1.0 / 9007199254740992.0);
}

/// Standard normal by Box-Muller over two independent uniforms.
AMPC_HD inline double standardNormal(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = uniform01Double(seed, stream, 2 * index);
  double u2 = uniform01Double(seed, stream, 2 * index + 1);
  double r = std::sqrt(-2.0 * std::log(1.0 - u1)); // 1 - u1 in (0, 1]: log is finite
  return r * std::cos(6.283185307179586 * u2);
}

/// The part of randomBits that depends only on (seed, stream), hoisted out
/// of loops over indices: randomBits(seed, stream, i) ==
/// mix64(streamKey(seed, stream) ^ i).
AMPC_HD inline uint64_t streamKey(uint64_t seed, uint64_t stream) {
  return mix64(mix64(seed) ^ stream);
}

/// Natural log of y in (0, 1] (a normal float) to within 1e-6:
/// exponent and mantissa apart, the mantissa folded into [sqrt(1/2),
/// sqrt(2)) and log(m) = 2 atanh((m - 1) / (m + 1)) by its series. No
/// branches or calls, so a loop over it vectorises.
AMPC_HD inline float logUnitInterval(float y) {
  uint32_t bits = floatBits(y);
  float exponent = static_cast<float>(static_cast<int>(bits >> 23) - 127);
  float m = bitsToFloat((bits & 0x7fffffu) | 0x3f800000u); // [1, 2)
  bool high = m > 1.41421356f;
  m = high ? 0.5f * m : m;
  exponent = high ? exponent + 1.0f : exponent;
  float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
  float series = 1.0f + t2 * (1.0f / 3 + t2 * (1.0f / 5 + t2 * (1.0f / 7 + t2 * (1.0f / 9))));
  return exponent * 0.693147181f + 2.0f * t * series;
}

/// cos(2 pi u) for u in [0, 1) to within 1e-6: folded by symmetry onto
/// [0, pi/2], then its Taylor polynomial to x^12.
AMPC_HD inline float cosTwoPi(float u) {
  float a = u > 0.5f ? 1.0f - u : u; // cos(2 pi u) = cos(2 pi (1 - u))
  bool second = a > 0.25f;           // cos(pi - x) = -cos(x)
  a = second ? 0.5f - a : a;
  float x = 6.28318531f * a, x2 = x * x;
  float c =
      1.0f +
      x2 * (-1.0f / 2 +
            x2 * (1.0f / 24 +
                  x2 * (-1.0f / 720 +
                        x2 * (1.0f / 40320 + x2 * (-1.0f / 3628800 + x2 * (1.0f / 479001600))))));
  return second ? -c : c;
}

/// A standard normal in float from one 64-bit draw, for bulk data rather
/// than initialisation: Box-Muller on two 24-bit uniforms with the
/// polynomial log and cos above (|z| <= 5.77). About ten times cheaper than
/// standardNormal and vectorisable; `key` is streamKey(seed, stream).
AMPC_HD inline float fastStandardNormal(uint64_t key, uint64_t index) {
  uint64_t bits = mix64(key ^ index);
  // 1 - u1 in (0, 1], exactly: (2^24 - k) / 2^24 for the 24-bit k.
  float y = static_cast<float>(16777216 - static_cast<int32_t>(bits >> 40)) * (1.0f / 16777216.0f);
  float u2 =
      static_cast<float>(static_cast<int32_t>((bits >> 16) & 0xffffffu)) * (1.0f / 16777216.0f);
  return std::sqrt(-2.0f * logUnitInterval(y)) * cosTwoPi(u2);
}

/// Dropout keeps element `index` of step `step` when this is true.
/// The stream seed of one random op: its own seed attribute under the run's
/// seed. Run seed 0 leaves the attribute as it is.
AMPC_HD inline uint64_t opSeed(uint64_t runSeed, uint64_t attrSeed) {
  return runSeed == 0 ? attrSeed : mix64(runSeed * 0x9e3779b97f4a7c15ull + attrSeed);
}

AMPC_HD inline bool dropoutKeep(uint64_t seed, uint64_t step, uint64_t index, float p) {
  return uniform01(seed, step, index) >= p;
}

} // namespace ampc::kernels

#endif
