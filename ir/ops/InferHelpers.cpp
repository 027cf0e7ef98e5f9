//===- InferHelpers.cpp -----------------------------------------------------===//
#include "ir/ops/InferHelpers.h"

namespace ampc::infer {

std::string shapeStr(llvm::ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

bool requireFloat(InferContext &ctx, unsigned i) {
  if (isFloating(ctx.operand(i).dtype()))
    return true;
  return ctx.error(ctx.op().operandSpec(i)->name + " must be a floating type, got " +
                   typeStr(ctx.operand(i)));
}

bool requireRank(InferContext &ctx, unsigned i, unsigned rank) {
  if (ctx.operand(i).rank() == rank)
    return true;
  return ctx.error(ctx.op().operandSpec(i)->name + " must have " + llvm::Twine(rank) +
                   " dims, got " + typeStr(ctx.operand(i)));
}

bool requireSameDType(InferContext &ctx, unsigned a, unsigned b) {
  if (ctx.operand(a).dtype() == ctx.operand(b).dtype())
    return true;
  return ctx.error(ctx.op().operandSpec(a)->name + " and " + ctx.op().operandSpec(b)->name +
                   " must have the same dtype, got " + typeStr(ctx.operand(a)) + " and " +
                   typeStr(ctx.operand(b)));
}

bool requireIndex(InferContext &ctx, unsigned i) {
  if (isIntegral(ctx.operand(i).dtype()))
    return true;
  return ctx.error(ctx.op().operandSpec(i)->name + " must be i64 or i32, got " +
                   typeStr(ctx.operand(i)));
}

bool requireMinRank(InferContext &ctx, unsigned i, unsigned rank) {
  if (ctx.operand(i).rank() >= rank)
    return true;
  return ctx.error(ctx.op().operandSpec(i)->name + " must have at least " + llvm::Twine(rank) +
                   " dims, got " + typeStr(ctx.operand(i)));
}

bool requireSameShape(InferContext &ctx, unsigned a, unsigned b) {
  if (ctx.operand(a).dims() == ctx.operand(b).dims())
    return true;
  return ctx.error(ctx.op().operandSpec(a)->name + " and " + ctx.op().operandSpec(b)->name +
                   " must have the same shape, got " + typeStr(ctx.operand(a)) + " and " +
                   typeStr(ctx.operand(b)));
}

bool requireParam(InferContext &ctx, unsigned param, unsigned input, llvm::ArrayRef<int64_t> dims) {
  const TensorType &p = ctx.operand(param), &x = ctx.operand(input);
  const std::string &name = ctx.op().operandSpec(param)->name;
  if (p.dims() != dims)
    return ctx.error(name + " must be " + shapeStr(dims) + " to match input " + typeStr(x) +
                     ", got " + typeStr(p));
  if (p.dtype() != DType::F32 && p.dtype() != x.dtype())
    return ctx.error(name + " must be f32 or the input's dtype, got " + typeStr(p) + " for input " +
                     typeStr(x));
  return true;
}

bool requireIntsCount(InferContext &ctx, llvm::StringRef attr, size_t count) {
  size_t n = ctx.getInts(attr).size();
  if (n == count)
    return true;
  return ctx.error(attr + " must have " + llvm::Twine(count) + " values, got " + llvm::Twine(n));
}

bool requireGeometryBounds(InferContext &ctx, std::initializer_list<llvm::StringRef> attrs) {
  constexpr int64_t kLimit = int64_t(1) << 31;
  for (llvm::StringRef attr : attrs)
    for (int64_t v : ctx.getInts(attr))
      if (v >= kLimit)
        return ctx.error(attr + " " + shapeStr(ctx.getInts(attr)) + " is too large: each value " +
                         "must be below 2^31");
  return true;
}

bool normalizeAxis(InferContext &ctx, int64_t axis, unsigned rank, unsigned &out,
                   llvm::StringRef what) {
  int64_t r = rank;
  if (axis < -r || axis >= r || r == 0)
    return ctx.error(what + " " + llvm::Twine(axis) + " is out of range for rank " +
                     llvm::Twine(rank));
  out = static_cast<unsigned>(axis < 0 ? axis + r : axis);
  return true;
}

bool broadcastShapes(InferContext &ctx, llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                     llvm::SmallVectorImpl<int64_t> &out) {
  size_t n = std::max(a.size(), b.size());
  out.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      return ctx.error("shapes " + shapeStr(a) + " and " + shapeStr(b) +
                       " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return true;
}

static int floatRank(DType t) {
  switch (t) {
  case DType::F64:
    return 3;
  case DType::F32:
    return 2;
  case DType::F16:
  case DType::BF16:
    return 1;
  case DType::I64:
  case DType::I32:
  case DType::Bool:
    return 0;
  }
  return 0;
}

DType widestFloat(DType a, DType b) {
  if (a == b)
    return a;
  if (isHalfType(a) && isHalfType(b))
    return DType::F32; // f16 and bf16 do not contain each other
  return floatRank(a) >= floatRank(b) ? a : b;
}

bool inferSameAsOperand0(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  results.push_back(ctx.operand(0));
  return true;
}

bool inferUnaryFloat(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0))
    return false;
  results.push_back(ctx.operand(0));
  return true;
}

} // namespace ampc::infer
