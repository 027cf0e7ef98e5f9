//===- MathOps.cpp - Elementwise arithmetic, activations, reductions -------===//
//
// Arithmetic on constants folds (shape chains: Shape -> Gather -> Add -> Div
// -> Slice); on values it lowers to the registry's broadcasting ops. A
// multiplication or division by a scalar constant becomes `scale`; a scalar
// added or subtracted becomes a constant buffer.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"

#include <cmath>
#include <limits>

namespace ampc::onnxfe {

namespace {

/// A float scalar known at import time (a Constant node or a one-element
/// initializer): the factor of a `scale`.
std::optional<double> scalarOf(OnnxLowering &l, const onnx::NodeProto &n, int i) {
  const Term *t = l.input(n, i);
  if (!t || t->value || t->type.numElements() != 1)
    return std::nullopt;
  if (!t->constant && !t->initializer)
    return std::nullopt;
  const ConstTensor *c = l.constantOf(n, i, "operand");
  if (!c)
    return std::nullopt;
  return c->values.front();
}

double opAdd(double a, double b) { return a + b; }
double opSub(double a, double b) { return a - b; }
double opMul(double a, double b) { return a * b; }
double opDivFloat(double a, double b) { return a / b; }
double opDivInt(double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }
double opPow(double a, double b) { return std::pow(a, b); }

enum class Arith { Add, Sub, Mul, Div };

bool lowerArith(OnnxLowering &l, const onnx::NodeProto &n, Arith op) {
  if (!l.checkAttrs(n, {}))
    return false;
  const Term *a = l.input(n, 0), *b = l.input(n, 1);
  if (!a || !b)
    return l.error("needs two inputs");
  if (isFoldable(a) && isFoldable(b)) {
    const ConstTensor *ca = l.constantOf(n, 0, "operand"), *cb = l.constantOf(n, 1, "operand");
    if (!ca || !cb)
      return false;
    bool integer = !isFloating(ca->dtype);
    double (*fn)(double, double) = op == Arith::Add   ? opAdd
                                   : op == Arith::Sub ? opSub
                                   : op == Arith::Mul ? opMul
                                   : integer          ? opDivInt
                                                      : opDivFloat;
    ConstTensor out;
    if (!foldBinary(l, *ca, *cb, fn, out))
      return false;
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  // x * c, c * x, x / c: a scale.
  if (op == Arith::Mul || op == Arith::Div) {
    std::optional<double> cb = scalarOf(l, n, 1);
    std::optional<double> ca = op == Arith::Mul && !cb ? scalarOf(l, n, 0) : std::nullopt;
    if (cb || ca) {
      Value *x = l.valueOf(n, cb ? 0 : 1);
      double factor = cb ? (op == Arith::Div ? 1.0 / *cb : *cb) : *ca;
      if (!x)
        return false;
      // A scalar operand broadcasts the result only when x has rank 0 too.
      l.setOutput(n, 0, l.build1(OpKind::Scale, {x}, {{"factor", Attribute(factor)}}, n.output(0)));
      return true;
    }
  }
  Value *x = l.valueOf(n, 0, StateKind::Parameter), *y = l.valueOf(n, 1, StateKind::Parameter);
  if (!x || !y)
    return false;
  OpKind kind = op == Arith::Add   ? OpKind::Add
                : op == Arith::Sub ? OpKind::Sub
                : op == Arith::Mul ? OpKind::Mul
                                   : OpKind::Div;
  l.setOutput(n, 0, l.build1(kind, {x, y}, {}, n.output(0)));
  return true;
}

bool lowerUnary(OnnxLowering &l, const onnx::NodeProto &n, OpKind kind, AttrMap attrs = {}) {
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  l.setOutput(n, 0, l.build1(kind, {x}, std::move(attrs), n.output(0)));
  return true;
}

} // namespace

bool foldBinary(OnnxLowering &l, const ConstTensor &a, const ConstTensor &b,
                double (*fn)(double, double), ConstTensor &out) {
  unsigned rank = std::max(a.dims.size(), b.dims.size());
  llvm::SmallVector<int64_t, 4> dims(rank, 1);
  auto dimOf = [&](const ConstTensor &t, unsigned d) -> int64_t {
    unsigned offset = rank - t.dims.size();
    return d < offset ? 1 : t.dims[d - offset];
  };
  for (unsigned d = 0; d < rank; ++d) {
    int64_t x = dimOf(a, d), y = dimOf(b, d);
    if (x != y && x != 1 && y != 1)
      return l.error("constant operands of shapes that do not broadcast");
    dims[d] = std::max(x, y);
  }
  int64_t total = 1;
  for (int64_t d : dims) {
    if (d > 0 && total > (int64_t(1) << 20) / d)
      return l.error("folding this op would make a constant of more than 2^20 elements");
    total *= d;
  }
  out.dtype = a.dtype;
  out.dims = dims;
  out.values.resize(total);
  // Walk the result's index and map it into each operand (stride 0 on
  // broadcast dims).
  auto offsetIn = [&](const ConstTensor &t, int64_t flat) {
    int64_t off = 0, stride = 1;
    for (int d = int(rank) - 1; d >= 0; --d) {
      int64_t idx = flat % dims[d];
      flat /= dims[d];
      int64_t size = dimOf(t, d);
      if (size != 1)
        off += idx * stride;
      stride *= size;
    }
    return off;
  };
  for (int64_t i = 0; i < total; ++i)
    out.values[i] = fn(a.values[offsetIn(a, i)], b.values[offsetIn(b, i)]);
  return true;
}

bool lowerAdd(OnnxLowering &l, const onnx::NodeProto &n) { return lowerArith(l, n, Arith::Add); }
bool lowerSub(OnnxLowering &l, const onnx::NodeProto &n) { return lowerArith(l, n, Arith::Sub); }
bool lowerMul(OnnxLowering &l, const onnx::NodeProto &n) { return lowerArith(l, n, Arith::Mul); }
bool lowerDiv(OnnxLowering &l, const onnx::NodeProto &n) { return lowerArith(l, n, Arith::Div); }

bool lowerPow(OnnxLowering &l, const onnx::NodeProto &n) {
  const Term *a = l.input(n, 0), *b = l.input(n, 1);
  if (!a || !b)
    return l.error("needs two inputs");
  if (isFoldable(a) && isFoldable(b)) {
    const ConstTensor *ca = l.constantOf(n, 0, "base"), *cb = l.constantOf(n, 1, "exponent");
    ConstTensor out;
    if (!ca || !cb || !foldBinary(l, *ca, *cb, opPow, out))
      return false;
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  std::optional<double> e = scalarOf(l, n, 1);
  if (!e)
    return l.error("the exponent must be a scalar constant");
  if (*e == 1.0) {
    l.alias(n, 0, 0);
    return true;
  }
  if (*e == 0.5)
    return lowerUnary(l, n, OpKind::Sqrt);
  return lowerUnary(l, n, OpKind::Pow, {{"exponent", Attribute(*e)}});
}

bool lowerRelu(OnnxLowering &l, const onnx::NodeProto &n) { return lowerUnary(l, n, OpKind::Relu); }
bool lowerSigmoid(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnary(l, n, OpKind::Sigmoid);
}
bool lowerTanh(OnnxLowering &l, const onnx::NodeProto &n) { return lowerUnary(l, n, OpKind::Tanh); }
bool lowerSqrt(OnnxLowering &l, const onnx::NodeProto &n) { return lowerUnary(l, n, OpKind::Sqrt); }
bool lowerErf(OnnxLowering &l, const onnx::NodeProto &n) { return lowerUnary(l, n, OpKind::Erf); }

bool lowerClip(OnnxLowering &l, const onnx::NodeProto &n) {
  double lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max();
  for (int i : {1, 2}) {
    if (!l.hasInput(n, i))
      continue;
    const ConstTensor *c = l.constantOf(n, i, i == 1 ? "min" : "max");
    if (!c)
      return false;
    if (c->numElements() != 1)
      return l.error(llvm::Twine(i == 1 ? "min" : "max") + " must be a scalar");
    (i == 1 ? lo : hi) = c->values.front();
  }
  if (lo == 0 && !l.hasInput(n, 2))
    return lowerUnary(l, n, OpKind::Relu);
  return lowerUnary(l, n, OpKind::Clamp, {{"min", Attribute(lo)}, {"max", Attribute(hi)}});
}

bool lowerReduceMean(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"axes", "keepdims"}))
    return false;
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  std::vector<int64_t> axes = l.intsAttr(n, "axes").value_or(std::vector<int64_t>{});
  if (axes.empty())
    for (unsigned d = 0; d < x->type().rank(); ++d)
      axes.push_back(d);
  for (int64_t &a : axes) {
    unsigned d;
    if (!l.normAxis(a, x->type().rank(), d, "axis"))
      return false;
    a = d;
  }
  bool keep = l.intAttr(n, "keepdims", 1) != 0;
  l.setOutput(n, 0,
              l.build1(OpKind::ReduceMean, {x},
                       {{"dims", Attribute(axes)}, {"keepdim", Attribute(keep)}}, n.output(0)));
  return true;
}

} // namespace ampc::onnxfe
