//===- CpuFeatures.h - What the host CPU's vector units can do -----------===//
//
// Host-only: the run-time check behind every AVX-512 copy of a loop (the
// cpu backend's loops, synthetic data), so they all agree on when it runs.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_CPUFEATURES_H
#define AMPC_KERNELS_COMMON_CPUFEATURES_H

namespace ampc::kernels {

/// AVX-512 F, BW, VL and DQ: what the wide loop copies are compiled for
/// (DQ for 64-bit integer multiplies). False off x86-64 GCC/clang.
inline bool cpuHasAvx512() {
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return has;
#else
  return false;
#endif
}

} // namespace ampc::kernels

#endif
