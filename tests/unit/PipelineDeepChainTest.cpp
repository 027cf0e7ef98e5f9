//===- PipelineDeepChainTest.cpp - The O1 solve on very deep graphs --------===//
//
// The O1 precision solve (a minimum cut) once searched augmenting paths
// recursively: a chain deep enough overflowed the stack, and a chain of
// residual blocks took quadratic time. These graphs of 200k nodes must come
// out right, in well under the test's time limit.
//
//===----------------------------------------------------------------------===//
#include "passes/AssignPrecision.h"

#include "ir/Builder.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

constexpr int kDeepNodes = 200000;

Value *build(Graph &g, OpKind kind, llvm::ArrayRef<Value *> operands, DiagnosticEngine &diag) {
  Node *n = buildNode(g, OpRegistry::builtin().get(kind), operands, {}, Location(), diag);
  EXPECT_NE(n, nullptr);
  return n ? n->result() : nullptr;
}

/// Runs assign-precision at O1.
bool assignO1(Graph &g, DiagnosticEngine &diag) {
  if (!setPolicyOverride(g.meta(), "opt_level", "O1", diag))
    return false;
  PassManager pm;
  return pm.addByNames("assign-precision", diag) && pm.run(g, diag);
}

DType decided(const Node &n) {
  std::optional<PrecisionDecision> d = precisionDecision(n);
  EXPECT_TRUE(d.has_value()) << n.opName().str();
  return d ? d->dtype : DType::Bool;
}

// x + relu(x @ w), repeated: every add is tied to the previous one by the
// promote rule, back to the f32 input, so each add is fp32 and each block
// costs two casts (x to half for the matmul, relu's result back to f32).
TEST(PipelineDeepChainTest, ResidualChainOfPromoteOps) {
  Graph g;
  DiagnosticEngine diag;
  TensorType t(DType::F32, {4, 8});
  Value *x = g.addInput("x", t);
  Value *w = g.addState("w", TensorType(DType::F32, {8, 8}), StateKind::Parameter);
  Value *cur = x;
  const int blocks = kDeepNodes / 3;
  for (int i = 0; i < blocks; ++i) {
    Value *h = build(g, OpKind::MatMul, {cur, w}, diag);
    Value *r = build(g, OpKind::Relu, {h}, diag);
    cur = build(g, OpKind::Add, {cur, r}, diag);
    ASSERT_NE(cur, nullptr);
  }
  g.addOutput(cur);
  ASSERT_TRUE(assignO1(g, diag));

  int casts = 0, adds = 0, relus = 0;
  for (const Node &n : g.nodes()) {
    switch (n.kind()) {
    case OpKind::Cast:
      ++casts;
      break;
    case OpKind::Add:
      ++adds;
      EXPECT_EQ(decided(n), DType::F32);
      break;
    case OpKind::Relu:
      ++relus;
      EXPECT_TRUE(isHalfType(decided(n)));
      break;
    default:
      break;
    }
  }
  EXPECT_EQ(adds, blocks);
  EXPECT_EQ(relus, blocks);
  EXPECT_EQ(casts, 2 * blocks + 1); // and the weight's, shared by all matmuls
}

// f32 input -> relu -> ... -> relu -> matmul: the only augmenting path runs
// the whole chain (200k arcs deep). One cast suffices wherever it goes; the
// solve keeps the most ops in half, so it sits right after the input.
TEST(PipelineDeepChainTest, FollowChainIntoHalfOp) {
  Graph g;
  DiagnosticEngine diag;
  Value *cur = g.addInput("x", TensorType(DType::F32, {4, 8}));
  Value *w = g.addState("w", TensorType(DType::F32, {8, 8}), StateKind::Parameter);
  for (int i = 0; i < kDeepNodes; ++i) {
    cur = build(g, OpKind::Relu, {cur}, diag);
    ASSERT_NE(cur, nullptr);
  }
  cur = build(g, OpKind::MatMul, {cur, w}, diag);
  g.addOutput(cur);
  ASSERT_TRUE(assignO1(g, diag));

  int inputCasts = 0;
  for (const Node &n : g.nodes()) {
    if (n.kind() == OpKind::Cast) {
      EXPECT_NE(n.operand(0)->definingNode() ? n.operand(0)->definingNode()->kind() : OpKind::Cast,
                OpKind::Relu)
          << "no cast inside the chain";
      inputCasts += n.operand(0)->isInput();
    } else if (n.kind() == OpKind::Relu) {
      EXPECT_TRUE(isHalfType(decided(n)));
    }
  }
  EXPECT_EQ(inputCasts, 1);
}

} // namespace
