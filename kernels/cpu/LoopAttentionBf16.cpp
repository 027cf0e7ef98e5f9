//===- LoopAttentionBf16.cpp - bf16 attention through dot products ---------===//
//
// scaled_dot_product_attention and its backward in bf16 on CPUs with
// AVX512_BF16 (Zen 4, Cooper Lake, Sapphire Rapids and later): every product
// runs `vdpbf16ps`, which multiplies pairs of bf16 elements exactly and adds
// both products to an f32 accumulator, 32 products an instruction, four
// times the f32 tiles' rate without fused multiply-adds. The exact loops
// (LoopAttention.cpp) keep the reference's bits and run at about 200
// GFLOP/s on 2 Zen 4 cores, a tenth of a BERT layer's step at O2.
//
// What changes against the reference (and the exact loops):
//
// - Each product adds its terms two at a time and in the instruction's
//   order, and subnormal products and sums flush to zero (the instruction
//   ignores MXCSR), so results differ in the last bits.
// - The probabilities P and their gradient dS are rounded to bf16 before
//   the products that read them (P v, dS k, dS^T q, P^T dO), as PyTorch's
//   autocast runs those matmuls in bf16. The softmax, its sums and the
//   gradient's row sums stay in f32 (AttentionBlocks.h), as do all
//   accumulators; each result is rounded to bf16 once.
// - Causal attention keeps the exact loops: a pair straddling the mask
//   would read a masked key's row, and the exact loops promise never to.
//
// tests/unit/CpuAttentionTest.cpp checks these loops against f64 attention
// within a tolerance derived from bf16's rounding, and the exact loops
// (setAttentionDotProductsAllowed(false)) bit for bit.
//
// Layout. Operands are packed per slice (and per block of query rows) into
// pairs of bf16 as one 32-bit word (the even contracted index in the low
// half, as vdpbf16ps reads a pair), the pair running along the contracted
// index: a left operand as rows of pairs, a right operand as rows of pairs
// with the result's columns along the row, padded to whole vectors with
// zeros. The register tile is kTileRows rows of the result by one or two
// vectors of 16 columns, as in the exact loops.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/AttentionBlocks.h"
#include "kernels/cpu/LoopKernels.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ampc::kernels::cpu {
namespace {
std::atomic<bool> dotProductsAllowed{true};
} // namespace

void setAttentionDotProductsAllowed(bool allowed) { dotProductsAllowed = allowed; }

bool cpuHasBf16DotProducts() {
#if AMPC_LOOP_HAVE_WIDE
  // CPUID leaf 7, sub-leaf 1, EAX bit 5 (clang 14's __builtin_cpu_supports
  // does not know avx512bf16, and the sanitizer builds use clang).
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return cpuHasAvx512() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) &&
           (eax & (1u << 5)) != 0;
  }();
  return has;
#else
  return false;
#endif
}

} // namespace ampc::kernels::cpu

namespace ampc::kernels::cpu::attention {

#if AMPC_LOOP_HAVE_WIDE

#define AMPC_BF16_DOT_TARGET                                                                       \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define AMPC_BF16_DOT_INLINE AMPC_BF16_DOT_TARGET __attribute__((always_inline)) inline

namespace {

/// 16 floats rounded to bf16 (to nearest, ties to even, as vcvtneps2bf16
/// rounds: subnormals flush to zero, as the dot products flush them).
AMPC_BF16_DOT_INLINE __m256i roundedHalves(const float *x) {
  return (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x));
}

/// dst[r * pairs + p] = (src[r][2p], src[r][2p + 1]): `rows` rows of `cols`
/// bf16 (`stride` elements apart) as rows of pairs, the odd tail's partner 0.
AMPC_BF16_DOT_INLINE void pairRows(const uint16_t *src, int64_t stride, int64_t rows, int64_t cols,
                                   int64_t pairs, uint32_t *dst) {
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t *row = dst + r * pairs;
    std::memcpy(row, src + r * stride, static_cast<size_t>(cols) * 2);
    if (cols % 2)
      reinterpret_cast<uint16_t *>(row)[cols] = 0;
  }
}

/// The same of `rows` rows of f32 (row stride ld, cols a multiple of 16),
/// rounded to bf16.
AMPC_BF16_DOT_INLINE void pairRowsRounded(const float *src, int64_t ld, int64_t rows, int64_t cols,
                                          uint32_t *dst) {
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t *row = reinterpret_cast<uint16_t *>(dst + r * (cols / 2));
    for (int64_t c = 0; c < cols; c += kVector)
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(row + c), roundedHalves(src + r * ld + c));
  }
}

/// dst[p * ld + j] = (src[j][2p], src[j][2p + 1]) for the `rows` rows j of
/// `cols` bf16 (`stride` elements apart), zero for j in [rows, ld): the
/// contracted index along src's rows of pairs, the result's columns along
/// src's rows.
AMPC_BF16_DOT_INLINE void pairColumnsTransposed(const uint16_t *src, int64_t stride, int64_t rows,
                                                int64_t cols, int64_t ld, uint32_t *dst) {
  int64_t pairs = (cols + 1) / 2, fullPairs = cols / 2;
  for (int64_t j = 0; j < rows; ++j) {
    const uint16_t *row = src + j * stride;
    for (int64_t p = 0; p < fullPairs; ++p) {
      uint32_t word;
      std::memcpy(&word, row + 2 * p, 4);
      dst[p * ld + j] = word;
    }
    if (cols % 2)
      dst[fullPairs * ld + j] = row[cols - 1];
  }
  for (int64_t p = 0; p < pairs; ++p)
    std::fill(dst + p * ld + rows, dst + (p + 1) * ld, 0u);
}

/// dst[p * ld + c] = (src[2p][c], src[2p + 1][c]) for c < cols (rows
/// `stride` elements apart), zero for c in [cols, ld), pairs p < `pairs`;
/// rows at or past `rows` read as 0.
AMPC_BF16_DOT_INLINE void interleaveRows(const uint16_t *src, int64_t stride, int64_t rows,
                                         int64_t cols, int64_t pairs, int64_t ld, uint32_t *dst) {
  for (int64_t p = 0; p < pairs; ++p) {
    uint32_t *out = dst + p * ld;
    const uint16_t *lo = 2 * p < rows ? src + 2 * p * stride : nullptr;
    const uint16_t *hi = 2 * p + 1 < rows ? src + (2 * p + 1) * stride : nullptr;
    if (lo && hi) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c)
        out[c] = uint32_t(lo[c]) | uint32_t(hi[c]) << 16;
    } else if (lo) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c)
        out[c] = lo[c];
    } else {
      std::fill(out, out + cols, 0u);
    }
    std::fill(out + cols, out + ld, 0u);
  }
}

/// The same of f32 rows (row stride ld, which is also the pairs' row
/// length and a multiple of 16), rounded to bf16.
AMPC_BF16_DOT_INLINE void interleaveRowsRounded(const float *src, int64_t rows, int64_t pairs,
                                                int64_t ld, uint32_t *dst) {
  for (int64_t p = 0; p < pairs; ++p) {
    uint32_t *out = dst + p * ld;
    const float *lo = src + 2 * p * ld, *hi = lo + ld;
    bool hasHi = 2 * p + 1 < rows;
    // (The zero-masking forms with every lane set are the plain
    // instructions; the unmasked intrinsics trip GCC 12's
    // -Wmaybe-uninitialized.)
    constexpr __mmask16 all = 0xffff;
    for (int64_t c = 0; c < ld; c += kVector) {
      __m512i l = _mm512_maskz_cvtepu16_epi32(all, roundedHalves(lo + c));
      __m512i h = hasHi ? _mm512_maskz_slli_epi32(
                              all, _mm512_maskz_cvtepu16_epi32(all, roundedHalves(hi + c)), 16)
                        : _mm512_setzero_si512();
      _mm512_storeu_si512(out + c, _mm512_or_si512(l, h));
    }
  }
}

/// A left operand of pairs: pair p of row r at data[r * rowStride + p * step].
struct PairOperand {
  const uint32_t *data;
  int64_t rowStride, step;
};

/// Rows x (Vectors x 16) of c (+)= sum over pairs p of a(r, p) . b[p, col].
template <int Rows, int Vectors>
AMPC_BF16_DOT_INLINE void dotTile(PairOperand a, const uint32_t *b, int64_t ldb, int64_t pairs,
                                  float *c, int64_t ldc, bool accumulate) {
  __m512 acc[Rows][Vectors];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v)
      acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + v * kVector) : _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512i bv[Vectors];
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v)
      bv[v] = _mm512_loadu_si512(b + p * ldb + v * kVector);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      __m512i ar = _mm512_set1_epi32(static_cast<int>(a.data[r * a.rowStride + p * a.step]));
#pragma GCC unroll 2
      for (int v = 0; v < Vectors; ++v)
        acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)ar, (__m512bh)bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v)
      _mm512_storeu_ps(c + r * ldc + v * kVector, acc[r][v]);
}

template <int Rows>
AMPC_BF16_DOT_INLINE void dotStrip(PairOperand a, const uint32_t *b, int64_t ldb, int64_t pairs,
                                   float *c, int64_t ldc, int64_t cols, bool accumulate) {
  int64_t col = 0;
  for (; col + 2 * kVector <= cols; col += 2 * kVector)
    dotTile<Rows, 2>(a, b + col, ldb, pairs, c + col, ldc, accumulate);
  if (col < cols)
    dotTile<Rows, 1>(a, b + col, ldb, pairs, c + col, ldc, accumulate);
}

/// The strip of Rows rows from row r0 of dotGemm.
template <int Rows>
AMPC_BF16_DOT_INLINE void dotStripAt(PairOperand a, int64_t r0, const uint32_t *b, int64_t ldb,
                                     int64_t pairs, float *c, int64_t ldc, int64_t cols,
                                     bool accumulate) {
  PairOperand from{a.data + r0 * a.rowStride, a.rowStride, a.step};
  dotStrip<Rows>(from, b, ldb, pairs, c + r0 * ldc, ldc, cols, accumulate);
}

/// c[r, 0..cols) (+)= sum over pairs p < `pairs` of a(r, p) . b[p, :], for
/// rows r in [0, rows); cols a multiple of 16.
AMPC_BF16_DOT_TARGET void dotGemm(PairOperand a, const uint32_t *b, int64_t ldb, int64_t rows,
                                  int64_t pairs, float *c, int64_t ldc, int64_t cols,
                                  bool accumulate) {
  int64_t r0 = 0;
  for (; r0 + kTileRows <= rows; r0 += kTileRows)
    dotStripAt<kTileRows>(a, r0, b, ldb, pairs, c, ldc, cols, accumulate);
  switch (rows - r0) {
  case 0:
    return;
  case 1:
    return dotStripAt<1>(a, r0, b, ldb, pairs, c, ldc, cols, accumulate);
  case 2:
    return dotStripAt<2>(a, r0, b, ldb, pairs, c, ldc, cols, accumulate);
  case 3:
    return dotStripAt<3>(a, r0, b, ldb, pairs, c, ldc, cols, accumulate);
  case 4:
    return dotStripAt<4>(a, r0, b, ldb, pairs, c, ldc, cols, accumulate);
  default:
    return dotStripAt<5>(a, r0, b, ldb, pairs, c, ldc, cols, accumulate);
  }
}

/// rows x cols floats (rows of `ld`) rounded to bf16 (store<BF16>, as
/// every kernel rounds its results) into the rows of `dst` at `at`.
AMPC_BF16_DOT_INLINE void storeRows(const float *src, int64_t ld, int64_t rows, int64_t cols,
                                    void *dst, RowsAt at) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = src + r * ld;
    uint16_t *out = static_cast<uint16_t *>(dst) + at.offset + r * at.stride;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      out[c] = floatToBf16Bits(row[c]);
  }
}

int64_t pairsOf(int64_t n) { return (n + 1) / 2; }

const uint16_t *bf16Data(const TensorArg &t) { return static_cast<const uint16_t *>(t.data); }

/// Forward units [begin, end) (a unit: one block of query rows of a slice).
AMPC_BF16_DOT_TARGET __attribute__((noinline)) void
forwardUnits(const KernelArgs &args, const AttentionPlan &plan, int64_t begin, int64_t end) {
  const uint16_t *qData = bf16Data(args.in(0)), *kData = bf16Data(args.in(1)),
                 *vData = bf16Data(args.in(2));
  void *yData = args.out().data;
  int64_t sq = plan.queryLen, sk = plan.keyLen, d = plan.headSize, dv = plan.valueSize;
  int64_t skp = plan.keysPadded(), dvp = plan.valuePadded(), br = plan.blockRows;
  int64_t headPairs = pairsOf(d), keyPairs = skp / 2, blocks = plan.blocks();
  // Per slice: k^T and v as right operands; per block: q, P (f32 and
  // pairs) and the result.
  float *scratch =
      threadScratch(headPairs * skp + keyPairs * dvp + br * (headPairs + skp + keyPairs + dvp));
  uint32_t *keysT = reinterpret_cast<uint32_t *>(scratch);
  uint32_t *values = keysT + headPairs * skp, *q = values + keyPairs * dvp;
  float *probs = reinterpret_cast<float *>(q + br * headPairs);
  uint32_t *probPairs = reinterpret_cast<uint32_t *>(probs + br * skp);
  float *y = reinterpret_cast<float *>(probPairs + br * keyPairs);
  int64_t loadedSlice = -1;
  for (int64_t unit = begin; unit < end; ++unit) {
    int64_t slice = unit / blocks, row0 = unit % blocks * br;
    BlockRanges block{&plan, row0, std::min(br, sq - row0)};
    int64_t rows = block.rows;
    if (slice != loadedSlice) {
      RowsAt k = plan.rowsAt(slice, 0, sk, d), v = plan.rowsAt(slice, 0, sk, dv);
      pairColumnsTransposed(kData + k.offset, k.stride, sk, d, skp, keysT);
      interleaveRows(vData + v.offset, v.stride, sk, dv, keyPairs, dvp, values);
      loadedSlice = slice;
    }
    RowsAt qAt = plan.rowsAt(slice, row0, sq, d);
    pairRows(qData + qAt.offset, qAt.stride, rows, d, headPairs, q);
    dotGemm({q, headPairs, 1}, keysT, skp, rows, headPairs, probs, skp, skp, false);
    blockSoftmax(block, probs);
    pairRowsRounded(probs, skp, rows, skp, probPairs);
    dotGemm({probPairs, keyPairs, 1}, values, dvp, rows, keyPairs, y, dvp, dvp, false);
    storeRows(y, dvp, rows, dv, yData, plan.rowsAt(slice, row0, sq, dv));
  }
}

/// Backward slices [begin, end): per query block, dP = dO v^T, dS from P
/// and dP (AttentionBlocks.h), dq = dS k, dk += dS^T q, dv += P^T dO.
AMPC_BF16_DOT_TARGET __attribute__((noinline)) void
backwardSlices(const KernelArgs &args, const AttentionPlan &plan, int64_t begin, int64_t end) {
  const uint16_t *dOutData = bf16Data(args.in(0)), *qData = bf16Data(args.in(1)),
                 *kData = bf16Data(args.in(2)), *vData = bf16Data(args.in(3));
  void *dqData = args.out(0).data, *dkData = args.out(1).data, *dvData = args.out(2).data;
  int64_t sq = plan.queryLen, sk = plan.keyLen, d = plan.headSize, dv = plan.valueSize;
  int64_t skp = plan.keysPadded(), dp = plan.headPadded(), dvp = plan.valuePadded();
  int64_t br = plan.blockRows, headPairs = pairsOf(d), valuePairs = pairsOf(dv);
  int64_t keyPairs = skp / 2, rowPairs = pairsOf(br);
  int64_t sliceWords = headPairs * skp + valuePairs * skp + keyPairs * dp + sk * dp + sk * dvp;
  int64_t blockWords = br * (headPairs + valuePairs) + rowPairs * (dp + dvp) + 2 * br * skp +
                       br * keyPairs + 2 * rowPairs * skp + br * dp;
  uint32_t *keysT = reinterpret_cast<uint32_t *>(threadScratch(sliceWords + blockWords));
  uint32_t *valuesT = keysT + headPairs * skp, *keys = valuesT + valuePairs * skp;
  float *dk = reinterpret_cast<float *>(keys + keyPairs * dp), *dvSum = dk + sk * dp;
  uint32_t *q = reinterpret_cast<uint32_t *>(dvSum + sk * dvp), *dOut = q + br * headPairs;
  uint32_t *qAcross = dOut + br * valuePairs, *dOutAcross = qAcross + rowPairs * dp;
  float *probs = reinterpret_cast<float *>(dOutAcross + rowPairs * dvp);
  float *dScores = probs + br * skp;
  uint32_t *dScorePairs = reinterpret_cast<uint32_t *>(dScores + br * skp);
  uint32_t *dScoresAcross = dScorePairs + br * keyPairs,
           *probsAcross = dScoresAcross + rowPairs * skp;
  float *dq = reinterpret_cast<float *>(probsAcross + rowPairs * skp);
  for (int64_t slice = begin; slice < end; ++slice) {
    RowsAt kAt = plan.rowsAt(slice, 0, sk, d), vAt = plan.rowsAt(slice, 0, sk, dv);
    const uint16_t *k = kData + kAt.offset, *v = vData + vAt.offset;
    pairColumnsTransposed(k, kAt.stride, sk, d, skp, keysT);
    pairColumnsTransposed(v, vAt.stride, sk, dv, skp, valuesT);
    interleaveRows(k, kAt.stride, sk, d, keyPairs, dp, keys);
    std::fill(dk, dk + sk * dp, 0.0f);
    std::fill(dvSum, dvSum + sk * dvp, 0.0f);
    for (int64_t row0 = 0; row0 < sq; row0 += br) {
      BlockRanges block{&plan, row0, std::min(br, sq - row0)};
      int64_t rows = block.rows, pairsOfRows = pairsOf(rows);
      RowsAt qAt = plan.rowsAt(slice, row0, sq, d), oAt = plan.rowsAt(slice, row0, sq, dv);
      const uint16_t *qRows = qData + qAt.offset, *dOutRows = dOutData + oAt.offset;
      pairRows(qRows, qAt.stride, rows, d, headPairs, q);
      pairRows(dOutRows, oAt.stride, rows, dv, valuePairs, dOut);
      interleaveRows(qRows, qAt.stride, rows, d, pairsOfRows, dp, qAcross);
      interleaveRows(dOutRows, oAt.stride, rows, dv, pairsOfRows, dvp, dOutAcross);
      dotGemm({q, headPairs, 1}, keysT, skp, rows, headPairs, probs, skp, skp, false);
      blockSoftmax(block, probs);
      // dP, then dS in place.
      dotGemm({dOut, valuePairs, 1}, valuesT, skp, rows, valuePairs, dScores, skp, skp, false);
      blockScoreGradients(block, probs, dScores);
      pairRowsRounded(dScores, skp, rows, skp, dScorePairs);
      dotGemm({dScorePairs, keyPairs, 1}, keys, dp, rows, keyPairs, dq, dp, dp, false);
      storeRows(dq, dp, rows, d, dqData, qAt);
      // dk and dv: rows are keys, the contracted index the block's query rows.
      interleaveRowsRounded(dScores, rows, pairsOfRows, skp, dScoresAcross);
      interleaveRowsRounded(probs, rows, pairsOfRows, skp, probsAcross);
      dotGemm({probsAcross, 1, skp}, dOutAcross, dvp, sk, pairsOfRows, dvSum, dvp, dvp, true);
      dotGemm({dScoresAcross, 1, skp}, qAcross, dp, sk, pairsOfRows, dk, dp, dp, true);
    }
    storeRows(dk, dp, sk, d, dkData, kAt);
    storeRows(dvSum, dvp, sk, dv, dvData, vAt);
  }
}

} // namespace

bool usesBf16DotProducts(const AttentionPlan &plan) {
  return !plan.causal && dotProductsAllowed && loopsUseWideVectors() && cpuHasBf16DotProducts();
}

void attentionForwardBf16Dot(const KernelArgs &args, const AttentionPlan &plan) {
  const KernelArgs *a = &args;
  const AttentionPlan *p = &plan;
  parallelFor(plan.slices * plan.blocks(), plan.forwardGrain,
              [=](int64_t begin, int64_t end) { forwardUnits(*a, *p, begin, end); });
}

void attentionBackwardBf16Dot(const KernelArgs &args, const AttentionPlan &plan) {
  const KernelArgs *a = &args;
  const AttentionPlan *p = &plan;
  parallelFor(plan.slices, plan.backwardGrain,
              [=](int64_t begin, int64_t end) { backwardSlices(*a, *p, begin, end); });
}

#else // no AVX-512 copies to run: the exact loops run every node

bool usesBf16DotProducts(const AttentionPlan &) { return false; }

void attentionForwardBf16Dot(const KernelArgs &, const AttentionPlan &) {
  std::fprintf(stderr, "ampc: bf16 attention dot products are not built for this CPU\n");
  std::abort();
}

void attentionBackwardBf16Dot(const KernelArgs &, const AttentionPlan &) {
  std::fprintf(stderr, "ampc: bf16 attention dot products are not built for this CPU\n");
  std::abort();
}

#endif

} // namespace ampc::kernels::cpu::attention
