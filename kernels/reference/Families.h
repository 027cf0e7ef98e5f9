//===- Families.h - Reference kernels, one family per file ----------------===//
#ifndef AMPC_KERNELS_REFERENCE_FAMILIES_H
#define AMPC_KERNELS_REFERENCE_FAMILIES_H

#include "kernels/KernelArgs.h"

namespace ampc::kernels::ref {

// LinearAlgebra.cpp
void linear(const KernelArgs &a);
void matMul(const KernelArgs &a);
void batchMatMul(const KernelArgs &a);
void conv2d(const KernelArgs &a);
void scaledDotProductAttention(const KernelArgs &a);
// Pooling.cpp
void maxPool2d(const KernelArgs &a);
void avgPool2d(const KernelArgs &a);
void globalAvgPool(const KernelArgs &a);
// Spatial.cpp (with the backward ops)
void pad(const KernelArgs &a);
void resize(const KernelArgs &a);
void padGrad(const KernelArgs &a);
void resizeGrad(const KernelArgs &a);
// Normalization.cpp
void batchNorm2d(const KernelArgs &a);
void layerNorm(const KernelArgs &a);
// Activation.cpp
void softmax(const KernelArgs &a);
void logSoftmax(const KernelArgs &a);
void dropout(const KernelArgs &a);
// Elementwise.cpp: the pointwise ops of ir/Pointwise.def, instantiated for
// each row's element functor.
template <class Fn> void unaryPointwise(const KernelArgs &a);
template <class Fn> void gradPointwise(const KernelArgs &a);
template <class Fn> void binaryPointwise(const KernelArgs &a);
// Shape.cpp
void flatten(const KernelArgs &a);
void reshape(const KernelArgs &a);
void transpose(const KernelArgs &a);
void permute(const KernelArgs &a);
void concat(const KernelArgs &a);
void embedding(const KernelArgs &a);
void cast(const KernelArgs &a);
// Logic.cpp
void compare(const KernelArgs &a);
void logical(const KernelArgs &a);
void logicalNot(const KernelArgs &a);
void where(const KernelArgs &a);
void reduceMax(const KernelArgs &a);
void reduceMin(const KernelArgs &a);
void reduceSelectGrad(const KernelArgs &a);
void argMax(const KernelArgs &a);
// Loss.cpp
void mseLoss(const KernelArgs &a);
void crossEntropy(const KernelArgs &a);
void binaryCrossEntropy(const KernelArgs &a);

// Reduction.cpp
void reduceSum(const KernelArgs &a);
void reduceMean(const KernelArgs &a);
void fill(const KernelArgs &a);

// Backward ops of activations, shape ops and losses.
// Activation.cpp
void softmaxGrad(const KernelArgs &a);
void logSoftmaxGrad(const KernelArgs &a);
// ShapeGrad.cpp
void slice(const KernelArgs &a);
void broadcastTo(const KernelArgs &a);
void embeddingGrad(const KernelArgs &a);
// LossGrad.cpp
void mseLossGrad(const KernelArgs &a);
void crossEntropyGrad(const KernelArgs &a);
void binaryCrossEntropyGradInput(const KernelArgs &a);
void binaryCrossEntropyGradTarget(const KernelArgs &a);

// Backward ops of linear algebra, pooling and normalization.
// LinearAlgebra.cpp
void conv2dGradInput(const KernelArgs &a);
void conv2dGradWeight(const KernelArgs &a);
void scaledDotProductAttentionGrad(const KernelArgs &a);
// Pooling.cpp
void maxPool2dGrad(const KernelArgs &a);
void avgPool2dGrad(const KernelArgs &a);
void globalAvgPoolGrad(const KernelArgs &a);
// Normalization.cpp
void batchNorm2dGrad(const KernelArgs &a);
void layerNormGrad(const KernelArgs &a);

// Optimizer.cpp
void learningRate(const KernelArgs &a);
void stepCounter(const KernelArgs &a);
void turnSkip(const KernelArgs &a);
void accumulateGrad(const KernelArgs &a);
void globalNorm(const KernelArgs &a);
void clipCoefficient(const KernelArgs &a);
void sgdUpdate(const KernelArgs &a);
void sgdMomentumUpdate(const KernelArgs &a);
void adamUpdate(const KernelArgs &a);
void lambUpdate(const KernelArgs &a);
void emaUpdate(const KernelArgs &a);

// LossScale.cpp
void unscaleCheck(const KernelArgs &a);
void updateLossScale(const KernelArgs &a);

} // namespace ampc::kernels::ref

#endif
