//===- LogicOps.cpp - Comparisons, logic, Where, Mod -----------------------===//
//
// Masks built from constants (a causal mask sliced from a buffer and
// compared with 0, a window mask of Swin) fold here; masks of run-time
// values (a padding mask from an attention_mask input) lower to compare,
// logical, logical_not and where.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"
#include "frontends/onnx/ConstFold.h"

#include "ir/OpAttrs.h"

#include <cmath>

namespace ampc::onnxfe {

namespace {

bool allFoldable(OnnxLowering &l, const onnx::NodeProto &n) {
  for (int i = 0; i < n.input_size(); ++i)
    if (l.hasInput(n, i) && !isFoldable(l.input(n, i)))
      return false;
  return true;
}

/// Folds output 0 of n as fn over every input, broadcast; the result has
/// `dtype` (or input 0's when nullopt).
bool foldInputs(OnnxLowering &l, const onnx::NodeProto &n, std::optional<DType> dtype,
                llvm::function_ref<double(llvm::ArrayRef<double>)> fn) {
  llvm::SmallVector<const ConstTensor *, 3> operands;
  for (int i = 0; i < n.input_size(); ++i) {
    const ConstTensor *c = l.constantOf(n, i, "input");
    if (!c)
      return false;
    operands.push_back(c);
  }
  ConstTensor out;
  std::string err;
  if (!foldElementwise(operands, dtype.value_or(operands.front()->dtype), fn, out, err))
    return l.error(err);
  l.setConstant(n, 0, std::move(out));
  return true;
}

bool lowerComparison(OnnxLowering &l, const onnx::NodeProto &n, ComparePredicate p) {
  if (!l.checkAttrs(n, {}))
    return false;
  if (allFoldable(l, n))
    return foldInputs(l, n, DType::Bool, [p](llvm::ArrayRef<double> v) {
      switch (p) {
      case ComparePredicate::Eq:
        return double(v[0] == v[1]);
      case ComparePredicate::Ne:
        return double(v[0] != v[1]);
      case ComparePredicate::Lt:
        return double(v[0] < v[1]);
      case ComparePredicate::Le:
        return double(v[0] <= v[1]);
      case ComparePredicate::Gt:
        return double(v[0] > v[1]);
      case ComparePredicate::Ge:
        return double(v[0] >= v[1]);
      }
      return 0.0;
    });
  Value *a = l.valueOf(n, 0, StateKind::Buffer), *b = l.valueOf(n, 1, StateKind::Buffer);
  if (!a || !b)
    return false;
  if (a->dtype() != b->dtype())
    return l.error("compares " + a->type().str() + " with " + b->type().str() +
                   "; ONNX requires one dtype");
  l.setOutput(n, 0,
              l.build1(OpKind::Compare, {a, b},
                       {{"predicate", Attribute(attrs::enumSpelling(p).str())}}, n.output(0)));
  return true;
}

bool requireBoolInputs(OnnxLowering &l, const onnx::NodeProto &n) {
  for (int i = 0; i < n.input_size(); ++i)
    if (l.typeOf(n, i).dtype() != DType::Bool)
      return l.error("input " + llvm::Twine(i) + " must be bool, got " + l.typeOf(n, i).str());
  return true;
}

bool lowerLogical(OnnxLowering &l, const onnx::NodeProto &n, LogicalOp op) {
  if (!l.checkAttrs(n, {}) || !requireBoolInputs(l, n))
    return false;
  if (allFoldable(l, n))
    return foldInputs(l, n, DType::Bool, [op](llvm::ArrayRef<double> v) {
      bool x = v[0] != 0, y = v[1] != 0;
      return double(op == LogicalOp::And ? (x && y) : op == LogicalOp::Or ? (x || y) : (x != y));
    });
  Value *a = l.valueOf(n, 0, StateKind::Buffer), *b = l.valueOf(n, 1, StateKind::Buffer);
  if (!a || !b)
    return false;
  l.setOutput(n, 0,
              l.build1(OpKind::Logical, {a, b}, {{"op", Attribute(attrs::enumSpelling(op).str())}},
                       n.output(0)));
  return true;
}

} // namespace

bool lowerEqual(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerComparison(l, n, ComparePredicate::Eq);
}
bool lowerLess(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerComparison(l, n, ComparePredicate::Lt);
}
bool lowerLessOrEqual(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerComparison(l, n, ComparePredicate::Le);
}
bool lowerGreater(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerComparison(l, n, ComparePredicate::Gt);
}
bool lowerGreaterOrEqual(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerComparison(l, n, ComparePredicate::Ge);
}
bool lowerAnd(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerLogical(l, n, LogicalOp::And);
}
bool lowerOr(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerLogical(l, n, LogicalOp::Or);
}
bool lowerXor(OnnxLowering &l, const onnx::NodeProto &n) {
  return lowerLogical(l, n, LogicalOp::Xor);
}

bool lowerNot(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {}) || !requireBoolInputs(l, n))
    return false;
  if (allFoldable(l, n))
    return foldInputs(l, n, DType::Bool,
                      [](llvm::ArrayRef<double> v) { return double(v[0] == 0); });
  Value *a = l.valueOf(n, 0, StateKind::Buffer);
  if (!a)
    return false;
  l.setOutput(n, 0, l.build1(OpKind::LogicalNot, {a}, {}, n.output(0)));
  return true;
}

bool lowerWhere(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {}))
    return false;
  if (l.typeOf(n, 0).dtype() != DType::Bool)
    return l.error("the condition must be bool, got " + l.typeOf(n, 0).str());
  if (l.typeOf(n, 1).dtype() != l.typeOf(n, 2).dtype())
    return l.error("X and Y must have one dtype, got " + l.typeOf(n, 1).str() + " and " +
                   l.typeOf(n, 2).str());
  if (allFoldable(l, n))
    return foldInputs(l, n, l.typeOf(n, 1).dtype(),
                      [](llvm::ArrayRef<double> v) { return v[0] != 0 ? v[1] : v[2]; });
  Value *cond = l.valueOf(n, 0, StateKind::Buffer);
  Value *x = l.valueOf(n, 1), *y = l.valueOf(n, 2);
  if (!cond || !x || !y)
    return false;
  l.setOutput(n, 0, l.build1(OpKind::Where, {cond, x, y}, {}, n.output(0)));
  return true;
}

bool lowerMod(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"fmod"}))
    return false;
  bool fmod = l.intAttr(n, "fmod", 0) != 0;
  // fmod=1 on integers gives the dividend's sign, as C's %; floats need it.
  DType type = l.typeOf(n, 0).dtype();
  if (isFloating(type) && !fmod)
    return l.error("Mod of floats needs fmod=1");
  if (!allFoldable(l, n)) {
    // At run time: the registry's mod or fmod; integers in f64 (exact below
    // 2^53) and cast back.
    DType computeType = isFloating(type) ? type : DType::F64;
    auto operand = [&](int i) {
      Value *v = l.valueOf(n, i);
      return v && v->dtype() != computeType
                 ? l.build1(OpKind::Cast, {v}, {{"to", Attribute(computeType)}})
                 : v;
    };
    Value *a = operand(0), *b = operand(1);
    bool castBack = computeType != type;
    Value *r = a && b ? l.build1(fmod ? OpKind::Fmod : OpKind::Mod, {a, b}, {},
                                 castBack ? llvm::StringRef() : llvm::StringRef(n.output(0)))
                      : nullptr;
    if (r && castBack)
      r = l.build1(OpKind::Cast, {r}, {{"to", Attribute(type)}}, n.output(0));
    if (!r)
      return false;
    l.setOutput(n, 0, r);
    return true;
  }
  return foldInputs(l, n, std::nullopt, [fmod](llvm::ArrayRef<double> v) {
    if (v[1] == 0)
      return fmod ? std::nan("") : 0.0;
    double r = std::fmod(v[0], v[1]);
    // Without fmod, the remainder takes the divisor's sign (Python's %).
    if (!fmod && r != 0 && ((r < 0) != (v[1] < 0)))
      r += v[1];
    return r;
  });
}

} // namespace ampc::onnxfe
