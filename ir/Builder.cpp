//===- Builder.cpp ----------------------------------------------------------===//
#include "ir/Builder.h"

namespace ampc {

bool checkOperandCount(const OpInfo &op, unsigned n, std::string &err) {
  unsigned lo = op.minOperands(), hi = op.maxOperands();
  if (n >= lo && n <= hi)
    return true;
  std::string expected;
  if (hi == ~0u)
    expected = "at least " + std::to_string(lo);
  else if (lo == hi)
    expected = std::to_string(lo);
  else
    expected = std::to_string(lo) + " to " + std::to_string(hi);
  bool singular = lo == 1 && (hi == 1 || hi == ~0u);
  err = "expected " + expected + " operand" + (singular ? "" : "s") + ", got " + std::to_string(n);
  return false;
}

bool normalizeAttrs(const OpInfo &op, AttrMap &attrs, std::string &err) {
  for (auto &[name, value] : attrs) {
    if (isAnnotationAttr(name))
      continue;
    const AttrSpec *spec = op.findAttr(name);
    if (!spec) {
      err = "unknown attribute '" + name.str() + "'";
      return false;
    }
    if (value.type() == spec->type)
      continue;
    if (spec->type == AttrType::Float && value.is(AttrType::Int)) {
      value = Attribute(static_cast<double>(value.getInt()));
      continue;
    }
    if (spec->type == AttrType::Floats && value.is(AttrType::Ints)) {
      std::vector<double> v(value.getInts().begin(), value.getInts().end());
      value = Attribute(std::move(v));
      continue;
    }
    err = "attribute '" + name.str() + "' must be " + attrTypeName(spec->type).str() + ", got " +
          attrTypeName(value.type()).str();
    return false;
  }
  for (const AttrSpec &spec : op.attrs) {
    if (attrs.count(spec.name))
      continue;
    if (!spec.defaultValue) {
      err = "missing required attribute '" + spec.name + "'";
      return false;
    }
    attrs[spec.name] = *spec.defaultValue;
  }
  return true;
}

bool checkAttrs(const OpInfo &op, const AttrMap &attrs, std::string &err) {
  for (const auto &[name, value] : attrs) {
    if (isAnnotationAttr(name))
      continue;
    const AttrSpec *spec = op.findAttr(name);
    if (!spec) {
      err = "unknown attribute '" + name.str() + "'";
      return false;
    }
    if (value.type() != spec->type) {
      err = "attribute '" + name.str() + "' must be " + attrTypeName(spec->type).str() + ", got " +
            attrTypeName(value.type()).str();
      return false;
    }
  }
  for (const AttrSpec &spec : op.attrs)
    if (!attrs.count(spec.name)) {
      err = "missing attribute '" + spec.name + "'";
      return false;
    }
  return true;
}

bool inferResultTypes(const OpInfo &op, llvm::ArrayRef<TensorType> operandTypes,
                      const AttrMap &attrs, llvm::SmallVectorImpl<TensorType> &results,
                      std::string &err) {
  InferContext ctx(op, operandTypes, attrs);
  results.clear();
  if (!op.infer(ctx, results)) {
    err = ctx.errorMessage();
    return false;
  }
  for (const TensorType &t : results)
    if (!t.checkedNumElements()) {
      err = "result " + t.str() + " has an element count that overflows int64";
      return false;
    }
  return true;
}

Node *buildNode(Graph &g, const OpInfo &op, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                const Location &loc, DiagnosticEngine &diag, llvm::ArrayRef<std::string> names,
                Node *before) {
  std::string err;
  auto fail = [&]() -> Node * {
    diag.error(loc, op.name + ": " + err);
    return nullptr;
  };
  if (!checkOperandCount(op, operands.size(), err))
    return fail();
  if (!normalizeAttrs(op, attrs, err))
    return fail();
  llvm::SmallVector<TensorType, 4> operandTypes;
  for (Value *v : operands)
    operandTypes.push_back(v->type());
  llvm::SmallVector<TensorType, 2> resultTypes;
  if (!inferResultTypes(op, operandTypes, attrs, resultTypes, err))
    return fail();
  if (!names.empty() && names.size() != resultTypes.size()) {
    err = "expected " + std::to_string(resultTypes.size()) + " result name(s), got " +
          std::to_string(names.size());
    return fail();
  }
  for (const std::string &n : names)
    if (!n.empty() && !g.isNameFree(n)) {
      err = "the name '" + n + "' is already used";
      return fail();
    }
  return g.createNode(op, operands, std::move(attrs), resultTypes, names, loc, before);
}

} // namespace ampc
