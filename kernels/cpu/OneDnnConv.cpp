//===- OneDnnConv.cpp - conv2d and its two gradients as oneDNN primitives -===//
//
// conv2d, conv2d_grad_input and conv2d_grad_weight as oneDNN's convolution
// forward, backward-data and backward-weights primitives. Our buffers are
// plain NCHW activations and OIHW weights (grouped weights [O, C/g, kh, kw]
// are the same bytes as oneDNN's [g, O/g, C/g, kh, kw]); the primitives pick
// their own (blocked) layouts and the kernel reorders into and out of them
// around each call. That pays off by far: in the seed ConvNet's training
// step at batch 32 (examples/convnet.yaml, 2 threads) the convolutions take
// 186 ms in f32 and 99 ms in bf16 that way, 14-17 ms of reorders included,
// against 301 ms and 239 ms with the gemm-based primitives oneDNN has for
// plain layouts. bf16 accumulates in f32 and rounds once.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/OneDnnContext.h"

#include <string>

namespace ampc::kernels::cpu {

namespace {

using dnnl::memory;

/// The largest stride beyond the kernel's reach that oneDNN is given.
constexpr int64_t kMaxGapStride = 16;

/// Output area (H' x W') beyond which a bf16 weight gradient is computed by
/// the f32 primitive (see prepareOneDnnConv2dGradWeight).
constexpr int64_t kMaxBf16GradWeightArea = 256 * 256;

/// A convolution's geometry in oneDNN's terms, from a node's attributes and
/// the shapes of its input x [N, C, H, W], weight w [O, C/g, kh, kw] and
/// output y [N, O, H', W'] (whichever of them the node has as tensors).
struct ConvShape {
  /// Our buffers' layouts.
  memory::desc x, w, y;
  /// The same shapes with the layout left to the primitive.
  memory::desc anyX, anyW, anyY;
  memory::dims strides, dilates, padLeft, padRight;
  /// False for geometry oneDNN's generated kernels are known to mishandle:
  /// a stride far beyond the kernel's reach wrote out of bounds inside
  /// oneDNN 2.6's bf16 kernels (SIGSEGV at stride >= 324 on 16 channels).
  /// Such a node runs its reference kernel instead.
  bool safe = true;

  /// `type` is our buffers' dtype; `compute`, when given, the one the
  /// primitive runs in (the bindings' reorders convert).
  ConvShape(const Node &n, llvm::ArrayRef<int64_t> xDims, llvm::ArrayRef<int64_t> wDims,
            llvm::ArrayRef<int64_t> yDims, memory::data_type type,
            std::optional<memory::data_type> compute = std::nullopt) {
    const std::vector<int64_t> &stride = attrs::Conv2d(n).stride(),
                               &padding = attrs::Conv2d(n).padding(),
                               &dilation = attrs::Conv2d(n).dilation();
    int64_t groups = attrs::Conv2d(n).groups();
    x = plainDesc(xDims, type);
    y = plainDesc(yDims, type);
    w = groups == 1 ? plainDesc(wDims, type)
                    : plainDesc({groups, wDims[0] / groups, wDims[1], wDims[2], wDims[3]}, type);
    memory::data_type inside = compute.value_or(type);
    anyX = memory::desc(x.dims(), inside, memory::format_tag::any);
    anyW = memory::desc(w.dims(), inside, memory::format_tag::any);
    anyY = memory::desc(y.dims(), inside, memory::format_tag::any);
    for (unsigned d = 0; d < 2; ++d) {
      int64_t span = (wDims[2 + d] - 1) * dilation[d] + 1;
      // With one output along a dim the stride moves nothing, so any stride
      // past the input the window leaves unread is the same convolution
      // (oneDNN wants the unread part, a negative right padding, smaller
      // than the stride): the smallest such keeps huge strides, which do
      // occur in fuzzed and generated models, away from the kernels.
      int64_t unread = xDims[2 + d] + padding[d] - span;
      int64_t s =
          yDims[2 + d] == 1 ? std::min(stride[d], std::max<int64_t>(1, unread + 1)) : stride[d];
      // Windows that overlap, touch (patch embeddings: stride = kernel) or
      // skip a little (1x1 downsampling) are what models use; far larger
      // strides go to the reference kernel.
      if (s > std::max<int64_t>(span, kMaxGapStride))
        safe = false;
      strides.push_back(s);
      // oneDNN counts dilation from 0 (no gaps), PyTorch from 1.
      dilates.push_back(dilation[d] - 1);
      padLeft.push_back(padding[d]);
      // The right padding the output size actually uses: smaller than the
      // left one when the stride leaves trailing input unread (oneDNN
      // checks that the sizes agree).
      padRight.push_back((yDims[2 + d] - 1) * s + span - xDims[2 + d] - padding[d]);
    }
  }

  /// The forward primitive descriptor (the backward ones need it as a hint).
  dnnl::convolution_forward::primitive_desc forward(const memory::desc *bias,
                                                    const dnnl::primitive_attr &attr) const {
    auto prop = dnnl::prop_kind::forward_training;
    auto algo = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::desc desc =
        bias ? dnnl::convolution_forward::desc(prop, algo, anyX, anyW, *bias, anyY, strides,
                                               dilates, padLeft, padRight)
             : dnnl::convolution_forward::desc(prop, algo, anyX, anyW, anyY, strides, dilates,
                                               padLeft, padRight);
    return dnnl::convolution_forward::primitive_desc(desc, attr, oneDnnEngine());
  }
};

} // namespace

// conv2d(x, w, bias?) -> y
std::unique_ptr<NodeKernel> prepareOneDnnConv2d(const Node &n, bool widen) {
  memory::data_type type = *oneDnnType(n.result()->dtype());
  std::optional<memory::data_type> compute;
  if (widen)
    compute = memory::data_type::f32;
  ConvShape s(n, n.operand(0)->type().dims(), n.operand(1)->type().dims(),
              n.result()->type().dims(), type, compute);
  if (!s.safe)
    return nullptr;
  bool hasBias = n.numOperands() > 2;
  memory::desc bias = hasBias ? plainDesc(n.operand(2)->type().dims(), type) : memory::desc();
  memory::desc insideBias = hasBias ? retypedDesc(bias, compute.value_or(type)) : memory::desc();
  auto pd = s.forward(hasBias ? &insideBias : nullptr, userScratchpadAttr());
  llvm::SmallVector<OneDnnBinding, 4> bindings{{DNNL_ARG_SRC, false, 0, s.x, pd.src_desc()},
                                               {DNNL_ARG_WEIGHTS, false, 1, s.w, pd.weights_desc()},
                                               {DNNL_ARG_DST, true, 0, s.y, pd.dst_desc()}};
  if (hasBias)
    bindings.push_back({DNNL_ARG_BIAS, false, 2, bias, pd.bias_desc()});
  return std::make_unique<OneDnnPrimitiveKernel>(pd, dnnl::convolution_forward(pd), bindings);
}

// conv2d_grad_input(dy, w) -> dx
std::unique_ptr<NodeKernel> prepareOneDnnConv2dGradInput(const Node &n, bool widen) {
  memory::data_type type = *oneDnnType(n.result()->dtype());
  std::optional<memory::data_type> compute;
  if (widen)
    compute = memory::data_type::f32;
  ConvShape s(n, n.result()->type().dims(), n.operand(1)->type().dims(),
              n.operand(0)->type().dims(), type, compute);
  if (!s.safe)
    return nullptr;
  dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, s.anyX, s.anyW,
                                             s.anyY, s.strides, s.dilates, s.padLeft, s.padRight);
  dnnl::convolution_backward_data::primitive_desc pd(desc, userScratchpadAttr(), oneDnnEngine(),
                                                     s.forward(nullptr, dnnl::primitive_attr()));
  llvm::SmallVector<OneDnnBinding, 3> bindings{
      {DNNL_ARG_DIFF_DST, false, 0, s.y, pd.diff_dst_desc()},
      {DNNL_ARG_WEIGHTS, false, 1, s.w, pd.weights_desc()},
      {DNNL_ARG_DIFF_SRC, true, 0, s.x, pd.diff_src_desc()}};
  return std::make_unique<OneDnnPrimitiveKernel>(pd, dnnl::convolution_backward_data(pd), bindings);
}

// conv2d_grad_weight(dy, x) -> dw (the bias gradient is a separate reduce_sum)
//
// Over large images the bf16 primitive runs in f32: creating oneDNN 2.6's
// bf16 backward-weights primitive for an 800x800 output (8 -> 16 channels,
// 3x3) did not finish in 600 s on a Xeon with AMX (640x640: 0.35 s; f32:
// instant). The bindings' reorders widen dy and x (exactly) and round dw
// once, as the bf16 primitive does after accumulating in f32.
std::unique_ptr<NodeKernel> prepareOneDnnConv2dGradWeight(const Node &n, bool widen) {
  memory::data_type type = *oneDnnType(n.result()->dtype());
  llvm::ArrayRef<int64_t> dyDims = n.operand(0)->type().dims();
  std::optional<memory::data_type> compute;
  if (widen || (type == memory::data_type::bf16 && dyDims[2] * dyDims[3] > kMaxBf16GradWeightArea))
    compute = memory::data_type::f32;
  ConvShape s(n, n.operand(1)->type().dims(), n.result()->type().dims(), dyDims, type, compute);
  if (!s.safe)
    return nullptr;
  dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, s.anyX, s.anyW,
                                                s.anyY, s.strides, s.dilates, s.padLeft,
                                                s.padRight);
  dnnl::convolution_backward_weights::primitive_desc pd(desc, userScratchpadAttr(), oneDnnEngine(),
                                                        s.forward(nullptr, dnnl::primitive_attr()));
  // oneDNN's gemm fallback for a depthwise weight gradient (5x5 kernels
  // over small images) ran at 0.6 GFLOP/s; our loop kernel
  // (LoopDepthwiseConv.cpp) takes those nodes.
  llvm::ArrayRef<int64_t> xDims = n.operand(1)->type().dims(), wDims = n.result()->type().dims();
  if (std::string(pd.impl_info_str()).find("gemm") != std::string::npos &&
      isDepthwiseConv(n, xDims[1], wDims[0], wDims[1]) && prepareLoopConv2dGradWeight(n))
    return nullptr;
  llvm::SmallVector<OneDnnBinding, 3> bindings{
      {DNNL_ARG_DIFF_DST, false, 0, s.y, pd.diff_dst_desc()},
      {DNNL_ARG_SRC, false, 1, s.x, pd.src_desc()},
      {DNNL_ARG_DIFF_WEIGHTS, true, 0, s.w, pd.diff_weights_desc()}};
  return std::make_unique<OneDnnPrimitiveKernel>(pd, dnnl::convolution_backward_weights(pd),
                                                 bindings);
}

} // namespace ampc::kernels::cpu
