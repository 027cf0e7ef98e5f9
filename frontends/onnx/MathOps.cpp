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
  DType type = l.typeOf(n, 0).dtype();
  if (type == DType::I64 || type == DType::I32) {
    // Integer arithmetic at run time (index arithmetic on an input): in f64,
    // exact below 2^53, cast back (division truncates, as ONNX's).
    auto widen = [&](int i) {
      Value *v = l.valueOf(n, i, StateKind::Buffer);
      return v ? l.build1(OpKind::Cast, {v}, {{"to", Attribute(DType::F64)}}) : nullptr;
    };
    Value *x = widen(0), *y = widen(1);
    OpKind kind = op == Arith::Add   ? OpKind::Add
                  : op == Arith::Sub ? OpKind::Sub
                  : op == Arith::Mul ? OpKind::Mul
                                     : OpKind::Div;
    Value *r = x && y ? l.build1(kind, {x, y}) : nullptr;
    Value *out = r ? l.build1(OpKind::Cast, {r}, {{"to", Attribute(type)}}, n.output(0)) : nullptr;
    if (!out)
      return false;
    l.setOutput(n, 0, out);
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

/// A unary op of ONNX's activations and math: folded when its input is a
/// constant known now (`fold` in double; no fold when null), else the
/// registry op `kind` with `attrs`. `known`: the ONNX attributes it reads.
bool lowerUnaryMath(OnnxLowering &l, const onnx::NodeProto &n, OpKind kind, double (*fold)(double),
                    std::initializer_list<llvm::StringRef> known = {}, AttrMap attrs = {}) {
  if (!l.checkAttrs(n, known))
    return false;
  const Term *t = l.input(n, 0);
  if (!t)
    return l.error("needs an input");
  if (fold && isFoldable(t)) {
    const ConstTensor *c = l.constantOf(n, 0, "input");
    if (!c)
      return false;
    ConstTensor out = *c;
    for (double &v : out.values)
      v = fold(v);
    l.setConstant(n, 0, std::move(out));
    return true;
  }
  return lowerUnary(l, n, kind, std::move(attrs));
}

double opNeg(double x) { return -x; }
double opAbs(double x) { return std::fabs(x); }
double opMax(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double opMin(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

/// ONNX's variadic Max and Min (1 to N inputs, numpy broadcasting) as a
/// chain of the binary op, left to right; constants fold.
/// `integersInF64`: integer operands are combined in f64 and the result cast
/// back (max and min of i32/i64: exact, as every such integer below 2^53).
bool lowerVariadic(OnnxLowering &l, const onnx::NodeProto &n, OpKind kind,
                   double (*fold)(double, double), bool integersInF64 = false) {
  if (!l.checkAttrs(n, {}))
    return false;
  int count = n.input_size();
  if (count < 1)
    return l.error("needs at least one input");
  bool foldable = true;
  for (int i = 0; i < count; ++i) {
    const Term *t = l.input(n, i);
    if (!t)
      return l.error("input " + llvm::Twine(i) + " is missing");
    foldable &= isFoldable(t);
  }
  if (count == 1) {
    l.alias(n, 0, 0);
    return true;
  }
  if (foldable) {
    const ConstTensor *first = l.constantOf(n, 0, "operand");
    if (!first)
      return false;
    ConstTensor acc = *first;
    for (int i = 1; i < count; ++i) {
      const ConstTensor *c = l.constantOf(n, i, "operand");
      ConstTensor out;
      if (!c || !foldBinary(l, acc, *c, fold, out))
        return false;
      acc = std::move(out);
    }
    l.setConstant(n, 0, std::move(acc));
    return true;
  }
  Value *acc = l.valueOf(n, 0, StateKind::Parameter);
  DType type = acc ? acc->dtype() : DType::F32;
  bool viaF64 = integersInF64 && (type == DType::I32 || type == DType::I64);
  auto widen = [&](Value *v) {
    return viaF64 && v ? l.build1(OpKind::Cast, {v}, {{"to", Attribute(DType::F64)}}) : v;
  };
  acc = widen(acc);
  for (int i = 1; acc && i < count; ++i) {
    Value *next = widen(l.valueOf(n, i, StateKind::Parameter));
    if (!next)
      return false;
    // Only the last link carries the ONNX output's name.
    acc = l.build1(kind, {acc, next}, {}, i + 1 == count && !viaF64 ? n.output(0) : "");
  }
  if (acc && viaF64)
    acc = l.build1(OpKind::Cast, {acc}, {{"to", Attribute(type)}}, n.output(0));
  if (!acc)
    return false;
  l.setOutput(n, 0, acc);
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
  std::optional<double> e =
      (b->constant || b->initializer) ? scalarOf(l, n, 1) : std::optional<double>();
  if (!e) {
    // A tensor of exponents, or one computed at run time: power(a, b), the
    // exponents in the base's dtype (ONNX lets them differ).
    Value *base = l.valueOf(n, 0), *exponent = l.valueOf(n, 1);
    if (!base || !exponent)
      return false;
    // An integer base is raised in f64 (exact wherever the integer result
    // is) and the result truncated back to its dtype, as ONNX casts.
    DType type = base->dtype(), computeType = isFloating(type) ? type : DType::F64;
    auto cast = [&](Value *v) {
      return v && v->dtype() != computeType
                 ? l.build1(OpKind::Cast, {v}, {{"to", Attribute(computeType)}})
                 : v;
    };
    base = cast(base);
    exponent = cast(exponent);
    if (!base || !exponent)
      return false;
    Value *y = l.build1(OpKind::Power, {base, exponent}, {},
                        computeType == type ? llvm::StringRef(n.output(0)) : llvm::StringRef());
    if (y && computeType != type)
      y = l.build1(OpKind::Cast, {y}, {{"to", Attribute(type)}}, n.output(0));
    if (!y)
      return false;
    l.setOutput(n, 0, y);
    return true;
  }
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

bool lowerExp(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnaryMath(l, n, OpKind::Exp, [](double x) { return std::exp(x); });
}
bool lowerLog(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnaryMath(l, n, OpKind::Log, [](double x) { return std::log(x); });
}
bool lowerNeg(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnaryMath(l, n, OpKind::Neg, opNeg);
}
bool lowerFloor(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnaryMath(l, n, OpKind::Floor, [](double x) { return std::floor(x); });
}
bool lowerCeil(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnaryMath(l, n, OpKind::Ceil, [](double x) { return std::ceil(x); });
}
bool lowerAbs(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnaryMath(l, n, OpKind::Abs, opAbs);
}
bool lowerReciprocal(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnaryMath(l, n, OpKind::Reciprocal, [](double x) { return 1 / x; });
}
bool lowerSoftplus(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnaryMath(l, n, OpKind::Softplus, nullptr);
}
bool lowerHardSwish(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerUnaryMath(l, n, OpKind::HardSwish, nullptr);
}
// ONNX's defaults differ from the registry's (PyTorch's): HardSigmoid's
// alpha is 0.2 (torch's 1/6), LeakyRelu's alpha 0.01, Elu's alpha 1.
bool lowerHardSigmoid(OnnxLowering &l, const onnx::NodeProto &n) {
  AttrMap attrs{{"alpha", Attribute(l.floatAttr(n, "alpha", 0.2))},
                {"beta", Attribute(l.floatAttr(n, "beta", 0.5))}};
  return lowerUnaryMath(l, n, OpKind::HardSigmoid, nullptr, {"alpha", "beta"}, std::move(attrs));
}
bool lowerLeakyRelu(OnnxLowering &l, const onnx::NodeProto &n) {
  AttrMap attrs{{"negative_slope", Attribute(l.floatAttr(n, "alpha", 0.01))}};
  return lowerUnaryMath(l, n, OpKind::LeakyRelu, nullptr, {"alpha"}, std::move(attrs));
}
bool lowerElu(OnnxLowering &l, const onnx::NodeProto &n) {
  AttrMap attrs{{"alpha", Attribute(l.floatAttr(n, "alpha", 1.0))}};
  return lowerUnaryMath(l, n, OpKind::Elu, nullptr, {"alpha"}, std::move(attrs));
}

// PRelu(X, slope): the slope (usually an initializer: a parameter) broadcasts
// to X (registry prelu checks that it does).
bool lowerPRelu(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {}))
    return false;
  Value *x = l.valueOf(n, 0), *slope = l.valueOf(n, 1, StateKind::Parameter);
  if (!x || !slope)
    return false;
  l.setOutput(n, 0, l.build1(OpKind::PRelu, {x, slope}, {}, n.output(0)));
  return true;
}

bool lowerMax(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerVariadic(l, n, OpKind::Max, opMax, /*integersInF64=*/true);
}
bool lowerMin(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerVariadic(l, n, OpKind::Min, opMin, /*integersInF64=*/true);
}

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
