//===- LinearAlgebra.cpp - Reference linear, matmul, conv2d, attention ----===//
//
// Plain loops over the output; every dot product accumulates in ComputeT<D>
// (f32 for f16/bf16, as tensor cores do) and is rounded once when stored.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/AttentionShape.h"
#include "kernels/common/LinearAlgebraMath.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/Families.h"

#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ampc::kernels::ref {
namespace {

/// A matrix operand of a GEMM: base pointer, element offset of the matrix
/// inside the buffer, and its logical (after transposition) shape.
struct MatrixView {
  const void *data;
  int64_t offset;
  int64_t rows;
  int64_t cols;
  bool transposed;

  int64_t at(int64_t row, int64_t col) const {
    return offset + matrixOffset(row, col, rows, cols, transposed);
  }
};

/// The rows of a (or the columns of b, with `byColumns`) widened to
/// ComputeT<D>, each contiguous: the dot products below then walk memory in
/// order. Widening first changes no result: every product reads the same
/// widened values in the same order.
template <DType D> std::vector<ComputeT<D>> widenedLines(const MatrixView &m, bool byColumns) {
  int64_t lines = byColumns ? m.cols : m.rows, length = byColumns ? m.rows : m.cols;
  std::vector<ComputeT<D>> out(static_cast<size_t>(lines * length));
  for (int64_t l = 0; l < lines; ++l)
    for (int64_t e = 0; e < length; ++e)
      out[l * length + e] = load<D>(m.data, byColumns ? m.at(e, l) : m.at(l, e));
  return out;
}

/// out[i, j] = sum_p a[i, p] * b[p, j] over widened row-major a [m, k] and
/// b [k, n], p ascending for every (i, j). The loop runs p outside j so the
/// inner loop streams a row of b into a row of accumulators (and vectorises),
/// while each accumulator still adds its products in the naive order.
template <DType D, class Store>
void gemmWidened(const std::vector<ComputeT<D>> &a, const std::vector<ComputeT<D>> &b, int64_t m,
                 int64_t k, int64_t n, Store &&storeRow) {
  using T = ComputeT<D>;
  std::vector<T> acc(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), T(0));
    const T *ai = a.data() + i * k;
    T *__restrict accRow = acc.data(); // no aliasing: lets the compiler vectorise
    for (int64_t p = 0; p < k; ++p) {
      const T aip = ai[p];
      const T *__restrict bp = b.data() + p * n;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        accRow[j] += aip * bp[j];
    }
    storeRow(i, acc.data());
  }
}

/// out[outOffset + i*n + j] = sum_p a(i, p) * b(p, j), p ascending.
template <DType D>
void gemm(const MatrixView &a, const MatrixView &b, void *out, int64_t outOffset) {
  const int64_t n = b.cols;
  gemmWidened<D>(widenedLines<D>(a, false), widenedLines<D>(b, false), a.rows, a.cols, n,
                 [&](int64_t i, const ComputeT<D> *row) {
                   for (int64_t j = 0; j < n; ++j)
                     store<D>(out, outOffset + i * n + j, row[j]);
                 });
}

template <DType D> void linearImpl(const KernelArgs &args) {
  const TensorArg &x = args.in(0), &w = args.in(1), &y = args.out();
  bool hasBias = args.inputs.size() > 2;
  int64_t outFeatures = w.dims()[0], inFeatures = w.dims()[1];
  if (outFeatures == 0)
    return;
  int64_t rows = y.numElements() / outFeatures;
  // y = x w^T (+ bias after the whole dot product, as before widening).
  gemmWidened<D>(widenedLines<D>({x.data, 0, rows, inFeatures, false}, false),
                 widenedLines<D>({w.data, 0, outFeatures, inFeatures, false}, true), rows,
                 inFeatures, outFeatures, [&](int64_t r, const ComputeT<D> *row) {
                   for (int64_t o = 0; o < outFeatures; ++o) {
                     ComputeT<D> v = row[o];
                     if (hasBias)
                       v += load<D>(args.in(2).data, o);
                     store<D>(y.data, r * outFeatures + o, v);
                   }
                 });
}

template <DType D> void matMulImpl(const KernelArgs &args) {
  const TensorArg &a = args.in(0), &b = args.in(1), &y = args.out();
  bool ta = attrs::MatMul(*args.node).transpose_a(), tb = attrs::MatMul(*args.node).transpose_b();
  int64_t m = y.dims()[0], n = y.dims()[1];
  int64_t k = ta ? a.dims()[0] : a.dims()[1];
  gemm<D>({a.data, 0, m, k, ta}, {b.data, 0, k, n, tb}, y.data, 0);
}

/// Element offset of the matrix that output batch `outBatchIndex` reads from
/// an operand whose batch dims are `operandBatch` (numpy broadcasting:
/// right-aligned, a dim of 1 repeats).
int64_t broadcastBatchOffset(int64_t outBatchIndex, llvm::ArrayRef<int64_t> outBatch,
                             llvm::ArrayRef<int64_t> operandBatch, int64_t matrixSize) {
  int64_t offset = 0, operandStride = matrixSize;
  size_t lead = outBatch.size() - operandBatch.size();
  for (size_t d = outBatch.size(); d-- > 0;) {
    int64_t coord = outBatchIndex % outBatch[d];
    outBatchIndex /= outBatch[d];
    if (d < lead)
      continue;
    int64_t operandDim = operandBatch[d - lead];
    if (operandDim != 1)
      offset += coord * operandStride;
    operandStride *= operandDim;
  }
  return offset;
}

template <DType D> void batchMatMulImpl(const KernelArgs &args) {
  const TensorArg &a = args.in(0), &b = args.in(1), &y = args.out();
  bool ta = attrs::MatMul(*args.node).transpose_a(), tb = attrs::MatMul(*args.node).transpose_b();
  llvm::ArrayRef<int64_t> outDims = y.dims(), aDims = a.dims(), bDims = b.dims();
  int64_t m = outDims[outDims.size() - 2], n = outDims.back();
  int64_t k = ta ? aDims[aDims.size() - 2] : aDims.back();
  llvm::ArrayRef<int64_t> outBatch = outDims.drop_back(2);
  int64_t batches = 1;
  for (int64_t d : outBatch)
    batches *= d;
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t aOffset = broadcastBatchOffset(bi, outBatch, aDims.drop_back(2), m * k);
    int64_t bOffset = broadcastBatchOffset(bi, outBatch, bDims.drop_back(2), k * n);
    gemm<D>({a.data, aOffset, m, k, ta}, {b.data, bOffset, k, n, tb}, y.data, bi * m * n);
  }
}

// softmax(q k^T * scale) v, one query row at a time; the probabilities stay in
// ComputeT<D> (f32 for half inputs) between the two products. exp is
// attentionExp, which the cpu backend's loops vectorize with the same bits.
template <DType D> void attentionImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &q = args.in(0), &k = args.in(1), &v = args.in(2), &y = args.out();
  AttentionShape shape = attentionShape(*args.node, q.dims(), k.dims(), v.dims());
  int64_t queryLen = shape.queryLen, headSize = shape.headSize;
  int64_t keyLen = shape.keyLen, valueSize = shape.valueSize;
  AttentionRows rows = shape.rows;
  bool causal = attrs::ScaledDotProductAttention(*args.node).causal();
  T scale = attentionScale<T>(attrs::ScaledDotProductAttention(*args.node).scale(), headSize);
  std::vector<T> probs(keyLen);
  for (int64_t b = 0; b < shape.slices; ++b) {
    auto qAt = [&](int64_t i, int64_t d) { return rows.offset(b, i, queryLen, headSize) + d; };
    auto kAt = [&](int64_t j, int64_t d) { return rows.offset(b, j, keyLen, headSize) + d; };
    auto vAt = [&](int64_t j, int64_t e) { return rows.offset(b, j, keyLen, valueSize) + e; };
    for (int64_t i = 0; i < queryLen; ++i) {
      // Key 0 is never masked (causal needs queryLen == keyLen), so the
      // running maximum starts from a real score.
      T maxScore = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        if (attentionMasked(i, j, causal))
          continue;
        T dot = 0;
        for (int64_t d = 0; d < headSize; ++d)
          dot += load<D>(q.data, qAt(i, d)) * load<D>(k.data, kAt(j, d));
        probs[j] = dot * scale;
        if (j == 0 || probs[j] > maxScore)
          maxScore = probs[j];
      }
      T sum = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        probs[j] = attentionMasked(i, j, causal) ? T(0) : attentionExp(probs[j] - maxScore);
        sum += probs[j];
      }
      for (int64_t j = 0; j < keyLen; ++j)
        probs[j] /= sum;
      for (int64_t e = 0; e < valueSize; ++e) {
        T acc = 0;
        for (int64_t j = 0; j < keyLen; ++j)
          acc += probs[j] * load<D>(v.data, vAt(j, e));
        store<D>(y.data, rows.offset(b, i, queryLen, valueSize) + e, acc);
      }
    }
  }
}

/// The geometry of a convolution node (forward or backward).
struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  int64_t batch, inChannels, inH, inW;
  int64_t outChannels, groupInChannels, kh, kw;
  int64_t outH, outW;

  ConvGeometry(const KernelArgs &args, llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> w,
               llvm::ArrayRef<int64_t> y)
      : stride(attrs::Conv2d(*args.node).stride()), padding(attrs::Conv2d(*args.node).padding()),
        dilation(attrs::Conv2d(*args.node).dilation()), groups(attrs::Conv2d(*args.node).groups()),
        batch(x[0]), inChannels(x[1]), inH(x[2]), inW(x[3]), outChannels(w[0]),
        groupInChannels(w[1]), kh(w[2]), kw(w[3]), outH(y[2]), outW(y[3]) {}

  int64_t groupOutChannels() const { return outChannels / groups; }
  int64_t xIndex(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return ((n * inChannels + c) * inH + h) * inW + w;
  }
  int64_t wIndex(int64_t oc, int64_t ci, int64_t r, int64_t s) const {
    return ((oc * groupInChannels + ci) * kh + r) * kw + s;
  }
  int64_t yIndex(int64_t n, int64_t oc, int64_t h, int64_t w) const {
    return ((n * outChannels + oc) * outH + h) * outW + w;
  }
};

/// The input patches of image n, group `group`, widened: row p = (ci, r, s)
/// of the group's taps, column = output position (oh, ow); taps that fall
/// in the padding read 0. Convolutions become GEMMs over it ("im2col"), so
/// their inner loops stream contiguous memory.
template <DType D>
std::vector<ComputeT<D>> inputPatches(const ConvGeometry &g, const void *x, int64_t n,
                                      int64_t group) {
  const int64_t taps = g.groupInChannels * g.kh * g.kw, positions = g.outH * g.outW;
  std::vector<ComputeT<D>> patches(static_cast<size_t>(taps * positions), ComputeT<D>(0));
  for (int64_t ci = 0; ci < g.groupInChannels; ++ci)
    for (int64_t r = 0; r < g.kh; ++r)
      for (int64_t s = 0; s < g.kw; ++s) {
        ComputeT<D> *row = patches.data() + ((ci * g.kh + r) * g.kw + s) * positions;
        for (int64_t oh = 0; oh < g.outH; ++oh) {
          int64_t ih = convInputCoord(oh, r, g.stride[0], g.padding[0], g.dilation[0]);
          if (ih < 0 || ih >= g.inH)
            continue;
          for (int64_t ow = 0; ow < g.outW; ++ow) {
            int64_t iw = convInputCoord(ow, s, g.stride[1], g.padding[1], g.dilation[1]);
            if (iw >= 0 && iw < g.inW)
              row[oh * g.outW + ow] =
                  load<D>(x, g.xIndex(n, group * g.groupInChannels + ci, ih, iw));
          }
        }
      }
  return patches;
}

/// The weights of group `group` widened as a [groupOut, taps] matrix (or its
/// transpose).
template <DType D>
std::vector<ComputeT<D>> groupWeights(const ConvGeometry &g, const void *w, int64_t group,
                                      bool transposed) {
  const int64_t taps = g.groupInChannels * g.kh * g.kw, groupOut = g.groupOutChannels();
  return widenedLines<D>({w, group * groupOut * taps, groupOut, taps, false}, transposed);
}

/// The rows [group * groupOut, (group + 1) * groupOut) of dy for image n,
/// widened: [groupOut, positions].
template <DType D>
std::vector<ComputeT<D>> groupOutputs(const ConvGeometry &g, const void *y, int64_t n,
                                      int64_t group) {
  const int64_t groupOut = g.groupOutChannels(), positions = g.outH * g.outW;
  return widenedLines<D>({y, g.yIndex(n, group * groupOut, 0, 0), groupOut, positions, false},
                         false);
}

// y[n, oc] = W[oc, taps] . patches[taps, positions] (+ bias after the sum).
template <DType D> void conv2dImpl(const KernelArgs &args) {
  const TensorArg &x = args.in(0), &w = args.in(1), &y = args.out();
  bool hasBias = args.inputs.size() > 2;
  ConvGeometry g(args, x.dims(), w.dims(), y.dims());
  const int64_t groupOut = g.groupOutChannels(), positions = g.outH * g.outW;
  const int64_t taps = g.groupInChannels * g.kh * g.kw;
  for (int64_t group = 0; group < g.groups; ++group) {
    std::vector<ComputeT<D>> weights = groupWeights<D>(g, w.data, group, false);
    for (int64_t n = 0; n < g.batch; ++n)
      gemmWidened<D>(weights, inputPatches<D>(g, x.data, n, group), groupOut, taps, positions,
                     [&](int64_t i, const ComputeT<D> *row) {
                       int64_t oc = group * groupOut + i;
                       for (int64_t pos = 0; pos < positions; ++pos) {
                         ComputeT<D> v = row[pos];
                         if (hasBias)
                           v += load<D>(args.in(2).data, oc);
                         store<D>(y.data, g.yIndex(n, oc, 0, 0) + pos, v);
                       }
                     });
  }
}

// dx = col2im(W^T dy): the patch gradients W[:, p]^T dy (a sum over the
// group's output channels) are added, in ComputeT<D>, into the input element
// each tap read, and every element is rounded once at the end.
template <DType D> void conv2dGradInputImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dy = args.in(0), &w = args.in(1), &dx = args.out();
  ConvGeometry g(args, dx.dims(), w.dims(), dy.dims());
  const int64_t groupOut = g.groupOutChannels(), positions = g.outH * g.outW;
  const int64_t taps = g.groupInChannels * g.kh * g.kw, plane = g.inH * g.inW;
  std::vector<T> image(static_cast<size_t>(g.inChannels * plane));
  for (int64_t n = 0; n < g.batch; ++n) {
    std::fill(image.begin(), image.end(), T(0));
    for (int64_t group = 0; group < g.groups; ++group)
      gemmWidened<D>(groupWeights<D>(g, w.data, group, true), groupOutputs<D>(g, dy.data, n, group),
                     taps, groupOut, positions, [&](int64_t tap, const T *row) {
                       int64_t ci = tap / (g.kh * g.kw), r = tap / g.kw % g.kh, s = tap % g.kw;
                       T *channel = image.data() + (group * g.groupInChannels + ci) * plane;
                       for (int64_t oh = 0; oh < g.outH; ++oh) {
                         int64_t ih =
                             convInputCoord(oh, r, g.stride[0], g.padding[0], g.dilation[0]);
                         if (ih < 0 || ih >= g.inH)
                           continue;
                         for (int64_t ow = 0; ow < g.outW; ++ow) {
                           int64_t iw =
                               convInputCoord(ow, s, g.stride[1], g.padding[1], g.dilation[1]);
                           if (iw >= 0 && iw < g.inW)
                             channel[ih * g.inW + iw] += row[oh * g.outW + ow];
                         }
                       }
                     });
    for (int64_t i = 0; i < g.inChannels * plane; ++i)
      store<D>(dx.data, g.xIndex(n, 0, 0, 0) + i, image[i]);
  }
}

// dw[oc, tap] = sum over images n and output positions of dy[n, oc, pos] *
// patches_n[tap, pos]: one ComputeT<D> accumulator per weight, carried
// across the batch, rounded once at the end.
template <DType D> void conv2dGradWeightImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dy = args.in(0), &x = args.in(1), &dw = args.out();
  ConvGeometry g(args, x.dims(), dw.dims(), dy.dims());
  const int64_t groupOut = g.groupOutChannels(), positions = g.outH * g.outW;
  const int64_t taps = g.groupInChannels * g.kh * g.kw;
  std::vector<T> acc(static_cast<size_t>(groupOut * taps));
  for (int64_t group = 0; group < g.groups; ++group) {
    std::fill(acc.begin(), acc.end(), T(0));
    for (int64_t n = 0; n < g.batch; ++n) {
      // Positions as rows, taps as columns, so the inner loop runs over taps.
      std::vector<T> byTap = inputPatches<D>(g, x.data, n, group);
      std::vector<T> byPosition(byTap.size());
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t pos = 0; pos < positions; ++pos)
          byPosition[pos * taps + t] = byTap[t * positions + pos];
      std::vector<T> dyRows = groupOutputs<D>(g, dy.data, n, group);
      for (int64_t i = 0; i < groupOut; ++i) {
        T *__restrict accRow = acc.data() + i * taps;
        for (int64_t pos = 0; pos < positions; ++pos) {
          const T d = dyRows[i * positions + pos];
          const T *__restrict patch = byPosition.data() + pos * taps;
#pragma omp simd
          for (int64_t t = 0; t < taps; ++t)
            accRow[t] += d * patch[t];
        }
      }
    }
    for (int64_t i = 0; i < groupOut * taps; ++i)
      store<D>(dw.data, group * groupOut * taps + i, acc[i]);
  }
}

// The backward of softmax(q k^T * scale) v, one query row at a time with the
// row's probabilities p recomputed as the forward does:
//   dv_j += p_j do,  dp_j = do . v_j,  ds_j = p_j (dp_j - sum_l p_l dp_l),
//   dq = scale sum_j ds_j k_j,  dk_j += scale ds_j q.
// dk and dv collect contributions of every query row, so they accumulate in
// ComputeT<D> buffers and are rounded once at the end.
template <DType D> void attentionGradImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dOut = args.in(0), &q = args.in(1), &k = args.in(2), &v = args.in(3);
  const TensorArg &dq = args.out(0), &dk = args.out(1), &dv = args.out(2);
  AttentionShape shape = attentionShape(*args.node, q.dims(), k.dims(), v.dims());
  int64_t queryLen = shape.queryLen, headSize = shape.headSize;
  int64_t keyLen = shape.keyLen, valueSize = shape.valueSize;
  AttentionRows rows = shape.rows;
  bool causal = attrs::ScaledDotProductAttention(*args.node).causal();
  T scale = attentionScale<T>(attrs::ScaledDotProductAttention(*args.node).scale(), headSize);
  std::vector<T> probs(keyLen), dScores(keyLen), dqRow(headSize);
  std::vector<T> dkAcc(keyLen * headSize), dvAcc(keyLen * valueSize);
  for (int64_t b = 0; b < shape.slices; ++b) {
    auto qAt = [&](int64_t i, int64_t d) { return rows.offset(b, i, queryLen, headSize) + d; };
    auto kAt = [&](int64_t j, int64_t d) { return rows.offset(b, j, keyLen, headSize) + d; };
    auto vAt = [&](int64_t j, int64_t e) { return rows.offset(b, j, keyLen, valueSize) + e; };
    auto oAt = [&](int64_t i, int64_t e) { return rows.offset(b, i, queryLen, valueSize) + e; };
    std::fill(dkAcc.begin(), dkAcc.end(), T(0));
    std::fill(dvAcc.begin(), dvAcc.end(), T(0));
    for (int64_t i = 0; i < queryLen; ++i) {
      T maxScore = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        if (attentionMasked(i, j, causal))
          continue;
        T dot = 0;
        for (int64_t d = 0; d < headSize; ++d)
          dot += load<D>(q.data, qAt(i, d)) * load<D>(k.data, kAt(j, d));
        probs[j] = dot * scale;
        if (j == 0 || probs[j] > maxScore)
          maxScore = probs[j];
      }
      T sum = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        probs[j] = attentionMasked(i, j, causal) ? T(0) : attentionExp(probs[j] - maxScore);
        sum += probs[j];
      }
      for (int64_t j = 0; j < keyLen; ++j)
        probs[j] /= sum;
      // dp_j and the softmax backward.
      T weighted = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        T dp = 0;
        for (int64_t e = 0; e < valueSize; ++e) {
          T dOutE = load<D>(dOut.data, oAt(i, e));
          dp += dOutE * load<D>(v.data, vAt(j, e));
          dvAcc[j * valueSize + e] += probs[j] * dOutE;
        }
        dScores[j] = dp;
        weighted += probs[j] * dp;
      }
      std::fill(dqRow.begin(), dqRow.end(), T(0));
      for (int64_t j = 0; j < keyLen; ++j) {
        T ds = probs[j] * (dScores[j] - weighted) * scale;
        for (int64_t d = 0; d < headSize; ++d) {
          dqRow[d] += ds * load<D>(k.data, kAt(j, d));
          dkAcc[j * headSize + d] += ds * load<D>(q.data, qAt(i, d));
        }
      }
      for (int64_t d = 0; d < headSize; ++d)
        store<D>(dq.data, qAt(i, d), dqRow[d]);
    }
    for (int64_t j = 0; j < keyLen; ++j) {
      for (int64_t d = 0; d < headSize; ++d)
        store<D>(dk.data, kAt(j, d), dkAcc[j * headSize + d]);
      for (int64_t e = 0; e < valueSize; ++e)
        store<D>(dv.data, vAt(j, e), dvAcc[j * valueSize + e]);
    }
  }
}

} // namespace

void linear(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { linearImpl<decltype(tag)::value>(a); });
}

void matMul(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { matMulImpl<decltype(tag)::value>(a); });
}

void batchMatMul(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { batchMatMulImpl<decltype(tag)::value>(a); });
}

void conv2d(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { conv2dImpl<decltype(tag)::value>(a); });
}

void scaledDotProductAttention(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { attentionImpl<decltype(tag)::value>(a); });
}

void conv2dGradInput(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { conv2dGradInputImpl<decltype(tag)::value>(a); });
}

void conv2dGradWeight(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { conv2dGradWeightImpl<decltype(tag)::value>(a); });
}

void scaledDotProductAttentionGrad(const KernelArgs &a) {
  dispatchFloat(a.out().dtype(), [&](auto tag) { attentionGradImpl<decltype(tag)::value>(a); });
}

} // namespace ampc::kernels::ref
