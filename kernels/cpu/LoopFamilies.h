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
std::unique_ptr<NodeKernel> prepareLoopRelu(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopReluGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopGelu(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopGeluGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopSigmoid(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopSigmoidGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopTanh(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopTanhGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopScale(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopAdd(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopSub(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopMul(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopDiv(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopMseLossGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopGlobalAvgPoolGrad(const Node &n);

// LoopReduction.cpp
std::unique_ptr<NodeKernel> prepareLoopReduceSum(const Node &n);
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
std::unique_ptr<NodeKernel> prepareLoopAccumulateGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopUnscaleCheck(const Node &n);

// LoopSoftmax.cpp
std::unique_ptr<NodeKernel> prepareLoopSoftmax(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopLogSoftmax(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopSoftmaxGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopLogSoftmaxGrad(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopCrossEntropy(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopCrossEntropyGrad(const Node &n);

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

// LoopDropoutNorm.cpp
std::unique_ptr<NodeKernel> prepareLoopDropout(const Node &n);
std::unique_ptr<NodeKernel> prepareLoopGlobalNorm(const Node &n);

} // namespace ampc::kernels::cpu

#endif
