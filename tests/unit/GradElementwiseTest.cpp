//===- GradElementwiseTest.cpp - Gradients of add, sub, mul, div, scale ----===//
//
// Finite-difference checks (f64) of the elementwise gradient rules (and
// max's and min's) with numpy broadcasting in either direction (each
// operand's gradient must be summed back to its own shape), scalars, one
// operand frozen, and the graph shape of the sums; max's and min's split
// ties. The rules build forward ops (mul, div, scale, reduce_sum, reshape)
// and greater_share, whose kernels the Ref*Test files cover.
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"

#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::checkGradients;
using ampc::testing::GradCheckOperand;

TensorType f64(std::vector<int64_t> dims) { return TensorType(DType::F64, dims); }

struct BroadcastCase {
  const char *name;
  std::vector<int64_t> a, b;
};

const BroadcastCase kBroadcastCases[] = {
    {"same shape", {2, 3}, {2, 3}},
    {"b broadcast over leading and size-1 dims", {2, 3, 4}, {3, 1}},
    {"a broadcast over leading and size-1 dims", {3, 1}, {2, 3, 4}},
    {"both broadcast", {1, 4}, {3, 1}},
    {"scalar a", {}, {2, 3}},
    {"scalar b", {2, 3}, {}},
    {"middle size-1 dim", {2, 1, 3}, {4, 3}},
    {"all ones against full", {1, 1, 1}, {2, 3, 2}},
};

TEST(GradElementwise, AddSubMulBroadcasting) {
  for (const char *op : {"add", "sub", "mul"})
    for (const BroadcastCase &c : kBroadcastCases) {
      SCOPED_TRACE(std::string(op) + ": " + c.name);
      EXPECT_TRUE(checkGradients(op, {{f64(c.a)}, {f64(c.b)}}));
    }
}

TEST(GradElementwise, DivBroadcasting) {
  // Denominators kept away from 0: values in [0.5, 2).
  for (const BroadcastCase &c : kBroadcastCases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(checkGradients("div", {{f64(c.a)}, {f64(c.b)}}, {}, {.lo = 0.5, .hi = 2}));
  }
}

TEST(GradElementwise, DivNegativeDenominators) {
  EXPECT_TRUE(checkGradients("div", {{f64({3, 2})}, {f64({2})}}, {}, {.lo = -2, .hi = -0.5}));
}

TEST(GradElementwise, OnlyOneOperandDifferentiated) {
  for (const char *op : {"add", "sub", "mul", "div"}) {
    SCOPED_TRACE(op);
    GradCheckOperand frozenA{f64({2, 3})}, frozenB{f64({3})};
    frozenA.differentiate = false;
    frozenB.differentiate = false;
    EXPECT_TRUE(checkGradients(op, {frozenA, {f64({3})}}, {}, {.lo = 0.5, .hi = 2}));
    EXPECT_TRUE(checkGradients(op, {{f64({2, 3})}, frozenB}, {}, {.lo = 0.5, .hi = 2}));
  }
}

TEST(GradElementwise, MaxMinBroadcasting) {
  // Random operands never tie, so each element's gradient goes to one side.
  // A one-element operand broadcast against many may lose everywhere (its
  // gradient is then exactly 0, which the finite differences confirm).
  for (const char *op : {"max", "min"})
    for (const BroadcastCase &c : kBroadcastCases) {
      SCOPED_TRACE(std::string(op) + ": " + c.name);
      bool single = f64(c.a).numElements() == 1 || f64(c.b).numElements() == 1;
      EXPECT_TRUE(checkGradients(op, {{f64(c.a)}, {f64(c.b)}}, {}, {.allowZeroGradient = single}));
    }
  for (const char *op : {"max", "min"}) {
    GradCheckOperand frozen{f64({3})};
    frozen.differentiate = false;
    EXPECT_TRUE(checkGradients(op, {{f64({2, 3})}, frozen}));
  }
}

TEST(GradElementwise, MaxMinSplitTiesInHalf) {
  // torch.maximum / minimum give each operand half the gradient on a tie
  // (finite differences cannot see it: the function has a kink there).
  for (const char *op : {"max", "min"}) {
    SCOPED_TRACE(op);
    Graph g("ties");
    DiagnosticEngine diag;
    const OpRegistry &reg = OpRegistry::builtin();
    Value *a = g.addState("a", f64({4}), StateKind::Parameter);
    Value *b = g.addState("b", f64({4}), StateKind::Parameter);
    Node *m = buildNode(g, *reg.lookup(op), {a, b}, {}, Location(), diag);
    ASSERT_TRUE(m);
    Node *loss = buildNode(g, reg.get(OpKind::ReduceSum), {m->result()}, {}, Location(), diag);
    ASSERT_TRUE(loss);
    loss->setRole(NodeRole::Loss);
    g.addOutput(loss->result());
    PassContext ctx{diag};
    AutodiffPass autodiff;
    ASSERT_NE(autodiff.run(g, ctx), PassResult::Failed);
    auto backend = createCpuRefBackend();
    auto program = Program::compile(g, *backend, diag);
    ASSERT_TRUE(program);
    auto fill = [&](Value *v, std::vector<double> values) {
      for (size_t e = 0; e < values.size(); ++e)
        kernels::storeFromDouble(DType::F64, program->data(v), e, values[e]);
    };
    auto read = [&](const char *param) {
      Value *grad = g.lookup(gradientName(param));
      std::vector<double> out(4);
      for (size_t e = 0; grad && e < out.size(); ++e)
        out[e] = kernels::loadAsDouble(DType::F64, program->data(grad), e);
      return out;
    };
    // Ties at elements 0 and 3.
    fill(a, {1, 2, 3, 4});
    fill(b, {1, 5, 0, 4});
    program->run(0);
    bool isMax = std::string(op) == "max";
    EXPECT_EQ(read("a"), (std::vector<double>{0.5, isMax ? 0.0 : 1.0, isMax ? 1.0 : 0.0, 0.5}));
    EXPECT_EQ(read("b"), (std::vector<double>{0.5, isMax ? 1.0 : 0.0, isMax ? 0.0 : 1.0, 0.5}));
  }
}

TEST(GradElementwise, Scale) {
  for (double factor : {2.5, -0.5, 0.0, 1.0}) {
    SCOPED_TRACE("factor " + std::to_string(factor));
    EXPECT_TRUE(checkGradients("scale", {{f64({3, 4})}}, {{"factor", Attribute(factor)}},
                               {.allowZeroGradient = factor == 0}));
  }
  EXPECT_TRUE(checkGradients("scale", {{f64({})}}, {{"factor", Attribute(-3.0)}}));
}

TEST(GradElementwise, BroadcastGradientIsSummedOnce) {
  // b [3, 1] against a [2, 3, 4]: b's gradient is one reduce_sum over dims
  // 0 and 2 (the leading dim and the size-1 dim), reshaped back to [3, 1];
  // a's gradient is the incoming one unchanged.
  Graph g("broadcast");
  DiagnosticEngine diag;
  const OpRegistry &reg = OpRegistry::builtin();
  Value *a = g.addState("a", f64({2, 3, 4}), StateKind::Parameter);
  Value *b = g.addState("b", f64({3, 1}), StateKind::Parameter);
  Node *add = buildNode(g, reg.get(OpKind::Add), {a, b}, {}, Location(), diag);
  ASSERT_TRUE(add);
  Node *loss = buildNode(g, reg.get(OpKind::ReduceSum), {add->result()}, {}, Location(), diag);
  ASSERT_TRUE(loss);
  loss->setRole(NodeRole::Loss);
  PassContext ctx{diag};
  AutodiffPass autodiff;
  ASSERT_NE(autodiff.run(g, ctx), PassResult::Failed);
  unsigned sums = 0;
  for (const Node &n : g.nodes())
    if (n.role() == NodeRole::Backward && n.kind() == OpKind::ReduceSum) {
      ++sums;
      EXPECT_EQ(n.attr("dims"), Attribute(std::vector<int64_t>{0, 2}));
      EXPECT_EQ(n.result()->type(), f64({3}));
    }
  EXPECT_EQ(sums, 1u);
  Value *bGrad = g.lookup(gradientName("b"));
  ASSERT_TRUE(bGrad);
  EXPECT_EQ(bGrad->type(), f64({3, 1}));
  ASSERT_TRUE(g.lookup(gradientName("a")));
  EXPECT_EQ(g.lookup(gradientName("a"))->type(), f64({2, 3, 4}));
}

} // namespace
