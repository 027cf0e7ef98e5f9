//===- LoopFamilies.h - The loop kernels, one preparer per op ----*- C++ -*-===//
//
// Internal to kernels/cpu: Loops.cpp maps each op to its preparer here. A
// preparer returns null for dtypes or shapes its loops do not take (the
// reference kernel then runs the node).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_LOOPFAMILIES_H
#define AMPC_KERNELS_CPU_LOOPFAMILIES_H

#include "kernels/KernelArgs.h"

#include <memory>

namespace ampc::kernels::cpu {

// LoopElementwise.cpp
std::unique_ptr<NodeKernel> prepareLoopCast(const Node &n);
// The pointwise ops (ir/Pointwise.def), instantiated for each row's functor.
template <class Fn> std::unique_ptr<NodeKernel> prepareLoopUnary(const Node &n);
template <class Fn> std::unique_ptr<NodeKernel> prepareLoopGrad(const Node &n);
template <class Fn> std::unique_ptr<NodeKernel> prepareLoopBinary(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopMseLossGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopGlobalAvgPoolGrad(const Node &n);

// LoopHalfTables.cpp: a unary functor with Fn::kTabulateHalves (gelu) and
// its gradient in bf16 and f16 from tables of all 65536 inputs; null for
// other dtypes.
template <class Fn>
concept TabulatesHalves = requires {
  requires Fn::kTabulateHalves;
};
template <class Fn> std::unique_ptr<NodeKernel> prepareHalfTableUnary(const Node &n, const Fn &f);
template <class Fn> std::unique_ptr<NodeKernel> prepareHalfTableGrad(const Node &n, const Fn &f);

// LoopReduction.cpp
std::unique_ptr<NodeKernel> prepareLoopReduceSum(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopReduceMean(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopMseLoss(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopGlobalAvgPool(const Node &n);

// LoopNormalization.cpp
std::unique_ptr<NodeKernel> prepareLoopBatchNorm2d(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopBatchNorm2dGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopLayerNorm(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopLayerNormGrad(const Node &n);

// LoopOptimizer.cpp
std::unique_ptr<NodeKernel> prepareLoopSgdUpdate(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopSgdMomentumUpdate(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopAdamUpdate(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopLambUpdate(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopEmaUpdate(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopAccumulateGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopUnscaleCheck(const Node &n);

// LoopSoftmax.cpp
std::unique_ptr<NodeKernel> prepareLoopSoftmax(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopLogSoftmax(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopSoftmaxGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopLogSoftmaxGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopCrossEntropy(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopCrossEntropyGrad(const Node &n);

// LoopAttention.cpp
std::unique_ptr<NodeKernel> prepareLoopAttention(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopAttentionGrad(const Node &n);

// LoopPooling.cpp
std::unique_ptr<NodeKernel> prepareLoopMaxPool2d(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopAvgPool2d(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopMaxPool2dGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopAvgPool2dGrad(const Node &n);

// LoopShape.cpp
std::unique_ptr<NodeKernel> prepareLoopReshape(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopTranspose(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopPermute(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopBroadcastTo(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopSlice(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopConcat(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopEmbedding(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopEmbeddingGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopFill(const Node &n);

// LoopSelect.cpp
std::unique_ptr<NodeKernel> prepareLoopWhere(const Node &n);

// LoopDepthwiseConv.cpp
/// Whether conv2d node `n` over `channels` input channels, with
/// `outChannels` outputs and weights of `weightInChannels` input channels
/// per group, is depthwise (one input channel per group and output).
bool isDepthwiseConv(const Node &n, int64_t channels, int64_t outChannels,
                     int64_t weightInChannels);
std::unique_ptr<NodeKernel> prepareLoopConv2dGradWeight(const Node &n);

// LoopDropoutNorm.cpp
std::unique_ptr<NodeKernel> prepareLoopDropout(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopGlobalNorm(const Node &n);

} // namespace ampc::kernels::cpu

#endif
