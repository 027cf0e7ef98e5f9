//===- Hash.h - FNV-1a, for checksums and fingerprints ----------*- C++ -*-===//
//
// 64-bit FNV-1a: the checkpoint format's checksum (so it must not change)
// and the fingerprints data-parallel ranks compare (runtime/train/).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_SUPPORT_HASH_H
#define AMPC_IR_SUPPORT_HASH_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ampc {

constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

/// Continues hash `h` over `n` bytes at `data`.
inline uint64_t fnv1a(const void *data, size_t n, uint64_t h = kFnv1aOffset) {
  auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

/// 16 lowercase hex digits.
inline std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

} // namespace ampc

#endif
