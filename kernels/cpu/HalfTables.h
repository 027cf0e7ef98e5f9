//===- HalfTables.h - gelu at every bf16 value, for f32 blocks ---*- C++ -*-===//
//
// Internal to kernels/cpu (LoopHalfTables.cpp builds the tables). At O1,
// gelu runs in f32 on a linear layer's bf16 output cast up: every element
// is a bf16 value, so f(x) and f'(x) can be read from tables of all 65536
// bf16 values in f32, built by the same scalar functions, with the bits the
// f32 loops compute. A block takes the tables only when all its elements
// are bf16 values and none is a NaN (allBf16Values), and computes otherwise.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_HALFTABLES_H
#define AMPC_KERNELS_CPU_HALFTABLES_H

#include <array>
#include <cstdint>
#include <cstring>

namespace ampc::kernels::cpu {

/// f(x) and f.derivative(x) in f32 at each bf16 value x (by its bits).
struct Bf16ValueTables {
  std::array<float, 1 << 16> values, derivatives;
};

/// The tables of functor state `f` (gelu's two forms), built on first use
/// and kept for the process. Instantiated for the functors with
/// kTabulateHalves.
template <class Fn> const Bf16ValueTables &bf16ValueTables(const Fn &f);

/// Whether each of the n floats is a bf16 value (its low 16 bits zero) and
/// none is a NaN: a NaN's sign and payload after gelu depend on the order
/// the compiler gives the operations, in the scalar code that built the
/// tables as in the vector loops, so a block with one computes it (and
/// keeps the loop's bits).
inline bool allBf16Values(const float *x, int64_t n) {
  uint32_t low = 0, nan = 0;
#pragma omp simd reduction(| : low, nan)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, 4);
    low |= bits & 0xffffu;
    nan |= (bits & 0x7fffffffu) > 0x7f800000u;
  }
  return low == 0 && nan == 0;
}

/// The bf16 whose value the float x is (allBf16Values), as a table index.
inline uint32_t bf16Index(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits >> 16;
}

} // namespace ampc::kernels::cpu

#endif
