//===- LoopSupport.h - Threads and vector code for the cpu backend's own loops -*- C++ -*-===//
//
// What the loop kernels (kernels/cpu/Loop*.cpp) share:
//
// - Vector code without a -march flag. A loop body is a lambda marked
//   AMPC_LOOP_BODY (always inlined) whose inner loop carries `#pragma omp
//   simd`; runVectorized() inlines it into one of two copies, one compiled
//   for AVX-512 (target attribute) and one for the baseline ISA, and picks the
//   AVX-512 copy when the CPU has it. So the binary runs anywhere and uses
//   512-bit vectors where they exist.
//
// - Bit-exact element math. The loops call the same kernels/common functions
//   as the reference kernels, per element, and kernels/CMakeLists.txt builds
//   both with -ffp-contract=off (no fused multiply-add the reference would
//   not do) and the loops with options that help them vectorize without
//   changing a result. Vector sqrt and division are correctly rounded like
//   the scalar ones; erf, exp and tanh stay calls to the same libm functions.
//   So an elementwise loop gives the reference's bits, in either copy.
//
// - f16 conversion in hardware. halvesToFloats() and floatsToHalves()
//   convert whole runs of f16 elements with AVX-512F's vcvtph2ps/vcvtps2ph
//   (16 lanes) in the wide copy, with F16C's (8 lanes) on CPUs that have
//   F16C and AVX2 but not the loops' AVX-512, and with the scalar functions
//   otherwise; every way gives halfBitsToFloat's / floatToHalfBits' bits.
//   f64 -> f16 stays with the reference (it rounds through f32). A loop
//   over f16 tensors converts a block of elements into a float buffer, runs
//   its element function over the buffer, and converts the results back.
//
// - Threads. parallelFor() splits a range into chunks run by OpenMP (the
//   libgomp oneDNN uses too), in the calling thread when there is only one.
//   Sums are split by the shapes alone (fixed pieces, kLanes lanes) and
//   combined in a fixed order, so their results do not depend on the number
//   of threads or on the vector copy.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_LOOPSUPPORT_H
#define AMPC_KERNELS_CPU_LOOPSUPPORT_H

#include "ir/HalfConversion.h"
#include "kernels/KernelArgs.h"
#include "kernels/common/Storage.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace ampc::kernels::cpu {

//===----------------------------------------------------------------------===//
// Kernel objects
//===----------------------------------------------------------------------===//

/// Base of every loop kernel, so tests can tell one from a reference
/// fallback (see isLoopKernel in LoopKernels.h).
class LoopKernel : public NodeKernel {};

/// How `dims` broadcast to `outDims` (numpy rules, aligned at the right), as
/// (middle, inner): the operand's element for result element i is
/// (i / inner) % middle. That form exists when the dims the operand does not
/// broadcast are one contiguous run of the result's dims; none otherwise.
/// (LoopElementwise.cpp)
std::optional<std::pair<int64_t, int64_t>> broadcastPattern(llvm::ArrayRef<int64_t> dims,
                                                            llvm::ArrayRef<int64_t> outDims);

/// True when every operand and result of `n` has dtype `t`.
inline bool allOfDType(const Node &n, DType t) {
  for (const Value *v : n.operands())
    if (v->dtype() != t)
      return false;
  for (unsigned r = 0; r < n.numResults(); ++r)
    if (n.result(r)->dtype() != t)
      return false;
  return true;
}

/// An element functor kept as bytes (its per-node state: scale's factor,
/// gelu's approximation), so that one function pointer type serves every
/// functor.
struct FunctorBytes {
  alignas(8) unsigned char bytes[16] = {};

  template <class Fn> void set(const Fn &fn) {
    static_assert(sizeof(Fn) <= sizeof(bytes) && std::is_trivially_copyable_v<Fn>,
                  "an element functor is a few trivially copyable bytes");
    std::memcpy(bytes, &fn, sizeof(Fn));
  }
  template <class Fn> Fn get() const {
    Fn fn;
    if constexpr (!std::is_empty_v<Fn>)
      std::memcpy(&fn, bytes, sizeof(Fn));
    return fn;
  }
};

/// What a loop kernel worked out from its node's shapes and attributes when
/// the program was compiled, so run() does not redo it every step.
struct LoopPlan {
  int64_t outer = 1;
  int64_t middle = 1;
  int64_t inner = 1;
  /// Which operand a binary op broadcasts, or which strategy a reduction
  /// uses (an enum of the kernel's file).
  int variant = 0;
  /// A pointwise op's element functor.
  FunctorBytes elementFn;
};

using LoopFn = void (*)(const KernelArgs &args, const LoopPlan &plan);

/// A loop kernel that is one function (chosen at compile time for the node's
/// dtypes) and its plan.
class FunctionLoopKernel final : public LoopKernel {
public:
  FunctionLoopKernel(LoopFn fn, const LoopPlan &plan) : fn_(fn), plan_(plan) {}
  void run(const KernelArgs &args) override { fn_(args, plan_); }

private:
  LoopFn fn_;
  LoopPlan plan_;
};

inline std::unique_ptr<NodeKernel> makeLoopKernel(LoopFn fn, const LoopPlan &plan = {}) {
  return std::make_unique<FunctionLoopKernel>(fn, plan);
}

//===----------------------------------------------------------------------===//
// Dtypes
//===----------------------------------------------------------------------===//

/// The dtypes the loops run: f32 and the half types (f32 compute). f64 and
/// integers stay with the reference kernels.
inline bool isLoopFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

/// Calls f(DTypeTag<D>{}) for a dtype isLoopFloat accepts and returns what f
/// returns; returns `otherwise` for the rest.
template <class R, class F> R dispatchLoopFloat(DType t, R otherwise, F &&f) {
  switch (t) {
  case DType::F32:
    return f(DTypeTag<DType::F32>{});
  case DType::BF16:
    return f(DTypeTag<DType::BF16>{});
  case DType::F16:
    return f(DTypeTag<DType::F16>{});
  case DType::F64:
  case DType::I64:
  case DType::I32:
  case DType::Bool:
    return otherwise;
  }
  return otherwise;
}

//===----------------------------------------------------------------------===//
// Vector code
//===----------------------------------------------------------------------===//

#if defined(__GNUC__) && defined(__x86_64__)
#define AMPC_LOOP_HAVE_WIDE 1
#define AMPC_LOOP_WIDE_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define AMPC_LOOP_F16C_TARGET __attribute__((target("avx2,f16c")))
#else
#define AMPC_LOOP_HAVE_WIDE 0
#define AMPC_LOOP_WIDE_TARGET
#endif

#if defined(__GNUC__)
/// Marks a loop body lambda: it must be inlined into the vectorized copies.
#define AMPC_LOOP_BODY __attribute__((always_inline))
#define AMPC_LOOP_NOINLINE __attribute__((noinline))
#else
#define AMPC_LOOP_BODY
#define AMPC_LOOP_NOINLINE
#endif

/// Whether the loops use their AVX-512 copies: the CPU has AVX-512 (F, BW,
/// VL, DQ) and no test turned them off (LoopKernels.h).
bool loopsUseWideVectors();

// The body is taken by value: a local copy of the closure is split into
// scalars, so a loop does not reload its captures from memory (which can
// keep it from vectorizing). Bodies capture by value for the same reason.

template <class Body>
AMPC_LOOP_WIDE_TARGET AMPC_LOOP_NOINLINE void runWide(Body body, int64_t begin, int64_t end) {
  body(begin, end);
}

template <class Body> AMPC_LOOP_NOINLINE void runNarrow(Body body, int64_t begin, int64_t end) {
  body(begin, end);
}

/// body(begin, end) in the best vector code this CPU runs.
template <class Body> inline void runVectorized(const Body &body, int64_t begin, int64_t end) {
#if AMPC_LOOP_HAVE_WIDE
  if (loopsUseWideVectors())
    return runWide(body, begin, end);
#endif
  runNarrow(body, begin, end);
}

//===----------------------------------------------------------------------===//
// f16 conversion
//===----------------------------------------------------------------------===//

/// Elements a loop over f16 tensors converts at a time (into float buffers
/// on its stack).
constexpr int64_t kHalfBlock = 256;

#if AMPC_LOOP_HAVE_WIDE
namespace detail {

/// Whether the CPU has F16C (and AVX2, which the 8-lane copy also uses).
/// F16C is read from CPUID (leaf 1, ECX bit 29): clang 14's
/// __builtin_cpu_supports does not know "f16c", and the sanitizer and fuzz
/// builds use clang.
inline bool cpuHasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0 &&
           __builtin_cpu_supports("avx2");
  }();
  return has;
}

// vcvtps2ph with round to nearest even (the immediate, not MXCSR) is
// floatToHalfBits exactly: subnormal results, overflow to infinity, and a NaN
// keeps its sign and top payload bits with the quiet bit set (checked for all
// 2^32 inputs). vcvtph2ps is exact too, except that it quiets a signalling
// NaN, which halfBitsToFloat keeps signalling: the sNaN lanes get their quiet
// bit (f32 bit 22) cleared again. Neither depends on MXCSR's FTZ / DAZ.
// (The zero-masking forms with every lane set are the plain instructions; the
// unmasked intrinsics trip GCC 12's -Wmaybe-uninitialized.)
constexpr int kToHalfRounding = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
constexpr __mmask16 kAllLanes = 0xffff;

AMPC_LOOP_WIDE_TARGET inline __m512 widenHalves16(__m256i h) {
  __m256i magnitude = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
  __mmask16 signalling = _mm256_cmpgt_epu16_mask(magnitude, _mm256_set1_epi16(0x7c00)) &
                         _mm256_cmplt_epu16_mask(magnitude, _mm256_set1_epi16(0x7e00));
  __m512i bits = _mm512_castps_si512(_mm512_maskz_cvtph_ps(kAllLanes, h));
  bits = _mm512_mask_xor_epi32(bits, signalling, bits, _mm512_set1_epi32(0x00400000));
  return _mm512_castsi512_ps(bits);
}

AMPC_LOOP_WIDE_TARGET inline void halvesToFloatsWide(const uint16_t *from, float *to, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(from + i));
    _mm512_storeu_ps(to + i, widenHalves16(h));
  }
  if (i < n) {
    __mmask16 lanes = static_cast<__mmask16>((1u << (n - i)) - 1u);
    __m256i h = _mm256_maskz_loadu_epi16(lanes, from + i);
    _mm512_mask_storeu_ps(to + i, lanes, widenHalves16(h));
  }
}

AMPC_LOOP_WIDE_TARGET inline void floatsToHalvesWide(const float *from, uint16_t *to, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm512_maskz_cvtps_ph(kAllLanes, _mm512_loadu_ps(from + i), kToHalfRounding);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(to + i), h);
  }
  if (i < n) {
    __mmask16 lanes = static_cast<__mmask16>((1u << (n - i)) - 1u);
    __m256i h =
        _mm512_maskz_cvtps_ph(kAllLanes, _mm512_maskz_loadu_ps(lanes, from + i), kToHalfRounding);
    _mm256_mask_storeu_epi16(to + i, lanes, h);
  }
}

AMPC_LOOP_F16C_TARGET inline void halvesToFloatsF16c(const uint16_t *from, float *to, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i));
    __m128i magnitude = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
    // Signed 16-bit compares: magnitudes are below 0x8000.
    __m128i signalling = _mm_and_si128(_mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7c00)),
                                       _mm_cmplt_epi16(magnitude, _mm_set1_epi16(0x7e00)));
    __m256i quietBit =
        _mm256_and_si256(_mm256_cvtepi16_epi32(signalling), _mm256_set1_epi32(0x00400000));
    __m256i bits = _mm256_castps_si256(_mm256_cvtph_ps(h));
    _mm256_storeu_ps(to + i, _mm256_castsi256_ps(_mm256_xor_si256(bits, quietBit)));
  }
  for (; i < n; ++i)
    to[i] = halfBitsToFloat(from[i]);
}

AMPC_LOOP_F16C_TARGET inline void floatsToHalvesF16c(const float *from, uint16_t *to, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(from + i), kToHalfRounding);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(to + i), h);
  }
  for (; i < n; ++i)
    to[i] = floatToHalfBits(from[i]);
}

} // namespace detail
#endif

/// to[i] = halfBitsToFloat(from[i]) for i in [0, n), in hardware where the
/// CPU converts (the AVX-512 copy only while loopsUseWideVectors()).
inline void halvesToFloats(const uint16_t *from, float *to, int64_t n) {
#if AMPC_LOOP_HAVE_WIDE
  if (loopsUseWideVectors())
    return detail::halvesToFloatsWide(from, to, n);
  if (detail::cpuHasF16c())
    return detail::halvesToFloatsF16c(from, to, n);
#endif
  for (int64_t i = 0; i < n; ++i)
    to[i] = halfBitsToFloat(from[i]);
}

/// to[i] = floatToHalfBits(from[i]) for i in [0, n), likewise.
inline void floatsToHalves(const float *from, uint16_t *to, int64_t n) {
#if AMPC_LOOP_HAVE_WIDE
  if (loopsUseWideVectors())
    return detail::floatsToHalvesWide(from, to, n);
  if (detail::cpuHasF16c())
    return detail::floatsToHalvesF16c(from, to, n);
#endif
  for (int64_t i = 0; i < n; ++i)
    to[i] = floatToHalfBits(from[i]);
}

/// Elements [i, i + n) of an f16 buffer as floats, converted into `buffer`.
AMPC_LOOP_BODY inline const float *loadHalfBlock(const void *p, int64_t i, int64_t n,
                                                 float *buffer) {
  halvesToFloats(static_cast<const uint16_t *>(p) + i, buffer, n);
  return buffer;
}

/// Stores n floats as elements [i, i + n) of an f16 buffer.
AMPC_LOOP_BODY inline void storeHalfBlock(const float *values, void *p, int64_t i, int64_t n) {
  floatsToHalves(values, static_cast<uint16_t *>(p) + i, n);
}

//===----------------------------------------------------------------------===//
// Blocks of floats: how the half types' loops run a float element function
//===----------------------------------------------------------------------===//

/// Elements [i, i + n) of a D buffer as floats: an f16 block converted into
/// `buffer`, the elements themselves for f32, loaded into `buffer` otherwise.
template <DType D>
AMPC_LOOP_BODY inline const float *loadBlock(const void *p, int64_t i, int64_t n, float *buffer) {
  if constexpr (D == DType::F16) {
    return loadHalfBlock(p, i, n, buffer);
  } else if constexpr (D == DType::F32) {
    return static_cast<const float *>(p) + i;
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      buffer[j] = load<D>(p, i + j);
    return buffer;
  }
}

/// Where a block's results go before storeBlock: the elements themselves for
/// f32, `buffer` otherwise.
template <DType D> AMPC_LOOP_BODY inline float *resultBlock(void *p, int64_t i, float *buffer) {
  if constexpr (D == DType::F32)
    return static_cast<float *>(p) + i;
  else
    return buffer;
}

/// Stores a block's results (from resultBlock) as elements [i, i + n).
template <DType D>
AMPC_LOOP_BODY inline void storeBlock(const float *values, void *p, int64_t i, int64_t n) {
  if constexpr (D == DType::F16) {
    storeHalfBlock(values, p, i, n);
  } else if constexpr (D != DType::F32) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      store<D>(p, i + j, values[j]);
  }
}

/// Calls block(i, n) for blocks of kHalfBlock elements (the last shorter)
/// covering [begin, end).
template <class Block>
AMPC_LOOP_BODY inline void forBlocks(int64_t begin, int64_t end, Block block) {
  for (int64_t i = begin; i < end; i += kHalfBlock)
    block(i, std::min(kHalfBlock, end - i));
}

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

/// OpenMP's thread count for the loops.
int loopThreads();

/// Runs body(begin, end) (vectorized, see runVectorized) over [0, n) in
/// chunks of `chunk` items, in parallel when there is more than one chunk.
/// Chunks are fixed by `chunk` alone, so a body that writes per-chunk
/// results gets the same ones on any number of threads.
template <class Body> void parallelChunks(int64_t n, int64_t chunk, const Body &body) {
  if (n <= 0)
    return;
  int64_t chunks = (n + chunk - 1) / chunk;
  if (chunks == 1)
    return runVectorized(body, 0, n);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = c * chunk;
    int64_t end = begin + chunk < n ? begin + chunk : n;
    runVectorized(body, begin, end);
  }
}

/// For loops whose items (elements, rows, channels) are independent: [0, n)
/// split evenly over the threads, but into no pieces smaller than `grain`
/// items, so a small tensor does not pay for waking threads. Pieces are
/// multiples of `alignment` items.
template <class Body>
void parallelFor(int64_t n, int64_t grain, const Body &body, int64_t alignment = 1) {
  int64_t threads = loopThreads();
  int64_t perThread = (n + threads - 1) / threads;
  perThread = (perThread + alignment - 1) / alignment * alignment;
  parallelChunks(n, perThread > grain ? perThread : grain, body);
}

/// parallelFor over the elements of tensors: pieces of whole cache lines (64
/// elements of any dtype), so threads never write to the same line.
template <class Body> void parallelForElements(int64_t n, int64_t grain, const Body &body) {
  parallelFor(n, grain, body, /*alignment=*/64);
}

/// Copies `bytes` bytes (memcpy in pieces of whole pages, split over the
/// threads when large); nothing when `from` is `to`.
void copyInParallel(const void *from, void *to, int64_t bytes);

/// Items per thread below which an elementwise loop stays on one thread. A
/// parallel region costs a few microseconds on an idle machine (about what
/// 20-30k elements of a simple map take) and much more when another process
/// holds a core (every region waits for all threads), so only tensors of a
/// few hundred thousand elements are split.
constexpr int64_t kElementwiseGrain = 65536;

//===----------------------------------------------------------------------===//
// Sums
//===----------------------------------------------------------------------===//

/// Elements per piece of a long sum: pieces are summed in parallel and their
/// partial sums added in order.
constexpr int64_t kSumPiece = 16384;

/// Partial sums in kLanes interleaved f32 lanes: run element j of a range
/// goes to lane j % kLanes, so a vector register holds the lanes, and the
/// order of additions depends only on the ranges added, never on the ISA or
/// the threads.
constexpr int kLanes = 16;

/// Adds lanes pairwise (8 + 8, 4 + 4, ...) into lane 0.
AMPC_LOOP_BODY inline float combineLanes(float (&lanes)[kLanes]) {
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l)
      lanes[l] += lanes[l + width];
  return lanes[0];
}

/// One lane-wise sum of term(i).
struct LaneSum {
  float lanes[kLanes] = {};

  /// Adds term(i) for i in [begin, end), starting at lane 0.
  template <class Term> AMPC_LOOP_BODY void add(int64_t begin, int64_t end, const Term &term) {
    int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
#pragma omp simd
      for (int l = 0; l < kLanes; ++l)
        lanes[l] += term(i + l);
    }
    for (int l = 0; i < end; ++i, ++l)
      lanes[l] += term(i);
  }
  AMPC_LOOP_BODY float total() { return combineLanes(lanes); }
};

/// Two lane-wise sums in one pass: term(i) returns both terms.
struct LaneSum2 {
  float first[kLanes] = {}, second[kLanes] = {};

  template <class Term> AMPC_LOOP_BODY void add(int64_t begin, int64_t end, const Term &term) {
    int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        std::pair<float, float> v = term(i + l);
        first[l] += v.first;
        second[l] += v.second;
      }
    }
    for (int l = 0; i < end; ++i, ++l) {
      std::pair<float, float> v = term(i);
      first[l] += v.first;
      second[l] += v.second;
    }
  }
  AMPC_LOOP_BODY std::pair<float, float> totals() {
    return {combineLanes(first), combineLanes(second)};
  }
};

} // namespace ampc::kernels::cpu

#endif
