//===- CpuBackend.cpp - The fast CPU backend ("cpu") ----------------------===//
//
// Host memory like the reference backend; per node, the fast kernel from
// kernels/cpu when there is one for its op and dtypes, else the reference
// kernel. So every model runs on `cpu`, and results differ from `cpu-ref`
// only by the summation order of the fast kernels (tested per op).
//
//===----------------------------------------------------------------------===//
#include "runtime/HostBackend.h"

#include "kernels/cpu/CpuKernels.h"

namespace ampc {
namespace {

class CpuBackend final : public HostBackend {
public:
  llvm::StringRef name() const override { return "cpu"; }
  std::unique_ptr<kernels::NodeKernel> prepare(const Node &n) override {
    if (n.kind() != OpKind::Custom)
      if (std::unique_ptr<kernels::NodeKernel> fast = kernels::cpu::prepareCpuKernel(n))
        return fast;
    return HostBackend::prepare(n);
  }
  bool fusable(const Node &n) const override { return kernels::cpu::fusableCpuNode(n); }
  std::unique_ptr<kernels::NodeKernel> prepareFused(llvm::ArrayRef<const Node *> chain) override {
    return kernels::cpu::prepareFusedCpuKernel(chain);
  }
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() { return std::make_unique<CpuBackend>(); }

} // namespace ampc
