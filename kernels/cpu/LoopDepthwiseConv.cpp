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
// channels. Per image and tap the sum over the output positions is a dot
// product in vectors (the plane copied once into a zero-bordered buffer,
// the tap's inputs gathered row by row), so the order of the sums is not
// the reference kernel's, as oneDNN's is not either: f32 sums, rounded
// once, within the summation-order tolerance the oneDNN kernels are held
// to. A channel is summed by one thread, so the bits do not depend on the
// thread count.
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

/// Taps (kh * kw) a channel's sums are kept for on the stack; larger
/// kernels stay with oneDNN.
constexpr int64_t kMaxTaps = 121;

/// Channels per task: enough multiply-adds that a task outweighs waking a
/// thread.
int64_t channelGrain(const DepthwiseShape &s) {
  int64_t work = s.batch * s.positions() * s.taps();
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(work, 1));
}

template <DType D> void depthwiseGradWeight(const KernelArgs &a, const DepthwiseShape &s) {
  const void *dy = a.in(0).data, *x = a.in(1).data;
  void *dw = a.out().data;
  parallelFor(s.channels, channelGrain(s), [=, &s](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    const int64_t positions = s.positions();
    const int64_t padH = s.inH + 2 * s.padding[0], padW = s.inW + 2 * s.padding[1];
    // Per thread: one image plane of the channel with its zero border, the
    // plane's dy in f32, and the inputs one tap reads at every position.
    thread_local std::vector<float> padded, gradient, tapInputs;
    padded.assign(static_cast<size_t>(padH * padW), 0.0f);
    gradient.resize(static_cast<size_t>(positions));
    tapInputs.resize(static_cast<size_t>(positions));
    float *xp = padded.data(), *g = gradient.data(), *in = tapInputs.data();
    float acc[kMaxTaps];
    for (int64_t c = begin; c < end; ++c) {
      std::fill(acc, acc + s.taps(), 0.0f);
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t plane = (n * s.channels + c) * s.inH * s.inW;
        for (int64_t h = 0; h < s.inH; ++h) {
          float *row = xp + (h + s.padding[0]) * padW + s.padding[1];
          const int64_t from = plane + h * s.inW;
#pragma omp simd
          for (int64_t w = 0; w < s.inW; ++w)
            row[w] = load<D>(x, from + w);
        }
        const int64_t dyPlane = (n * s.channels + c) * positions;
#pragma omp simd
        for (int64_t p = 0; p < positions; ++p)
          g[p] = load<D>(dy, dyPlane + p);
        for (int64_t r = 0; r < s.kh; ++r)
          for (int64_t q = 0; q < s.kw; ++q) {
            // Output (oh, ow) reads padded (oh * stride + r * dilation,
            // ow * stride + q * dilation).
            for (int64_t oh = 0; oh < s.outH; ++oh) {
              const float *src =
                  xp + (oh * s.stride[0] + r * s.dilation[0]) * padW + q * s.dilation[1];
              float *dst = in + oh * s.outW;
#pragma omp simd
              for (int64_t ow = 0; ow < s.outW; ++ow)
                dst[ow] = src[ow * s.stride[1]];
            }
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int64_t p = 0; p < positions; ++p)
              sum += g[p] * in[p];
            acc[r * s.kw + q] += sum;
          }
      }
      for (int64_t t = 0; t < s.taps(); ++t)
        store<D>(dw, c * s.taps() + t, acc[t]);
    }
  });
}

/// Stride 1: one channel's images stacked, each with its zero border, and dy
/// laid out with the same row pitch (zeros past the output). Then tap
/// (r, q) reads, for every output position, the padded input at the same
/// flat index shifted by r * dilation * pitch + q * dilation, so its sum is
/// one long dot product of the two stacks, in vectors, however small the
/// images (EfficientNet's 4x4 ones). The zeros of dy stand for the output
/// positions that do not exist; they meet real inputs, so an infinite
/// input can make a NaN where the direct sum would not (its step is lost
/// to the overflow check either way).
template <DType D> void depthwiseGradWeightStride1(const KernelArgs &a, const DepthwiseShape &s) {
  const void *dy = a.in(0).data, *x = a.in(1).data;
  void *dw = a.out().data;
  parallelFor(s.channels, channelGrain(s), [=, &s](int64_t begin, int64_t end) AMPC_LOOP_BODY {
    const int64_t padH = s.inH + 2 * s.padding[0], padW = s.inW + 2 * s.padding[1];
    const int64_t planeSize = padH * padW, stack = s.batch * planeSize;
    thread_local std::vector<float> inputs, gradients;
    inputs.assign(static_cast<size_t>(stack), 0.0f);
    gradients.assign(static_cast<size_t>(stack), 0.0f);
    float *xs = inputs.data(), *gs = gradients.data();
    for (int64_t c = begin; c < end; ++c) {
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t plane = (n * s.channels + c) * s.inH * s.inW;
        for (int64_t h = 0; h < s.inH; ++h) {
          float *row = xs + n * planeSize + (h + s.padding[0]) * padW + s.padding[1];
#pragma omp simd
          for (int64_t w = 0; w < s.inW; ++w)
            row[w] = load<D>(x, plane + h * s.inW + w);
        }
        const int64_t dyPlane = (n * s.channels + c) * s.positions();
        for (int64_t oh = 0; oh < s.outH; ++oh) {
          float *row = gs + n * planeSize + oh * padW;
#pragma omp simd
          for (int64_t ow = 0; ow < s.outW; ++ow)
            row[ow] = load<D>(dy, dyPlane + oh * s.outW + ow);
        }
      }
      for (int64_t r = 0; r < s.kh; ++r)
        for (int64_t q = 0; q < s.kw; ++q) {
          const int64_t shift = r * s.dilation[0] * padW + q * s.dilation[1];
          const float *shifted = xs + shift;
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
  void run(const KernelArgs &a) override {
    if (shape_.stride[0] == 1 && shape_.stride[1] == 1)
      depthwiseGradWeightStride1<D>(a, shape_);
    else
      depthwiseGradWeight<D>(a, shape_);
  }

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
