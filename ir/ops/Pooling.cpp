//===- Pooling.cpp - maxpool2d, avgpool2d, global_avgpool -------------------===//
#include "ir/ops/InferHelpers.h"
#include "ir/ops/OpFamilies.h"

namespace ampc {
using namespace infer;

// maxpool2d / avgpool2d(input[N, C, H, W]) -> [N, C, H', W'] with PyTorch's
// floor mode: H' = (H + 2p - k) / s + 1. stride [] means stride = kernel.
static bool inferPool2d(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 4) || !requireIntsCount(ctx, "kernel", 2) ||
      !requireIntsCount(ctx, "padding", 2))
    return false;
  const TensorType &x = ctx.operand(0);
  const std::vector<int64_t> &kernel = ctx.getInts("kernel"), &pad = ctx.getInts("padding");
  std::vector<int64_t> stride = ctx.getInts("stride");
  if (stride.empty())
    stride = kernel;
  else if (!requireIntsCount(ctx, "stride", 2))
    return false;
  int64_t outDims[2];
  for (unsigned i = 0; i < 2; ++i) {
    if (kernel[i] < 1 || stride[i] < 1)
      return ctx.error("kernel and stride must be >= 1, got kernel " + shapeStr(kernel) +
                       " and stride " + shapeStr(stride));
    if (pad[i] < 0 || pad[i] > kernel[i] / 2)
      return ctx.error("padding " + shapeStr(pad) + " must be >= 0 and at most half of kernel " +
                       shapeStr(kernel));
    int64_t in = x.dim(2 + i);
    // Checked before dividing: C++ division truncates towards zero, which
    // would turn a kernel one larger than the padded input into one output.
    if (in + 2 * pad[i] < kernel[i])
      return ctx.error("kernel " + shapeStr(kernel) + " does not fit input " + typeStr(x) +
                       " with padding " + shapeStr(pad));
    outDims[i] = (in + 2 * pad[i] - kernel[i]) / stride[i] + 1;
  }
  results.push_back(TensorType(x.dtype(), {x.dim(0), x.dim(1), outDims[0], outDims[1]}));
  return true;
}

// global_avgpool(input[N, C, H, W]) -> [N, C, 1, 1]
static bool inferGlobalAvgPool(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  if (!requireFloat(ctx, 0) || !requireRank(ctx, 0, 4))
    return false;
  const TensorType &x = ctx.operand(0);
  if (x.dim(2) < 1 || x.dim(3) < 1)
    return ctx.error("input " + typeStr(x) + " has no spatial elements to average");
  results.push_back(TensorType(x.dtype(), {x.dim(0), x.dim(1), 1, 1}));
  return true;
}

void registerPoolingOps(OpRegistry &r) {
  OpRow(r.define(OpKind::MaxPool2d))
      .operand("input")
      .attr("kernel", AttrType::Ints)
      .attr("stride", AttrType::Ints, std::vector<int64_t>{})
      .attr("padding", AttrType::Ints, std::vector<int64_t>{0, 0})
      .infer(inferPool2d);
  OpRow(r.define(OpKind::AvgPool2d))
      .operand("input")
      .attr("kernel", AttrType::Ints)
      .attr("stride", AttrType::Ints, std::vector<int64_t>{})
      .attr("padding", AttrType::Ints, std::vector<int64_t>{0, 0})
      .attr("count_include_pad", AttrType::Bool, true)
      .infer(inferPool2d);
  OpRow(r.define(OpKind::GlobalAvgPool)).operand("input").infer(inferGlobalAvgPool);
}

} // namespace ampc
