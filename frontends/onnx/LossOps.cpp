//===- LossOps.cpp - NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ----===//
//
// Both lower to registry ops, so they train through the ops' own gradient
// rules and run on every backend: the target is compared with the class
// indices (a one-hot mask [N, C, d1..dk]), `where` picks each sample's
// log-probability and class weight out of it, and reduce_sum over the class
// axis gathers them. Masking with `where` rather than multiplying by the
// one-hot keeps the -inf log-probabilities of the other classes out of the
// sum (-inf * 0 is NaN). A target equal to ignore_index matches no class,
// so its loss and its weight are 0 even when ignore_index lies outside
// [0, C).
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"

#include "ir/OpAttrs.h"

namespace ampc::onnxfe {

namespace {

/// Reports `msg` at the current node; nullptr, for builders of values.
Value *fail(OnnxLowering &l, const llvm::Twine &msg) {
  l.error(msg);
  return nullptr;
}

enum class Reduction { None, Sum, Mean };

/// What the lowering of one loss node needs from its attributes and inputs.
struct NllSpec {
  Reduction reduction = Reduction::Mean;
  std::optional<int64_t> ignoreIndex;
  Value *logProb = nullptr; ///< [N, C, d1..dk]
  Value *target = nullptr;  ///< [N, d1..dk], i64
};

bool parseReduction(OnnxLowering &l, const onnx::NodeProto &n, Reduction &out) {
  std::string r = l.stringAttr(n, "reduction", "mean");
  if (r == "none")
    out = Reduction::None;
  else if (r == "sum")
    out = Reduction::Sum;
  else if (r == "mean")
    out = Reduction::Mean;
  else
    return l.error("reduction must be none, sum or mean, got '" + r + "'");
  return true;
}

/// The target of `n` (input 1) checked against the scores' shape
/// [N, C, d1..dk], as i64 (the class indices' dtype).
Value *checkedTarget(OnnxLowering &l, const onnx::NodeProto &n, const TensorType &scores) {
  if (!l.hasInput(n, 1))
    return fail(l, "the target input is missing");
  const TensorType &t = l.typeOf(n, 1);
  if (t.dtype() != DType::I64 && t.dtype() != DType::I32)
    return fail(l, "the target must be int64 or int32, got " + t.str());
  llvm::SmallVector<int64_t, 4> want{scores.dim(0)};
  for (unsigned d = 2; d < scores.rank(); ++d)
    want.push_back(scores.dim(d));
  if (t.dims() != llvm::ArrayRef<int64_t>(want))
    return fail(l, "the target " + t.str() + " does not fit the scores " + scores.str() +
                       " (it must be [N, d1..dk] of [N, C, d1..dk])");
  Value *target = l.valueOf(n, 1, StateKind::Buffer);
  if (target && target->dtype() != DType::I64)
    target = l.build1(OpKind::Cast, {target}, {{"to", Attribute(DType::I64)}});
  return target;
}

/// `dims` of the scores with every dim but the class axis (1) made 1.
std::vector<int64_t> classShape(const TensorType &scores) {
  std::vector<int64_t> dims(scores.rank(), 1);
  dims[1] = scores.dim(1);
  return dims;
}

/// bool [N, C, d1..dk]: whether sample (n, d1..dk) has class c and is not
/// ignored.
Value *oneHot(OnnxLowering &l, const NllSpec &s) {
  const TensorType &x = s.logProb->type();
  int64_t classes = x.dim(1);
  ConstTensor iota;
  iota.dtype = DType::I64;
  for (int64_t d : classShape(x))
    iota.dims.push_back(d);
  for (int64_t c = 0; c < classes; ++c)
    iota.values.push_back(double(c));
  std::vector<int64_t> targetDims(x.dims().begin(), x.dims().end());
  targetDims[1] = 1;
  Value *target = l.reshape(s.target, targetDims);
  Value *hot = l.build1(OpKind::Compare, {target, l.constantBuffer("classes", iota)},
                        {{"predicate", Attribute(std::string("eq"))}});
  // An ignore_index outside [0, C) matches no class already.
  if (!s.ignoreIndex || *s.ignoreIndex < 0 || *s.ignoreIndex >= classes)
    return hot;
  ConstTensor ignored;
  ignored.dtype = DType::I64;
  ignored.values.push_back(double(*s.ignoreIndex));
  Value *kept = l.build1(OpKind::Compare, {target, l.constantBuffer("ignore_index", ignored)},
                         {{"predicate", Attribute(std::string("ne"))}});
  return l.build1(OpKind::Logical, {hot, kept}, {{"op", Attribute(std::string("and"))}});
}

/// The class weights as [1, C, 1..] in the scores' dtype: the weight input
/// (a buffer: class weights are not trained), or ones without one.
Value *classWeights(OnnxLowering &l, const onnx::NodeProto &n, const TensorType &x) {
  std::vector<int64_t> shape = classShape(x);
  if (!l.hasInput(n, 2))
    return l.constantState("ones", TensorType(x.dtype(), shape), 1.0);
  const TensorType &w = l.typeOf(n, 2);
  if (w.dims() != llvm::ArrayRef<int64_t>{x.dim(1)})
    return fail(l, "the weight " + w.str() + " must be [C] of the scores " + x.str());
  if (w.dtype() != x.dtype())
    return fail(l, "the weight " + w.str() + " must have the scores' dtype " + x.str());
  return l.reshape(l.valueOf(n, 2, StateKind::Buffer), shape);
}

/// The loss of each sample [N, d1..dk], and the weight of each sample
/// (0 where ignored) summed over every sample, for the mean.
struct Losses {
  Value *perSample = nullptr;
  Value *totalWeight = nullptr;
};

Losses sampleLosses(OnnxLowering &l, const onnx::NodeProto &n, const NllSpec &s, bool needTotal) {
  const TensorType &x = s.logProb->type();
  Value *hot = oneHot(l, s);
  Value *zero = l.constantState("zero", TensorType(x.dtype(), {}), 0.0);
  AttrMap classAxis{{"dims", Attribute(std::vector<int64_t>{1})}, {"keepdim", Attribute(false)}};
  Value *picked =
      l.build1(OpKind::ReduceSum, {l.build1(OpKind::Where, {hot, s.logProb, zero})}, classAxis);
  Losses out;
  bool weighted = l.hasInput(n, 2);
  Value *weights = nullptr;
  if (weighted || needTotal) {
    Value *perClass = classWeights(l, n, x);
    weights =
        l.build1(OpKind::ReduceSum, {l.build1(OpKind::Where, {hot, perClass, zero})}, classAxis);
  }
  // Without a weight input every kept sample weighs 1: picked is the loss.
  out.perSample = weighted ? l.build1(OpKind::Mul, {picked, weights}) : picked;
  if (needTotal)
    out.totalWeight = l.build1(OpKind::ReduceSum, {weights});
  return out;
}

/// Lowers the NLL of `s` as output `out` of n.
bool lowerNll(OnnxLowering &l, const onnx::NodeProto &n, const NllSpec &s, int out) {
  Losses losses = sampleLosses(l, n, s, s.reduction == Reduction::Mean);
  if (!losses.perSample)
    return false;
  // The sum (or mean) is negated once, after the reduction, on fewer elements.
  Value *loss = losses.perSample;
  if (s.reduction != Reduction::None)
    loss = l.build1(OpKind::ReduceSum, {loss});
  if (s.reduction == Reduction::Mean) {
    // ONNX's weighted mean: sum(loss) / sum(weight[target]) over the kept
    // samples (without weights, their count; NaN when every one is ignored).
    loss = l.build1(OpKind::Div, {loss, losses.totalWeight});
  }
  l.setOutput(n, out, l.build1(OpKind::Neg, {loss}, {}, n.output(out)));
  return true;
}

/// The spec of n, its scores being `logProb`; false after an error.
bool parseSpec(OnnxLowering &l, const onnx::NodeProto &n, Value *logProb, NllSpec &s) {
  if (!logProb)
    return false;
  const TensorType &x = logProb->type();
  if (x.rank() < 2)
    return l.error("the scores must be [N, C, d1..dk], got " + x.str());
  if (!isFloating(x.dtype()))
    return l.error("the scores must be floating point, got " + x.str());
  if (!parseReduction(l, n, s.reduction))
    return false;
  if (l.attr(n, "ignore_index"))
    s.ignoreIndex = l.intAttr(n, "ignore_index", 0);
  s.logProb = logProb;
  s.target = checkedTarget(l, n, x);
  return s.target != nullptr;
}

} // namespace

bool lowerNegativeLogLikelihoodLoss(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"reduction", "ignore_index"}))
    return false;
  NllSpec s;
  return parseSpec(l, n, l.valueOf(n, 0), s) && lowerNll(l, n, s, 0);
}

bool lowerSoftmaxCrossEntropyLoss(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"reduction", "ignore_index"}))
    return false;
  Value *scores = l.valueOf(n, 0);
  if (!scores)
    return false;
  if (scores->type().rank() < 2)
    return l.error("the scores must be [N, C, d1..dk], got " + scores->type().str());
  // The optional log_prob output is log_softmax over the classes, whatever
  // the targets (ignored ones included).
  bool wantLogProb = n.output_size() > 1 && !n.output(1).empty();
  Value *logProb = l.build1(OpKind::LogSoftmax, {scores}, {{"dim", Attribute(int64_t(1))}},
                            wantLogProb ? llvm::StringRef(n.output(1)) : "");
  NllSpec s;
  if (!parseSpec(l, n, logProb, s))
    return false;
  if (wantLogProb)
    l.setOutput(n, 1, logProb);
  return lowerNll(l, n, s, 0);
}

} // namespace ampc::onnxfe
