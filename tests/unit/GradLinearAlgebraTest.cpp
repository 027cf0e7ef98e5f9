//===- GradLinearAlgebraTest.cpp - Gradients of linear, matmul, conv, attention
//
// Finite-difference checks (f64) of every gradient rule of the family over
// transposes, broadcast batch dims, strides, padding, dilation, groups,
// causal masks and explicit scales; hand-computed cases and f32/f16/bf16 vs
// f64 comparisons of the backward kernels; and a frozen parameter that must
// get no gradient.
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"
#include "KernelTestUtil.h"

#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::allClose;
using ampc::testing::checkGradients;
using ampc::testing::GradCheckOperand;
using ampc::testing::KernelRun;
using ampc::testing::matchesF64;
using ampc::testing::randomValues;
using ampc::testing::runKernel;

TensorType f64(std::vector<int64_t> dims) { return TensorType(DType::F64, dims); }

Attribute ints(std::vector<int64_t> v) { return Attribute(std::move(v)); }

constexpr DType kLowDTypes[] = {DType::F32, DType::F16, DType::BF16};

// --- linear -----------------------------------------------------------------

TEST(GradLinearAlgebra, LinearWithBias) {
  EXPECT_TRUE(checkGradients("linear", {{f64({3, 4})}, {f64({5, 4})}, {f64({5})}}));
}

TEST(GradLinearAlgebra, LinearBatchedInputWithoutBias) {
  EXPECT_TRUE(checkGradients("linear", {{f64({2, 3, 4})}, {f64({5, 4})}}));
}

TEST(GradLinearAlgebra, LinearVectorInput) {
  EXPECT_TRUE(checkGradients("linear", {{f64({4})}, {f64({3, 4})}, {f64({3})}}));
}

TEST(GradLinearAlgebra, LinearOnlyWeightDifferentiated) {
  GradCheckOperand input{f64({2, 4})};
  input.differentiate = false;
  EXPECT_TRUE(checkGradients("linear", {input, {f64({3, 4})}, {f64({3})}}));
}

// --- matmul and batch_matmul --------------------------------------------------

TEST(GradLinearAlgebra, MatMulEveryTranspose) {
  const int64_t m = 3, k = 4, n = 2;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE("transpose_a=" + std::to_string(ta) + " transpose_b=" + std::to_string(tb));
      TensorType a = ta ? f64({k, m}) : f64({m, k});
      TensorType b = tb ? f64({n, k}) : f64({k, n});
      EXPECT_TRUE(checkGradients("matmul", {{a}, {b}},
                                 {{"transpose_a", Attribute(ta)}, {"transpose_b", Attribute(tb)}}));
    }
}

TEST(GradLinearAlgebra, BatchMatMulEveryTranspose) {
  const int64_t m = 3, k = 2, n = 4;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE("transpose_a=" + std::to_string(ta) + " transpose_b=" + std::to_string(tb));
      TensorType a = ta ? f64({2, k, m}) : f64({2, m, k});
      TensorType b = tb ? f64({2, n, k}) : f64({2, k, n});
      EXPECT_TRUE(checkGradients("batch_matmul", {{a}, {b}},
                                 {{"transpose_a", Attribute(ta)}, {"transpose_b", Attribute(tb)}}));
    }
}

TEST(GradLinearAlgebra, BatchMatMulBroadcastBatchDims) {
  // a's batch [2] against b's [5, 1]: the output batch is [5, 2]; both
  // gradients must be summed back over the dims their operand broadcast.
  EXPECT_TRUE(checkGradients("batch_matmul", {{f64({2, 3, 4})}, {f64({3, 1, 4, 2})}}));
  EXPECT_TRUE(checkGradients("batch_matmul", {{f64({1, 3, 4})}, {f64({2, 4, 2})}}));
  EXPECT_TRUE(checkGradients("batch_matmul", {{f64({2, 1, 3, 4})}, {f64({3, 2, 4})}},
                             {{"transpose_b", Attribute(true)}}));
  EXPECT_TRUE(checkGradients("batch_matmul", {{f64({2, 1, 4, 3})}, {f64({3, 2, 4})}},
                             {{"transpose_a", Attribute(true)}, {"transpose_b", Attribute(true)}}));
}

// --- conv2d ---------------------------------------------------------------------

struct ConvCase {
  const char *name;
  std::vector<int64_t> input, weight;
  bool bias;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
};

AttrMap convAttrs(const ConvCase &c) {
  return {{"stride", ints(c.stride)},
          {"padding", ints(c.padding)},
          {"dilation", ints(c.dilation)},
          {"groups", Attribute(c.groups)}};
}

const ConvCase kConvCases[] = {
    {"plain", {2, 3, 5, 5}, {4, 3, 3, 3}, true, {1, 1}, {0, 0}, {1, 1}, 1},
    {"stride 2 padding 1", {1, 2, 6, 5}, {3, 2, 3, 3}, true, {2, 2}, {1, 1}, {1, 1}, 1},
    {"dilation and asymmetric padding",
     {1, 2, 7, 6},
     {2, 2, 3, 2},
     false,
     {1, 1},
     {2, 0},
     {2, 1},
     1},
    {"groups 2 with stride", {2, 4, 5, 5}, {6, 2, 3, 3}, true, {1, 2}, {1, 0}, {1, 1}, 2},
    {"depthwise", {1, 3, 4, 4}, {3, 1, 2, 2}, true, {1, 1}, {1, 1}, {1, 1}, 3},
    // Stride larger than the kernel: some inputs are read by no output and
    // must get a zero gradient.
    {"stride skips inputs", {1, 1, 7, 7}, {2, 1, 2, 2}, false, {3, 3}, {0, 0}, {1, 1}, 1},
    {"everything at once", {2, 4, 7, 6}, {4, 2, 2, 3}, true, {2, 1}, {1, 1}, {2, 2}, 2},
};

TEST(GradLinearAlgebra, Conv2dFiniteDifferences) {
  for (const ConvCase &c : kConvCases) {
    SCOPED_TRACE(c.name);
    std::vector<GradCheckOperand> operands{{f64(c.input)}, {f64(c.weight)}};
    if (c.bias)
      operands.push_back({f64({c.weight[0]})});
    EXPECT_TRUE(checkGradients("conv2d", operands, convAttrs(c)));
  }
}

TEST(GradLinearAlgebra, Conv2dGradInputHandComputed) {
  // 3x3 input, 2x2 kernel [[1, 2], [3, 4]], grad_output [[1, 2], [3, 4]]:
  // dx[i][j] = sum over outputs (oh, ow) of dy[oh][ow] * w[i - oh][j - ow].
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t).str());
    KernelRun run =
        runKernel("conv2d_grad_input", {TensorType(t, {1, 1, 2, 2}), TensorType(t, {1, 1, 2, 2})},
                  {{1, 2, 3, 4}, {1, 2, 3, 4}}, {{"input_shape", ints({1, 1, 3, 3})}});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_TRUE(allClose(run.outputs[0], {1, 4, 4, 6, 20, 16, 9, 24, 16}, 0));
  }
}

TEST(GradLinearAlgebra, Conv2dGradWeightHandComputed) {
  // Input 1..9 as 3x3, grad_output [[1, 2], [3, 4]]:
  // dw[r][s] = sum over outputs of dy[oh][ow] * x[oh + r][ow + s].
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t).str());
    KernelRun run = runKernel(
        "conv2d_grad_weight", {TensorType(t, {1, 1, 2, 2}), TensorType(t, {1, 1, 3, 3})},
        {{1, 2, 3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}, {{"weight_shape", ints({1, 1, 2, 2})}});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_TRUE(allClose(run.outputs[0], {37, 47, 67, 77}, 0));
  }
}

TEST(GradLinearAlgebra, Conv2dBackwardKernelsMatchF64) {
  for (const ConvCase &c : kConvCases) {
    SCOPED_TRACE(c.name);
    // The forward's output shape is the backward's grad_output shape.
    KernelRun forward = runKernel(
        "conv2d", {f64(c.input), f64(c.weight)},
        {randomValues(f64(c.input).numElements(), 1), randomValues(f64(c.weight).numElements(), 2)},
        convAttrs(c));
    ASSERT_TRUE(forward.ok) << forward.error;
    TensorType dy = forward.outputTypes[0];
    AttrMap inputAttrs = convAttrs(c), weightAttrs = convAttrs(c);
    inputAttrs["input_shape"] = ints(c.input);
    weightAttrs["weight_shape"] = ints(c.weight);
    std::vector<double> dyValues = randomValues(dy.numElements(), 3);
    for (DType t : kLowDTypes) {
      double tol = ampc::testing::defaultTolerance(t);
      EXPECT_TRUE(matchesF64("conv2d_grad_input", {dy, f64(c.weight)},
                             {dyValues, randomValues(f64(c.weight).numElements(), 4)}, inputAttrs,
                             t, tol));
      EXPECT_TRUE(matchesF64("conv2d_grad_weight", {dy, f64(c.input)},
                             {dyValues, randomValues(f64(c.input).numElements(), 5)}, weightAttrs,
                             t, tol));
    }
  }
}

TEST(GradLinearAlgebra, Conv2dBackwardRowsRejectMismatchedShapes) {
  KernelRun wrongInput =
      runKernel("conv2d_grad_input", {f64({1, 2, 3, 3}), f64({2, 1, 2, 2})},
                {randomValues(18, 1), randomValues(8, 2)}, {{"input_shape", ints({1, 1, 5, 5})}});
  EXPECT_FALSE(wrongInput.ok);
  EXPECT_NE(wrongInput.error.find("does not match the convolution output [1,2,4,4]"),
            std::string::npos)
      << wrongInput.error;
  KernelRun wrongGroups =
      runKernel("conv2d_grad_weight", {f64({1, 2, 3, 3}), f64({1, 3, 4, 4})},
                {randomValues(18, 1), randomValues(48, 2)},
                {{"weight_shape", ints({2, 1, 2, 2})}, {"groups", Attribute(2)}});
  EXPECT_FALSE(wrongGroups.ok);
  EXPECT_NE(wrongGroups.error.find("does not fit input"), std::string::npos) << wrongGroups.error;
}

// --- scaled_dot_product_attention ---------------------------------------------

TEST(GradLinearAlgebra, AttentionFiniteDifferences) {
  SCOPED_TRACE("plain, key length differs from query length");
  EXPECT_TRUE(checkGradients("scaled_dot_product_attention",
                             {{f64({2, 3, 4})}, {f64({2, 5, 4})}, {f64({2, 5, 3})}}));
}

TEST(GradLinearAlgebra, AttentionCausal) {
  EXPECT_TRUE(checkGradients("scaled_dot_product_attention",
                             {{f64({2, 4, 3})}, {f64({2, 4, 3})}, {f64({2, 4, 2})}},
                             {{"causal", Attribute(true)}}));
}

TEST(GradLinearAlgebra, AttentionExplicitScaleAndHeads) {
  EXPECT_TRUE(checkGradients("scaled_dot_product_attention",
                             {{f64({2, 2, 3, 4})}, {f64({2, 2, 3, 4})}, {f64({2, 2, 3, 2})}},
                             {{"scale", Attribute(0.7)}, {"causal", Attribute(true)}}));
  EXPECT_TRUE(checkGradients("scaled_dot_product_attention",
                             {{f64({3, 2})}, {f64({4, 2})}, {f64({4, 3})}},
                             {{"scale", Attribute(1.9)}}, {.lo = -2, .hi = 2}));
}

TEST(GradLinearAlgebra, AttentionInLayoutBshd) {
  // [batch, seq, heads, dim]: three heads, key length 5 against 4 queries,
  // and causal with equal lengths.
  EXPECT_TRUE(checkGradients("scaled_dot_product_attention",
                             {{f64({2, 4, 3, 2})}, {f64({2, 5, 3, 2})}, {f64({2, 5, 3, 3})}},
                             {{"layout", Attribute(std::string("bshd"))}}));
  EXPECT_TRUE(checkGradients("scaled_dot_product_attention",
                             {{f64({1, 4, 2, 3})}, {f64({1, 4, 2, 3})}, {f64({1, 4, 2, 2})}},
                             {{"layout", Attribute(std::string("bshd"))},
                              {"causal", Attribute(true)},
                              {"scale", Attribute(0.6)}}));
}

TEST(GradLinearAlgebra, AttentionOnlyValueDifferentiated) {
  GradCheckOperand q{f64({2, 3})}, k{f64({4, 3})};
  q.differentiate = k.differentiate = false;
  EXPECT_TRUE(checkGradients("scaled_dot_product_attention", {q, k, {f64({4, 2})}}));
}

TEST(GradLinearAlgebra, AttentionGradHandComputed) {
  // One query q = [0] against keys [1], [2] (head size 1, scale 1): the
  // scores are equal, p = [0.5, 0.5]. With values [1], [3] and grad_output
  // [1]: dv = p * do = [0.5, 0.5]; dp = [1, 3], sum p dp = 2,
  // ds = p (dp - 2) = [-0.5, 0.5]; dq = sum ds k = 0.5; dk = ds q = 0.
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t).str());
    KernelRun run = runKernel("scaled_dot_product_attention_grad",
                              {TensorType(t, {1, 1}), TensorType(t, {1, 1}), TensorType(t, {2, 1}),
                               TensorType(t, {2, 1})},
                              {{1}, {0}, {1, 2}, {1, 3}});
    ASSERT_TRUE(run.ok) << run.error;
    ASSERT_EQ(run.outputs.size(), 3u);
    EXPECT_TRUE(allClose(run.outputs[0], {0.5}, 1e-6));
    EXPECT_TRUE(allClose(run.outputs[1], {0, 0}, 1e-6));
    EXPECT_TRUE(allClose(run.outputs[2], {0.5, 0.5}, 1e-6));
  }
}

TEST(GradLinearAlgebra, AttentionGradKernelMatchesF64) {
  struct Case {
    std::vector<int64_t> q, k, v;
    AttrMap attrs;
  };
  const Case cases[] = {
      {{2, 3, 4}, {2, 5, 4}, {2, 5, 3}, {}},
      {{2, 4, 3}, {2, 4, 3}, {2, 4, 2}, {{"causal", Attribute(true)}}},
      {{2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 2}, {{"scale", Attribute(0.5)}}},
  };
  for (const Case &c : cases) {
    std::vector<int64_t> out = c.q;
    out.back() = c.v.back();
    std::vector<TensorType> types{f64(out), f64(c.q), f64(c.k), f64(c.v)};
    std::vector<std::vector<double>> values;
    for (size_t i = 0; i < types.size(); ++i)
      values.push_back(randomValues(types[i].numElements(), 10 + i));
    for (DType t : kLowDTypes)
      EXPECT_TRUE(matchesF64("scaled_dot_product_attention_grad", types, values, c.attrs, t,
                             ampc::testing::defaultTolerance(t)));
  }
}

// --- frozen parameters ------------------------------------------------------------

TEST(GradLinearAlgebra, FrozenConvWeightGetsNoGradient) {
  Graph g("frozen");
  DiagnosticEngine diag;
  Value *x = g.addInput("x", f64({1, 2, 4, 4}));
  Value *w = g.addState("w", f64({3, 2, 3, 3}), StateKind::Parameter);
  Value *b = g.addState("b", f64({3}), StateKind::Parameter);
  w->setTrainable(false);
  const OpRegistry &reg = OpRegistry::builtin();
  Node *conv = buildNode(g, reg.get(OpKind::Conv2d), {x, w, b}, {}, Location(), diag);
  ASSERT_TRUE(conv);
  Node *loss = buildNode(g, reg.get(OpKind::ReduceSum), {conv->result()}, {}, Location(), diag);
  ASSERT_TRUE(loss);
  loss->setRole(NodeRole::Loss);
  PassContext ctx{diag};
  AutodiffPass autodiff;
  ASSERT_NE(autodiff.run(g, ctx), PassResult::Failed);
  EXPECT_TRUE(g.lookup(gradientName("b")));
  EXPECT_FALSE(g.lookup(gradientName("w")));
  // Neither the frozen weight nor the data input needs a backward convolution.
  for (const Node &n : g.nodes()) {
    EXPECT_NE(n.kind(), OpKind::Conv2dGradWeight);
    EXPECT_NE(n.kind(), OpKind::Conv2dGradInput);
  }
}

} // namespace
