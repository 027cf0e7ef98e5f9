//===- OpTable.cpp - ONNX op type and opset to a builder -------------------===//
//
// The one table of the ONNX frontend. A row names an ONNX op type and the
// first opset whose semantics its builder follows; a later row of the same
// type takes over from its opset on. Files older than opset 13 are converted
// to 13 before lowering (OnnxFile.cpp), so 13 is the oldest row needed.
// docs/onnx.md lists the same mapping for users.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"

#include "llvm/ADT/STLExtras.h"

#include <set>

namespace ampc::onnxfe {

namespace {
// clang-format off
const OpTableEntry kOnnxOps[] = {
  // Convolution, normalisation, pooling, dense layers.
  {"Conv",               13, lowerConv},
  {"BatchNormalization", 13, lowerBatchNormalization},
  {"LayerNormalization", 17, lowerLayerNormalization},
  {"MaxPool",            13, lowerMaxPool},
  {"AveragePool",        13, lowerAveragePool},
  {"GlobalAveragePool",  13, lowerGlobalAveragePool},
  {"Pad",                13, lowerPad},
  {"Resize",             13, lowerResize},
  {"Gemm",               13, lowerGemm},
  {"MatMul",             13, lowerMatMul},
  {"Softmax",            13, lowerSoftmax},
  {"LogSoftmax",         13, lowerLogSoftmax},
  {"Dropout",            13, lowerDropout},
  // Elementwise.
  {"Add",                13, lowerAdd},
  {"Sub",                13, lowerSub},
  {"Mul",                13, lowerMul},
  {"Div",                13, lowerDiv},
  {"Pow",                13, lowerPow},
  {"Relu",               13, lowerRelu},
  {"Sigmoid",            13, lowerSigmoid},
  {"Tanh",               13, lowerTanh},
  {"Sqrt",               13, lowerSqrt},
  {"Erf",                13, lowerErf},
  {"Clip",               13, lowerClip},
  {"ReduceMean",         13, lowerReduceMean},
  // ONNX's other activations and unary math, Max and Min.
  {"HardSigmoid",        13, lowerHardSigmoid},
  {"HardSwish",          14, lowerHardSwish},
  {"LeakyRelu",          13, lowerLeakyRelu},
  {"Elu",                13, lowerElu},
  {"Softplus",           13, lowerSoftplus},
  {"PRelu",              13, lowerPRelu},
  {"Neg",                13, lowerNeg},
  {"Floor",              13, lowerFloor},
  {"Ceil",               13, lowerCeil},
  {"Abs",                13, lowerAbs},
  {"Exp",                13, lowerExp},
  {"Log",                13, lowerLog},
  {"Reciprocal",         13, lowerReciprocal},
  {"Max",                13, lowerMax},
  {"Min",                13, lowerMin},
  // Shapes, constants, data movement.
  {"Constant",           13, lowerConstant},
  {"Identity",           13, lowerIdentity},
  {"Shape",              13, lowerShape},
  {"Gather",             13, lowerGather},
  {"GatherElements",     13, lowerGatherElements},
  {"Concat",             13, lowerConcat},
  {"Slice",              13, lowerSlice},
  {"Reshape",            13, lowerReshape},
  {"Flatten",            13, lowerFlatten},
  {"Transpose",          13, lowerTranspose},
  {"Unsqueeze",          13, lowerUnsqueeze},
  {"Squeeze",            13, lowerSqueeze},
  {"Cast",               13, lowerCast},
  {"CastLike",           15, lowerCastLike},
  {"Size",               13, lowerSize},
  // Masks, generators and index arithmetic (fold on constants).
  {"Equal",              13, lowerEqual},
  {"Less",               13, lowerLess},
  {"LessOrEqual",        13, lowerLessOrEqual},
  {"Greater",            13, lowerGreater},
  {"GreaterOrEqual",     13, lowerGreaterOrEqual},
  {"Not",                13, lowerNot},
  {"And",                13, lowerAnd},
  {"Or",                 13, lowerOr},
  {"Xor",                13, lowerXor},
  {"Where",              13, lowerWhere},
  {"Mod",                13, lowerMod},
  {"Range",              13, lowerRange},
  {"ConstantOfShape",    13, lowerConstantOfShape},
  {"Expand",             13, lowerExpand},
  {"Tile",               13, lowerTile},
  {"Trilu",              14, lowerTrilu},
  {"CumSum",             13, lowerCumSum},
  {"ScatterND",          13, lowerScatterND},
  {"Split",              13, lowerSplit},
  // Reductions, contractions, layers composed of registry ops.
  {"ReduceSum",          13, lowerReduceSum},
  {"ReduceMax",          13, lowerReduceMax},
  {"ReduceMin",          13, lowerReduceMin},
  {"ReduceL2",           13, lowerReduceL2},
  {"ReduceL1",           13, lowerReduceL1},
  {"ReduceSumSquare",    13, lowerReduceSumSquare},
  {"ReduceLogSum",       13, lowerReduceLogSum},
  {"ReduceLogSumExp",    13, lowerReduceLogSumExp},
  {"ArgMax",             13, lowerArgMax},
  {"ArgMin",             13, lowerArgMin},
  {"Einsum",             13, lowerEinsum},
  {"InstanceNormalization", 13, lowerInstanceNormalization},
  {"ConvTranspose",      13, lowerConvTranspose},
  // Losses an exported training graph computes itself.
  {"NegativeLogLikelihoodLoss", 13, lowerNegativeLogLikelihoodLoss},
  {"SoftmaxCrossEntropyLoss",   13, lowerSoftmaxCrossEntropyLoss},
};
// clang-format on
} // namespace

const OpTableEntry *findOnnxOp(llvm::StringRef opType, int64_t opset) {
  const OpTableEntry *best = nullptr;
  for (const OpTableEntry &e : kOnnxOps)
    if (opType == e.opType && e.sinceOpset <= opset && (!best || e.sinceOpset > best->sinceOpset))
      best = &e;
  return best;
}

std::vector<std::string> supportedOnnxOps() {
  std::set<std::string> types;
  for (const OpTableEntry &e : kOnnxOps)
    types.insert(e.opType);
  return std::vector<std::string>(types.begin(), types.end());
}

} // namespace ampc::onnxfe
