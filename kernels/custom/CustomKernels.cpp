//===- CustomKernels.cpp ----------------------------------------------------===//
#include "kernels/custom/CustomKernels.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <mutex>

namespace ampc::kernels {
namespace {

/// Entries are never removed (registry entries are never removed either),
/// so a pointer handed out stays valid. The mutex makes registering from
/// one thread while another compiles a different model safe.
struct Table {
  std::mutex mutex;
  llvm::DenseMap<const OpInfo *, std::unique_ptr<CustomKernels>> byOp;
};

Table &table() {
  static Table t; // built on first use, no static constructor
  return t;
}

class CustomNodeKernel final : public NodeKernel {
public:
  explicit CustomNodeKernel(const CustomKernelFn &fn) : fn_(fn) {}
  void run(const KernelArgs &args) override { fn_(args); }

private:
  const CustomKernelFn &fn_; // owned by the table, which outlives programs
};

} // namespace

std::optional<std::string> registerCustomKernels(const OpInfo &op, CustomKernels kernels) {
  if (op.kind != OpKind::Custom)
    return "'" + op.name + "' is a built-in op; only custom ops take kernels at run time";
  if (!kernels.cpu)
    return "custom op '" + op.name +
           "' needs a CPU kernel (the reference every backend is "
           "tested against)";
  if (kernels.dtypes.empty())
    return "custom op '" + op.name + "' lists no compute dtype for its kernels";
  for (DType t : kernels.dtypes)
    if (!isFloating(t))
      return "custom op '" + op.name + "': compute dtype " + dtypeName(t).str() +
             " is not a floating type";
  Table &t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (t.byOp.count(&op))
    return "custom op '" + op.name + "' already has kernels";
  t.byOp[&op] = std::make_unique<CustomKernels>(std::move(kernels));
  return std::nullopt;
}

const CustomKernels *findCustomKernels(const OpInfo &op) {
  Table &t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.byOp.find(&op);
  return it == t.byOp.end() ? nullptr : it->second.get();
}

bool customKernelSupports(const OpInfo &op, DType dtype) {
  const CustomKernels *k = findCustomKernels(op);
  return k && llvm::is_contained(k->dtypes, dtype);
}

std::unique_ptr<NodeKernel> prepareCustomCpuKernel(const Node &n) {
  const CustomKernels *k = findCustomKernels(n.op());
  return k ? std::make_unique<CustomNodeKernel>(k->cpu) : nullptr;
}

std::unique_ptr<NodeKernel> prepareCustomCudaKernel(const Node &n) {
  const CustomKernels *k = findCustomKernels(n.op());
  return k && k->cuda ? std::make_unique<CustomNodeKernel>(k->cuda) : nullptr;
}

} // namespace ampc::kernels
