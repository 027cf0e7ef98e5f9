//===- AttentionBlocks.h - What the attention loops share ------*- C++ -*-===//
//
// Internal to kernels/cpu: the plan of a scaled_dot_product_attention node
// and the per-block softmax steps that both of its cpu loops run, the exact
// f32 tiles (LoopAttention.cpp) and the bf16 dot-product tiles
// (LoopAttentionBf16.cpp). The block functions are AMPC_LOOP_BODY: they are
// inlined into each caller's vector copy.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_ATTENTIONBLOCKS_H
#define AMPC_KERNELS_CPU_ATTENTIONBLOCKS_H

#include "kernels/KernelArgs.h"
#include "kernels/common/LinearAlgebraMath.h"
#include "kernels/cpu/LoopSupport.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace ampc::kernels::cpu::attention {

/// Floats per vector: rows of the scratch buffers are padded to multiples.
constexpr int64_t kVector = 16;
/// Rows of one register tile. With two vectors of columns that is 12
/// accumulators, which with the loads fits AVX-512's 32 registers (the
/// baseline copy's 4-float SSE vectors keep part of them in memory).
constexpr int kTileRows = 6;
/// Score elements of one block of query rows (64 KiB of floats): the
/// block's scores and their gradient stay in L2 while the block is used.
constexpr int64_t kBlockScores = 16384;
/// Most query rows in a block.
constexpr int64_t kMaxBlockRows = 64;
/// Floating-point operations below which a thread is not worth waking for
/// one more slice (a few microseconds of work).
constexpr double kGrainFlops = 1 << 18;

inline int64_t padded(int64_t n) { return (n + kVector - 1) / kVector * kVector; }

/// Where rows of an operand are: row r at offset + r * stride.
struct RowsAt {
  int64_t offset, stride;
};

/// The node's shapes and attributes, worked out when the program is compiled.
struct AttentionPlan {
  int64_t slices = 1; ///< batch x heads (kernels/AttentionShape.h)
  int64_t queryLen = 0, keyLen = 0, headSize = 0, valueSize = 0;
  AttentionRows layout;  ///< where a slice's rows are (layout bhsd or bshd)
  int64_t blockRows = 0; ///< query rows per block
  bool causal = false;
  float scale = 1;
  /// Least work units per thread: forward units are blocks of query rows,
  /// backward units whole slices (planAttention, from kGrainFlops).
  int64_t forwardGrain = 1, backwardGrain = 1;

  int64_t blocks() const { return (queryLen + blockRows - 1) / blockRows; }
  int64_t keysPadded() const { return padded(keyLen); }
  int64_t headPadded() const { return padded(headSize); }
  int64_t valuePadded() const { return padded(valueSize); }
  /// Rows from `row` of `slice` of an operand of sequences of `len` rows
  /// of `width` elements.
  RowsAt rowsAt(int64_t slice, int64_t row, int64_t len, int64_t width) const {
    return {layout.offset(slice, row, len, width), layout.stride(width)};
  }
  /// Keys that query rows [0, rowEnd) may see.
  int64_t keysBefore(int64_t rowEnd) const { return causal ? std::min(keyLen, rowEnd) : keyLen; }
};

/// At least n floats of the calling thread's scratch, 64-byte aligned (grows,
/// stays for the thread's lifetime). LoopAttention.cpp.
float *threadScratch(int64_t n);

//===----------------------------------------------------------------------===//
// One block of query rows
//===----------------------------------------------------------------------===//

/// Contracted ranges and column counts for gemm(), for a block of query rows
/// from row0 (block-relative rows; keys from 0).
struct BlockRanges {
  const AttentionPlan *plan;
  int64_t row0, rows;

  /// Every row contracts over [0, n): a dense product.
  static auto dense(int64_t n) {
    return [n](int64_t) AMPC_LOOP_BODY { return std::pair<int64_t, int64_t>(0, n); };
  }
  /// Query row r contracts over the keys it sees.
  auto keysOfQuery() const {
    return [plan = plan, row0 = row0](int64_t r) AMPC_LOOP_BODY {
      return std::pair<int64_t, int64_t>(0, plan->keysBefore(row0 + r + 1));
    };
  }
  /// Key j contracts over the block's query rows that see it.
  auto queriesOfKey() const {
    return [causal = plan->causal, row0 = row0, rows = rows](int64_t j) AMPC_LOOP_BODY {
      int64_t first = causal ? std::clamp<int64_t>(j - row0, 0, rows) : 0;
      return std::pair<int64_t, int64_t>(first, rows);
    };
  }
  /// The key columns a strip of query rows sees (its last row's keys).
  auto seenKeyColumns() const {
    return [plan = plan, row0 = row0](int64_t r0, int64_t n)
               AMPC_LOOP_BODY { return padded(plan->keysBefore(row0 + r0 + n)); };
  }
  static auto columns(int64_t n) {
    return [n](int64_t, int64_t) AMPC_LOOP_BODY { return n; };
  }
};

/// Rows whose sequential sums (softmax's maximum and denominator, the
/// backward's weighted sum) run together: each row still adds in the
/// reference's order, but the rows' dependency chains overlap.
constexpr int kChainRows = 8;

/// acc[r] = step(acc[r], term(r, j)) for j from `first` up to length[r],
/// ascending, for the n <= kChainRows rows r; the steps of different rows
/// interleave.
template <class Term, class Step>
AMPC_LOOP_BODY inline void foldRows(int n, const int64_t (&length)[kChainRows], int64_t first,
                                    float (&acc)[kChainRows], const Term &term, const Step &step) {
  int64_t common = length[0];
  for (int r = 1; r < n; ++r)
    common = std::min(common, length[r]);
  if (n == kChainRows) {
    for (int64_t j = first; j < common; ++j) {
#pragma GCC unroll 8
      for (int r = 0; r < kChainRows; ++r)
        acc[r] = step(acc[r], term(r, j));
    }
  } else {
    for (int64_t j = first; j < common; ++j)
      for (int r = 0; r < n; ++r)
        acc[r] = step(acc[r], term(r, j));
  }
  for (int r = 0; r < n; ++r)
    for (int64_t j = std::max(first, common); j < length[r]; ++j)
      acc[r] = step(acc[r], term(r, j));
}

/// The block's scores (rows of keysPadded(), the keys each row sees) in
/// place into their probabilities: each row's softmax of its scaled scores
/// as the reference takes it; masked and padding columns become exact zeros.
AMPC_LOOP_BODY inline void blockSoftmax(const BlockRanges &block, float *scores) {
  const AttentionPlan &plan = *block.plan;
  int64_t ldk = plan.keysPadded();
  float scale = plan.scale;
  for (int64_t g = 0; g < block.rows; g += kChainRows) {
    int n = static_cast<int>(std::min<int64_t>(kChainRows, block.rows - g));
    float *rows = scores + g * ldk;
    int64_t keys[kChainRows];
    float maxScore[kChainRows], sum[kChainRows];
    for (int r = 0; r < n; ++r) {
      float *row = rows + r * ldk;
      keys[r] = plan.keysBefore(block.row0 + g + r + 1);
#pragma omp simd
      for (int64_t j = 0; j < keys[r]; ++j)
        row[j] *= scale;
      // Key 0 is never masked; the running maximum starts from it.
      maxScore[r] = row[0];
      sum[r] = 0;
    }
    auto score = [=](int r, int64_t j) AMPC_LOOP_BODY { return rows[r * ldk + j]; };
    foldRows(n, keys, 1, maxScore, score,
             [](float m, float x) AMPC_LOOP_BODY { return x > m ? x : m; });
    for (int r = 0; r < n; ++r) {
      float *row = rows + r * ldk, m = maxScore[r];
#pragma omp simd
      for (int64_t j = 0; j < keys[r]; ++j)
        row[j] = attentionExp(row[j] - m);
    }
    foldRows(n, keys, 0, sum, score, [](float s, float x) AMPC_LOOP_BODY { return s + x; });
    for (int r = 0; r < n; ++r) {
      float *row = rows + r * ldk, s = sum[r];
#pragma omp simd
      for (int64_t j = 0; j < keys[r]; ++j)
        row[j] /= s;
      for (int64_t j = keys[r]; j < ldk; ++j)
        row[j] = 0;
    }
  }
}

/// dS in place of dP for the block's rows (rows of keysPadded()), from
/// their probabilities: ds_j = p_j (dp_j - sum_l p_l dp_l) * scale, the
/// reference's, with masked and padding columns exact zeros.
AMPC_LOOP_BODY inline void blockScoreGradients(const BlockRanges &block, const float *probs,
                                               float *dScores) {
  const AttentionPlan &plan = *block.plan;
  int64_t ldk = plan.keysPadded();
  float scale = plan.scale;
  for (int64_t g = 0; g < block.rows; g += kChainRows) {
    int n = static_cast<int>(std::min<int64_t>(kChainRows, block.rows - g));
    const float *p = probs + g * ldk;
    float *ds = dScores + g * ldk;
    int64_t keys[kChainRows];
    float weighted[kChainRows];
    for (int r = 0; r < n; ++r) {
      keys[r] = plan.keysBefore(block.row0 + g + r + 1);
      weighted[r] = 0;
    }
    foldRows(
        n, keys, 0, weighted,
        [=](int r, int64_t j) AMPC_LOOP_BODY { return p[r * ldk + j] * ds[r * ldk + j]; },
        [](float s, float x) AMPC_LOOP_BODY { return s + x; });
    for (int r = 0; r < n; ++r) {
      const float *pr = p + r * ldk;
      float *dr = ds + r * ldk, w = weighted[r];
#pragma omp simd
      for (int64_t j = 0; j < keys[r]; ++j)
        dr[j] = pr[j] * (dr[j] - w) * scale;
      for (int64_t j = keys[r]; j < ldk; ++j)
        dr[j] = 0;
    }
  }
}

//===----------------------------------------------------------------------===//
// bf16 through the CPU's dot-product instructions (LoopAttentionBf16.cpp)
//===----------------------------------------------------------------------===//

/// Whether a bf16 node of this plan runs the dot-product loops now: the CPU
/// has AVX512_BF16, the wide loops are on (setLoopWideVectorsAllowed), the
/// dot products are allowed (setAttentionDotProductsAllowed), and the mask
/// is not causal (a causal block keeps the exact loops, which never read a
/// masked key).
bool usesBf16DotProducts(const AttentionPlan &plan);

/// The forward and backward of a bf16 node through the dot products: the
/// products of bf16 pairs accumulate in f32; the probabilities and their
/// gradient are rounded to bf16 before the products that read them.
void attentionForwardBf16Dot(const KernelArgs &args, const AttentionPlan &plan);
void attentionBackwardBf16Dot(const KernelArgs &args, const AttentionPlan &plan);

} // namespace ampc::kernels::cpu::attention

#endif
