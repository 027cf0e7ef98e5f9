//===- ReferenceKernels.cpp - OpKind -> reference kernel -------------------===//
#include "kernels/reference/ReferenceKernels.h"

#include "kernels/Pointwise.h"
#include "kernels/reference/Families.h"

namespace ampc::kernels {

KernelFn referenceKernel(OpKind kind) {
  // No default: a new op in Ops.def without a reference kernel fails to compile
  // (with -Werror=switch) and at least warns.
  switch (kind) {
    // The pointwise ops: one generic loop per shape, over the row's functor.
#define AMPC_POINTWISE_UNARY(Op, Fn)                                                               \
  case OpKind::Op:                                                                                 \
    return ref::unaryPointwise<Fn>;
#define AMPC_POINTWISE_GRAD(Op, GradOp, Fn, Saved)                                                 \
  case OpKind::GradOp:                                                                             \
    return ref::gradPointwise<Fn>;
#define AMPC_POINTWISE_BINARY(Op, Fn)                                                              \
  case OpKind::Op:                                                                                 \
    return ref::binaryPointwise<Fn>;
#include "ir/Pointwise.def"
  case OpKind::Linear:
    return ref::linear;
  case OpKind::MatMul:
    return ref::matMul;
  case OpKind::BatchMatMul:
    return ref::batchMatMul;
  case OpKind::Conv2d:
    return ref::conv2d;
  case OpKind::ScaledDotProductAttention:
    return ref::scaledDotProductAttention;
  case OpKind::BatchNorm2d:
    return ref::batchNorm2d;
  case OpKind::LayerNorm:
    return ref::layerNorm;
  case OpKind::Softmax:
    return ref::softmax;
  case OpKind::LogSoftmax:
    return ref::logSoftmax;
  case OpKind::Dropout:
    return ref::dropout;
  case OpKind::MaxPool2d:
    return ref::maxPool2d;
  case OpKind::AvgPool2d:
    return ref::avgPool2d;
  case OpKind::GlobalAvgPool:
    return ref::globalAvgPool;
  // Padding and resizing, and their backward ops.
  case OpKind::Pad:
    return ref::pad;
  case OpKind::Resize:
    return ref::resize;
  case OpKind::PadGrad:
    return ref::padGrad;
  case OpKind::ResizeGrad:
    return ref::resizeGrad;
  case OpKind::Flatten:
    return ref::flatten;
  case OpKind::Reshape:
    return ref::reshape;
  case OpKind::Transpose:
    return ref::transpose;
  case OpKind::Permute:
    return ref::permute;
  case OpKind::Concat:
    return ref::concat;
  case OpKind::Embedding:
    return ref::embedding;
  case OpKind::Cast:
    return ref::cast;
  case OpKind::MseLoss:
    return ref::mseLoss;
  case OpKind::CrossEntropy:
    return ref::crossEntropy;
  case OpKind::BinaryCrossEntropy:
    return ref::binaryCrossEntropy;
  case OpKind::ReduceSum:
    return ref::reduceSum;
  case OpKind::ReduceMean:
    return ref::reduceMean;
  case OpKind::Fill:
    return ref::fill;
  // Comparisons, logic, selection and the extremum reductions.
  case OpKind::Compare:
    return ref::compare;
  case OpKind::Logical:
    return ref::logical;
  case OpKind::LogicalNot:
    return ref::logicalNot;
  case OpKind::Where:
    return ref::where;
  case OpKind::ReduceMax:
    return ref::reduceMax;
  case OpKind::ReduceMin:
    return ref::reduceMin;
  case OpKind::ReduceSelectGrad:
    return ref::reduceSelectGrad;
  case OpKind::ArgMax:
    return ref::argMax;
  // Backward ops of activations, shape ops and losses.
  case OpKind::SoftmaxGrad:
    return ref::softmaxGrad;
  case OpKind::LogSoftmaxGrad:
    return ref::logSoftmaxGrad;
  case OpKind::Slice:
    return ref::slice;
  case OpKind::BroadcastTo:
    return ref::broadcastTo;
  case OpKind::EmbeddingGrad:
    return ref::embeddingGrad;
  case OpKind::MseLossGrad:
    return ref::mseLossGrad;
  case OpKind::CrossEntropyGrad:
    return ref::crossEntropyGrad;
  case OpKind::BinaryCrossEntropyGradInput:
    return ref::binaryCrossEntropyGradInput;
  case OpKind::BinaryCrossEntropyGradTarget:
    return ref::binaryCrossEntropyGradTarget;
  // Backward ops of linear algebra, pooling and normalization.
  case OpKind::Conv2dGradInput:
    return ref::conv2dGradInput;
  case OpKind::Conv2dGradWeight:
    return ref::conv2dGradWeight;
  case OpKind::ScaledDotProductAttentionGrad:
    return ref::scaledDotProductAttentionGrad;
  case OpKind::MaxPool2dGrad:
    return ref::maxPool2dGrad;
  case OpKind::AvgPool2dGrad:
    return ref::avgPool2dGrad;
  case OpKind::GlobalAvgPoolGrad:
    return ref::globalAvgPoolGrad;
  case OpKind::BatchNorm2dGrad:
    return ref::batchNorm2dGrad;
  case OpKind::LayerNormGrad:
    return ref::layerNormGrad;
  // Optimizer ops.
  case OpKind::LearningRate:
    return ref::learningRate;
  case OpKind::StepCounter:
    return ref::stepCounter;
  case OpKind::TurnSkip:
    return ref::turnSkip;
  case OpKind::AccumulateGrad:
    return ref::accumulateGrad;
  case OpKind::GlobalNorm:
    return ref::globalNorm;
  case OpKind::ClipCoefficient:
    return ref::clipCoefficient;
  case OpKind::SgdUpdate:
    return ref::sgdUpdate;
  case OpKind::SgdMomentumUpdate:
    return ref::sgdMomentumUpdate;
  case OpKind::AdamUpdate:
    return ref::adamUpdate;
  case OpKind::LambUpdate:
    return ref::lambUpdate;
  case OpKind::EmaUpdate:
    return ref::emaUpdate;
  // Loss-scaling ops.
  case OpKind::UnscaleCheck:
    return ref::unscaleCheck;
  case OpKind::UpdateLossScale:
    return ref::updateLossScale;
  // Collectives run through the runtime's communicator, not a backend
  // (runtime/dist/CollectiveKernel.cpp); custom ops through their table.
  case OpKind::AllReduce:
  case OpKind::Custom:
    return nullptr;
  }
  return nullptr;
}

bool referenceSupports(const OpInfo &op, DType dtype) {
  if (op.kind == OpKind::Custom || !referenceKernel(op.kind))
    return false;
  // Every floating precision is emulated exactly; integer operands (indices,
  // labels) are not a compute precision and are always accepted by the ops
  // that take them.
  return isFloating(dtype);
}

} // namespace ampc::kernels
