//===- Builders.h - The lowering of each ONNX op type -----------*- C++ -*-===//
//
// Internal to the ONNX frontend: one function per ONNX op type, grouped by
// file (NnOps.cpp, ResampleOps.cpp, MathOps.cpp, ShapeOps.cpp, LossOps.cpp,
// ...), listed in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_ONNX_BUILDERS_H
#define AMPC_FRONTENDS_ONNX_BUILDERS_H

#include "frontends/onnx/Lowering.h"

namespace ampc::onnxfe {

// NnOps.cpp
bool lowerConv(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerBatchNormalization(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerMaxPool(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerAveragePool(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerGlobalAveragePool(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerGemm(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerMatMul(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerLayerNormalization(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSoftmax(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerLogSoftmax(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerDropout(OnnxLowering &l, const onnx::NodeProto &n);

// ResampleOps.cpp
bool lowerPad(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerResize(OnnxLowering &l, const onnx::NodeProto &n);

// MathOps.cpp
bool lowerAdd(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSub(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerMul(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerDiv(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerPow(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerRelu(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSigmoid(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerTanh(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSqrt(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerErf(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerClip(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReduceMean(OnnxLowering &l, const onnx::NodeProto &n);

// MathOps.cpp: ONNX's other activations and unary math, Max and Min.
bool lowerHardSigmoid(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerHardSwish(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerLeakyRelu(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerElu(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSoftplus(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerPRelu(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerNeg(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerFloor(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerCeil(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerAbs(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerExp(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerLog(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReciprocal(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerMax(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerMin(OnnxLowering &l, const onnx::NodeProto &n);

// ShapeOps.cpp
bool lowerConstant(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerIdentity(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerShape(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerGather(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerGatherElements(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerConcat(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSlice(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReshape(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerFlatten(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerTranspose(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerUnsqueeze(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSqueeze(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerCast(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerCastLike(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSize(OnnxLowering &l, const onnx::NodeProto &n);

// LogicOps.cpp
bool lowerEqual(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerLess(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerLessOrEqual(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerGreater(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerGreaterOrEqual(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerNot(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerAnd(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerOr(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerXor(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerWhere(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerMod(OnnxLowering &l, const onnx::NodeProto &n);

// ConstOps.cpp
bool lowerRange(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerConstantOfShape(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerExpand(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerTile(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerTrilu(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerCumSum(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerScatterND(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSplit(OnnxLowering &l, const onnx::NodeProto &n);

// ReduceOps.cpp
bool lowerReduceSum(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReduceMax(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReduceMin(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReduceL2(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReduceL1(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReduceSumSquare(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReduceLogSum(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReduceLogSumExp(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerArgMax(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerArgMin(OnnxLowering &l, const onnx::NodeProto &n);

// Einsum.cpp
bool lowerEinsum(OnnxLowering &l, const onnx::NodeProto &n);

// LossOps.cpp
bool lowerNegativeLogLikelihoodLoss(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSoftmaxCrossEntropyLoss(OnnxLowering &l, const onnx::NodeProto &n);

// LayerOps.cpp
bool lowerInstanceNormalization(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerConvTranspose(OnnxLowering &l, const onnx::NodeProto &n);

/// Constant folding of a binary elementwise op with numpy broadcasting;
/// false after an error when the shapes do not broadcast.
bool foldBinary(OnnxLowering &l, const ConstTensor &a, const ConstTensor &b,
                double (*fn)(double, double), ConstTensor &out);

} // namespace ampc::onnxfe

#endif
