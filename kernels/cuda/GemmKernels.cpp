//===- GemmKernels.cpp - linear, matmul, batch_matmul on cuBLAS ------------===//
//
// cublasGemmEx / cublasGemmStridedBatchedEx with f16/bf16 operands and f32
// accumulation (CUBLAS_COMPUTE_32F; the handle disallows reduced-precision
// split-K reductions), f32 in f32 (TF32 only with AMPC_CUDA_TF32=1:
// CUBLAS_COMPUTE_32F_FAST_TF32), f64 in f64. We use cuBLAS's GemmEx rather
// than cuBLASLt: one call covers every case here, including broadcast batch
// strides, and captures into CUDA graphs with the workspace the backend set.
//
// Row-major C[m, n] = op(A)[m, k] op(B)[k, n] is the column-major product
// C^T = op(B)^T op(A)^T, so B is passed first. A bias (linear) is
// broadcast into C first and added by the GEMM with beta = 1: the sum is
// formed in the compute type and rounded once, as the reference does.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/cuda/CudaContext.h"

#include <algorithm>
#include <vector>

namespace ampc::cuda {

namespace kc = kernels::cuda;
using kernels::KernelArgs;

namespace {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t batches = 1;
  /// Element offsets of each batch's A and B matrix.
  std::vector<int64_t> aOffsets, bOffsets;
  /// When the offsets are i * stride: one strided-batched call.
  bool strided = true;
  int64_t strideA = 0, strideB = 0;
};

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

bool affine(const std::vector<int64_t> &offsets, int64_t &stride) {
  stride = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] != static_cast<int64_t>(i) * stride)
      return false;
  return true;
}

class GemmKernel final : public kernels::NodeKernel {
public:
  GemmKernel(CudaContext &ctx, const Node &n, GemmShape shape, DType t, bool bias)
      : ctx_(ctx), shape_(std::move(shape)), dtype_(t), bias_(bias) {
    switch (t) {
    case DType::F16:
      type_ = CUDA_R_16F;
      compute_ = CUBLAS_COMPUTE_32F;
      break;
    case DType::BF16:
      type_ = CUDA_R_16BF;
      compute_ = CUBLAS_COMPUTE_32F;
      break;
    case DType::F32:
      type_ = CUDA_R_32F;
      compute_ = ctx.allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      break;
    case DType::F64:
      type_ = CUDA_R_64F;
      compute_ = CUBLAS_COMPUTE_64F;
      break;
    case DType::I64:
    case DType::I32:
    case DType::Bool:
      break;
    }
  }

  void run(const KernelArgs &a) override {
    const GemmShape &s = shape_;
    const Node *node = a.node;
    if (s.m == 0 || s.n == 0)
      return;
    void *c = a.out().data;
    if (bias_)
      check(kc::broadcastChannels(ctx_.launch(), dtype_, a.in(2).data, c, s.m, s.n, 1),
            "launch of the bias broadcast", node);
    float alpha32 = 1, beta32 = bias_ ? 1 : 0;
    double alpha64 = 1, beta64 = bias_ ? 1 : 0;
    const void *alpha = dtype_ == DType::F64 ? static_cast<const void *>(&alpha64) : &alpha32;
    const void *beta = dtype_ == DType::F64 ? static_cast<const void *>(&beta64) : &beta32;
    cublasOperation_t opA = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    // Leading dimensions are at least 1 (cuBLAS's rule, also for k = 0).
    int lda = static_cast<int>(std::max<int64_t>(1, s.ta ? s.m : s.k));
    int ldb = static_cast<int>(std::max<int64_t>(1, s.tb ? s.k : s.n));
    int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
    size_t element = dtypeSize(dtype_);
    const char *A = static_cast<const char *>(a.in(0).data);
    const char *B = static_cast<const char *>(a.in(1).data);
    if (s.batches == 1) {
      check(cublasGemmEx(ctx_.cublas, opB, opA, n, m, k, alpha, B, type_, ldb, A, type_, lda, beta,
                         c, type_, n, compute_, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx", node);
      return;
    }
    if (s.strided) {
      check(cublasGemmStridedBatchedEx(ctx_.cublas, opB, opA, n, m, k, alpha, B, type_, ldb,
                                       s.strideB, A, type_, lda, s.strideA, beta, c, type_, n,
                                       s.m * s.n, static_cast<int>(s.batches), compute_,
                                       CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx", node);
      return;
    }
    for (int64_t b = 0; b < s.batches; ++b)
      check(cublasGemmEx(ctx_.cublas, opB, opA, n, m, k, alpha, B + s.bOffsets[b] * element, type_,
                         ldb, A + s.aOffsets[b] * element, type_, lda, beta,
                         static_cast<char *>(c) + b * s.m * s.n * element, type_, n, compute_,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx (batch)", node);
  }

private:
  CudaContext &ctx_;
  GemmShape shape_;
  DType dtype_;
  bool bias_;
  cudaDataType_t type_ = CUDA_R_32F;
  cublasComputeType_t compute_ = CUBLAS_COMPUTE_32F;
};

bool fitsInt(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

} // namespace

std::unique_ptr<kernels::NodeKernel> prepareGemmKernel(CudaContext &ctx, const Node &n) {
  DType t = n.result()->dtype();
  if (!isFloating(t))
    return nullptr;
  for (const Value *v : n.operands())
    if (v->dtype() != t)
      return nullptr; // mixed operand dtypes: the reference handles them
  GemmShape s;
  bool bias = false;
  llvm::ArrayRef<int64_t> outDims = n.result()->type().dims();
  if (outDims.size() < 2 && n.kind() != OpKind::Linear)
    return nullptr;
  switch (n.kind()) {
  case OpKind::Linear: {
    llvm::ArrayRef<int64_t> w = n.operand(1)->type().dims();
    s.n = w[0];
    s.k = w[1];
    s.m = s.n ? n.result()->type().numElements() / s.n : 0;
    s.tb = true;
    bias = n.numOperands() > 2;
    break;
  }
  case OpKind::MatMul: {
    llvm::ArrayRef<int64_t> a = n.operand(0)->type().dims();
    s.ta = attrs::MatMul(n).transpose_a();
    s.tb = attrs::MatMul(n).transpose_b();
    s.m = outDims[0];
    s.n = outDims[1];
    s.k = s.ta ? a[0] : a[1];
    break;
  }
  case OpKind::BatchMatMul: {
    llvm::ArrayRef<int64_t> a = n.operand(0)->type().dims(), b = n.operand(1)->type().dims();
    s.ta = attrs::MatMul(n).transpose_a();
    s.tb = attrs::MatMul(n).transpose_b();
    s.m = outDims[outDims.size() - 2];
    s.n = outDims.back();
    s.k = s.ta ? a[a.size() - 2] : a.back();
    llvm::ArrayRef<int64_t> outBatch = outDims.drop_back(2);
    s.batches = 1;
    for (int64_t d : outBatch)
      s.batches *= d;
    for (int64_t i = 0; i < s.batches; ++i) {
      s.aOffsets.push_back(broadcastBatchOffset(i, outBatch, a.drop_back(2), s.m * s.k));
      s.bOffsets.push_back(broadcastBatchOffset(i, outBatch, b.drop_back(2), s.k * s.n));
    }
    s.strided = affine(s.aOffsets, s.strideA) && affine(s.bOffsets, s.strideB);
    if (s.batches == 0)
      s.m = 0;
    break;
  }
  default:
    return nullptr;
  }
  if (!fitsInt(s.m) || !fitsInt(s.n) || !fitsInt(s.k) || !fitsInt(s.batches))
    return nullptr;
  return std::make_unique<GemmKernel>(ctx, n, std::move(s), t, bias);
}

} // namespace ampc::cuda
