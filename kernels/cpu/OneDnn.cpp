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

#include "ir/HalfConversion.h"
#include "ir/OpAttrs.h"

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <omp.h>

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

dnnl::memory::desc retypedDesc(const dnnl::memory::desc &d, dnnl::memory::data_type type) {
  const dnnl_dims_t &strides = d.data.format_desc.blocking.strides;
  return dnnl::memory::desc(d.dims(), type, dnnl::memory::dims(strides, strides + d.data.ndims));
}

dnnl::primitive_attr userScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {

/// 64-byte aligned memory for oneDNN; there is nobody to report a failure
/// to mid-step.
std::byte *allocateOrDie(size_t bytes, const char *what) {
  auto *p = static_cast<std::byte *>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!p) {
    std::fprintf(stderr, "ampc: out of memory allocating %zu bytes of %s\n", bytes, what);
    std::abort();
  }
  return p;
}

/// Scratch memory for the oneDNN kernels running on one thread: slot 0 for
/// the primitive's scratchpad, slot 1 + i for the staging buffer of the
/// i-th reordered argument, the last one for the dense f32 copy a bf16
/// argument passes through on its way to or from a blocked f32 layout (one
/// argument converts at a time). A slot grows to the largest request and
/// stays.
class Workspace {
public:
  static constexpr unsigned kArgumentSlots = 4;
  static constexpr unsigned kSlots = 1 + kArgumentSlots + 1;
  static constexpr unsigned kDenseF32Slot = kSlots - 1;

  void *slot(unsigned i, size_t bytes) {
    Buffer &b = slots_[i];
    if (b.bytes < bytes) {
      b.data.reset(allocateOrDie(bytes, "oneDNN scratch"));
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

/// Elements per thread below which a conversion stays on one thread.
constexpr int64_t kConvertGrain = 1 << 16;

/// bf16 -> f32, exact.
void widenBf16(const uint16_t *from, float *to, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 2 * kConvertGrain)
  for (int64_t i = 0; i < n; ++i)
    to[i] = bf16BitsToFloat(from[i]);
}

/// f32 -> bf16, rounded to nearest even as every bf16 store is.
void narrowToBf16(const float *from, uint16_t *to, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 2 * kConvertGrain)
  for (int64_t i = 0; i < n; ++i)
    to[i] = floatToBf16Bits(from[i]);
}

} // namespace

void OneDnnPrimitiveKernel::FreeBytes::operator()(std::byte *p) const { std::free(p); }

OneDnnPrimitiveKernel::OneDnnPrimitiveKernel(const dnnl::primitive_desc &pd,
                                             dnnl::primitive primitive,
                                             llvm::ArrayRef<OneDnnBinding> bindings)
    : primitive_(std::move(primitive)), implementation_(pd.impl_info_str()) {
  assert(bindings.size() <= Workspace::kArgumentSlots && "more arguments than workspace slots");
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
    Reorder r;
    r.afterPrimitive = b.isOutput;
    r.index = b.index;
    r.staged = staged;
    r.slot = nextSlot++;
    r.bytes = b.primitiveDesc.get_size();
    bool bf16ToF32 = b.desc.data_type() == dnnl::memory::data_type::bf16 &&
                     b.primitiveDesc.data_type() == dnnl::memory::data_type::f32;
    dnnl::memory::desc denseF32 =
        bf16ToF32 ? retypedDesc(b.desc, dnnl::memory::data_type::f32) : dnnl::memory::desc();
    // bf16 <-> f32 in the same layout: our loop converts straight into (or
    // out of) the staging buffer, no primitive.
    r.widenBf16 = bf16ToF32;
    r.elements = static_cast<int64_t>(b.desc.get_size() / sizeof(uint16_t));
    if (bf16ToF32 && b.primitiveDesc != denseF32) {
      // oneDNN 2.6's reorder between bf16 and a blocked f32 layout is its
      // scalar one (18 ms a tensor in ResNet-50's convolutions, 16x the
      // convolutions themselves): our loop converts into a dense f32 copy
      // and oneDNN's vectorised f32 reorder blocks it.
      r.dense = dnnl::memory(denseF32, engine, DNNL_MEMORY_NONE);
      r.denseBytes = denseF32.get_size();
      if (b.isOutput) {
        r.primitive = dnnl::reorder(staged, *r.dense);
        r.arguments = {{DNNL_ARG_FROM, staged}, {DNNL_ARG_TO, *r.dense}};
      } else {
        r.primitive = dnnl::reorder(*r.dense, staged);
        r.arguments = {{DNNL_ARG_FROM, *r.dense}, {DNNL_ARG_TO, staged}};
      }
    } else if (!bf16ToF32 && b.isOutput) {
      r.primitive = dnnl::reorder(staged, user);
      r.arguments = {{DNNL_ARG_FROM, staged}, {DNNL_ARG_TO, user}};
    } else if (!bf16ToF32) {
      r.primitive = dnnl::reorder(user, staged);
      r.arguments = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, staged}};
    }
    reorders_.push_back(std::move(r));
    arguments_.emplace(b.argument, staged);
  }
  dnnl::memory::desc scratchpad = pd.scratchpad_desc();
  if (size_t bytes = scratchpad.get_size()) {
    scratchpad_ = dnnl::memory(scratchpad, engine, DNNL_MEMORY_NONE);
    scratchpadBytes_ = bytes;
    arguments_.emplace(DNNL_ARG_SCRATCHPAD, *scratchpad_);
  }
}

uint64_t OneDnnPrimitiveKernel::heldBytes() const {
  uint64_t bytes = 0;
  for (const Reorder &r : reorders_)
    if (r.kept)
      bytes += r.bytes;
  return bytes;
}

void OneDnnPrimitiveKernel::run(const KernelArgs &args) {
  for (Bound &b : bound_)
    b.memory.set_data_handle(b.isOutput ? args.out(b.index).data : args.in(b.index).data);
  Workspace &w = workspace();
  if (scratchpad_)
    scratchpad_->set_data_handle(w.slot(0, scratchpadBytes_));
  reordersSkipped_ = 0;
  // Descriptors and shapes were checked when the primitive was created, so
  // execution fails only on a broken oneDNN install; there is nobody to
  // report to mid-step, and continuing would train on garbage.
  try {
    dnnl::stream &stream = oneDnnStream();
    for (Reorder &r : reorders_) {
      if (r.afterPrimitive)
        continue;
      const TensorArg &operand = args.in(r.index);
      auto convert = [&] {
        if (r.dense) {
          r.dense->set_data_handle(w.slot(Workspace::kDenseF32Slot, r.denseBytes));
          widenBf16(static_cast<const uint16_t *>(operand.data),
                    static_cast<float *>(r.dense->get_data_handle()), r.elements);
          r.primitive.execute(stream, r.arguments);
        } else if (r.widenBf16) {
          widenBf16(static_cast<const uint16_t *>(operand.data),
                    static_cast<float *>(r.staged.get_data_handle()), r.elements);
        } else {
          r.primitive.execute(stream, r.arguments);
        }
      };
      if (!operand.stableVersion) {
        r.staged.set_data_handle(w.slot(r.slot, r.bytes));
        convert();
        continue;
      }
      if (!r.kept)
        r.kept.reset(allocateOrDie(r.bytes, "reordered weights"));
      r.staged.set_data_handle(r.kept.get());
      bool current = r.keptFrom == operand.data && r.keptVersion == *operand.stableVersion;
      if (current) {
        ++reordersSkipped_;
        continue;
      }
      convert();
      r.keptFrom = operand.data;
      r.keptVersion = *operand.stableVersion;
    }
    for (Reorder &r : reorders_)
      if (r.afterPrimitive)
        r.staged.set_data_handle(w.slot(r.slot, r.bytes));
    primitive_.execute(stream, arguments_);
    stream.wait();
    for (Reorder &r : reorders_) {
      if (!r.afterPrimitive)
        continue;
      if (r.dense) {
        r.dense->set_data_handle(w.slot(Workspace::kDenseF32Slot, r.denseBytes));
        r.primitive.execute(stream, r.arguments);
        stream.wait();
        narrowToBf16(static_cast<const float *>(r.dense->get_data_handle()),
                     static_cast<uint16_t *>(args.out(r.index).data), r.elements);
      } else if (r.widenBf16) {
        narrowToBf16(static_cast<const float *>(r.staged.get_data_handle()),
                     static_cast<uint16_t *>(args.out(r.index).data), r.elements);
      } else {
        r.primitive.execute(stream, r.arguments);
      }
    }
    stream.wait();
  } catch (const dnnl::error &e) {
    std::fprintf(stderr, "ampc: oneDNN failed running %s: %s\n", args.node->opName().str().c_str(),
                 e.what());
    std::abort();
  }
}

namespace {

/// A node's oneDNN primitive for each team size it ran at. A primitive
/// fixes its thread count when it is created (it opens its parallel
/// regions with that many threads whatever the team size is later), so the
/// kernels follow a team the ThreadGovernor shrinks only through a
/// primitive made for the new size. Each is made on the first run at its
/// size; the Graph, and so the node, outlives the Program.
class OneDnnTeamKernel final : public NodeKernel {
public:
  using Preparer = std::unique_ptr<NodeKernel> (*)(const Node &, bool);
  OneDnnTeamKernel(const Node &n, Preparer prepare, bool widen, std::unique_ptr<NodeKernel> first)
      : node_(n), prepare_(prepare), widen_(widen) {
    variants_.push_back({omp_get_max_threads(), std::move(first)});
  }

  void run(const KernelArgs &args) override { current().run(args); }

  uint64_t heldBytes() const override {
    uint64_t bytes = 0;
    for (const Variant &v : variants_)
      bytes += v.kernel->heldBytes();
    return bytes;
  }

  const OneDnnPrimitiveKernel &last() const {
    return static_cast<const OneDnnPrimitiveKernel &>(*variants_[lastUsed_].kernel);
  }

private:
  struct Variant {
    int threads;
    std::unique_ptr<NodeKernel> kernel;
  };

  NodeKernel &current() {
    int threads = omp_get_max_threads();
    for (size_t i = 0; i < variants_.size(); ++i)
      if (variants_[i].threads == threads) {
        lastUsed_ = i;
        return *variants_[i].kernel;
      }
    // The node was prepared once already, so only a broken install makes
    // this fail: the first primitive then runs, on its own thread count.
    std::unique_ptr<NodeKernel> k;
    try {
      k = prepare_(node_, widen_);
    } catch (const dnnl::error &) {
    }
    if (!k)
      return *variants_[lastUsed_ = 0].kernel;
    variants_.push_back({threads, std::move(k)});
    lastUsed_ = variants_.size() - 1;
    return *variants_.back().kernel;
  }

  const Node &node_;
  Preparer prepare_;
  bool widen_;
  llvm::SmallVector<Variant, 2> variants_;
  size_t lastUsed_ = 0;
};

const OneDnnPrimitiveKernel *asPrimitive(const NodeKernel &k) {
  if (const auto *team = dynamic_cast<const OneDnnTeamKernel *>(&k))
    return &team->last();
  return dynamic_cast<const OneDnnPrimitiveKernel *>(&k);
}

} // namespace

bool isOneDnnKernel(const NodeKernel &k) { return asPrimitive(k) != nullptr; }

Bf16GemmMode bf16GemmMode() {
  static const Bf16GemmMode mode = [] {
    const char *choice = std::getenv("AMPC_CPU_BF16_GEMMS");
    if (choice && std::strcmp(choice, "native") == 0)
      return Bf16GemmMode::Native;
    if (choice && std::strcmp(choice, "widened") == 0)
      return Bf16GemmMode::WidenedAll;
    if (choice && *choice && std::strcmp(choice, "auto") != 0)
      std::fprintf(stderr,
                   "ampc: warning: AMPC_CPU_BF16_GEMMS=%s is not one of auto, native, widened; "
                   "using auto\n",
                   choice);
    // oneDNN's own view of the ISA, so that this agrees with what its
    // primitives would run. AMX tiles and AMD's AVX512-BF16 (Zen 4: 916
    // against 456 GFLOP/s on one 2048^3 linear) make bf16 about twice f32;
    // Intel's AVX512-BF16 without AMX (a Sapphire Rapids Xeon whose
    // hypervisor hides AMX: 151 against 234 GFLOP/s; Cooper Lake, not
    // measured, has the same one-port dot product) and emulated bf16 on
    // plain AVX-512 make it slower than f32.
    auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    auto amx = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);
    auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    bool hasAmx = (isa & amx) == amx;
    bool hasBf16Dot = (isa & bf16) == bf16;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    bool amd = __builtin_cpu_is("amd");
#else
    bool amd = false;
#endif
    return hasAmx || (hasBf16Dot && amd) ? Bf16GemmMode::Native : Bf16GemmMode::Widened;
  }();
  return mode;
}

bool bf16GemmsRunWidened() { return bf16GemmMode() != Bf16GemmMode::Native; }

namespace {

/// Multiply-adds per converted element below which a bf16 GEMM runs oneDNN's
/// bf16 kernel even where widening is the rule: the conversions would cost
/// more than the faster f32 kernel saves. On the Xeon of bf16GemmMode ViT-B/32's
/// projections (2 * 200 * 768 * 3072 FLOPs over 3.1 M elements: 301 per
/// element) took 575 ms a step widened and 700 native, its attention's
/// batched 50x64 by 64x50 products (36 per element) 17 ms widened and 12
/// native; the threshold lies between.
constexpr double kMinWidenedIntensity = 128;

/// FLOPs per element read or written of a linear, matmul or batch_matmul
/// node (convolutions reuse each element over their window: always high).
double gemmIntensity(const Node &n) {
  if (n.kind() != OpKind::Linear && n.kind() != OpKind::MatMul && n.kind() != OpKind::BatchMatMul)
    return kMinWidenedIntensity;
  llvm::ArrayRef<int64_t> a = n.operand(0)->type().dims();
  if (a.empty())
    return 0;
  bool transposeA = n.kind() != OpKind::Linear && attrs::MatMul(n).transpose_a();
  int64_t k = transposeA && a.size() >= 2 ? a[a.size() - 2] : a.back();
  double elements = static_cast<double>(n.operand(0)->type().numElements()) +
                    static_cast<double>(n.operand(1)->type().numElements()) +
                    static_cast<double>(n.result()->type().numElements());
  double flops = 2.0 * static_cast<double>(n.result()->type().numElements()) * k;
  return elements > 0 ? flops / elements : 0;
}

} // namespace

bool bf16GemmRunsWidened(const Node &n) {
  Bf16GemmMode mode = bf16GemmMode();
  return mode == Bf16GemmMode::WidenedAll ||
         (mode == Bf16GemmMode::Widened && gemmIntensity(n) >= kMinWidenedIntensity);
}

bool oneDnnHasBf16() {
  static const bool has = [] {
    try {
      dnnl::memory::desc d({8, 8}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(d, d, d), oneDnnEngine());
      return true;
    } catch (const dnnl::error &) {
      return false;
    }
  }();
  return has;
}

OneDnnReorderCounts OneDnnPrimitiveKernel::reorderCounts() const {
  OneDnnReorderCounts counts;
  for (const Reorder &r : reorders_)
    counts.operands += !r.afterPrimitive;
  counts.skipped = reordersSkipped_;
  return counts;
}

OneDnnReorderCounts oneDnnReorderCounts(const NodeKernel &k) {
  if (const OneDnnPrimitiveKernel *p = asPrimitive(k))
    return p->reorderCounts();
  return {};
}

std::string oneDnnImplementation(const NodeKernel &k) {
  if (const OneDnnPrimitiveKernel *p = asPrimitive(k))
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

static bool hasBf16Tensor(const Node &n) {
  for (const Value *v : n.operands())
    if (v->dtype() == DType::BF16)
      return true;
  for (unsigned r = 0; r < n.numResults(); ++r)
    if (n.result(r)->dtype() == DType::BF16)
      return true;
  return false;
}

/// The family preparer for `n`'s op, or null when oneDNN has no primitive
/// for it. An if-chain rather than a switch: almost every op has none.
static std::unique_ptr<NodeKernel> (*preparerFor(OpKind kind))(const Node &, bool) {
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
  // oneDNN reports an unsupported shape, layout or dtype by throwing when
  // the primitive is created. bf16 on a CPU without AVX-512 is one: such a
  // node computes in f32 on widened operands (the same products, summed in
  // f32, rounded once) rather than on the reference kernel, 15-20x slower.
  // Any other refusal runs the reference kernel.
  // Where bf16 dot products are no faster than f32 FMAs, a bf16 node
  // takes the widened primitive first (bf16GemmRunsWidened).
  bool widenFirst = hasBf16Tensor(n) && bf16GemmRunsWidened(n);
  for (bool widen : {widenFirst, !widenFirst}) {
    if (widen && !hasBf16Tensor(n))
      continue;
    try {
      std::unique_ptr<NodeKernel> first = prepare(n, widen);
      if (!first)
        return nullptr;
      return std::make_unique<OneDnnTeamKernel>(n, prepare, widen, std::move(first));
    } catch (const dnnl::error &) {
    }
  }
  return nullptr;
}

} // namespace ampc::kernels::cpu
