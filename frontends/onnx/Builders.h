//===- Builders.h - The lowering of each ONNX op type -----------*- C++ -*-===//
//
// Internal to the ONNX frontend: one function per ONNX op type, grouped by
// file (NnOps.cpp, ResampleOps.cpp, MathOps.cpp, ShapeOps.cpp), listed in
// OpTable.cpp.
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

// ShapeOps.cpp
bool lowerConstant(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerIdentity(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerShape(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerGather(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerConcat(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSlice(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerReshape(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerFlatten(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerTranspose(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerUnsqueeze(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerSqueeze(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerCast(OnnxLowering &l, const onnx::NodeProto &n);
bool lowerConstantOfShape(OnnxLowering &l, const onnx::NodeProto &n);

/// Constant folding of a binary elementwise op with numpy broadcasting;
/// false after an error when the shapes do not broadcast.
bool foldBinary(OnnxLowering &l, const ConstTensor &a, const ConstTensor &b,
                double (*fn)(double, double), ConstTensor &out);

} // namespace ampc::onnxfe

#endif
