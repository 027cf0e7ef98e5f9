//===- VerifierTest.cpp - Each verifier diagnostic --------------------------===//
#include "ir/Verifier.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

const OpInfo &op(llvm::StringRef name) { return *OpRegistry::builtin().lookup(name); }

std::string firstError(const DiagnosticEngine &d) {
  return d.diagnostics().empty() ? "" : d.diagnostics()[0].str();
}

struct Chain {
  Graph g{"t"};
  DiagnosticEngine diag;
  Value *x, *w;
  Node *fc, *relu;
  Chain() {
    x = g.addInput("x", TensorType(DType::F32, {2, 4}));
    w = g.addState("w", TensorType(DType::F32, {4, 4}), StateKind::Parameter);
    fc = buildNode(g, op("linear"), {x, w}, {}, Location::inFile("m.yaml", 2, 3), diag, {"fc"});
    relu =
        buildNode(g, op("relu"), {fc->result()}, {}, Location::inFile("m.yaml", 3, 3), diag, {"r"});
    g.addOutput(relu->result());
  }
};

TEST(Verifier, AcceptsAValidGraph) {
  Chain c;
  DiagnosticEngine d;
  EXPECT_TRUE(verifyGraph(c.g, d)) << firstError(d);
}

TEST(Verifier, ReportsResultTypeMismatch) {
  Chain c;
  c.relu->result()->setType(TensorType(DType::F16, {2, 4}));
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(c.g, d));
  EXPECT_EQ(firstError(d), "m.yaml:3:3: error: relu: result %r has type f16[2,4] but the "
                           "operands give f32[2,4]");
}

TEST(Verifier, ReportsOperandShapeMismatch) {
  Chain c;
  c.w->setType(TensorType(DType::F32, {4, 5}));
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(c.g, d));
  EXPECT_EQ(firstError(d),
            "m.yaml:2:3: error: linear: input has 4 features but weight f32[4,5] expects 5");
}

TEST(Verifier, ReportsDtypeMismatch) {
  Chain c;
  c.w->setType(TensorType(DType::BF16, {4, 4}));
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(c.g, d));
  EXPECT_NE(firstError(d).find("must have the same dtype"), std::string::npos) << firstError(d);
}

TEST(Verifier, ReportsWrongAttributeType) {
  Chain c;
  c.relu->setAttr("alpha", Attribute(1.0));
  c.fc->setAttr("transpose", Attribute(true));
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(c.g, d));
  EXPECT_EQ(firstError(d), "m.yaml:2:3: error: linear: unknown attribute 'transpose'");
}

TEST(Verifier, ReportsMissingAndMistypedAttributes) {
  Graph g;
  DiagnosticEngine build;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 4}));
  Node *s = buildNode(g, op("softmax"), {x}, {}, Location::inFile("m.yaml", 5, 1), build);
  ASSERT_NE(s, nullptr) << firstError(build);
  s->setAttr("dim", Attribute(1.5));
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(g, d));
  EXPECT_EQ(firstError(d), "m.yaml:5:1: error: softmax: attribute 'dim' must be int, got float");
}

TEST(Verifier, ReportsUseBeforeDefinition) {
  Chain c;
  // Move relu before the linear that feeds it: an ordering problem, not a cycle.
  c.g.nodes().remove(c.relu);
  c.g.nodes().push_front(c.relu);
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(c.g, d));
  EXPECT_EQ(firstError(d),
            "m.yaml:3:3: error: relu: operand %fc is used before the node that defines it");
}

TEST(Verifier, ReportsCycle) {
  Graph g;
  DiagnosticEngine build;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 4}));
  Node *a = buildNode(g, op("relu"), {x}, {}, Location::inFile("c.ir", 1, 1), build, {"a"});
  Node *b =
      buildNode(g, op("tanh"), {a->result()}, {}, Location::inFile("c.ir", 2, 1), build, {"b"});
  ASSERT_TRUE(a && b) << firstError(build);
  a->setOperand(0, b->result()); // a <- b <- a
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(g, d));
  EXPECT_EQ(firstError(d), "c.ir:1:1: error: relu: cycle in the graph: %a -> %b -> %a");
}

TEST(Verifier, ReportsDanglingOperand) {
  Chain c;
  Graph other;
  Value *foreign = other.addInput("y", TensorType(DType::F32, {2, 4}));
  c.relu->setOperand(0, foreign);
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(c.g, d));
  EXPECT_EQ(firstError(d), "m.yaml:3:3: error: relu: operand 0 (%y) is dangling: it is not "
                           "defined in this graph");
  c.relu->setOperand(0, c.fc->result()); // restore before `other` dies
}

TEST(Verifier, ReportsBadStateUpdates) {
  Chain c;
  c.g.addStateUpdate(c.w, c.relu->result()); // f32[4,4] <- f32[2,4]
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(c.g, d));
  EXPECT_EQ(firstError(d), "m.yaml:3:3: error: update of %w (f32[4,4]) with %r of type f32[2,4]");
  c.g.setStateUpdates({{c.x, c.x}});
  DiagnosticEngine d2;
  EXPECT_FALSE(verifyGraph(c.g, d2));
  EXPECT_NE(firstError(d2).find("update target %x is not a state tensor"), std::string::npos);
}

TEST(Verifier, ReportsOverflowingDeclarations) {
  Graph g;
  g.addInput("huge", TensorType(DType::F32, {int64_t(1) << 40, int64_t(1) << 40}),
             Location::inFile("m.yaml", 4, 12));
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(g, d));
  EXPECT_EQ(firstError(d), "m.yaml:4:12: error: input %huge has an element count that overflows "
                           "int64: f32[1099511627776,1099511627776]");
}

} // namespace

TEST(Verifier, ReportsDataOfTheWrongSize) {
  Chain c;
  InitSpec init;
  init.kind = InitSpec::Kind::Data;
  init.data = std::make_shared<std::vector<double>>(std::vector<double>{1, 0, 1});
  c.g.addState("mask", TensorType(DType::Bool, {2, 2}), StateKind::Buffer, init,
               Location::inFile("m.onnx", 1, 1));
  DiagnosticEngine d;
  EXPECT_FALSE(verifyGraph(c.g, d));
  EXPECT_EQ(firstError(d),
            "m.onnx:1:1: error: state %mask of type bool[2,2] has 3 elements in its data(...)");
}
