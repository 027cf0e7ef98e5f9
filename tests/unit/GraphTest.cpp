//===- GraphTest.cpp - Values, nodes, use lists, state ---------------------===//
#include "ir/Graph.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

const OpInfo &op(llvm::StringRef name) {
  const OpInfo *info = OpRegistry::builtin().lookup(name);
  EXPECT_NE(info, nullptr) << name.str();
  return *info;
}

struct SmallLinear {
  Graph g{"t"};
  DiagnosticEngine diag;
  Value *x, *w, *b;
  Node *fc;
  SmallLinear() {
    x = g.addInput("x", TensorType(DType::F32, {8, 4}));
    w = g.addState("w", TensorType(DType::F32, {3, 4}), StateKind::Parameter,
                   {InitSpec::Kind::Uniform, -0.5, 0.5, {}});
    b = g.addState("b", TensorType(DType::F32, {3}), StateKind::Parameter,
                   {InitSpec::Kind::Zeros, 0, 0, {}});
    fc = buildNode(g, op("linear"), {x, w, b}, {}, Location::inFile("m.yaml", 3, 5), diag, {"fc"});
  }
};

TEST(Graph, BuildNodeInfersTypesAndRecordsUses) {
  SmallLinear t;
  ASSERT_NE(t.fc, nullptr) << (t.diag.diagnostics().empty() ? "" : t.diag.diagnostics()[0].str());
  EXPECT_EQ(t.fc->result()->type(), TensorType(DType::F32, {8, 3}));
  EXPECT_EQ(t.fc->result()->name(), "fc");
  ASSERT_EQ(t.x->uses().size(), 1u);
  EXPECT_EQ(t.x->uses()[0].user, t.fc);
  EXPECT_EQ(t.w->uses()[0].operandIndex, 1u);
  EXPECT_EQ(t.fc->result()->loc().str(), "m.yaml:3:5");
  EXPECT_EQ(t.g.lookup("fc"), t.fc->result());
}

TEST(Graph, BuildNodeReportsShapeErrorsAtTheLocation) {
  Graph g;
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {8, 5}));
  Value *w = g.addState("w", TensorType(DType::F32, {3, 4}), StateKind::Parameter);
  Node *n = buildNode(g, op("linear"), {x, w}, {}, Location::inFile("m.yaml", 7, 9), diag);
  EXPECT_EQ(n, nullptr);
  ASSERT_EQ(diag.diagnostics().size(), 1u);
  EXPECT_EQ(diag.diagnostics()[0].str(),
            "m.yaml:7:9: error: linear: input has 5 features but weight f32[3,4] expects 4");
  EXPECT_EQ(g.numNodes(), 0u);
  EXPECT_FALSE(x->hasUses());
}

TEST(Graph, ReplaceAllUsesAndErase) {
  SmallLinear t;
  DiagnosticEngine diag;
  Node *relu1 = buildNode(t.g, op("relu"), {t.fc->result()}, {}, {}, diag, {"r1"});
  Node *relu2 = buildNode(t.g, op("relu"), {t.fc->result()}, {}, {}, diag, {"r2"});
  ASSERT_TRUE(relu1 && relu2);
  EXPECT_EQ(t.fc->result()->uses().size(), 2u);
  relu2->result()->replaceAllUsesWith(relu1->result()); // no uses: no-op
  relu2->setOperand(0, relu1->result());
  EXPECT_EQ(t.fc->result()->uses().size(), 1u);
  EXPECT_EQ(relu1->result()->uses().size(), 1u);
  t.g.eraseNode(relu2);
  EXPECT_TRUE(t.g.isNameFree("r2"));
  EXPECT_FALSE(relu1->result()->hasUses());
  EXPECT_EQ(t.g.numNodes(), 2u);
}

TEST(Graph, StateKindsAndNames) {
  Graph g;
  g.addState("p", TensorType(DType::F32, {2}), StateKind::Parameter);
  g.addState("m", TensorType(DType::F32, {2}), StateKind::OptimizerState);
  g.addState("scale", TensorType(DType::F32, {}), StateKind::ScalerState);
  EXPECT_EQ(g.state().size(), 3u);
  EXPECT_EQ(g.state(StateKind::OptimizerState).size(), 1u);
  EXPECT_EQ(g.state(StateKind::MasterWeight).size(), 0u);
  EXPECT_EQ(g.uniqueName("p"), "p_1");
  EXPECT_EQ(g.uniqueName("q"), "q");
  EXPECT_EQ(parseStateKind(stateKindKeyword(StateKind::MasterWeight)), StateKind::MasterWeight);
  EXPECT_EQ(parseRole("loss_scale"), NodeRole::LossScale);
  EXPECT_EQ(parseRole("bogus"), std::nullopt);
}

TEST(Graph, DeclaredValuesKeepTheirDeclarationResultsTheirNodes) {
  SmallLinear t;
  ASSERT_NE(t.fc, nullptr);
  EXPECT_EQ(t.w->init().kind, InitSpec::Kind::Uniform);
  EXPECT_EQ(t.w->init().b, 0.5);
  EXPECT_EQ(t.b->init().kind, InitSpec::Kind::Zeros);
  t.w->setTrainable(false);
  EXPECT_FALSE(t.w->trainable());
  EXPECT_TRUE(t.b->trainable());
  EXPECT_EQ(t.w->stateKind(), StateKind::Parameter);
  Value *m = t.g.addState("m", TensorType(DType::F32, {3}), StateKind::OptimizerState, {},
                          Location::inFile("m.yaml", 9, 2));
  EXPECT_EQ(m->stateKind(), StateKind::OptimizerState);
  EXPECT_EQ(m->loc().str(), "m.yaml:9:2");
  // A result carries no declaration of its own: the defaults, and its node's
  // location, which follows the node.
  Value *r = t.fc->result();
  EXPECT_EQ(r->init().kind, InitSpec{}.kind);
  EXPECT_TRUE(r->trainable());
  t.fc->setLoc(Location::inFile("m.yaml", 4, 1));
  EXPECT_EQ(r->loc().str(), "m.yaml:4:1");
}

TEST(Graph, NamesOutliveTheStringsTheyWereMadeFrom) {
  Graph g;
  Value *x;
  {
    std::string name(40, 'x'); // longer than any small-string buffer
    x = g.addInput(name, TensorType(DType::F32, {2}));
    name.assign(40, 'y');
  }
  EXPECT_EQ(x->name(), std::string(40, 'x'));
  EXPECT_EQ(g.lookup(std::string(40, 'x')), x);
  std::string renamed = "a_much_longer_name_given_after_the_fact";
  g.renameValue(x, renamed);
  renamed.clear();
  EXPECT_EQ(x->name(), "a_much_longer_name_given_after_the_fact");
  EXPECT_EQ(g.lookup("a_much_longer_name_given_after_the_fact"), x);
  EXPECT_EQ(g.lookup(std::string(40, 'x')), nullptr);
  EXPECT_TRUE(g.isNameFree(std::string(40, 'x')));
}

TEST(Graph, FreshNamesSkipTakenOnesAndOldNamesStayReadable) {
  Graph g;
  DiagnosticEngine diag;
  // A user's value already holds the next numeric name: the fresh name
  // skips it, in the one probe of the name table that also claims it.
  Value *x = g.addInput("0", TensorType(DType::F32, {2}));
  Node *r = buildNode(g, op("relu"), {x}, {}, {}, diag);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->result()->name(), "1");
  EXPECT_EQ(g.lookup("1"), r->result());
  Value *extra = g.addResult(r, TensorType(DType::F32, {2}), "");
  EXPECT_EQ(extra->name(), "2");
  // A name read before a rename stays readable after it (the name table's
  // memory goes only with the graph), and the old name is free again.
  llvm::StringRef before = r->result()->name();
  g.renameValue(r->result(), "renamed");
  EXPECT_EQ(before, "1");
  EXPECT_TRUE(g.isNameFree("1"));
  EXPECT_EQ(g.lookup("renamed"), r->result());
  Node *again = buildNode(g, op("relu"), {x}, {}, {}, diag, {"1"});
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(g.lookup("1"), again->result());
}

TEST(Graph, NodesMadeInTurnLieInTurnInMemory) {
  // Passes walk the node list; nodes made one after another sit one after
  // another in their arena, apart from the values they make.
  Graph g;
  DiagnosticEngine diag;
  Value *v = g.addInput("x", TensorType(DType::F32, {2}));
  std::vector<const Node *> made;
  for (int i = 0; i < 64; ++i) {
    Node *n = buildNode(g, op("relu"), {v}, {}, {}, diag);
    ASSERT_NE(n, nullptr);
    made.push_back(n);
    v = n->result();
  }
  size_t adjacent = 0;
  for (size_t i = 1; i < made.size(); ++i) {
    // Under AddressSanitizer the arena puts a red zone (aligned up to the
    // nodes' 64 bytes) after each.
    uintptr_t gap = reinterpret_cast<uintptr_t>(made[i]) - reinterpret_cast<uintptr_t>(made[i - 1]);
    adjacent += gap >= sizeof(Node) && gap <= sizeof(Node) + 64;
    // A node's first cache line holds what walks read (Graph.h).
    EXPECT_EQ(reinterpret_cast<uintptr_t>(made[i]) % 64, 0u);
  }
  // Each new slab of the arena (4 KiB at first) breaks the run once.
  size_t slabs = made.size() * sizeof(Node) / 4096 + 1;
  EXPECT_GE(adjacent, made.size() - 1 - slabs);
}

TEST(Graph, TensorTypeSizes) {
  TensorType t(DType::BF16, {2, 3, 4});
  EXPECT_EQ(t.numElements(), 24);
  EXPECT_EQ(t.sizeInBytes(), 48);
  EXPECT_EQ(t.str(), "bf16[2,3,4]");
  EXPECT_EQ(TensorType(DType::F32, {}).str(), "f32[]");
  EXPECT_EQ(TensorType(DType::F32, {}).numElements(), 1);
  EXPECT_EQ(TensorType(DType::F32, {int64_t(1) << 40, int64_t(1) << 30}).checkedNumElements(),
            std::nullopt);
  EXPECT_EQ(TensorType(DType::F32, {-1, 2}).checkedNumElements(), std::nullopt);
}

TEST(Graph, AttributeSpelling) {
  EXPECT_EQ(Attribute(int64_t(3)).str(), "3");
  EXPECT_EQ(Attribute(1.0).str(), "1.0");
  EXPECT_EQ(Attribute(1e-5).str(), "1e-05");
  EXPECT_EQ(Attribute(0.1).str(), "0.1");
  EXPECT_EQ(Attribute(true).str(), "true");
  EXPECT_EQ(Attribute("a\"b").str(), "\"a\\\"b\"");
  EXPECT_EQ(Attribute(std::vector<int64_t>{1, 2}).str(), "[1, 2]");
  EXPECT_EQ(Attribute(std::vector<double>{0.9, 0.999}).str(), "[0.9, 0.999]");
  EXPECT_EQ(Attribute(DType::BF16).str(), "bf16");
}

TEST(Graph, NormalizeAttrsWidensAndDefaults) {
  AttrMap attrs{{"stride", Attribute(std::vector<int64_t>{2, 2})}};
  std::string err;
  ASSERT_TRUE(normalizeAttrs(op("conv2d"), attrs, err)) << err;
  EXPECT_EQ(attrs.at("groups").getInt(), 1);
  EXPECT_EQ(attrs.at("padding").getInts(), (std::vector<int64_t>{0, 0}));
  AttrMap bad{{"strides", Attribute(std::vector<int64_t>{2, 2})}};
  EXPECT_FALSE(normalizeAttrs(op("conv2d"), bad, err));
  EXPECT_EQ(err, "unknown attribute 'strides'");
  AttrMap wrong{{"groups", Attribute("two")}};
  EXPECT_FALSE(normalizeAttrs(op("conv2d"), wrong, err));
  EXPECT_EQ(err, "attribute 'groups' must be int, got string");
  AttrMap widened{{"scale", Attribute(int64_t(2))}};
  ASSERT_TRUE(normalizeAttrs(op("scaled_dot_product_attention"), widened, err)) << err;
  EXPECT_TRUE(widened.at("scale").is(AttrType::Float));
}

TEST(OpRegistry, EveryBuiltinHasARowAndCategory) {
  auto all = OpRegistry::builtin().all();
  EXPECT_GE(all.size(), 32u);
  for (const OpInfo *info : all) {
    EXPECT_NE(info->infer, nullptr) << info->name;
    EXPECT_EQ(OpRegistry::builtin().lookup(info->name), info);
  }
  EXPECT_EQ(op("linear").category, PrecisionCategory::Half);
  EXPECT_EQ(op("softmax").category, PrecisionCategory::Fp32);
  EXPECT_EQ(op("add").category, PrecisionCategory::Promote);
  EXPECT_EQ(op("relu").category, PrecisionCategory::Follow);
  EXPECT_EQ(op("binary_cross_entropy").category, PrecisionCategory::Banned);
  EXPECT_TRUE(op("batchnorm2d").operands[1].keepFp32);
}

} // namespace
