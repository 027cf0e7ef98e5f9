//===- CpuRefBackend.cpp - The reference backend ---------------------------===//
#include "runtime/HostBackend.h"

namespace ampc {
namespace {

/// Every node on its reference kernel: the oracle the other backends are
/// tested against.
class CpuRefBackend final : public HostBackend {
public:
  llvm::StringRef name() const override { return "cpu-ref"; }
};

} // namespace

std::unique_ptr<Backend> createCpuRefBackend() { return std::make_unique<CpuRefBackend>(); }

} // namespace ampc
