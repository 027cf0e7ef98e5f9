//===- Random.h - Counter-based random numbers, identical on every backend ===//
//
// A value depends only on (seed, stream, index), never on evaluation order or
// thread count, so dropout masks and parameter initialisation are the same on
// the reference, CPU and CUDA backends and across runs.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_RANDOM_H
#define AMPC_KERNELS_COMMON_RANDOM_H

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
