//===- GradNormalizationTest.cpp - Gradients of batchnorm2d and layernorm --===//
//
// Finite-difference checks (f64): batchnorm2d in training mode (through the
// batch statistics) and eval mode (running statistics are constants),
// layernorm over one to three normalized dims, with and without a learned
// affine. The running statistics are buffers: neither they nor the new
// statistics the training forward returns are on any gradient path. Then
// hand-computed and f32/f16/bf16 vs f64 checks of the backward kernels.
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
using ampc::testing::checkGraphGradients;
using ampc::testing::defaultTolerance;
using ampc::testing::GradCheckOperand;
using ampc::testing::KernelRun;
using ampc::testing::matchesF64;
using ampc::testing::randomValues;
using ampc::testing::roundedTo;
using ampc::testing::runKernel;

TensorType f64(std::vector<int64_t> dims) { return TensorType(DType::F64, dims); }

constexpr DType kLowDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr DType kAllFloatDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

InitSpec initOf(InitSpec::Kind kind, double a = 0, double b = 0) {
  InitSpec init;
  init.kind = kind;
  init.a = a;
  init.b = b;
  return init;
}

/// Running statistics of `channels` channels: inputs, not differentiated
/// (the variance positive).
std::vector<GradCheckOperand> runningStats(int64_t channels) {
  return {GradCheckOperand(f64({channels}), randomValues(channels, 21, -0.5, 0.5), false),
          GradCheckOperand(f64({channels}), randomValues(channels, 22, 0.5, 1.5), false)};
}

std::vector<GradCheckOperand> batchNormOperands(std::vector<int64_t> input) {
  int64_t channels = input[1];
  std::vector<GradCheckOperand> ops{{f64(input)}, {f64({channels})}, {f64({channels})}};
  for (GradCheckOperand &s : runningStats(channels))
    ops.push_back(std::move(s));
  return ops;
}

// --- finite differences: batchnorm2d --------------------------------------------

TEST(GradNormalization, BatchNorm2dTraining) {
  for (double eps : {1e-5, 0.1}) {
    SCOPED_TRACE("eps " + std::to_string(eps));
    AttrMap attrs{{"training", Attribute(true)}, {"eps", Attribute(eps)}};
    EXPECT_TRUE(checkGradients("batchnorm2d", batchNormOperands({2, 3, 2, 2}), attrs));
    EXPECT_TRUE(checkGradients("batchnorm2d", batchNormOperands({3, 2, 1, 3}), attrs,
                               {.seed = 5, .lo = -2, .hi = 2}));
  }
}

TEST(GradNormalization, BatchNorm2dTrainingFrozenAffine) {
  std::vector<GradCheckOperand> ops = batchNormOperands({2, 2, 3, 2});
  ops[1].differentiate = false;
  EXPECT_TRUE(checkGradients("batchnorm2d", ops));
  ops = batchNormOperands({2, 2, 3, 2});
  ops[0].differentiate = false;
  EXPECT_TRUE(checkGradients("batchnorm2d", ops));
}

TEST(GradNormalization, BatchNorm2dEval) {
  for (double eps : {1e-5, 0.25}) {
    SCOPED_TRACE("eps " + std::to_string(eps));
    AttrMap attrs{{"training", Attribute(false)}, {"eps", Attribute(eps)}};
    EXPECT_TRUE(checkGradients("batchnorm2d", batchNormOperands({2, 3, 2, 2}), attrs));
  }
}

/// x -> batchnorm2d (training) -> sum(y * r) as the loss, with the new
/// running statistics written back as state updates (as the YAML frontend
/// builds a training graph).
struct BatchNormGraph {
  Graph g{"bn"};
  Node *bn = nullptr;
  Value *x = nullptr, *w = nullptr, *b = nullptr, *mean = nullptr, *var = nullptr;

  explicit BatchNormGraph(bool lossFromRunningMean) {
    DiagnosticEngine diag;
    const OpRegistry &reg = OpRegistry::builtin();
    x = g.addState("x", f64({2, 2, 2, 2}), StateKind::Parameter);
    w = g.addState("w", f64({2}), StateKind::Parameter, initOf(InitSpec::Kind::Uniform, 0.5, 1.5));
    b = g.addState("b", f64({2}), StateKind::Parameter, initOf(InitSpec::Kind::Uniform, -1, 1));
    mean = g.addState("mean", f64({2}), StateKind::Buffer, initOf(InitSpec::Kind::Zeros));
    var = g.addState("var", f64({2}), StateKind::Buffer, initOf(InitSpec::Kind::Ones));
    x->setInit(initOf(InitSpec::Kind::Uniform, -1, 1));
    bn = buildNode(g, reg.get(OpKind::BatchNorm2d), {x, w, b, mean, var},
                   {{"training", Attribute(true)}}, Location(), diag);
    EXPECT_TRUE(bn);
    g.addStateUpdate(mean, bn->result(1));
    g.addStateUpdate(var, bn->result(2));
    Value *scored = lossFromRunningMean ? bn->result(1) : bn->result(0);
    Value *r = g.addInput("r", scored->type());
    Node *prod = buildNode(g, reg.get(OpKind::Mul), {scored, r}, {}, Location(), diag);
    Node *loss = buildNode(g, reg.get(OpKind::ReduceSum), {prod->result()}, {}, Location(), diag);
    loss->setRole(NodeRole::Loss);
  }
};

TEST(GradNormalization, BatchNorm2dRunningStatisticsAreOffTheGradientPath) {
  BatchNormGraph graph(/*lossFromRunningMean=*/false);
  // The state updates run after every step; the gradients are unaffected.
  EXPECT_TRUE(checkGraphGradients(graph.g));
  for (unsigned r : {1u, 2u})
    for (const Use &u : graph.bn->result(r)->uses())
      ADD_FAILURE() << "a node reads new running statistic " << r << ": " << u.user->opName().str();
  EXPECT_FALSE(graph.g.lookup(gradientName("mean")));
  EXPECT_FALSE(graph.g.lookup(gradientName("var")));
  unsigned bnGrads = 0;
  for (const Node &n : graph.g.nodes())
    if (n.kind() == OpKind::BatchNorm2dGrad) {
      ++bnGrads;
      EXPECT_EQ(n.attr("training"), Attribute(true));
    }
  EXPECT_EQ(bnGrads, 1u);
}

TEST(GradNormalization, BatchNorm2dNewRunningStatisticsAreNotDifferentiated) {
  // A loss that reads only the new running mean: as in PyTorch, the
  // statistics update is not differentiated, so no parameter gets a gradient
  // and autodiff says so instead of producing a training step that trains
  // nothing.
  BatchNormGraph graph(/*lossFromRunningMean=*/true);
  DiagnosticEngine diag;
  PassContext ctx{diag};
  AutodiffPass autodiff;
  EXPECT_EQ(autodiff.run(graph.g, ctx), PassResult::Failed);
  ASSERT_EQ(diag.diagnostics().size(), 1u);
  EXPECT_NE(diag.diagnostics()[0].message.find("no trainable parameter receives a gradient"),
            std::string::npos)
      << diag.diagnostics()[0].message;
  for (const char *p : {"x", "w", "b"})
    EXPECT_FALSE(graph.g.lookup(gradientName(p))) << p;
}

// --- finite differences: layernorm -------------------------------------------------

TEST(GradNormalization, LayerNormWithAffine) {
  struct Case {
    std::vector<int64_t> input;
    int64_t normalizedDims;
  };
  const Case cases[] = {{{2, 3, 4}, 1}, {{2, 3, 4}, 2}, {{2, 2, 3}, 3}, {{5}, 1}};
  for (const Case &c : cases)
    for (double eps : {1e-5, 0.5}) {
      SCOPED_TRACE("normalized_dims " + std::to_string(c.normalizedDims) + " eps " +
                   std::to_string(eps));
      std::vector<int64_t> normalized(c.input.end() - c.normalizedDims, c.input.end());
      EXPECT_TRUE(checkGradients(
          "layernorm", {{f64(c.input)}, {f64(normalized)}, {f64(normalized)}},
          {{"normalized_dims", Attribute(c.normalizedDims)}, {"eps", Attribute(eps)}}));
    }
}

TEST(GradNormalization, LayerNormWithoutAffine) {
  // PyTorch's elementwise_affine=False: weight ones and bias zeros, constants.
  GradCheckOperand weight{f64({4}), std::vector<double>(4, 1.0), false};
  GradCheckOperand bias{f64({4}), std::vector<double>(4, 0.0), false};
  EXPECT_TRUE(checkGradients("layernorm", {{f64({3, 4})}, weight, bias}));
  GradCheckOperand weight2{f64({2, 3}), std::vector<double>(6, 1.0), false};
  GradCheckOperand bias2{f64({2, 3}), std::vector<double>(6, 0.0), false};
  EXPECT_TRUE(checkGradients("layernorm", {{f64({2, 2, 3})}, weight2, bias2},
                             {{"normalized_dims", Attribute(2)}}));
}

TEST(GradNormalization, LayerNormOnlyAffineDifferentiated) {
  GradCheckOperand input{f64({3, 5})};
  input.differentiate = false;
  EXPECT_TRUE(checkGradients("layernorm", {input, {f64({5})}, {f64({5})}}));
}

// --- hand-computed backward kernels ------------------------------------------------

TEST(GradNormalization, BackwardKernelsHandComputed) {
  for (DType t : kAllFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    // One group x = [-1, 0, 0, 1]: mean 0, biased variance 0.5, eps 0.5 ->
    // invStdDev 1 and xhat = x. dy = [1, 2, 3, 4], weight 1: mean(dy) = 2.5,
    // mean(dy xhat) = 0.75, dx = dy - 2.5 - 0.75 xhat.
    TensorType x(t, {1, 1, 2, 2}), param(t, {1});
    std::vector<double> xv{-1, 0, 0, 1}, dy{1, 2, 3, 4};
    KernelRun training =
        runKernel("batchnorm2d_grad", {x, x, param, param, param}, {dy, xv, {1}, {7}, {7}},
                  {{"eps", Attribute(0.5)}, {"training", Attribute(true)}});
    ASSERT_TRUE(training.ok) << training.error;
    EXPECT_TRUE(allClose(training.outputs[0], {-0.75, -0.5, 0.5, 0.75}, 0));
    EXPECT_TRUE(allClose(training.outputs[1], {3}, 0));
    EXPECT_TRUE(allClose(training.outputs[2], {10}, 0));
    // Eval: running mean 1, variance 3, eps 1 -> invStdDev 0.5; weight 2:
    // dx = 2 * 0.5 * dy = dy; xhat = (x - 1) / 2 = [-1, -0.5, -0.5, 0].
    KernelRun eval =
        runKernel("batchnorm2d_grad", {x, x, param, param, param}, {dy, xv, {2}, {1}, {3}},
                  {{"eps", Attribute(1.0)}, {"training", Attribute(false)}});
    ASSERT_TRUE(eval.ok) << eval.error;
    EXPECT_TRUE(allClose(eval.outputs[0], {1, 2, 3, 4}, 0));
    EXPECT_TRUE(allClose(eval.outputs[1], {-3.5}, 0)); // sum dy xhat
    EXPECT_TRUE(allClose(eval.outputs[2], {10}, 0));
    // layernorm over the same four values as one row.
    TensorType row(t, {1, 4}), weight(t, {4});
    KernelRun layer = runKernel("layernorm_grad", {row, row, weight}, {dy, xv, {1, 1, 1, 1}},
                                {{"eps", Attribute(0.5)}});
    ASSERT_TRUE(layer.ok) << layer.error;
    EXPECT_TRUE(allClose(layer.outputs[0], {-0.75, -0.5, 0.5, 0.75}, 0));
    EXPECT_TRUE(allClose(layer.outputs[1], {-1, 0, 0, 4}, 0));
    EXPECT_TRUE(allClose(layer.outputs[2], {1, 2, 3, 4}, 0));
  }
}

// --- low precision against f64 ---------------------------------------------------

TEST(GradNormalization, BatchNorm2dGradMatchesF64) {
  TensorType x = f64({3, 4, 3, 2}), param = f64({4});
  std::vector<std::vector<double>> values{
      randomValues(72, 1, -2, 2), randomValues(72, 2, -2, 2), randomValues(4, 3, 0.5, 1.5),
      randomValues(4, 4, -0.5, 0.5), randomValues(4, 5, 0.5, 1.5)};
  for (bool training : {true, false})
    for (DType t : kLowDTypes) {
      SCOPED_TRACE("training " + std::to_string(training));
      EXPECT_TRUE(matchesF64("batchnorm2d_grad", {x, x, param, param, param}, values,
                             {{"training", Attribute(training)}}, t, defaultTolerance(t)));
    }
}

TEST(GradNormalization, BatchNorm2dGradHalfInputWithF32Statistics) {
  // keep_batchnorm_fp32: a half input with f32 weight and statistics; the
  // f64 run on the same (rounded) values is the reference.
  TensorType x = f64({2, 3, 2, 2}), param = f64({3});
  std::vector<double> dy = randomValues(24, 6, -2, 2), xv = randomValues(24, 7, -2, 2);
  std::vector<double> w = randomValues(3, 8, 0.5, 1.5), mean = randomValues(3, 9, -0.5, 0.5),
                      var = randomValues(3, 10, 0.5, 1.5);
  for (DType half : {DType::F16, DType::BF16})
    for (bool training : {true, false}) {
      SCOPED_TRACE(dtypeName(half).str() + " training " + std::to_string(training));
      std::vector<double> dyHalf = roundedTo(half, dy), xHalf = roundedTo(half, xv);
      std::vector<double> w32 = roundedTo(DType::F32, w), mean32 = roundedTo(DType::F32, mean),
                          var32 = roundedTo(DType::F32, var);
      AttrMap attrs{{"training", Attribute(training)}};
      TensorType halfX = x.withDType(half), f32Param = param.withDType(DType::F32);
      KernelRun run = runKernel("batchnorm2d_grad", {halfX, halfX, f32Param, f32Param, f32Param},
                                {dyHalf, xHalf, w32, mean32, var32}, attrs);
      KernelRun exact = runKernel("batchnorm2d_grad", {x, x, param, param, param},
                                  {dyHalf, xHalf, w32, mean32, var32}, attrs);
      ASSERT_TRUE(run.ok && exact.ok) << run.error << exact.error;
      EXPECT_EQ(run.outputTypes[1].dtype(), DType::F32);
      for (size_t r = 0; r < 3; ++r)
        EXPECT_TRUE(
            allClose(run.outputs[r], exact.outputs[r], r == 0 ? defaultTolerance(half) : 1e-5))
            << "output " << r;
    }
}

TEST(GradNormalization, LayerNormGradMatchesF64) {
  struct Case {
    std::vector<int64_t> input;
    int64_t normalizedDims;
  };
  const Case cases[] = {{{4, 6}, 1}, {{2, 3, 5}, 2}};
  for (const Case &c : cases) {
    TensorType x = f64(c.input);
    std::vector<int64_t> normalized(c.input.end() - c.normalizedDims, c.input.end());
    TensorType w = f64(normalized);
    std::vector<std::vector<double>> values{randomValues(x.numElements(), 1, -2, 2),
                                            randomValues(x.numElements(), 2, -2, 2),
                                            randomValues(w.numElements(), 3, 0.5, 1.5)};
    for (DType t : kLowDTypes)
      EXPECT_TRUE(matchesF64("layernorm_grad", {x, x, w}, values,
                             {{"normalized_dims", Attribute(c.normalizedDims)}}, t,
                             defaultTolerance(t)));
  }
}

} // namespace
