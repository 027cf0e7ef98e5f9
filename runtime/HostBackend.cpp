//===- HostBackend.cpp ------------------------------------------------------===//
#include "runtime/HostBackend.h"

#include "kernels/custom/CustomKernels.h"
#include "kernels/reference/ReferenceKernels.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ampc {

bool HostBackend::supports(const OpInfo &op, DType dtype) const {
  // A host program's op: its registered kernels say (kernels/custom).
  if (op.kind == OpKind::Custom)
    return kernels::customKernelSupports(op, dtype);
  return kernels::referenceSupports(op, dtype);
}

kernels::KernelFn HostBackend::kernelFor(const Node &n) const {
  return kernels::referenceKernel(n.kind());
}

std::unique_ptr<kernels::NodeKernel> HostBackend::prepare(const Node &n) {
  if (n.kind() == OpKind::Custom)
    return kernels::prepareCustomCpuKernel(n);
  return Backend::prepare(n);
}

namespace {
/// A "Key:   123 kB" line's bytes from /proc/meminfo; 0 when absent.
uint64_t meminfoBytes(const char *key) {
  std::FILE *f = std::fopen("/proc/meminfo", "r");
  if (!f)
    return 0;
  char line[256];
  uint64_t bytes = 0;
  size_t keyLength = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, keyLength) == 0 && line[keyLength] == ':') {
      unsigned long long kb = 0;
      if (std::sscanf(line + keyLength + 1, "%llu", &kb) == 1)
        bytes = kb * 1024;
      break;
    }
  std::fclose(f);
  return bytes;
}

/// What the cgroup (v2) still lets this process take, or 0 without a limit.
uint64_t cgroupHeadroomBytes() {
  auto readNumber = [](const char *path, uint64_t &v) {
    std::FILE *f = std::fopen(path, "r");
    if (!f)
      return false;
    unsigned long long n = 0;
    bool ok = std::fscanf(f, "%llu", &n) == 1; // "max" (no limit) does not parse
    std::fclose(f);
    v = n;
    return ok;
  };
  uint64_t limit = 0, current = 0;
  if (!readNumber("/sys/fs/cgroup/memory.max", limit) ||
      !readNumber("/sys/fs/cgroup/memory.current", current))
    return 0;
  return limit > current ? limit - current : 1;
}
} // namespace

uint64_t HostBackend::availableMemoryBytes() const {
  uint64_t available = meminfoBytes("MemAvailable");
  if (uint64_t headroom = cgroupHeadroomBytes(); headroom && (!available || headroom < available))
    available = headroom;
  return available;
}

void *HostBackend::allocate(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment; 0 bytes still gets a block.
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (p) {
    sizes_[p] = bytes;
    inUse_ += bytes;
  }
  return p;
}

void HostBackend::deallocate(void *p) {
  auto it = sizes_.find(p);
  if (it != sizes_.end()) {
    inUse_ -= it->second;
    sizes_.erase(it);
  }
  std::free(p);
}

} // namespace ampc
