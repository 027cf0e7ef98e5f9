//===- GradModelTest.cpp - Whole-model gradients against finite differences ===//
//
// Small f64 models written in textual IR, differentiated by the autodiff pass
// and run by the reference backend: every element of every parameter's
// gradient is compared with a central finite difference of the loss. These
// catch what single-op checks cannot: gradients accumulated across uses
// (tied weights, residual connections), multi-result ops inside a graph,
// integer inputs along the way, and the interplay of the rules' shapes.
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"

#include "ir/Parser.h"

namespace {

using namespace ampc;
using ampc::testing::checkGraphGradients;

std::unique_ptr<Graph> parse(llvm::StringRef text) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(text, "model.ir", diag);
  EXPECT_TRUE(g) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  if (g) {
    EXPECT_TRUE(verifyGraph(*g, diag))
        << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  }
  return g;
}

unsigned countParameters(const Graph &g) {
  unsigned n = 0;
  for (Value *p : g.state(StateKind::Parameter))
    n += p->trainable();
  return n;
}

TEST(GradModel, Mlp) {
  // linear -> relu -> linear -> mse_loss.
  auto g = parse(R"(graph @mlp {
  input %x : f64[4,6]
  input %target : f64[4,3]
  param %fc1.weight : f64[8,6] init uniform(-0.5, 0.5)
  param %fc1.bias : f64[8] init uniform(-0.5, 0.5)
  param %fc2.weight : f64[3,8] init uniform(-0.5, 0.5)
  param %fc2.bias : f64[3] init uniform(-0.5, 0.5)
  %fc1 = linear(%x, %fc1.weight, %fc1.bias) : (f64[4,6], f64[8,6], f64[8]) -> f64[4,8]
  %act = relu(%fc1) : (f64[4,8]) -> f64[4,8]
  %fc2 = linear(%act, %fc2.weight, %fc2.bias) : (f64[4,8], f64[3,8], f64[3]) -> f64[4,3]
  %loss = mse_loss(%fc2, %target) : (f64[4,3], f64[4,3]) -> f64[] role(loss)
  output %loss
}
)");
  ASSERT_TRUE(g);
  EXPECT_TRUE(checkGraphGradients(*g, {}, {}, "mlp"));
  EXPECT_EQ(countParameters(*g), 4u);
}

TEST(GradModel, ConvNet) {
  // conv2d -> batchnorm2d (training, running statistics updated) -> relu ->
  // maxpool2d -> flatten -> linear -> cross_entropy.
  auto g = parse(R"(graph @convnet {
  input %image : f64[2,2,6,6]
  input %label : i64[2]
  param %conv.weight : f64[3,2,3,3] init uniform(-0.4, 0.4)
  param %conv.bias : f64[3] init uniform(-0.4, 0.4)
  param %bn.weight : f64[3] init uniform(0.5, 1.5)
  param %bn.bias : f64[3] init uniform(-0.5, 0.5)
  buffer %bn.running_mean : f64[3] init zeros
  buffer %bn.running_var : f64[3] init ones
  param %fc.weight : f64[4,12] init uniform(-0.5, 0.5)
  param %fc.bias : f64[4] init uniform(-0.5, 0.5)
  %conv = conv2d(%image, %conv.weight, %conv.bias) {padding = [1, 1], stride = [1, 1]} : (f64[2,2,6,6], f64[3,2,3,3], f64[3]) -> f64[2,3,6,6]
  %bn, %bn.mean, %bn.var = batchnorm2d(%conv, %bn.weight, %bn.bias, %bn.running_mean, %bn.running_var) {training = true} : (f64[2,3,6,6], f64[3], f64[3], f64[3], f64[3]) -> (f64[2,3,6,6], f64[3], f64[3])
  %act = relu(%bn) : (f64[2,3,6,6]) -> f64[2,3,6,6]
  %pool = maxpool2d(%act) {kernel = [3, 3]} : (f64[2,3,6,6]) -> f64[2,3,2,2]
  %flat = flatten(%pool) : (f64[2,3,2,2]) -> f64[2,12]
  %fc = linear(%flat, %fc.weight, %fc.bias) : (f64[2,12], f64[4,12], f64[4]) -> f64[2,4]
  %loss = cross_entropy(%fc, %label) : (f64[2,4], i64[2]) -> f64[] role(loss)
  update %bn.running_mean = %bn.mean
  update %bn.running_var = %bn.var
  output %loss
}
)");
  ASSERT_TRUE(g);
  EXPECT_TRUE(checkGraphGradients(*g, {{"label", {3, 1}}}, {.lo = -2, .hi = 2}, "convnet"));
  EXPECT_EQ(countParameters(*g), 6u);
  EXPECT_FALSE(g->lookup("bn.running_mean.grad"));
}

TEST(GradModel, TransformerBlock) {
  // A pre-norm block with two heads and tied input/output embeddings:
  //   e = embedding(tokens); a = attention(layernorm(e)) (causal); r = e + dropout(a)
  //   r2 = r + linear(gelu(linear(layernorm(r)))); logits = linear(r2, embedding table)
  //   loss = cross_entropy(logits, labels) with one ignored label and smoothing.
  // The table is used twice (lookup and output projection), e and r twice
  // (residuals), and the layernorm output three times (q, k, v).
  auto g = parse(R"(graph @block {
  input %tokens : i64[2,3]
  input %labels : i64[6]
  param %embed : f64[5,4] init uniform(-1, 1)
  param %ln1.weight : f64[4] init uniform(0.5, 1.5)
  param %ln1.bias : f64[4] init uniform(-0.5, 0.5)
  param %wq : f64[4,4] init uniform(-0.7, 0.7)
  param %wk : f64[4,4] init uniform(-0.7, 0.7)
  param %wv : f64[4,4] init uniform(-0.7, 0.7)
  param %ln2.weight : f64[4] init uniform(0.5, 1.5)
  param %ln2.bias : f64[4] init uniform(-0.5, 0.5)
  param %ff1.weight : f64[8,4] init uniform(-0.5, 0.5)
  param %ff1.bias : f64[8] init uniform(-0.5, 0.5)
  param %ff2.weight : f64[4,8] init uniform(-0.5, 0.5)
  param %ff2.bias : f64[4] init uniform(-0.5, 0.5)
  %e = embedding(%tokens, %embed) : (i64[2,3], f64[5,4]) -> f64[2,3,4]
  %n1 = layernorm(%e, %ln1.weight, %ln1.bias) : (f64[2,3,4], f64[4], f64[4]) -> f64[2,3,4]
  %q = linear(%n1, %wq) : (f64[2,3,4], f64[4,4]) -> f64[2,3,4]
  %k = linear(%n1, %wk) : (f64[2,3,4], f64[4,4]) -> f64[2,3,4]
  %v = linear(%n1, %wv) : (f64[2,3,4], f64[4,4]) -> f64[2,3,4]
  %q4 = reshape(%q) {shape = [2, 3, 2, 2]} : (f64[2,3,4]) -> f64[2,3,2,2]
  %k4 = reshape(%k) {shape = [2, 3, 2, 2]} : (f64[2,3,4]) -> f64[2,3,2,2]
  %v4 = reshape(%v) {shape = [2, 3, 2, 2]} : (f64[2,3,4]) -> f64[2,3,2,2]
  %qh = permute(%q4) {dims = [0, 2, 1, 3]} : (f64[2,3,2,2]) -> f64[2,2,3,2]
  %kh = permute(%k4) {dims = [0, 2, 1, 3]} : (f64[2,3,2,2]) -> f64[2,2,3,2]
  %vh = permute(%v4) {dims = [0, 2, 1, 3]} : (f64[2,3,2,2]) -> f64[2,2,3,2]
  %att = scaled_dot_product_attention(%qh, %kh, %vh) {causal = true} : (f64[2,2,3,2], f64[2,2,3,2], f64[2,2,3,2]) -> f64[2,2,3,2]
  %att4 = permute(%att) {dims = [0, 2, 1, 3]} : (f64[2,2,3,2]) -> f64[2,3,2,2]
  %att3 = reshape(%att4) {shape = [2, 3, 4]} : (f64[2,3,2,2]) -> f64[2,3,4]
  %drop = dropout(%att3) {p = 0.25, seed = 3} : (f64[2,3,4]) -> f64[2,3,4]
  %r = add(%e, %drop) : (f64[2,3,4], f64[2,3,4]) -> f64[2,3,4]
  %n2 = layernorm(%r, %ln2.weight, %ln2.bias) : (f64[2,3,4], f64[4], f64[4]) -> f64[2,3,4]
  %ff1 = linear(%n2, %ff1.weight, %ff1.bias) : (f64[2,3,4], f64[8,4], f64[8]) -> f64[2,3,8]
  %gelu = gelu(%ff1) {approximate = "tanh"} : (f64[2,3,8]) -> f64[2,3,8]
  %ff2 = linear(%gelu, %ff2.weight, %ff2.bias) : (f64[2,3,8], f64[4,8], f64[4]) -> f64[2,3,4]
  %r2 = add(%r, %ff2) : (f64[2,3,4], f64[2,3,4]) -> f64[2,3,4]
  %logits = linear(%r2, %embed) : (f64[2,3,4], f64[5,4]) -> f64[2,3,5]
  %flat = reshape(%logits) {shape = [6, 5]} : (f64[2,3,5]) -> f64[6,5]
  %loss = cross_entropy(%flat, %labels) {ignore_index = -1, label_smoothing = 0.1} : (f64[6,5], i64[6]) -> f64[] role(loss)
  output %loss
}
)");
  ASSERT_TRUE(g);
  EXPECT_TRUE(checkGraphGradients(*g,
                                  {{"tokens", {0, 3, 3, 4, 1, 0}}, {"labels", {3, 3, -1, 2, 0, 4}}},
                                  {}, "transformer block"));
  EXPECT_EQ(countParameters(*g), 12u);
  // The tied table's two contributions are summed into one gradient.
  Value *grad = g->lookup("embed.grad");
  ASSERT_TRUE(grad && grad->isResult());
  EXPECT_EQ(grad->definingNode()->kind(), OpKind::Add);
}

} // namespace
