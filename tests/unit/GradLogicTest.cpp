//===- GradLogicTest.cpp - Gradients of where, the extrema, conv transpose -===//
//
// Finite-difference checks (f64) of where's rule with a broadcast condition
// and broadcast data operands, of reduce_max/reduce_min (no ties among
// random values), and of conv2d_grad_input as a layer of its own (ONNX
// ConvTranspose lowers to it: its gradients are a convolution and the
// convolution's weight gradient).
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"

#include <vector>

namespace {

using namespace ampc;
using ampc::testing::checkGradients;
using ampc::testing::GradCheckOperand;
using Ints = std::vector<int64_t>;

TensorType f64(Ints dims) { return TensorType(DType::F64, dims); }

} // namespace

TEST(GradLogic, WhereWithBroadcasting) {
  // condition [1, 3, 1] against x [2, 3, 4] and y [4].
  GradCheckOperand cond(TensorType(DType::Bool, {1, 3, 1}), {1, 0, 1});
  EXPECT_TRUE(checkGradients("where", {cond, {f64({2, 3, 4})}, {f64({4})}}));
  GradCheckOperand scalarY(f64({}));
  EXPECT_TRUE(checkGradients("where", {cond, {f64({2, 3, 4})}, scalarY}));
}

TEST(GradLogic, WhereOneSideFrozen) {
  GradCheckOperand cond(TensorType(DType::Bool, {2, 2}), {1, 0, 0, 1});
  GradCheckOperand frozen(f64({2, 2}));
  frozen.differentiate = false;
  EXPECT_TRUE(checkGradients("where", {cond, {f64({2, 2})}, frozen}));
  EXPECT_TRUE(checkGradients("where", {cond, frozen, {f64({2, 2})}}));
}

TEST(GradLogic, Extrema) {
  for (const char *op : {"reduce_max", "reduce_min"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(checkGradients(op, {{f64({3, 5})}}, {{"dims", Attribute(Ints{1})}}));
    EXPECT_TRUE(checkGradients(op, {{f64({2, 3, 4})}},
                               {{"dims", Attribute(Ints{0, 2})}, {"keepdim", Attribute(true)}}));
    EXPECT_TRUE(checkGradients(op, {{f64({4, 2})}}));
  }
}

TEST(GradLogic, ConvTransposeAsConv2dGradInput) {
  // x [2, 4, 3, 3] upsampled by a stride-2 transposed convolution of
  // weight [4, 3, 2, 2] to [2, 3, 6, 6]; and a grouped, padded one.
  EXPECT_TRUE(checkGradients(
      "conv2d_grad_input", {{f64({2, 4, 3, 3})}, {f64({4, 3, 2, 2})}},
      {{"stride", Attribute(Ints{2, 2})}, {"input_shape", Attribute(Ints{2, 3, 6, 6})}}));
  EXPECT_TRUE(checkGradients("conv2d_grad_input", {{f64({1, 4, 3, 3})}, {f64({4, 1, 3, 3})}},
                             {{"stride", Attribute(Ints{2, 2})},
                              {"padding", Attribute(Ints{1, 1})},
                              {"groups", Attribute(int64_t(2))},
                              {"input_shape", Attribute(Ints{1, 2, 5, 6})}}));
}
