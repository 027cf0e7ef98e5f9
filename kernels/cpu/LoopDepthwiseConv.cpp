//===- LoopDepthwiseConv.cpp - a depthwise convolution's weight gradient --===//
//
// conv2d_grad_weight of a depthwise convolution (groups = input channels =
// output channels: EfficientNet's and MobileNet's 3x3 and 5x5 layers) as a
// loop kernel. oneDNN 2.6 runs these with its own depthwise kernel where it
// can, but gives 5x5 kernels over small images (4x4 and 8x8 with padding
// 2) to its gemm fallback, which took 25 ms for one 1152-channel layer of
// EfficientNet-B0 at batch 16 (0.6 GFLOP/s) and half of the model's step's
// weight gradients. OneDnnConv.cpp declines such nodes and they come here.
//
// Each channel is one independent sum per tap, so the threads split the
// channels, and each tap's sum is one dot product in vectors (see
// depthwiseGradWeight). Its order is not the reference kernel's, as
// oneDNN's is not either: f32 sums, rounded once, within the
// summation-order tolerance the oneDNN kernels are held to. A channel is
// summed by one thread, so the bits do not depend on the thread count.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopSupport.h"

#include <algorithm>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

/// The geometry of a depthwise convolution with dy [N, C, OH, OW],
/// x [N, C, H, W] and dw [C, 1, KH, KW].
struct DepthwiseShape {
  int64_t batch, channels, inH, inW, outH, outW, kh, kw;
  int64_t stride[2], padding[2], dilation[2];
  int64_t taps() const { return kh * kw; }
  int64_t positions() const { return outH * outW; }
};

/// Taps (kh * kw) beyond which a kernel stays with oneDNN: the loop is
/// written for the 3x3 to 7x7 kernels of depthwise layers.
constexpr int64_t kMaxTaps = 121;

/// Channels per task: enough multiply-adds that a task outweighs waking a
/// thread.
int64_t channelGrain(const DepthwiseShape &s) {
  int64_t work = s.batch * s.positions() * s.taps();
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(work, 1));
}

/// One channel at a time: its images with their zero borders, split into
/// stride[0] x stride[1] phases (the padded rows and columns congruent
/// modulo the strides), each phase a stack of the images' planes of
/// phaseH x phaseW; and dy laid out as one such stack (zeros past the
/// output). Tap (r, q) reads, for output (oh, ow), padded input
/// (oh * s0 + r * d0, ow * s1 + q * d1): phase (r * d0 % s0, q * d1 % s1) at
/// (oh + r * d0 / s0, ow + q * d1 / s1), the same flat index as dy's shifted
/// by a constant. So each tap's sum over every image and position is one
/// long dot product, in vectors, however small the images (EfficientNet's
/// 4x4 ones). dy's zeros stand for positions that do not exist; they meet
/// real inputs, so an infinite input can make a NaN where the direct sum
/// would not (its step is lost to the overflow check either way).
template <DType D> void depthwiseGradWeight(const KernelArgs &a, const DepthwiseShape &s) {
  const void *dy = a.in(0).data, *x = a.in(1).data;
  void *dw = a.out().data;
  parallelFor(s.channels, channelGrain(s), [=, &s](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    const int64_t s0 = s.stride[0], s1 = s.stride[1];
    const int64_t padH = s.inH + 2 * s.padding[0], padW = s.inW + 2 * s.padding[1];
    const int64_t phaseH = (padH + s0 - 1) / s0, phaseW = (padW + s1 - 1) / s1;
    const int64_t planeSize = phaseH * phaseW, stack = s.batch * planeSize;
    thread_local std::vector<float> inputs, gradients;
    inputs.assign(static_cast<size_t>(s0 * s1 * stack), 0.0f);
    gradients.assign(static_cast<size_t>(stack), 0.0f);
    float *xs = inputs.data(), *gs = gradients.data();
    for (int64_t c = begin; c < end; ++c) {
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t plane = (n * s.channels + c) * s.inH * s.inW;
        for (int64_t h = 0; h < s.inH; ++h) {
          const int64_t ph = h + s.padding[0];
          float *phaseRows = xs + (ph % s0) * s1 * stack + n * planeSize + (ph / s0) * phaseW;
          for (int64_t w = 0; w < s.inW; ++w) {
            const int64_t pw = w + s.padding[1];
            phaseRows[(pw % s1) * stack + pw / s1] = load<D>(x, plane + h * s.inW + w);
          }
        }
        const int64_t dyPlane = (n * s.channels + c) * s.positions();
        for (int64_t oh = 0; oh < s.outH; ++oh) {
          float *row = gs + n * planeSize + oh * phaseW;
#pragma omp simd
          for (int64_t ow = 0; ow < s.outW; ++ow)
            row[ow] = load<D>(dy, dyPlane + oh * s.outW + ow);
        }
      }
      for (int64_t r = 0; r < s.kh; ++r)
        for (int64_t q = 0; q < s.kw; ++q) {
          const int64_t rowReach = r * s.dilation[0], colReach = q * s.dilation[1];
          const int64_t shift = (rowReach / s0) * phaseW + colReach / s1;
          const float *shifted = xs + ((rowReach % s0) * s1 + colReach % s1) * stack + shift;
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int64_t i = 0; i < stack - shift; ++i)
            sum += gs[i] * shifted[i];
          store<D>(dw, c * s.taps() + r * s.kw + q, sum);
        }
    }
  });
}

template <DType D> class DepthwiseGradWeightKernel final : public LoopKernel {
public:
  explicit DepthwiseGradWeightKernel(const DepthwiseShape &shape) : shape_(shape) {}
  void run(const KernelArgs &a) override { depthwiseGradWeight<D>(a, shape_); }

private:
  DepthwiseShape shape_;
};

} // namespace

bool isDepthwiseConv(const Node &n, int64_t channels, int64_t outChannels,
                     int64_t weightInChannels) {
  return attrs::Conv2d(n).groups() == channels && channels == outChannels &&
         weightInChannels == 1 && channels > 1;
}

// conv2d_grad_weight(dy, x) -> dw, depthwise only.
std::unique_ptr<NodeKernel> prepareLoopConv2dGradWeight(const Node &n) {
  DType t = n.result()->dtype();
  if (n.numOperands() != 2 || !allOfDType(n, t))
    return nullptr;
  llvm::ArrayRef<int64_t> dy = n.operand(0)->type().dims(), x = n.operand(1)->type().dims(),
                          w = n.result()->type().dims();
  if (dy.size() != 4 || x.size() != 4 || w.size() != 4 || !isDepthwiseConv(n, x[1], w[0], w[1]))
    return nullptr;
  DepthwiseShape s{x[0], x[1], x[2], x[3], dy[2], dy[3], w[2], w[3], {}, {}, {}};
  if (s.taps() > kMaxTaps || dy[0] != x[0] || dy[1] != x[1])
    return nullptr;
  const std::vector<int64_t> &stride = attrs::Conv2d(n).stride(),
                             &padding = attrs::Conv2d(n).padding(),
                             &dilation = attrs::Conv2d(n).dilation();
  for (unsigned d = 0; d < 2; ++d) {
    s.stride[d] = stride[d];
    s.padding[d] = padding[d];
    s.dilation[d] = dilation[d];
  }
  return dispatchLoopFloat(t, std::unique_ptr<NodeKernel>(), [&](auto tag) {
    return std::unique_ptr<NodeKernel>(
        std::make_unique<DepthwiseGradWeightKernel<decltype(tag)::value>>(s));
  });
}

} // namespace ampc::kernels::cpu
