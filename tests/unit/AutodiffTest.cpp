//===- AutodiffTest.cpp - The autodiff pass's behaviour ------------------===//
//
// What the pass promises beyond each op's gradient rule (checked in the
// Grad*Test files): gradient naming and outputs, one accumulated gradient per
// parameter however often it is used, frozen parameters and the backward
// work only they would need pruned, and clear errors for graphs it cannot
// differentiate.
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"

#include "ir/Parser.h"
#include "ir/Printer.h"

#include <set>
#include <string>

namespace {

using namespace ampc;
using ampc::testing::checkGraphGradients;

std::unique_ptr<Graph> parse(llvm::StringRef text) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(text, "test.ir", diag);
  EXPECT_TRUE(g) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  if (g) {
    EXPECT_TRUE(verifyGraph(*g, diag))
        << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  }
  return g;
}

/// Runs autodiff; on failure returns the first error's message.
std::string runAutodiff(Graph &g, PassResult *result = nullptr) {
  DiagnosticEngine diag;
  PassContext ctx{diag};
  AutodiffPass autodiff;
  PassResult r = autodiff.run(g, ctx);
  if (result)
    *result = r;
  for (const Diagnostic &d : diag.diagnostics())
    if (d.severity == Severity::Error)
      return d.message;
  return r == PassResult::Failed ? "failed without an error" : "";
}

unsigned countBackward(const Graph &g, std::optional<OpKind> kind = std::nullopt) {
  unsigned n = 0;
  for (const Node &node : g.nodes())
    n += node.role() == NodeRole::Backward && (!kind || node.kind() == *kind);
  return n;
}

/// x -> linear(w1, b1) -> relu -> linear(w2, b2) -> mse_loss against t.
/// `w1Attrs` / `b1Attrs` go after the parameter's type (e.g. "frozen").
std::string mlp(const std::string &w1Attrs = "", const std::string &b1Attrs = "") {
  return R"(graph @mlp {
  input %x : f64[4,3]
  input %t : f64[4,2]
  param %w1 : f64[5,3] init uniform(-1, 1) )" +
         w1Attrs + R"(
  param %b1 : f64[5] init uniform(-1, 1) )" +
         b1Attrs + R"(
  param %w2 : f64[2,5] init uniform(-1, 1)
  param %b2 : f64[2] init uniform(-1, 1)
  %h = linear(%x, %w1, %b1) : (f64[4,3], f64[5,3], f64[5]) -> f64[4,5]
  %a = relu(%h) : (f64[4,5]) -> f64[4,5]
  %y = linear(%a, %w2, %b2) : (f64[4,5], f64[2,5], f64[2]) -> f64[4,2]
  %loss = mse_loss(%y, %t) : (f64[4,2], f64[4,2]) -> f64[] role(loss)
  output %loss
}
)";
}

TEST(Autodiff, GradientsAreNamedAfterParametersAndOutput) {
  auto g = parse(mlp());
  ASSERT_TRUE(g);
  size_t forwardOutputs = g->outputs().size();
  ASSERT_EQ(runAutodiff(*g), "");
  for (const char *p : {"w1", "b1", "w2", "b2"}) {
    SCOPED_TRACE(p);
    Value *param = g->lookup(p);
    Value *grad = g->lookup(std::string(p) + ".grad");
    ASSERT_TRUE(grad);
    EXPECT_EQ(gradientName(p), std::string(p) + ".grad");
    EXPECT_EQ(grad->type(), param->type());
    ASSERT_TRUE(grad->isResult());
    EXPECT_EQ(grad->definingNode()->role(), NodeRole::Backward);
    EXPECT_TRUE(llvm::is_contained(g->outputs(), grad));
  }
  // The forward outputs stay first; one output per parameter is added.
  ASSERT_EQ(g->outputs().size(), forwardOutputs + 4);
  EXPECT_EQ(g->outputs()[0], g->lookup("loss"));
  // The seed d loss / d loss = 1 is named after the loss.
  Value *seed = g->lookup("loss.grad");
  ASSERT_TRUE(seed && seed->isResult());
  EXPECT_EQ(seed->definingNode()->kind(), OpKind::Fill);
  EXPECT_EQ(seed->definingNode()->attr("value"), Attribute(1.0));
  EXPECT_EQ(seed->type(), TensorType(DType::F64, {}));
  // Inputs get no gradient.
  EXPECT_FALSE(g->lookup("x.grad"));
  EXPECT_FALSE(g->lookup("t.grad"));
  DiagnosticEngine diag;
  EXPECT_TRUE(verifyGraph(*g, diag));
}

TEST(Autodiff, MlpGradientsMatchFiniteDifferences) {
  auto g = parse(mlp());
  ASSERT_TRUE(g);
  EXPECT_TRUE(checkGraphGradients(*g, {}, {}, "mlp"));
}

TEST(Autodiff, ParameterUsedManyTimesGetsOneAccumulatedGradient) {
  // loss = sum(p * p + p * q + p): p is read by four operands of three nodes.
  auto g = parse(R"(graph @reuse {
  param %p : f64[2,3] init uniform(-1, 1)
  param %q : f64[3] init uniform(-1, 1)
  %sq = mul(%p, %p) : (f64[2,3], f64[2,3]) -> f64[2,3]
  %pq = mul(%p, %q) : (f64[2,3], f64[3]) -> f64[2,3]
  %s1 = add(%sq, %pq) : (f64[2,3], f64[2,3]) -> f64[2,3]
  %s2 = add(%s1, %p) : (f64[2,3], f64[2,3]) -> f64[2,3]
  %loss = reduce_sum(%s2) : (f64[2,3]) -> f64[] role(loss)
  output %loss
}
)");
  ASSERT_TRUE(g);
  EXPECT_TRUE(checkGraphGradients(*g, {}, {}, "reuse"));
  unsigned named = 0, outputs = 0;
  for (const Node &n : g->nodes())
    for (Value *r : n.results())
      named += llvm::StringRef(r->name()).startswith("p.grad");
  for (Value *v : g->outputs())
    outputs += llvm::StringRef(v->name()).startswith("p.grad");
  EXPECT_EQ(named, 1u);
  EXPECT_EQ(outputs, 1u);
  // d/dp = 2p + q + 1: the four contributions are summed by three adds.
  Value *grad = g->lookup("p.grad");
  ASSERT_TRUE(grad && grad->isResult());
  EXPECT_EQ(grad->definingNode()->kind(), OpKind::Add);
}

TEST(Autodiff, FrozenParameterGetsNoGradientAndNoBackwardWork) {
  // w1 frozen: b1 still needs the gradient through relu and linear 2's input,
  // but nothing computes d/d w1 (a matmul reading x).
  auto g = parse(mlp("frozen"));
  ASSERT_TRUE(g);
  ASSERT_FALSE(g->lookup("w1")->trainable());
  EXPECT_TRUE(checkGraphGradients(*g, {}, {}, "mlp, w1 frozen"));
  EXPECT_FALSE(g->lookup("w1.grad"));
  EXPECT_TRUE(g->lookup("b1.grad"));
  EXPECT_EQ(g->lookup("x")->uses().size(), 1u) << "only the forward linear reads x";
  // fill (seed), mse_loss_grad, d w2 and d a (matmuls), d b2 and d b1
  // (reduce_sums), relu_grad.
  EXPECT_EQ(countBackward(*g), 7u);
  EXPECT_EQ(countBackward(*g, OpKind::MatMul), 2u);
  EXPECT_EQ(countBackward(*g, OpKind::ReluGrad), 1u);
}

TEST(Autodiff, FrozenFirstLayerPrunesEverythingBelowTheSecond) {
  // w1 and b1 frozen: relu's input depends on no trainable parameter, so
  // neither relu_grad nor linear 2's input gradient (dy w2) is built.
  auto g = parse(mlp("frozen", "frozen"));
  ASSERT_TRUE(g);
  EXPECT_TRUE(checkGraphGradients(*g, {}, {}, "mlp, layer 1 frozen"));
  EXPECT_FALSE(g->lookup("w1.grad"));
  EXPECT_FALSE(g->lookup("b1.grad"));
  // fill, mse_loss_grad, d w2 (matmul), d b2 (reduce_sum).
  EXPECT_EQ(countBackward(*g), 4u);
  EXPECT_EQ(countBackward(*g, OpKind::ReluGrad), 0u);
  EXPECT_EQ(g->lookup("w2")->uses().size(), 1u) << "only the forward linear reads w2";
  EXPECT_EQ(g->lookup("a")->uses().size(), 2u) << "the forward linear and d w2";
}

TEST(Autodiff, BufferGetsNoGradient) {
  auto g = parse(R"(graph @buffer {
  param %w : f64[3] init uniform(-1, 1)
  buffer %s : f64[3] init ones
  %y = mul(%w, %s) : (f64[3], f64[3]) -> f64[3]
  %loss = reduce_sum(%y) : (f64[3]) -> f64[] role(loss)
  output %loss
}
)");
  ASSERT_TRUE(g);
  EXPECT_TRUE(checkGraphGradients(*g));
  EXPECT_FALSE(g->lookup("s.grad"));
  // Only d w = dy * s: one mul, no d s = dy * w.
  EXPECT_EQ(countBackward(*g, OpKind::Mul), 1u);
}

TEST(Autodiff, GraphWithoutLossIsRefused) {
  auto g = parse(R"(graph @noloss {
  param %w : f64[3] init ones
  %y = relu(%w) : (f64[3]) -> f64[3]
  output %y
}
)");
  ASSERT_TRUE(g);
  PassResult result;
  EXPECT_EQ(runAutodiff(*g, &result), "autodiff: the graph has no loss (a node with role loss)");
  EXPECT_EQ(result, PassResult::Failed);
  EXPECT_EQ(g->numNodes(), 1u);
}

TEST(Autodiff, RunningTwiceIsRefused) {
  auto g = parse(mlp());
  ASSERT_TRUE(g);
  ASSERT_EQ(runAutodiff(*g), "");
  size_t nodes = g->numNodes(), outputs = g->outputs().size();
  PassResult result;
  EXPECT_EQ(runAutodiff(*g, &result), "autodiff: the graph already has a backward pass");
  EXPECT_EQ(result, PassResult::Failed);
  EXPECT_EQ(g->numNodes(), nodes);
  EXPECT_EQ(g->outputs().size(), outputs);
}

TEST(Autodiff, NonScalarLossIsRefused) {
  auto g = parse(R"(graph @vectorloss {
  param %w : f64[3] init ones
  %loss = relu(%w) : (f64[3]) -> f64[3] role(loss)
  output %loss
}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(runAutodiff(*g), "autodiff: the loss must be a scalar, got f64[3]");
}

TEST(Autodiff, LossWithoutTrainableParameterIsRefused) {
  auto g = parse(R"(graph @frozen {
  input %x : f64[3]
  param %w : f64[3] frozen init ones
  %y = mul(%x, %w) : (f64[3], f64[3]) -> f64[3]
  %loss = reduce_sum(%y) : (f64[3]) -> f64[] role(loss)
  output %loss
}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(runAutodiff(*g), "autodiff: the loss does not depend on any trainable parameter");
}

TEST(Autodiff, OpWithoutGradientRuleIsReported) {
  // relu_grad is a backward op with no gradient rule of its own.
  auto g = parse(R"(graph @relu_grad {
  param %w : f64[4] init ones
  param %x : f64[4] init ones
  %s = relu_grad(%w, %x) : (f64[4], f64[4]) -> f64[4]
  %loss = reduce_sum(%s) : (f64[4]) -> f64[] role(loss)
  output %loss
}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(runAutodiff(*g), "autodiff: relu_grad has no gradient rule");
}

TEST(Autodiff, SliceSendsZerosOutsideItsRange) {
  // slice runs forward in imported models: the gradient fills the rest of
  // the input with zeros.
  auto g = parse(R"(graph @slice {
  param %w : f64[4] init ones
  %s = slice(%w) {axis = 0, start = 1, end = 3} : (f64[4]) -> f64[2]
  %loss = reduce_sum(%s) : (f64[2]) -> f64[] role(loss)
  output %loss
}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(runAutodiff(*g), "");
  std::string ir = printGraphToString(*g);
  EXPECT_NE(ir.find("fill()"), std::string::npos) << ir;
  EXPECT_NE(ir.find("concat("), std::string::npos) << ir;
}

TEST(Autodiff, EveryForwardOpHasAGradientRule) {
  // The ops autodiff may meet on a path from a parameter to the loss all
  // have a rule; the ones without are exactly the backward ops (not
  // differentiated again; conv2d_grad_input is differentiable, as ONNX
  // ConvTranspose lowers to it), fill (no operands), ops with bool or index
  // results and the optimizer ops. A new op must be put on one side.
  const std::set<std::string> withoutRule = {
      "fill",
      // Backward ops of activations, shape ops and losses.
      "relu_grad", "gelu_grad", "sigmoid_grad", "tanh_grad", "silu_grad", "softmax_grad",
      "log_softmax_grad", "clamp_grad", "sqrt_grad", "erf_grad", "pow_grad", "exp_grad",
      "embedding_grad", "mse_loss_grad", "cross_entropy_grad", "binary_cross_entropy_grad_input",
      "binary_cross_entropy_grad_target",
      // Backward ops of linear algebra, pooling and normalization.
      "conv2d_grad_weight", "scaled_dot_product_attention_grad", "maxpool2d_grad", "avgpool2d_grad",
      "global_avgpool_grad", "batchnorm2d_grad", "layernorm_grad", "reduce_select_grad",
      // Not differentiable: bool and index results.
      "compare", "logical", "logical_not", "argmax",
      // Backward ops of ONNX's other activations and unary math, prelu, max
      // and min.
      "hardsigmoid_grad", "hardswish_grad", "leaky_relu_grad", "elu_grad", "softplus_grad",
      "abs_grad", "log_grad", "reciprocal_grad", "prelu_derivative", "prelu_grad_slope",
      "greater_share", "power_grad_base", "power_grad_exponent", "mod_grad_divisor",
      "fmod_grad_divisor",
      // Backward ops of padding and resizing.
      "pad_grad", "resize_grad",
      // Optimizer ops.
      "learning_rate", "step_counter", "turn_skip", "accumulate_grad", "global_norm",
      "clip_coefficient", "sgd_update", "sgd_momentum_update", "adam_update", "lamb_update",
      "ema_update",
      // Loss-scaling ops.
      "unscale_check", "update_loss_scale"};
  std::set<std::string> seenWithoutRule;
  for (const OpInfo *op : OpRegistry::builtin().all()) {
    if (op->kind == OpKind::Custom)
      continue;
    if (!op->gradient) {
      seenWithoutRule.insert(op->name);
      EXPECT_TRUE(withoutRule.count(op->name)) << op->name << " has no gradient rule";
    } else {
      EXPECT_FALSE(withoutRule.count(op->name)) << op->name << " is listed but has a rule";
    }
  }
  EXPECT_EQ(seenWithoutRule, withoutRule);
}

} // namespace
