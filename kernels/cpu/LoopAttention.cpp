//===- LoopAttention.cpp - scaled_dot_product_attention and its backward --===//
//
// softmax(q k^T * scale) v and its fused backward in f32, bf16 and f16, with
// the reference's bits (kernels/reference/LinearAlgebra.cpp): every dot
// product adds its terms in the reference's order, each softmax row takes
// its maximum and sum sequentially, exp is the reference's attentionExp
// (kernels/common/ExpMath.h, vectorized here), and dk and dv collect the
// query rows in ascending order. (bf16 on a CPU with AVX512_BF16 runs the
// dot-product loops of LoopAttentionBf16.cpp instead, unless causal; they
// share the plan and the softmax steps, AttentionBlocks.h.) Only the
// schedule differs:
//
// - Threads take whole (batch, head) slices -- the forward also splits a
//   slice into blocks of query rows -- so no sum is split between threads.
// - Each slice's operands are widened to f32 once, into per-thread scratch,
//   with rows padded to whole vectors (zeros in the padding).
// - The products are register tiles (gemmTile): kTileRows rows of the
//   result times one or two vectors of columns, kept in registers while the
//   contracted index runs in ascending order. That is the reference's order
//   for each element, so tiling changes no bit, and the vectors run along
//   the result's columns (key or feature positions), never along a sum.
// - Query rows are processed in blocks whose scores fit in cache; the
//   backward recomputes a block's probabilities as the forward does (the
//   op keeps no softmax), then accumulates the block into dk and dv.
// - Causal: every product skips the masked pairs, row by row (a tile's rows
//   check on the diagonal which steps are theirs), and score tiles wholly
//   above the diagonal are not computed. Masked probabilities are exact
//   zeros and a sum that skips a zero product has the same bits (sums start
//   at +0, so never hold the -0 that adding +0 would change), so this
//   changes nothing for finite inputs. A masked key's value row or a masked
//   position's gradient is never read: where the reference multiplies an
//   infinity there by the zero probability and gets a NaN, these loops do
//   not (as PyTorch's fused kernels).
// - Sequential sums run for kChainRows rows at once (foldRows), so their
//   dependency chains overlap.
//
// With -ffp-contract=off (kernels/CMakeLists.txt) the tiles multiply and add
// separately, as the reference does: that costs the fused multiply-add but
// keeps the reference's bits.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/AttentionShape.h"
#include "kernels/common/ExpMath.h"
#include "kernels/common/LinearAlgebraMath.h"
#include "kernels/cpu/AttentionBlocks.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

namespace ampc::kernels::cpu::attention {

/// At least n floats of the calling thread's scratch, 64-byte aligned (grows,
/// stays for the thread's lifetime).
float *threadScratch(int64_t n) {
  struct Scratch {
    float *data = nullptr;
    int64_t size = 0;
    ~Scratch() { std::free(data); }
  };
  thread_local Scratch scratch;
  if (scratch.size < n) {
    std::free(scratch.data);
    scratch.size = (n + 1023) / 1024 * 1024;
    scratch.data = static_cast<float *>(
        std::aligned_alloc(64, static_cast<size_t>(scratch.size) * sizeof(float)));
    if (!scratch.data) { // mid-step: nobody to report a failure to
      std::fprintf(stderr, "ampc: out of memory allocating %lld floats of attention scratch\n",
                   static_cast<long long>(scratch.size));
      std::abort();
    }
  }
  return scratch.data;
}

namespace {

static_assert(kTileRows == 6, "gemm() dispatches the strips of 1-5 rows left over");

//===----------------------------------------------------------------------===//
// Widening and narrowing
//===----------------------------------------------------------------------===//

/// rows x cols elements of `src` at `at` (row r from at.offset + r *
/// at.stride) as f32 rows of `ld` floats at `dst`, the padding [cols, ld)
/// zeroed.
template <DType D>
AMPC_LOOP_BODY inline void widenRows(const void *src, RowsAt at, int64_t rows, int64_t cols,
                                     float *dst, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    float *row = dst + r * ld;
    int64_t from = at.offset + r * at.stride;
    if constexpr (D == DType::F16) {
      halvesToFloats(static_cast<const uint16_t *>(src) + from, row, cols);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c)
        row[c] = load<D>(src, from + c);
    }
    for (int64_t c = cols; c < ld; ++c)
      row[c] = 0;
  }
}

/// The transpose of rows x cols elements of `src` at `at`: cols rows of
/// `ld` floats at `dst`, the padding [rows, ld) zeroed. `rowBuffer` holds
/// one widened source row.
template <DType D>
AMPC_LOOP_BODY inline void widenTransposed(const void *src, RowsAt at, int64_t rows, int64_t cols,
                                           float *dst, int64_t ld, float *rowBuffer) {
  for (int64_t r = 0; r < rows; ++r) {
    widenRows<D>(src, RowsAt{at.offset + r * at.stride, cols}, 1, cols, rowBuffer, cols);
    for (int64_t c = 0; c < cols; ++c)
      dst[c * ld + r] = rowBuffer[c];
  }
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = rows; r < ld; ++r)
      dst[c * ld + r] = 0;
}

/// Stores rows x cols floats (rows of `ld`) as the rows of `dst` at `at`,
/// rounded once to D.
template <DType D>
AMPC_LOOP_BODY inline void narrowRows(const float *src, int64_t ld, int64_t rows, int64_t cols,
                                      void *dst, RowsAt at) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = src + r * ld;
    int64_t to = at.offset + r * at.stride;
    if constexpr (D == DType::F16) {
      floatsToHalves(row, static_cast<uint16_t *>(dst) + to, cols);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c)
        store<D>(dst, to + c, row[c]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Products
//===----------------------------------------------------------------------===//

/// A left operand: element (row r, contracted index p) at r * rowStride +
/// p * step, so one buffer serves as itself (step 1) or its transpose.
struct LeftOperand {
  const float *data;
  int64_t rowStride, step;
};

/// Rows x (Vectors x kVector) of c = (c +) sum over p of a(r, p) * b[p, col],
/// row r's p running through its own range [begin[r], end[r]) in ascending
/// order: the accumulators stay in registers, and each adds its products in
/// the reference's order. Where all rows' ranges overlap the loop runs
/// unconditionally; before and after it (at most Rows - 1 steps of a causal
/// diagonal) each row checks that p is its own.
template <int Rows, int Vectors>
AMPC_LOOP_BODY inline void gemmTile(LeftOperand a, const float *b, int64_t ldb,
                                    const int64_t (&begin)[Rows], const int64_t (&end)[Rows],
                                    float *c, int64_t ldc, bool accumulate) {
  constexpr int kCols = Vectors * kVector;
  float acc[Rows][kCols];
  int64_t first = begin[0], allFrom = begin[0], allTo = end[0], last = end[0];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma omp simd
    for (int w = 0; w < kCols; ++w)
      acc[r][w] = accumulate ? c[r * ldc + w] : 0.0f;
    first = std::min(first, begin[r]);
    allFrom = std::max(allFrom, begin[r]);
    allTo = std::min(allTo, end[r]);
    last = std::max(last, end[r]);
  }
  auto someRows = [&](int64_t from, int64_t to) AMPC_LOOP_BODY {
    for (int64_t p = from; p < to; ++p) {
      const float *bp = b + p * ldb;
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        if (p < begin[r] || p >= end[r])
          continue;
        float ar = a.data[r * a.rowStride + p * a.step];
#pragma omp simd
        for (int w = 0; w < kCols; ++w)
          acc[r][w] += ar * bp[w];
      }
    }
  };
  someRows(first, allFrom);
  for (int64_t p = allFrom; p < allTo; ++p) {
    const float *bp = b + p * ldb;
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      float ar = a.data[r * a.rowStride + p * a.step];
#pragma omp simd
      for (int w = 0; w < kCols; ++w)
        acc[r][w] += ar * bp[w];
    }
  }
  someRows(std::max(allFrom, allTo), last);
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma omp simd
    for (int w = 0; w < kCols; ++w)
      c[r * ldc + w] = acc[r][w];
  }
}

/// Rows rows from row r0 of the result: all column tiles up to
/// `colsOf(r0, Rows)` (a multiple of kVector), two vectors at a time, row r
/// contracting over `range(r)`.
template <int Rows, class Range, class Cols>
AMPC_LOOP_BODY inline void gemmStrip(LeftOperand a, const float *b, int64_t ldb, float *c,
                                     int64_t ldc, bool accumulate, int64_t r0, const Range &range,
                                     const Cols &colsOf) {
  int64_t begin[Rows], end[Rows];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    std::pair<int64_t, int64_t> rowRange = range(r0 + r);
    begin[r] = rowRange.first;
    end[r] = rowRange.second;
  }
  LeftOperand strip{a.data + r0 * a.rowStride, a.rowStride, a.step};
  float *cr = c + r0 * ldc;
  int64_t cols = colsOf(r0, Rows), col = 0;
  for (; col + 2 * kVector <= cols; col += 2 * kVector)
    gemmTile<Rows, 2>(strip, b + col, ldb, begin, end, cr + col, ldc, accumulate);
  if (col < cols)
    gemmTile<Rows, 1>(strip, b + col, ldb, begin, end, cr + col, ldc, accumulate);
}

/// c[r, 0..cols) (+)= sum over p in range(r) of a(r, p) b[p, :] for rows r
/// in [0, rows), in strips of kTileRows rows: `range(r)` is row r's
/// contracted range (all of it for dense products, cut by the causal mask),
/// `colsOf(r0, n)` the columns of the strip of n rows from r0.
template <class Range, class Cols>
AMPC_LOOP_BODY inline void gemm(LeftOperand a, const float *b, int64_t ldb, int64_t rows, float *c,
                                int64_t ldc, bool accumulate, const Range &range,
                                const Cols &colsOf) {
  int64_t r0 = 0;
  for (; r0 + kTileRows <= rows; r0 += kTileRows)
    gemmStrip<kTileRows>(a, b, ldb, c, ldc, accumulate, r0, range, colsOf);
  switch (rows - r0) {
  case 0:
    return;
  case 1:
    return gemmStrip<1>(a, b, ldb, c, ldc, accumulate, r0, range, colsOf);
  case 2:
    return gemmStrip<2>(a, b, ldb, c, ldc, accumulate, r0, range, colsOf);
  case 3:
    return gemmStrip<3>(a, b, ldb, c, ldc, accumulate, r0, range, colsOf);
  case 4:
    return gemmStrip<4>(a, b, ldb, c, ldc, accumulate, r0, range, colsOf);
  default:
    return gemmStrip<5>(a, b, ldb, c, ldc, accumulate, r0, range, colsOf);
  }
}

/// The scores of the block's query rows (their widened queries at `q`, rows
/// of headPadded()) against the keys they see, into `scores` (rows of
/// keysPadded()), then their softmax (blockSoftmax).
AMPC_LOOP_BODY inline void blockProbabilities(const BlockRanges &block, const float *q,
                                              const float *keysT, float *scores) {
  const AttentionPlan &plan = *block.plan;
  int64_t ldk = plan.keysPadded();
  gemm({q, plan.headPadded(), 1}, keysT, ldk, block.rows, scores, ldk, false,
       BlockRanges::dense(plan.headSize), block.seenKeyColumns());
  blockSoftmax(block, scores);
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <DType D> void attentionForward(const KernelArgs &args, const AttentionPlan &plan) {
  const void *qData = args.in(0).data, *kData = args.in(1).data, *vData = args.in(2).data;
  void *yData = args.out().data;
  int64_t blocks = plan.blocks();
  parallelFor(
      plan.slices * blocks, plan.forwardGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
        int64_t sq = plan.queryLen, sk = plan.keyLen, d = plan.headSize, dv = plan.valueSize;
        int64_t skp = plan.keysPadded(), dp = plan.headPadded(), dvp = plan.valuePadded();
        int64_t br = plan.blockRows;
        float *keysT = threadScratch(d * skp + sk * dvp + br * (dp + skp + dvp) + d);
        float *values = keysT + d * skp, *q = values + sk * dvp, *probs = q + br * dp;
        float *y = probs + br * skp, *rowBuffer = y + br * dvp;
        int64_t loadedSlice = -1;
        for (int64_t unit = begin; unit < end; ++unit) {
          int64_t slice = unit / blocks, row0 = unit % blocks * br;
          BlockRanges block{&plan, row0, std::min(br, sq - row0)};
          if (slice != loadedSlice) {
            widenTransposed<D>(kData, plan.rowsAt(slice, 0, sk, d), sk, d, keysT, skp, rowBuffer);
            widenRows<D>(vData, plan.rowsAt(slice, 0, sk, dv), sk, dv, values, dvp);
            loadedSlice = slice;
          }
          widenRows<D>(qData, plan.rowsAt(slice, row0, sq, d), block.rows, d, q, dp);
          blockProbabilities(block, q, keysT, probs);
          gemm({probs, skp, 1}, values, dvp, block.rows, y, dvp, false, block.keysOfQuery(),
               BlockRanges::columns(dvp));
          narrowRows<D>(y, dvp, block.rows, dv, yData, plan.rowsAt(slice, row0, sq, dv));
        }
      });
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

// Per query block, with P its probabilities and dO its rows of grad_output:
//   dP = dO v^T,  dS = P (dP - rowsum(P dP)) * scale  (the reference's
//   ds_j = p_j (dp_j - sum_l p_l dp_l) * scale),
//   dq = dS k,  dk += dS^T q,  dv += P^T dO.
template <DType D> void attentionBackward(const KernelArgs &args, const AttentionPlan &plan) {
  const void *dOutData = args.in(0).data, *qData = args.in(1).data, *kData = args.in(2).data,
             *vData = args.in(3).data;
  void *dqData = args.out(0).data, *dkData = args.out(1).data, *dvData = args.out(2).data;
  parallelFor(plan.slices, plan.backwardGrain, [=](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    int64_t sq = plan.queryLen, sk = plan.keyLen, d = plan.headSize, dv = plan.valueSize;
    int64_t skp = plan.keysPadded(), dp = plan.headPadded(), dvp = plan.valuePadded();
    int64_t br = plan.blockRows;
    // Per slice: k (rows and transposed), v^T, and the dk, dv sums; per
    // block: q, dO, P, dS and dq.
    int64_t sliceFloats = sk * dp + d * skp + dv * skp + sk * dp + sk * dvp;
    int64_t blockFloats = br * (dp + dvp + 2 * skp + dp);
    float *keyRows = threadScratch(sliceFloats + blockFloats + std::max(d, dv));
    float *keysT = keyRows + sk * dp, *valuesT = keysT + d * skp, *dk = valuesT + dv * skp;
    float *dvSum = dk + sk * dp, *q = dvSum + sk * dvp, *dOut = q + br * dp;
    float *probs = dOut + br * dvp, *dScores = probs + br * skp, *dq = dScores + br * skp;
    float *rowBuffer = dq + br * dp;
    for (int64_t slice = begin; slice < end; ++slice) {
      widenRows<D>(kData, plan.rowsAt(slice, 0, sk, d), sk, d, keyRows, dp);
      widenTransposed<D>(kData, plan.rowsAt(slice, 0, sk, d), sk, d, keysT, skp, rowBuffer);
      widenTransposed<D>(vData, plan.rowsAt(slice, 0, sk, dv), sk, dv, valuesT, skp, rowBuffer);
      std::fill(dk, dk + sk * dp, 0.0f);
      std::fill(dvSum, dvSum + sk * dvp, 0.0f);
      for (int64_t row0 = 0; row0 < sq; row0 += br) {
        BlockRanges block{&plan, row0, std::min(br, sq - row0)};
        int64_t rows = block.rows;
        widenRows<D>(qData, plan.rowsAt(slice, row0, sq, d), rows, d, q, dp);
        widenRows<D>(dOutData, plan.rowsAt(slice, row0, sq, dv), rows, dv, dOut, dvp);
        blockProbabilities(block, q, keysT, probs);
        // dP, then dS in place.
        gemm({dOut, dvp, 1}, valuesT, skp, rows, dScores, skp, false, BlockRanges::dense(dv),
             block.seenKeyColumns());
        blockScoreGradients(block, probs, dScores);
        gemm({dScores, skp, 1}, keyRows, dp, rows, dq, dp, false, block.keysOfQuery(),
             BlockRanges::columns(dp));
        narrowRows<D>(dq, dp, rows, d, dqData, plan.rowsAt(slice, row0, sq, d));
        // dk and dv: rows are keys (those the block's rows see), the
        // contracted index the block's query rows.
        int64_t keysSeen = plan.keysBefore(row0 + rows);
        gemm({probs, 1, skp}, dOut, dvp, keysSeen, dvSum, dvp, true, block.queriesOfKey(),
             BlockRanges::columns(dvp));
        gemm({dScores, 1, skp}, q, dp, keysSeen, dk, dp, true, block.queriesOfKey(),
             BlockRanges::columns(dp));
      }
      narrowRows<D>(dk, dp, sk, d, dkData, plan.rowsAt(slice, 0, sk, d));
      narrowRows<D>(dvSum, dvp, sk, dv, dvData, plan.rowsAt(slice, 0, sk, dv));
    }
  });
}

//===----------------------------------------------------------------------===//
// Preparing
//===----------------------------------------------------------------------===//

using AttentionFn = void (*)(const KernelArgs &args, const AttentionPlan &plan);

/// The exact loops' function, and for bf16 the dot products' (chosen at
/// every run: tests turn the dot products and the wide loops on and off).
class AttentionKernel final : public LoopKernel {
public:
  AttentionKernel(AttentionFn exact, AttentionFn dot, const AttentionPlan &plan)
      : exact_(exact), dot_(dot), plan_(plan) {}
  void run(const KernelArgs &args) override {
    (dot_ && usesBf16DotProducts(plan_) ? dot_ : exact_)(args, plan_);
  }

private:
  AttentionFn exact_, dot_;
  AttentionPlan plan_;
};

/// The plan of attention over the query, key and value operands at `first`
/// (0 for the forward, 1 for the backward), or nothing for shapes the
/// reference should run: empty ones.
std::optional<AttentionPlan> planAttention(const Node &n, unsigned first, bool causal,
                                           double scaleAttr) {
  AttentionShape shape =
      attentionShape(n, n.operand(first)->type().dims(), n.operand(first + 1)->type().dims(),
                     n.operand(first + 2)->type().dims());
  AttentionPlan plan;
  plan.slices = shape.slices;
  plan.queryLen = shape.queryLen;
  plan.keyLen = shape.keyLen;
  plan.headSize = shape.headSize;
  plan.valueSize = shape.valueSize;
  plan.layout = shape.rows;
  if (plan.slices == 0 || plan.queryLen == 0 || plan.keyLen == 0 || plan.headSize == 0 ||
      plan.valueSize == 0)
    return std::nullopt;
  plan.causal = causal;
  plan.scale = attentionScale<float>(scaleAttr, plan.headSize);
  int64_t rows = kBlockScores / plan.keysPadded();
  rows = std::clamp<int64_t>(rows / kTileRows * kTileRows, kTileRows, kMaxBlockRows);
  plan.blockRows = std::min(rows, plan.queryLen);
  double unitFlops =
      2.0 * double(plan.blockRows) * double(plan.keyLen) * double(plan.headSize + plan.valueSize);
  double sliceFlops =
      6.0 * double(plan.queryLen) * double(plan.keyLen) * double(plan.headSize + plan.valueSize);
  plan.forwardGrain = std::max<int64_t>(1, int64_t(kGrainFlops / std::max(unitFlops, 1.0)));
  plan.backwardGrain = std::max<int64_t>(1, int64_t(kGrainFlops / std::max(sliceFlops, 1.0)));
  return plan;
}

} // namespace
} // namespace ampc::kernels::cpu::attention

namespace ampc::kernels::cpu {

using namespace attention;

std::unique_ptr<NodeKernel> prepareLoopAttention(const Node &n) {
  DType t = n.result()->dtype();
  attrs::ScaledDotProductAttention a(n);
  std::optional<AttentionPlan> plan = planAttention(n, 0, a.causal(), a.scale());
  if (!plan || !allOfDType(n, t))
    return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    return std::unique_ptr<NodeKernel>(std::make_unique<AttentionKernel>(
        &attentionForward<D>, D == DType::BF16 ? &attentionForwardBf16Dot : nullptr, *plan));
  });
}

std::unique_ptr<NodeKernel> prepareLoopAttentionGrad(const Node &n) {
  DType t = n.result(0)->dtype();
  attrs::ScaledDotProductAttentionGrad a(n);
  std::optional<AttentionPlan> plan = planAttention(n, 1, a.causal(), a.scale());
  if (!plan || !allOfDType(n, t))
    return nullptr;
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    return std::unique_ptr<NodeKernel>(std::make_unique<AttentionKernel>(
        &attentionBackward<D>, D == DType::BF16 ? &attentionBackwardBf16Dot : nullptr, *plan));
  });
}

} // namespace ampc::kernels::cpu
