//===- LinearAlgebra.cpp - Reference linear, matmul, conv2d, attention ----===//
//
// Plain loops over the output; every dot product accumulates in ComputeT<D>
// (f32 for f16/bf16, as tensor cores do) and is rounded once when stored.
//
//===----------------------------------------------------------------------===//
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

/// out[outOffset + i*n + j] = sum_p a(i, p) * b(p, j).
template <DType D>
void gemm(const MatrixView &a, const MatrixView &b, void *out, int64_t outOffset) {
  using T = ComputeT<D>;
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < b.cols; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < a.cols; ++p)
        acc += load<D>(a.data, a.at(i, p)) * load<D>(b.data, b.at(p, j));
      store<D>(out, outOffset + i * b.cols + j, acc);
    }
}

template <DType D> void linearImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &x = args.in(0), &w = args.in(1), &y = args.out();
  bool hasBias = args.inputs.size() > 2;
  int64_t outFeatures = w.dims()[0], inFeatures = w.dims()[1];
  if (outFeatures == 0)
    return;
  int64_t rows = y.numElements() / outFeatures;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < outFeatures; ++o) {
      T acc = 0;
      for (int64_t i = 0; i < inFeatures; ++i)
        acc += load<D>(x.data, r * inFeatures + i) * load<D>(w.data, o * inFeatures + i);
      if (hasBias)
        acc += load<D>(args.in(2).data, o);
      store<D>(y.data, r * outFeatures + o, acc);
    }
}

template <DType D> void matMulImpl(const KernelArgs &args) {
  const TensorArg &a = args.in(0), &b = args.in(1), &y = args.out();
  bool ta = args.attr("transpose_a").getBool(), tb = args.attr("transpose_b").getBool();
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
  bool ta = args.attr("transpose_a").getBool(), tb = args.attr("transpose_b").getBool();
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

template <DType D> void conv2dImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &x = args.in(0), &w = args.in(1), &y = args.out();
  bool hasBias = args.inputs.size() > 2;
  const std::vector<int64_t> &stride = args.attr("stride").getInts(),
                             &padding = args.attr("padding").getInts(),
                             &dilation = args.attr("dilation").getInts();
  int64_t groups = args.attr("groups").getInt();
  int64_t batch = x.dims()[0], inChannels = x.dims()[1], inH = x.dims()[2], inW = x.dims()[3];
  int64_t outChannels = w.dims()[0], groupInChannels = w.dims()[1], kh = w.dims()[2],
          kw = w.dims()[3];
  int64_t outH = y.dims()[2], outW = y.dims()[3];
  int64_t groupOutChannels = outChannels / groups;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t oc = 0; oc < outChannels; ++oc) {
      int64_t firstInChannel = (oc / groupOutChannels) * groupInChannels;
      for (int64_t oh = 0; oh < outH; ++oh)
        for (int64_t ow = 0; ow < outW; ++ow) {
          T acc = 0;
          for (int64_t ci = 0; ci < groupInChannels; ++ci)
            for (int64_t r = 0; r < kh; ++r) {
              int64_t ih = convInputCoord(oh, r, stride[0], padding[0], dilation[0]);
              if (ih < 0 || ih >= inH)
                continue;
              for (int64_t s = 0; s < kw; ++s) {
                int64_t iw = convInputCoord(ow, s, stride[1], padding[1], dilation[1]);
                if (iw < 0 || iw >= inW)
                  continue;
                int64_t xIndex = ((n * inChannels + firstInChannel + ci) * inH + ih) * inW + iw;
                int64_t wIndex = ((oc * groupInChannels + ci) * kh + r) * kw + s;
                acc += load<D>(x.data, xIndex) * load<D>(w.data, wIndex);
              }
            }
          if (hasBias)
            acc += load<D>(args.in(2).data, oc);
          store<D>(y.data, ((n * outChannels + oc) * outH + oh) * outW + ow, acc);
        }
    }
}

// softmax(q k^T * scale) v, one query row at a time; the probabilities stay in
// ComputeT<D> (f32 for half inputs) between the two products.
template <DType D> void attentionImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  using std::exp;
  const TensorArg &q = args.in(0), &k = args.in(1), &v = args.in(2), &y = args.out();
  unsigned rank = q.dims().size();
  int64_t queryLen = q.dims()[rank - 2], headSize = q.dims()[rank - 1];
  int64_t keyLen = k.dims()[rank - 2], valueSize = v.dims()[rank - 1];
  bool causal = args.attr("causal").getBool();
  T scale = attentionScale<T>(args.attr("scale").getNumber(), headSize);
  int64_t batches = 1;
  for (int64_t d : q.dims().drop_back(2))
    batches *= d;
  std::vector<T> probs(keyLen);
  for (int64_t b = 0; b < batches; ++b) {
    int64_t qBase = b * queryLen * headSize, kBase = b * keyLen * headSize,
            vBase = b * keyLen * valueSize, yBase = b * queryLen * valueSize;
    for (int64_t i = 0; i < queryLen; ++i) {
      // Key 0 is never masked (causal needs queryLen == keyLen), so the
      // running maximum starts from a real score.
      T maxScore = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        if (attentionMasked(i, j, causal))
          continue;
        T dot = 0;
        for (int64_t d = 0; d < headSize; ++d)
          dot +=
              load<D>(q.data, qBase + i * headSize + d) * load<D>(k.data, kBase + j * headSize + d);
        probs[j] = dot * scale;
        if (j == 0 || probs[j] > maxScore)
          maxScore = probs[j];
      }
      T sum = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        probs[j] = attentionMasked(i, j, causal) ? T(0) : exp(probs[j] - maxScore);
        sum += probs[j];
      }
      for (int64_t j = 0; j < keyLen; ++j)
        probs[j] /= sum;
      for (int64_t e = 0; e < valueSize; ++e) {
        T acc = 0;
        for (int64_t j = 0; j < keyLen; ++j)
          acc += probs[j] * load<D>(v.data, vBase + j * valueSize + e);
        store<D>(y.data, yBase + i * valueSize + e, acc);
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
      : stride(args.attr("stride").getInts()), padding(args.attr("padding").getInts()),
        dilation(args.attr("dilation").getInts()), groups(args.attr("groups").getInt()),
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

// dx[n, c, ih, iw] = sum over the outputs that read (ih, iw) through some tap
// of dy * w: a gather, so each element is accumulated and rounded once.
template <DType D> void conv2dGradInputImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dy = args.in(0), &w = args.in(1), &dx = args.out();
  ConvGeometry g(args, dx.dims(), w.dims(), dy.dims());
  int64_t groupOut = g.groupOutChannels();
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t c = 0; c < g.inChannels; ++c) {
      int64_t group = c / g.groupInChannels, ci = c % g.groupInChannels;
      for (int64_t ih = 0; ih < g.inH; ++ih)
        for (int64_t iw = 0; iw < g.inW; ++iw) {
          T acc = 0;
          for (int64_t oc = group * groupOut; oc < (group + 1) * groupOut; ++oc)
            for (int64_t r = 0; r < g.kh; ++r) {
              int64_t oh = convOutputCoord(ih, r, g.stride[0], g.padding[0], g.dilation[0], g.outH);
              if (oh < 0)
                continue;
              for (int64_t s = 0; s < g.kw; ++s) {
                int64_t ow =
                    convOutputCoord(iw, s, g.stride[1], g.padding[1], g.dilation[1], g.outW);
                if (ow < 0)
                  continue;
                acc += load<D>(dy.data, g.yIndex(n, oc, oh, ow)) *
                       load<D>(w.data, g.wIndex(oc, ci, r, s));
              }
            }
          store<D>(dx.data, g.xIndex(n, c, ih, iw), acc);
        }
    }
}

// dw[oc, ci, r, s] = sum over batch and output positions of dy * the input
// element tap (r, s) read there.
template <DType D> void conv2dGradWeightImpl(const KernelArgs &args) {
  using T = ComputeT<D>;
  const TensorArg &dy = args.in(0), &x = args.in(1), &dw = args.out();
  ConvGeometry g(args, x.dims(), dw.dims(), dy.dims());
  int64_t groupOut = g.groupOutChannels();
  for (int64_t oc = 0; oc < g.outChannels; ++oc) {
    int64_t firstInChannel = (oc / groupOut) * g.groupInChannels;
    for (int64_t ci = 0; ci < g.groupInChannels; ++ci)
      for (int64_t r = 0; r < g.kh; ++r)
        for (int64_t s = 0; s < g.kw; ++s) {
          T acc = 0;
          for (int64_t n = 0; n < g.batch; ++n)
            for (int64_t oh = 0; oh < g.outH; ++oh) {
              int64_t ih = convInputCoord(oh, r, g.stride[0], g.padding[0], g.dilation[0]);
              if (ih < 0 || ih >= g.inH)
                continue;
              for (int64_t ow = 0; ow < g.outW; ++ow) {
                int64_t iw = convInputCoord(ow, s, g.stride[1], g.padding[1], g.dilation[1]);
                if (iw < 0 || iw >= g.inW)
                  continue;
                acc += load<D>(dy.data, g.yIndex(n, oc, oh, ow)) *
                       load<D>(x.data, g.xIndex(n, firstInChannel + ci, ih, iw));
              }
            }
          store<D>(dw.data, g.wIndex(oc, ci, r, s), acc);
        }
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
  using std::exp;
  const TensorArg &dOut = args.in(0), &q = args.in(1), &k = args.in(2), &v = args.in(3);
  const TensorArg &dq = args.out(0), &dk = args.out(1), &dv = args.out(2);
  unsigned rank = q.dims().size();
  int64_t queryLen = q.dims()[rank - 2], headSize = q.dims()[rank - 1];
  int64_t keyLen = k.dims()[rank - 2], valueSize = v.dims()[rank - 1];
  bool causal = args.attr("causal").getBool();
  T scale = attentionScale<T>(args.attr("scale").getNumber(), headSize);
  int64_t batches = 1;
  for (int64_t d : q.dims().drop_back(2))
    batches *= d;
  std::vector<T> probs(keyLen), dScores(keyLen), dqRow(headSize);
  std::vector<T> dkAcc(keyLen * headSize), dvAcc(keyLen * valueSize);
  for (int64_t b = 0; b < batches; ++b) {
    int64_t qBase = b * queryLen * headSize, kBase = b * keyLen * headSize,
            vBase = b * keyLen * valueSize, oBase = b * queryLen * valueSize;
    std::fill(dkAcc.begin(), dkAcc.end(), T(0));
    std::fill(dvAcc.begin(), dvAcc.end(), T(0));
    for (int64_t i = 0; i < queryLen; ++i) {
      T maxScore = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        if (attentionMasked(i, j, causal))
          continue;
        T dot = 0;
        for (int64_t d = 0; d < headSize; ++d)
          dot +=
              load<D>(q.data, qBase + i * headSize + d) * load<D>(k.data, kBase + j * headSize + d);
        probs[j] = dot * scale;
        if (j == 0 || probs[j] > maxScore)
          maxScore = probs[j];
      }
      T sum = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        probs[j] = attentionMasked(i, j, causal) ? T(0) : exp(probs[j] - maxScore);
        sum += probs[j];
      }
      for (int64_t j = 0; j < keyLen; ++j)
        probs[j] /= sum;
      // dp_j and the softmax backward.
      T weighted = 0;
      for (int64_t j = 0; j < keyLen; ++j) {
        T dp = 0;
        for (int64_t e = 0; e < valueSize; ++e) {
          T dOutE = load<D>(dOut.data, oBase + i * valueSize + e);
          dp += dOutE * load<D>(v.data, vBase + j * valueSize + e);
          dvAcc[j * valueSize + e] += probs[j] * dOutE;
        }
        dScores[j] = dp;
        weighted += probs[j] * dp;
      }
      std::fill(dqRow.begin(), dqRow.end(), T(0));
      for (int64_t j = 0; j < keyLen; ++j) {
        T ds = probs[j] * (dScores[j] - weighted) * scale;
        for (int64_t d = 0; d < headSize; ++d) {
          dqRow[d] += ds * load<D>(k.data, kBase + j * headSize + d);
          dkAcc[j * headSize + d] += ds * load<D>(q.data, qBase + i * headSize + d);
        }
      }
      for (int64_t d = 0; d < headSize; ++d)
        store<D>(dq.data, qBase + i * headSize + d, dqRow[d]);
    }
    for (int64_t e = 0; e < keyLen * headSize; ++e)
      store<D>(dk.data, kBase + e, dkAcc[e]);
    for (int64_t e = 0; e < keyLen * valueSize; ++e)
      store<D>(dv.data, vBase + e, dvAcc[e]);
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
