//===- OneDnn.cpp - oneDNN primitives for the cpu backend -----------------===//
//
// The dispatcher (which ops and dtypes go to oneDNN), the engine and stream,
// and the kernel object every oneDNN primitive runs in. The primitives of
// each family are built in OneDnnMatMul.cpp and OneDnnConv.cpp.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/OneDnn.h"
#include "kernels/cpu/Families.h"
#include "kernels/cpu/OneDnnContext.h"

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

namespace ampc::kernels::cpu {

const dnnl::engine &oneDnnEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream &oneDnnStream() {
  thread_local dnnl::stream stream(oneDnnEngine());
  return stream;
}

std::optional<dnnl::memory::data_type> oneDnnType(DType t) {
  switch (t) {
  case DType::F32:
    return dnnl::memory::data_type::f32;
  case DType::BF16:
    return dnnl::memory::data_type::bf16;
  case DType::F16:
  case DType::F64:
  case DType::I64:
  case DType::I32:
  case DType::Bool:
    return std::nullopt;
  }
  return std::nullopt;
}

dnnl::memory::dims denseStrides(llvm::ArrayRef<int64_t> dims) {
  dnnl::memory::dims strides(dims.size());
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= dims[d];
  }
  return strides;
}

dnnl::memory::desc plainDesc(llvm::ArrayRef<int64_t> dims, dnnl::memory::data_type type) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), type, denseStrides(dims));
}

dnnl::primitive_attr userScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {

/// Scratch memory for the oneDNN kernels running on one thread: slot 0 for
/// the primitive's scratchpad, slot 1 + i for the staging buffer of the
/// i-th reordered argument. A slot grows to the largest request and stays.
class Workspace {
public:
  static constexpr unsigned kSlots = 1 + 4;

  void *slot(unsigned i, size_t bytes) {
    Buffer &b = slots_[i];
    if (b.bytes < bytes) {
      b.data.reset(static_cast<std::byte *>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
      if (!b.data) {
        std::fprintf(stderr, "ampc: out of memory allocating %zu bytes of oneDNN scratch\n", bytes);
        std::abort();
      }
      b.bytes = bytes;
    }
    return b.data.get();
  }

private:
  struct Free {
    void operator()(std::byte *p) const { std::free(p); }
  };
  struct Buffer {
    std::unique_ptr<std::byte, Free> data;
    size_t bytes = 0;
  };
  std::array<Buffer, kSlots> slots_;
};

Workspace &workspace() {
  thread_local Workspace w;
  return w;
}

} // namespace

OneDnnPrimitiveKernel::OneDnnPrimitiveKernel(const dnnl::primitive_desc &pd,
                                             dnnl::primitive primitive,
                                             llvm::ArrayRef<OneDnnBinding> bindings)
    : primitive_(std::move(primitive)), implementation_(pd.impl_info_str()) {
  assert(bindings.size() < Workspace::kSlots && "more arguments than workspace slots");
  const dnnl::engine &engine = oneDnnEngine();
  unsigned nextSlot = 1;
  for (const OneDnnBinding &b : bindings) {
    dnnl::memory user(b.desc, engine, DNNL_MEMORY_NONE);
    bound_.push_back({b.isOutput, b.index, user});
    if (b.primitiveDesc.is_zero() || b.primitiveDesc == b.desc) {
      arguments_.emplace(b.argument, user);
      continue;
    }
    dnnl::memory staged(b.primitiveDesc, engine, DNNL_MEMORY_NONE);
    scratch_.push_back({nextSlot++, b.primitiveDesc.get_size(), staged});
    if (b.isOutput)
      reorders_.push_back(
          {true, dnnl::reorder(staged, user), {{DNNL_ARG_FROM, staged}, {DNNL_ARG_TO, user}}});
    else
      reorders_.push_back(
          {false, dnnl::reorder(user, staged), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, staged}}});
    arguments_.emplace(b.argument, staged);
  }
  dnnl::memory::desc scratchpad = pd.scratchpad_desc();
  if (size_t bytes = scratchpad.get_size()) {
    dnnl::memory memory(scratchpad, engine, DNNL_MEMORY_NONE);
    scratch_.push_back({0, bytes, memory});
    arguments_.emplace(DNNL_ARG_SCRATCHPAD, memory);
  }
}

void OneDnnPrimitiveKernel::run(const KernelArgs &args) {
  for (Bound &b : bound_)
    b.memory.set_data_handle(b.isOutput ? args.out(b.index).data : args.in(b.index).data);
  Workspace &w = workspace();
  for (Scratch &s : scratch_)
    s.memory.set_data_handle(w.slot(s.slot, s.bytes));
  // Descriptors and shapes were checked when the primitive was created, so
  // execution fails only on a broken oneDNN install; there is nobody to
  // report to mid-step, and continuing would train on garbage.
  try {
    dnnl::stream &stream = oneDnnStream();
    for (Reorder &r : reorders_)
      if (!r.afterPrimitive)
        r.primitive.execute(stream, r.arguments);
    primitive_.execute(stream, arguments_);
    for (Reorder &r : reorders_)
      if (r.afterPrimitive)
        r.primitive.execute(stream, r.arguments);
    stream.wait();
  } catch (const dnnl::error &e) {
    std::fprintf(stderr, "ampc: oneDNN failed running %s: %s\n", args.node->opName().str().c_str(),
                 e.what());
    std::abort();
  }
}

bool isOneDnnKernel(const NodeKernel &k) {
  return dynamic_cast<const OneDnnPrimitiveKernel *>(&k) != nullptr;
}

std::string oneDnnImplementation(const NodeKernel &k) {
  if (const auto *p = dynamic_cast<const OneDnnPrimitiveKernel *>(&k))
    return p->implementation();
  return "";
}

/// Whether every tensor of `n` has a dtype oneDNN runs and no dim of zero
/// (oneDNN rejects empty tensors; the reference kernels handle them).
static bool oneDnnCanTake(const Node &n) {
  for (const Value *v : n.operands())
    if (!oneDnnType(v->dtype()) || v->type().numElements() == 0)
      return false;
  for (unsigned r = 0; r < n.numResults(); ++r)
    if (!oneDnnType(n.result(r)->dtype()) || n.result(r)->type().numElements() == 0)
      return false;
  return true;
}

/// The family preparer for `n`'s op, or null when oneDNN has no primitive
/// for it. An if-chain rather than a switch: almost every op has none.
static std::unique_ptr<NodeKernel> (*preparerFor(OpKind kind))(const Node &) {
  if (kind == OpKind::Linear)
    return prepareOneDnnLinear;
  if (kind == OpKind::MatMul)
    return prepareOneDnnMatMul;
  if (kind == OpKind::BatchMatMul)
    return prepareOneDnnBatchMatMul;
  if (kind == OpKind::Conv2d)
    return prepareOneDnnConv2d;
  if (kind == OpKind::Conv2dGradInput)
    return prepareOneDnnConv2dGradInput;
  if (kind == OpKind::Conv2dGradWeight)
    return prepareOneDnnConv2dGradWeight;
  return nullptr;
}

std::unique_ptr<NodeKernel> prepareOneDnnKernel(const Node &n) {
  auto prepare = preparerFor(n.kind());
  if (!prepare || !oneDnnCanTake(n))
    return nullptr;
  // oneDNN reports an unsupported shape, layout or dtype (say, bf16 on a CPU
  // without AVX-512) by throwing when the primitive is created; that node
  // then runs its reference kernel.
  try {
    return prepare(n);
  } catch (const dnnl::error &) {
    return nullptr;
  }
}

} // namespace ampc::kernels::cpu
