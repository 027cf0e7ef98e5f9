//===- GradLossTest.cpp - Gradients of mse_loss, cross_entropy, bce --------===//
//
// Finite-difference checks (f64) of every loss's gradient rule: mse_loss and
// binary_cross_entropy in both operands, cross_entropy with ignore_index and
// label smoothing (labels are integral and get no gradient);
// hand-computed backward kernels; f32/f16/bf16 vs f64 comparisons of each.
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"
#include "KernelTestUtil.h"

#include <cmath>
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
using ampc::testing::runKernel;

TensorType f64(std::vector<int64_t> dims) { return TensorType(DType::F64, dims); }

constexpr DType kLowDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr DType kAllFloatDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

GradCheckOperand labels(DType t, std::vector<double> values) {
  return GradCheckOperand(TensorType(t, {static_cast<int64_t>(values.size())}), values);
}

// --- finite differences ---------------------------------------------------------

TEST(GradLoss, MseLossBothOperands) {
  EXPECT_TRUE(checkGradients("mse_loss", {{f64({4, 3})}, {f64({4, 3})}}));
  EXPECT_TRUE(checkGradients("mse_loss", {{f64({5})}, {f64({5})}}, {}, {.seed = 4}));
  EXPECT_TRUE(checkGradients("mse_loss", {{f64({})}, {f64({})}}));
}

TEST(GradLoss, MseLossOneOperandFrozen) {
  GradCheckOperand frozen{f64({2, 3})};
  frozen.differentiate = false;
  EXPECT_TRUE(checkGradients("mse_loss", {{f64({2, 3})}, frozen}));
  EXPECT_TRUE(checkGradients("mse_loss", {frozen, {f64({2, 3})}}));
}

TEST(GradLoss, CrossEntropyPlain) {
  EXPECT_TRUE(checkGradients("cross_entropy", {{f64({4, 5})}, labels(DType::I64, {0, 4, 2, 2})}, {},
                             {.lo = -3, .hi = 3}));
  EXPECT_TRUE(checkGradients("cross_entropy", {{f64({3, 2})}, labels(DType::I32, {1, 0, 1})}));
  // One class: the loss is 0 whatever the logit, and so is the gradient.
  EXPECT_TRUE(checkGradients("cross_entropy", {{f64({1, 1})}, labels(DType::I64, {0})}, {},
                             {.allowZeroGradient = true}));
}

TEST(GradLoss, CrossEntropyIgnoreIndex) {
  // Rows labelled ignore_index contribute nothing and are not counted in the
  // mean: their logits get zero gradient, the others 1/3 each.
  EXPECT_TRUE(checkGradients("cross_entropy",
                             {{f64({5, 4})}, labels(DType::I64, {1, -100, 3, -100, 0})}, {},
                             {.lo = -2, .hi = 2}));
  EXPECT_TRUE(checkGradients("cross_entropy", {{f64({4, 3})}, labels(DType::I64, {2, 0, 1, 2})},
                             {{"ignore_index", Attribute(2)}}));
}

TEST(GradLoss, CrossEntropyLabelSmoothing) {
  for (double eps : {0.1, 0.5, 1.0}) {
    SCOPED_TRACE("label_smoothing " + std::to_string(eps));
    EXPECT_TRUE(checkGradients("cross_entropy", {{f64({4, 5})}, labels(DType::I64, {0, 4, 2, 1})},
                               {{"label_smoothing", Attribute(eps)}}, {.lo = -3, .hi = 3}));
  }
  // Both at once: ignored rows get no smoothing term either.
  EXPECT_TRUE(
      checkGradients("cross_entropy", {{f64({4, 3})}, labels(DType::I32, {0, 1, 1, 2})},
                     {{"label_smoothing", Attribute(0.2)}, {"ignore_index", Attribute(1)}}));
}

TEST(GradLoss, CrossEntropyLabelsGetNoGradient) {
  // The labels are a graph input here; what matters is that the rule builds
  // exactly one backward node reading them and no gradient path through them.
  Graph g("ce");
  DiagnosticEngine diag;
  const OpRegistry &reg = OpRegistry::builtin();
  Value *logits = g.addState("logits", f64({3, 4}), StateKind::Parameter);
  Value *target = g.addInput("target", TensorType(DType::I64, {3}));
  Node *ce = buildNode(g, reg.get(OpKind::CrossEntropy), {logits, target}, {}, Location(), diag);
  ASSERT_TRUE(ce);
  ce->setRole(NodeRole::Loss);
  EXPECT_TRUE(checkGraphGradients(g, {{"target", {3, 0, 1}}}));
  ASSERT_EQ(target->uses().size(), 2u);
  for (const Use &u : target->uses())
    EXPECT_TRUE(u.user == ce || u.user->kind() == OpKind::CrossEntropyGrad);
  EXPECT_FALSE(g.lookup(gradientName("target")));
}

TEST(GradLoss, BinaryCrossEntropyBothOperands) {
  // Probabilities kept inside (0, 1), away from the clamps; soft targets so
  // the target's gradient is exercised at many points.
  EXPECT_TRUE(checkGradients("binary_cross_entropy", {{f64({4, 3})}, {f64({4, 3})}}, {},
                             {.lo = 0.05, .hi = 0.95}));
  EXPECT_TRUE(checkGradients("binary_cross_entropy", {{f64({6})}, {f64({6})}}, {},
                             {.seed = 9, .lo = 0.2, .hi = 0.8}));
}

TEST(GradLoss, BinaryCrossEntropyHardTargets) {
  GradCheckOperand target{f64({6}), {0, 1, 1, 0, 1, 0}, false};
  EXPECT_TRUE(
      checkGradients("binary_cross_entropy", {{f64({6})}, target}, {}, {.lo = 0.1, .hi = 0.9}));
}

TEST(GradLoss, BinaryCrossEntropyOnlyTarget) {
  GradCheckOperand input{f64({2, 3})};
  input.differentiate = false;
  EXPECT_TRUE(
      checkGradients("binary_cross_entropy", {input, {f64({2, 3})}}, {}, {.lo = 0.1, .hi = 0.9}));
}

// --- hand-computed backward kernels ------------------------------------------------

TEST(GradLoss, BackwardKernelsHandComputed) {
  for (DType t : kAllFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    TensorType scalar(t, {}), two(t, {2});
    // mse: 2 (x - t) dy / n with n = 2, dy = 1.
    KernelRun mse = runKernel("mse_loss_grad", {scalar, two, two}, {{1}, {1, 2}, {0, 4}});
    ASSERT_TRUE(mse.ok) << mse.error;
    EXPECT_TRUE(allClose(mse.outputs[0], {1, -2}, 0));
    // bce input: (x - t) / (x (1 - x)) * dy / n; target: (log(1 - x) - log x) dy / n.
    KernelRun bceInput = runKernel("binary_cross_entropy_grad_input", {scalar, two, two},
                                   {{2}, {0.5, 0.25}, {1, 0}});
    ASSERT_TRUE(bceInput.ok) << bceInput.error;
    EXPECT_TRUE(allClose(bceInput.outputs[0], {-2, 4.0 / 3}, t == DType::BF16 ? 1e-2 : 1e-3));
    KernelRun bceTarget = runKernel("binary_cross_entropy_grad_target", {scalar, two, two},
                                    {{2}, {0.5, 0.25}, {1, 0}});
    ASSERT_TRUE(bceTarget.ok) << bceTarget.error;
    EXPECT_TRUE(allClose(bceTarget.outputs[0], {0, std::log(3.0)}, t == DType::BF16 ? 1e-2 : 1e-3));
    // cross-entropy of one row of equal logits, label 0: softmax [0.5, 0.5],
    // gradient [-0.5, 0.5]; with smoothing 0.2 the target is [0.9, 0.1].
    TensorType row(t, {1, 2});
    TensorType label(DType::I64, {1});
    KernelRun ce = runKernel("cross_entropy_grad", {scalar, row, label}, {{1}, {0, 0}, {0}});
    ASSERT_TRUE(ce.ok) << ce.error;
    EXPECT_TRUE(allClose(ce.outputs[0], {-0.5, 0.5}, 0));
    KernelRun smoothed = runKernel("cross_entropy_grad", {scalar, row, label}, {{1}, {0, 0}, {0}},
                                   {{"label_smoothing", Attribute(0.2)}});
    ASSERT_TRUE(smoothed.ok) << smoothed.error;
    EXPECT_TRUE(allClose(smoothed.outputs[0], {-0.4, 0.4}, t == DType::BF16 ? 4e-3 : 1e-3));
    // Two rows, the second ignored: it gets zeros, the first is divided by 1.
    KernelRun ignored = runKernel("cross_entropy_grad",
                                  {scalar, TensorType(t, {2, 2}), TensorType(DType::I64, {2})},
                                  {{1}, {0, 0, 5, -5}, {1, -100}});
    ASSERT_TRUE(ignored.ok) << ignored.error;
    EXPECT_TRUE(allClose(ignored.outputs[0], {0.5, -0.5, 0, 0}, 0));
  }
}

// --- low precision against f64 ---------------------------------------------------

TEST(GradLoss, BackwardKernelsMatchF64) {
  TensorType scalar = f64({}), x = f64({6, 5});
  std::vector<double> dy{0.75};
  std::vector<double> input = randomValues(30, 1, -2, 2), target = randomValues(30, 2, -2, 2);
  std::vector<double> probabilities = randomValues(30, 3, 0.05, 0.95);
  std::vector<double> softTargets = randomValues(30, 4, 0, 1);
  TensorType labelType(DType::I64, {6});
  std::vector<double> labelValues{0, 4, -100, 2, 2, 1};
  for (DType t : kLowDTypes) {
    double tol = defaultTolerance(t);
    EXPECT_TRUE(matchesF64("mse_loss_grad", {scalar, x, x}, {dy, input, target}, {}, t, tol));
    EXPECT_TRUE(matchesF64("binary_cross_entropy_grad_input", {scalar, x, x},
                           {dy, probabilities, softTargets}, {}, t, tol));
    EXPECT_TRUE(matchesF64("binary_cross_entropy_grad_target", {scalar, x, x},
                           {dy, probabilities, softTargets}, {}, t, tol));
    for (double eps : {0.0, 0.1}) {
      SCOPED_TRACE("label_smoothing " + std::to_string(eps));
      EXPECT_TRUE(matchesF64("cross_entropy_grad", {scalar, x, labelType}, {dy, input, labelValues},
                             {{"label_smoothing", Attribute(eps)}}, t, tol));
    }
  }
}

} // namespace
