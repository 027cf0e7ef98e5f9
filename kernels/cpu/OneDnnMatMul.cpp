//===- OneDnnMatMul.cpp - linear, matmul, batch_matmul as oneDNN matmul ---===//
//
// All three are one dnnl::matmul over our row-major buffers: a transposed
// operand is the same buffer described with swapped strides, so no copy is
// made, and linear's weight [out, in] is read as the [in, out] matrix W^T.
// bf16 operands accumulate in f32 and the result is rounded once, with the
// bias added before that rounding (as the reference kernel does). On a CPU
// whose oneDNN has no bf16 matmul (before AVX-512) all three run the f32
// primitive on the operands widened exactly: the same products and f32
// sums, in oneDNN's order instead of the reference kernel's. (On the
// zoo's Swin-T input that order moved the O2 forward error from 1.8e-2 to
// 3.1e-2; over five other inputs it was 0.6-1.2e-2 against the reference
// kernel's 0.6-1.6e-2, with the same RMS error: bf16 noise in a maximum.)
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/cpu/OneDnnContext.h"

namespace ampc::kernels::cpu {

namespace {

using dnnl::memory;

/// A stack of matrices stored in C order as [batch..., r, c] (r x c each),
/// described as the logical [batch..., rows, cols] matrices a GEMM reads:
/// the stored ones, or their transposes when `transposed` (rows = c,
/// cols = r) through swapped strides. `rank` pads the batch dims with
/// leading 1s, as numpy broadcasting aligns them.
memory::desc matrixDesc(llvm::ArrayRef<int64_t> storedDims, bool transposed, unsigned rank,
                        memory::data_type type) {
  memory::dims stored(rank - storedDims.size(), 1);
  stored.insert(stored.end(), storedDims.begin(), storedDims.end());
  memory::dims strides = denseStrides(stored);
  memory::dims dims = stored;
  if (transposed) {
    std::swap(dims[rank - 2], dims[rank - 1]);
    std::swap(strides[rank - 2], strides[rank - 1]);
  }
  return memory::desc(dims, type, strides);
}

/// The matmul over our buffers a, b (, bias) -> y, computed in f32 on
/// widened copies when `widen` (the bindings' reorders convert).
std::unique_ptr<NodeKernel> matMulKernel(const memory::desc &a, const memory::desc &b,
                                         const memory::desc *bias, const memory::desc &y,
                                         bool widen) {
  // Only the bf16 tensors widen (a node may read bf16 and write f32).
  auto widens = [&](const memory::desc &d) {
    return widen && d.data_type() == memory::data_type::bf16;
  };
  auto inside = [&](const memory::desc &d) {
    return widens(d) ? retypedDesc(d, memory::data_type::f32) : d;
  };
  memory::desc ia = inside(a), ib = inside(b), iy = inside(y);
  memory::desc ibias = bias ? inside(*bias) : memory::desc();
  dnnl::matmul::desc desc =
      bias ? dnnl::matmul::desc(ia, ib, ibias, iy) : dnnl::matmul::desc(ia, ib, iy);
  dnnl::matmul::primitive_desc pd(desc, userScratchpadAttr(), oneDnnEngine());
  // A bf16 tensor's binding to its f32 twin (same layout): the kernel
  // widens and narrows it (OneDnnPrimitiveKernel).
  llvm::SmallVector<OneDnnBinding, 4> bindings{{DNNL_ARG_SRC, false, 0, a, ia},
                                               {DNNL_ARG_WEIGHTS, false, 1, b, ib},
                                               {DNNL_ARG_DST, true, 0, y, iy}};
  if (bias)
    bindings.push_back({DNNL_ARG_BIAS, false, 2, *bias, ibias});
  return std::make_unique<OneDnnPrimitiveKernel>(pd, dnnl::matmul(pd), bindings);
}

} // namespace

// y[rows, out] = x[rows, in] W^T (+ b), x's leading dims flattened to rows.
std::unique_ptr<NodeKernel> prepareOneDnnLinear(const Node &n, bool widen) {
  const TensorType &x = n.operand(0)->type(), &w = n.operand(1)->type();
  memory::data_type type = *oneDnnType(x.dtype());
  int64_t outFeatures = w.dim(0), inFeatures = w.dim(1);
  int64_t rows = x.numElements() / inFeatures;
  memory::desc src = plainDesc({rows, inFeatures}, type);
  memory::desc weights = matrixDesc(w.dims(), /*transposed=*/true, 2, type);
  memory::desc dst = plainDesc({rows, outFeatures}, type);
  if (n.numOperands() < 3)
    return matMulKernel(src, weights, nullptr, dst, widen);
  // oneDNN's matmul bias has the rank of dst and broadcasts over its rows.
  memory::desc bias = plainDesc({1, outFeatures}, type);
  return matMulKernel(src, weights, &bias, dst, widen);
}

std::unique_ptr<NodeKernel> prepareOneDnnMatMul(const Node &n, bool widen) {
  const TensorType &a = n.operand(0)->type(), &b = n.operand(1)->type(), &y = n.result()->type();
  memory::data_type type = *oneDnnType(a.dtype());
  return matMulKernel(matrixDesc(a.dims(), attrs::MatMul(n).transpose_a(), 2, type),
                      matrixDesc(b.dims(), attrs::MatMul(n).transpose_b(), 2, type), nullptr,
                      plainDesc(y.dims(), type), widen);
}

// Batch dims of size 1 broadcast (oneDNN matmul's own semantics, the same
// as numpy's once both operands have the result's rank).
std::unique_ptr<NodeKernel> prepareOneDnnBatchMatMul(const Node &n, bool widen) {
  const TensorType &a = n.operand(0)->type(), &b = n.operand(1)->type(), &y = n.result()->type();
  memory::data_type type = *oneDnnType(a.dtype());
  unsigned rank = y.rank();
  if (rank > DNNL_MAX_NDIMS)
    return nullptr;
  return matMulKernel(matrixDesc(a.dims(), attrs::MatMul(n).transpose_a(), rank, type),
                      matrixDesc(b.dims(), attrs::MatMul(n).transpose_b(), rank, type), nullptr,
                      plainDesc(y.dims(), type), widen);
}

} // namespace ampc::kernels::cpu
