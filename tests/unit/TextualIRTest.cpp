//===- TextualIRTest.cpp - Printer and parser ------------------------------===//
//
// The textual IR must round-trip byte for byte (print, parse, print gives the
// same text), print a fixed format, and reject bad input with a diagnostic at
// the exact line and column.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace ampc;

namespace {

const OpInfo &op(llvm::StringRef name) {
  const OpInfo *info = OpRegistry::builtin().lookup(name);
  EXPECT_NE(info, nullptr) << name.str();
  return *info;
}

TensorType f32(llvm::ArrayRef<int64_t> dims) { return TensorType(DType::F32, dims); }

bool identityInfer(InferContext &ctx, llvm::SmallVectorImpl<TensorType> &results) {
  results.push_back(ctx.operand(0));
  return true;
}

/// A custom op with one attribute of every type, since no built-in op has a
/// float list. Registered once in the shared builtin registry.
const OpInfo &allAttrsOp() {
  static const OpInfo *info = [] {
    OpInfo o;
    o.name = "textual_ir_test_all_attrs";
    OpRow(o)
        .operand("input")
        .attr("i", AttrType::Int, 0)
        .attr("f", AttrType::Float, 0.0)
        .attr("b", AttrType::Bool, false)
        .attr("s", AttrType::String, "")
        .attr("is", AttrType::Ints, std::vector<int64_t>{})
        .attr("fs", AttrType::Floats, std::vector<double>{})
        .attr("t", AttrType::DType, DType::F32)
        .infer(identityInfer);
    if (!OpRegistry::builtin().lookup(o.name)) {
      std::optional<std::string> err =
          OpRegistry::builtin().addCustomOp(std::move(o), PrecisionCategory::Follow);
      EXPECT_FALSE(err) << *err;
    }
    return OpRegistry::builtin().lookup("textual_ir_test_all_attrs");
  }();
  return *info;
}

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const Diagnostic &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

std::unique_ptr<Graph> parseOk(llvm::StringRef text) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(text, "t.ir", diag);
  EXPECT_TRUE(g) << diagText(diag);
  EXPECT_FALSE(diag.hasErrors()) << diagText(diag);
  return g;
}

/// The parse fails with exactly this one diagnostic ("t.ir:L:C: error: ...").
void expectParseError(llvm::StringRef text, llvm::StringRef expected) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(text, "t.ir", diag);
  EXPECT_EQ(g, nullptr) << "parsed:\n" << text.str();
  EXPECT_EQ(diagText(diag), expected.str() + "\n") << "input:\n" << text.str();
}

void expectRoundTrip(const Graph &g, const PrintOptions &opts = {}) {
  std::string first = printGraphToString(g, opts);
  DiagnosticEngine diag;
  std::unique_ptr<Graph> reparsed = parseGraph(first, "printed.ir", diag);
  ASSERT_TRUE(reparsed) << diagText(diag) << "\n" << first;
  EXPECT_EQ(printGraphToString(*reparsed, opts), first);
}

Location at(uint32_t line, uint32_t col) { return Location::inFile("m.yaml", line, col); }

InitSpec init(InitSpec::Kind kind, double a = 0, double b = 0, std::string path = "") {
  InitSpec s;
  s.kind = kind;
  s.a = a;
  s.b = b;
  s.path = std::move(path);
  return s;
}

/// A training-shaped graph touching every construct of the textual IR.
struct FullGraph {
  Graph g{"mlp"};
  DiagnosticEngine diag;

  bool ok = false;

  Node *build(const OpInfo &o, llvm::ArrayRef<Value *> operands, AttrMap attrs,
              llvm::ArrayRef<std::string> names, Location loc) {
    Node *n = buildNode(g, o, operands, std::move(attrs), loc, diag, names);
    EXPECT_NE(n, nullptr) << diagText(diag);
    return n;
  }
  Node *build(llvm::StringRef opName, llvm::ArrayRef<Value *> operands, AttrMap attrs,
              llvm::ArrayRef<std::string> names, uint32_t line) {
    return build(op(opName), operands, std::move(attrs), names, at(line, 5));
  }

  FullGraph() { ok = construct() && !diag.hasErrors(); }

  bool construct() {
    g.meta()["batch"] = Attribute(int64_t(4));
    g.meta()["model"] = Attribute("mlp \"quoted\" \\ back\nslash\ttab");
    g.meta()["optimizer.lr"] = Attribute(1.0e-3);
    g.meta()["optimizer.betas"] = Attribute(std::vector<double>{0.9, 0.999});
    g.meta()["dims"] = Attribute(std::vector<int64_t>{1, -2, 3});
    g.meta()["empty"] = Attribute(std::vector<int64_t>{});
    g.meta()["amp"] = Attribute(true);
    g.meta()["half"] = Attribute(DType::BF16);
    g.meta()["odd key-with space"] = Attribute(int64_t(-7));

    Value *x = g.addInput("x", f32({4, 8}), at(3, 3));
    Value *img = g.addInput("img", f32({2, 3, 4, 4}), at(4, 3));
    Value *target = g.addInput("target", f32({4, 6}));
    Value *w1 = g.addState("fc1.weight", f32({6, 8}), StateKind::Parameter,
                           init(InitSpec::Kind::Uniform, -0.03125, 0.03125), at(10, 5));
    Value *b1 = g.addState("fc1.bias", f32({6}), StateKind::Parameter, init(InitSpec::Kind::Zeros),
                           at(10, 5));
    Value *emb = g.addState("emb.weight", f32({10, 4}), StateKind::Parameter,
                            init(InitSpec::Kind::Normal, 0.0, 1.0));
    emb->setTrainable(false);
    Value *gamma =
        g.addState("bn1.weight", f32({3}), StateKind::Parameter, init(InitSpec::Kind::Ones));
    Value *beta = g.addState("bn1.bias", f32({3}), StateKind::Parameter,
                             init(InitSpec::Kind::Constant, 0.25));
    Value *mean =
        g.addState("bn1.running_mean", f32({3}), StateKind::Buffer, init(InitSpec::Kind::Zeros));
    Value *var = g.addState("bn1.running_var", f32({3}), StateKind::Buffer,
                            init(InitSpec::Kind::File, 0, 0, "weights/bn \"1\".npy"));
    g.addState("fc1.weight.m", f32({6, 8}), StateKind::OptimizerState);
    g.addState("fc1.weight.master", f32({6, 8}), StateKind::MasterWeight);
    g.addState("loss_scale", f32({}), StateKind::ScalerState,
               init(InitSpec::Kind::Constant, 65536));
    Node *fc1 = build("linear", {x, w1, b1}, {}, {"fc1"}, 12);
    Node *bn = build("batchnorm2d", {img, gamma, beta, mean, var}, {{"momentum", 0.1}},
                     {"bn1", "bn1.mean", "bn1.var"}, 13);
    if (!fc1 || !bn)
      return false;
    Node *cast =
        build("cast", {fc1->result()}, {{"to", DType::BF16}, {"cacheable", true}}, {"h"}, 14);
    if (!cast)
      return false;
    cast->setPrecisionOverride(PrecisionOverride::Fp32);
    Node *back = build("cast", {cast->result()}, {{"to", DType::F32}}, {}, 15);
    if (!back)
      return false;
    back->setPrecisionOverride(PrecisionOverride::Half);
    Node *loss = build("mse_loss", {back->result(), target}, {}, {"loss"}, 16);
    if (!loss)
      return false;
    loss->setRole(NodeRole::Loss);
    // Float edge cases and escapes in one node each.
    const std::pair<const char *, double> floats[] = {
        {"tiny", 1e-05},
        {"tenth", 0.1},
        {"huge", 1e300},
        {"negzero", -0.0},
        {"posinf", std::numeric_limits<double>::infinity()},
        {"neginf", -std::numeric_limits<double>::infinity()},
        {"nan", std::numeric_limits<double>::quiet_NaN()},
        {"denormal", 5e-324},
    };
    Value *chain = fc1->result();
    uint32_t line = 20;
    for (const auto &[name, value] : floats) {
      Node *n =
          build(allAttrsOp(), {chain}, {{"f", value}}, {std::string("f_") + name}, at(line++, 5));
      if (!n)
        return false;
      chain = n->result();
    }
    Node *all = build(allAttrsOp(), {chain},
                      {{"i", int64_t(-9007199254740993)},
                       {"f", 2.5},
                       {"b", true},
                       {"s", "a\"b\\c\nd\te"},
                       {"is", std::vector<int64_t>{1, 2, 3}},
                       {"fs", std::vector<double>{0.9, 0.999, -1e-300}},
                       {"t", DType::F16}},
                      {"all"}, at(30, 5));
    if (!all)
      return false;
    all->setRole(NodeRole::Optimizer);
    // A node with an unknown location prints without loc(...).
    Node *scale = build(op("scale"), {all->result()}, {{"factor", 0.5}}, {}, Location());
    if (!scale)
      return false;
    scale->setRole(NodeRole::LossScale);
    Node *bw = build("relu", {scale->result()}, {}, {}, 32);
    if (!fc1 || !bn || !cast || !back || !loss || !bw)
      return false;
    bw->setRole(NodeRole::Backward);

    g.addStateUpdate(mean, bn->result(1));
    g.addStateUpdate(var, bn->result(2));
    g.addOutput(loss->result());
    g.addOutput(bn->result(0));
    return true;
  }
};

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

TEST(TextualIR, PrintsTheDocumentedFormat) {
  Graph g("small");
  DiagnosticEngine diag;
  g.meta()["batch"] = Attribute(int64_t(2));
  g.meta()["optimizer.lr"] = Attribute(1.0e-3);
  Value *x = g.addInput("x", f32({2, 4}), at(6, 5));
  Value *w = g.addState("fc.weight", f32({3, 4}), StateKind::Parameter,
                        init(InitSpec::Kind::Uniform, -0.5, 0.5), at(9, 5));
  Value *stat = g.addState("stat", f32({3}), StateKind::Buffer, init(InitSpec::Kind::Zeros));
  Value *frozen = g.addState("frozen", f32({3}), StateKind::Parameter);
  frozen->setTrainable(false);
  Node *fc = buildNode(g, op("linear"), {x, w}, {}, at(9, 5), diag, {"fc"});
  ASSERT_NE(fc, nullptr) << diagText(diag);
  Node *h = buildNode(g, op("cast"), {fc->result()}, {{"to", DType::BF16}}, at(10, 5), diag);
  ASSERT_NE(h, nullptr) << diagText(diag);
  h->setPrecisionOverride(PrecisionOverride::Fp32);
  h->setRole(NodeRole::Loss);
  g.addStateUpdate(stat, frozen);
  g.addOutput(h->result());
  g.addOutput(fc->result());

  EXPECT_EQ(printGraphToString(g),
            "graph @small {\n"
            "  meta {batch = 2, optimizer.lr = 0.001}\n"
            "  input %x : f32[2,4] loc(\"m.yaml\":6:5)\n"
            "  param %fc.weight : f32[3,4] init uniform(-0.5, 0.5) loc(\"m.yaml\":9:5)\n"
            "  buffer %stat : f32[3] init zeros\n"
            "  param %frozen : f32[3] frozen\n"
            "  %fc = linear(%x, %fc.weight) : (f32[2,4], f32[3,4]) -> f32[2,3] "
            "loc(\"m.yaml\":9:5)\n"
            "  %0 = cast(%fc) {cacheable = false, to = bf16} : (f32[2,3]) -> bf16[2,3] "
            "role(loss) precision(fp32) loc(\"m.yaml\":10:5)\n"
            "  update %stat = %frozen\n"
            "  output %0, %fc\n"
            "}\n");

  PrintOptions noLocs;
  noLocs.locations = false;
  std::string text = printGraphToString(g, noLocs);
  EXPECT_EQ(text.find("loc("), std::string::npos) << text;
  EXPECT_NE(text.find("  input %x : f32[2,4]\n"), std::string::npos) << text;
}

TEST(TextualIR, PrintsEmptyGraphWithoutOptionalSections) {
  Graph g("empty");
  EXPECT_EQ(printGraphToString(g), "graph @empty {\n}\n");
}

TEST(TextualIR, PrintsMultiResultAndZeroResultSignatures) {
  FullGraph t;
  ASSERT_TRUE(t.ok) << diagText(t.diag);
  std::string text = printGraphToString(t.g);
  EXPECT_NE(text.find("  %bn1, %bn1.mean, %bn1.var = batchnorm2d(%img, %bn1.weight, %bn1.bias, "
                      "%bn1.running_mean, %bn1.running_var) {eps = 1e-05, momentum = 0.1, "
                      "training = true} : (f32[2,3,4,4], f32[3], f32[3], f32[3], f32[3]) -> "
                      "(f32[2,3,4,4], f32[3], f32[3]) loc(\"m.yaml\":13:5)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{b = true, f = 2.5, fs = [0.9, 0.999, -1e-300], i = -9007199254740993, "
                      "is = [1, 2, 3], s = \"a\\\"b\\\\c\\nd\\te\", t = f16}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("frozen"), std::string::npos);
  EXPECT_NE(text.find("init file(\"weights/bn \\\"1\\\".npy\")"), std::string::npos) << text;
  EXPECT_NE(text.find("\"odd key-with space\" = -7"), std::string::npos) << text;
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(TextualIR, RoundTripsEveryConstruct) {
  FullGraph t;
  ASSERT_TRUE(t.ok) << diagText(t.diag);
  PrintOptions noLocs;
  noLocs.locations = false;
  expectRoundTrip(t.g, noLocs);

  // With locations, the node that had none picks up its position in the
  // printed text; from then on the text is a fixed point.
  std::string first = printGraphToString(t.g);
  DiagnosticEngine diag;
  std::unique_ptr<Graph> once = parseGraph(first, "printed.ir", diag);
  ASSERT_TRUE(once) << diagText(diag);
  std::string second = printGraphToString(*once);
  expectRoundTrip(*once);
  EXPECT_NE(second.find("role(loss_scale) loc(\"printed.ir\":"), std::string::npos) << second;
}

TEST(TextualIR, RoundTripPreservesValues) {
  FullGraph t;
  ASSERT_TRUE(t.ok) << diagText(t.diag);
  std::unique_ptr<Graph> g = parseOk(printGraphToString(t.g));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->name(), "mlp");
  EXPECT_EQ(g->meta(), t.g.meta());
  ASSERT_EQ(g->state().size(), t.g.state().size());
  for (size_t i = 0; i < g->state().size(); ++i) {
    const Value *a = g->state()[i], *b = t.g.state()[i];
    EXPECT_EQ(a->name(), b->name());
    EXPECT_EQ(a->stateKind(), b->stateKind());
    EXPECT_EQ(a->init(), b->init()) << a->name().str();
    EXPECT_EQ(a->trainable(), b->trainable());
    if (b->loc().known()) {
      EXPECT_EQ(a->loc(), b->loc());
    }
    EXPECT_EQ(a->type(), b->type());
  }
  ASSERT_EQ(g->numNodes(), t.g.numNodes());
  auto it = t.g.nodes().begin();
  for (const Node &n : g->nodes()) {
    const Node &orig = *it++;
    EXPECT_EQ(n.opName(), orig.opName());
    EXPECT_EQ(n.role(), orig.role());
    EXPECT_EQ(n.precisionOverride(), orig.precisionOverride());
    ASSERT_EQ(n.attrs().size(), orig.attrs().size());
    for (const auto &[name, value] : orig.attrs()) {
      const Attribute *parsed = n.findAttr(name);
      ASSERT_NE(parsed, nullptr) << name.str();
      EXPECT_EQ(parsed->type(), value.type()) << name.str();
      if (value.is(AttrType::Float) && std::isnan(value.getFloat())) {
        EXPECT_TRUE(std::isnan(parsed->getFloat()));
      } else {
        EXPECT_EQ(*parsed, value) << name.str();
      }
      if (value.is(AttrType::Float)) {
        EXPECT_EQ(std::signbit(parsed->getFloat()), std::signbit(value.getFloat())) << name.str();
      }
    }
    for (unsigned i = 0; i < n.numOperands(); ++i)
      EXPECT_EQ(n.operand(i)->name(), orig.operand(i)->name());
  }
  ASSERT_EQ(g->stateUpdates().size(), 2u);
  EXPECT_EQ(g->stateUpdates()[1].state->name(), "bn1.running_var");
  EXPECT_EQ(g->stateUpdates()[1].newValue->name(), "bn1.var");
  ASSERT_EQ(g->outputs().size(), 2u);
  EXPECT_EQ(g->outputs()[0]->name(), "loss");
  // Uses are rebuilt: the input feeds exactly the linear node.
  ASSERT_EQ(g->lookup("x")->uses().size(), 1u);
  EXPECT_EQ(g->lookup("x")->uses()[0].user->opName(), "linear");
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

TEST(TextualIR, ParsesCommentsDefaultsAndLocations) {
  std::unique_ptr<Graph> g = parseOk("// leading comment\n"
                                     "graph @g { // trailing comment\n"
                                     "  input %x : f32[2,3]\n"
                                     "  %y = scale(%x) {factor = 2} : (f32[2,3]) -> f32[2,3]\n"
                                     "  %p = maxpool2d(%z) {kernel = [1, 1]} : (f32[1,1,2,2]) -> "
                                     "(f32[1,1,2,2]) loc(\"a.yaml\":7:9)\n"
                                     "  input %z : f32[1,1,2,2]\n"
                                     "  output %y\n"
                                     "}\n");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->name(), "g");
  const Node &scale = g->nodes().front();
  // An int written for a float attribute is widened; defaults are filled.
  ASSERT_TRUE(scale.findAttr("factor"));
  EXPECT_TRUE(scale.findAttr("factor")->is(AttrType::Float));
  EXPECT_EQ(scale.findAttr("factor")->getFloat(), 2.0);
  // Declarations and nodes without loc(...) are located in the .ir file.
  EXPECT_EQ(g->lookup("x")->loc().str(), "t.ir:3:3");
  EXPECT_EQ(scale.loc().str(), "t.ir:4:3");
  const Node &pool = g->nodes().back();
  EXPECT_EQ(pool.loc().str(), "a.yaml:7:9");
  ASSERT_TRUE(pool.findAttr("stride"));
  EXPECT_TRUE(pool.findAttr("stride")->is(AttrType::Ints));
  EXPECT_EQ(pool.operand(0), g->lookup("z"));
}

TEST(TextualIR, EmptyListBecomesAFloatListWhereTheOpWantsOne) {
  const OpInfo &custom = allAttrsOp();
  (void)custom;
  std::unique_ptr<Graph> g =
      parseOk("graph @g {\n"
              "  input %x : f32[2]\n"
              "  %a = textual_ir_test_all_attrs(%x) {fs = [], is = []} : (f32[2]) -> f32[2]\n"
              "  %b = textual_ir_test_all_attrs(%a) {fs = [1, 2]} : (f32[2]) -> f32[2]\n"
              "}\n");
  ASSERT_TRUE(g);
  const Node &a = g->nodes().front();
  EXPECT_TRUE(a.findAttr("fs")->is(AttrType::Floats));
  EXPECT_TRUE(a.findAttr("is")->is(AttrType::Ints));
  const Node &b = g->nodes().back();
  EXPECT_EQ(b.findAttr("fs")->getFloats(), (std::vector<double>{1.0, 2.0}));
}

TEST(TextualIR, ForwardReferencesResolveSoCyclesCanBeWritten) {
  // Not a valid graph (the verifier reports the cycle), but it parses.
  std::unique_ptr<Graph> g = parseOk("graph @cycle {\n"
                                     "  input %x : f32[2]\n"
                                     "  %a = add(%x, %b) : (f32[2], f32[2]) -> f32[2]\n"
                                     "  %b = relu(%a) : (f32[2]) -> f32[2]\n"
                                     "  %c = relu(%c) : (f32[2]) -> f32[2]\n"
                                     "  output %b\n"
                                     "}\n");
  ASSERT_TRUE(g);
  const Node &add = g->nodes().front();
  EXPECT_EQ(add.operand(1), g->lookup("b"));
  ASSERT_EQ(g->lookup("b")->uses().size(), 1u);
  EXPECT_EQ(g->lookup("b")->uses()[0].user, &add);
  const Node &self = g->nodes().back();
  EXPECT_EQ(self.operand(0), self.result());
}

TEST(TextualIR, ResultTypesAreTakenAsWritten) {
  // relu of f32[2] cannot give i64[5]; the verifier says so, not the parser.
  std::unique_ptr<Graph> g = parseOk("graph @g {\n"
                                     "  input %x : f32[2]\n"
                                     "  %y = relu(%x) : (f32[2]) -> i64[5]\n"
                                     "}\n");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->lookup("y")->type(), TensorType(DType::I64, {5}));
}

TEST(TextualIR, ParsesZeroResultNodesAndScalars) {
  std::unique_ptr<Graph> g = parseOk("graph @g {\n"
                                     "  input %x : f32[]\n"
                                     "  relu(%x) : (f32[]) -> ()\n"
                                     "  output %x\n"
                                     "}\n");
  ASSERT_TRUE(g);
  ASSERT_EQ(g->numNodes(), 1u);
  EXPECT_EQ(g->nodes().front().numResults(), 0u);
  EXPECT_EQ(g->lookup("x")->type().rank(), 0u);
  std::string text = printGraphToString(*g);
  EXPECT_NE(text.find("  relu(%x) : (f32[]) -> () loc(\"t.ir\":3:3)\n"), std::string::npos) << text;
}

TEST(TextualIR, ParseErrorsAtExactPositions) {
  const std::string head = "graph @g {\n  input %x : f32[2]\n";
  struct Case {
    std::string body;
    const char *error;
  } cases[] = {
      {"  %y = frob(%x) : (f32[2]) -> f32[2]\n", "t.ir:3:8: error: unknown op 'frob'"},
      {"  %y = relu(%x) {alpha = 1} : (f32[2]) -> f32[2]\n",
       "t.ir:3:18: error: relu: unknown attribute 'alpha'"},
      {"  %y = cast(%x) {to = 3} : (f32[2]) -> f32[2]\n",
       "t.ir:3:18: error: cast: attribute 'to' must be dtype, got int"},
      {"  %y = cast(%x) : (f32[2]) -> f32[2]\n",
       "t.ir:3:8: error: cast: missing required attribute 'to'"},
      {"  %y = linear(%x) : (f32[2]) -> f32[2]\n",
       "t.ir:3:8: error: linear: expected 2 to 3 operands, got 1"},
      {"  %y = relu(%nope) : (f32[2]) -> f32[2]\n",
       "t.ir:3:13: error: use of undefined value %nope"},
      {"  input %x : f32[3]\n", "t.ir:3:9: error: redefinition of value %x (first defined at 2:9)"},
      {"  %x = relu(%x) : (f32[2]) -> f32[2]\n",
       "t.ir:3:3: error: redefinition of value %x (first defined at 2:9)"},
      {"  input %z : f33[2]\n",
       "t.ir:3:14: error: unknown dtype 'f33' (expected f32, f16, bf16, f64, i64, i32 or bool)"},
      {"  input %z : f32[2,-1]\n", "t.ir:3:20: error: dimension -1 is negative"},
      {"  input %z : f32[2\n", "t.ir:4:1: error: expected ',' or ']' in the shape, got '}'"},
      {"  %y = relu(%x) -> f32[2]\n",
       "t.ir:3:17: error: expected ':' before the node's type signature, got '->'"},
      {"  %y = relu(%x) : (f16[2]) -> f32[2]\n",
       "t.ir:3:20: error: operand 0 of relu is f32[2], but the signature says f16[2]"},
      {"  %y = add(%x, %w) : (f32[2], f32[3]) -> f32[2]\n  %w = relu(%x) : (f32[2]) -> f32[2]\n",
       "t.ir:3:31: error: operand 1 of add is f32[2], but the signature says f32[3]"},
      {"  %y = add(%x, %x) : (f32[2]) -> f32[2]\n",
       "t.ir:3:22: error: add has 2 operand(s), but the signature lists 1 type(s)"},
      {"  %y, %z = relu(%x) : (f32[2]) -> f32[2]\n",
       "t.ir:3:35: error: relu has 2 result name(s), but the signature lists 1 result type(s)"},
      {"  %y = relu(%x) : (f32[2]) -> f32[2] role(sideways)\n",
       "t.ir:3:43: error: unknown role 'sideways' (expected forward, loss, backward, optimizer or "
       "loss_scale)"},
      {"  %y = relu(%x) : (f32[2]) -> f32[2] precision(f16)\n",
       "t.ir:3:48: error: unknown precision 'f16' (expected fp32 or half)"},
      {"  meta {model = \"mlp}\n", "t.ir:3:17: error: unterminated string"},
      {"  meta {model = \"a\\qb\"}\n",
       "t.ir:3:19: error: unknown escape sequence in string (use \\\", \\\\, \\n or \\t)"},
      {"  meta {batch = 99999999999999999999}\n",
       "t.ir:3:17: error: integer 99999999999999999999 does not fit in 64 bits"},
      {"  meta {lr = 1e999}\n",
       "t.ir:3:14: error: number 1e999 is out of range for a 64-bit float"},
      {"  meta {a = 1, a = 2}\n", "t.ir:3:16: error: duplicate attribute 'a'"},
      {"  meta {a = what}\n",
       "t.ir:3:13: error: expected an attribute value (a number, true, false, a string, a list or "
       "a dtype), got 'what'"},
      {"  param %p : f32[2] init gaussian(0, 1)\n",
       "t.ir:3:26: error: unknown initializer 'gaussian' (expected zeros, ones, constant, uniform, "
       "normal, file or data)"},
      {"  update %x = %x\n", "t.ir:3:10: error: update target %x is not a state tensor"},
      {"  output %x, %q\n", "t.ir:3:14: error: use of undefined value %q"},
      {"  %y = relu(%x) : (f32[2]) -> f32[2] $\n", "t.ir:3:38: error: unexpected character '$'"},
      {"  frobnicate %x\n",
       "t.ir:3:3: error: expected a declaration, a node, 'update', 'output' or '}', got "
       "'frobnicate'"},
      {"  %y = relu(%x) : (f32[2]) -> f32[2] loc(\"f\":1)\n",
       "t.ir:3:47: error: expected ':' after the line number in loc(...), got ')'"},
  };
  for (const Case &c : cases)
    expectParseError(head + c.body + "}\n", c.error);

  expectParseError("", "t.ir:1:1: error: expected 'graph', got end of file");
  expectParseError("graph @g {\n}\nextra\n",
                   "t.ir:3:1: error: expected end of file after the graph's closing '}', got "
                   "'extra'");
  expectParseError("graph @g {\n  input %x : f32[2]\n",
                   "t.ir:3:1: error: expected a declaration, a node, 'update', 'output' or '}', "
                   "got end of file");
}

TEST(TextualIR, ReportsEveryUndefinedName) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph("graph @g {\n"
                                        "  %a = relu(%p) : (f32[2]) -> f32[2]\n"
                                        "  %b = relu(%q) : (f32[2]) -> f32[2]\n"
                                        "}\n",
                                        "t.ir", diag);
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(diagText(diag), "t.ir:2:13: error: use of undefined value %p\n"
                            "t.ir:3:13: error: use of undefined value %q\n");
}

TEST(TextualIR, ParsesLargeGraphsInLinearTime) {
  // 20k nodes: a quadratic step would show up as seconds here.
  std::string text = "graph @big {\n  input %v0 : f32[4]\n";
  const int n = 20000;
  for (int i = 1; i <= n; ++i)
    text += "  %v" + std::to_string(i) + " = relu(%v" + std::to_string(i - 1) +
            ") : (f32[4]) -> f32[4]\n";
  text += "  output %v" + std::to_string(n) + "\n}\n";
  std::unique_ptr<Graph> g = parseOk(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->numNodes(), size_t(n));
  std::string printed = printGraphToString(*g);
  std::unique_ptr<Graph> again = parseOk(printed);
  ASSERT_TRUE(again);
  EXPECT_EQ(printGraphToString(*again), printed);
}

} // namespace

TEST(TextualIR, DataInitialisersRoundTripWithRuns) {
  // A folded causal mask and index tensor: every element, runs shortened.
  std::unique_ptr<Graph> g = parseOk("graph @g {\n"
                                     "  buffer %mask : bool[2,3] init data(1.0, 0.0 x 2, 1.0 x 2, "
                                     "0.0)\n"
                                     "  buffer %fill : f32[3] init data(-inf x 2, nan)\n"
                                     "}\n");
  ASSERT_TRUE(g);
  const InitSpec &mask = g->lookup("mask")->init();
  ASSERT_EQ(mask.kind, InitSpec::Kind::Data);
  EXPECT_EQ(*mask.data, (std::vector<double>{1, 0, 0, 1, 1, 0}));
  EXPECT_EQ(mask.str(), "data(1.0, 0.0 x 2, 1.0 x 2, 0.0)");
  EXPECT_EQ(g->lookup("fill")->init().str(), "data(-inf x 2, nan)");
  expectRoundTrip(*g);
  std::unique_ptr<Graph> again = parseOk(printGraphToString(*g));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->lookup("fill")->init(), g->lookup("fill")->init());
}

TEST(TextualIR, DataInitialiserErrors) {
  expectParseError("graph @g {\n  buffer %m : f32[2] init data(1.0 x 0)\n}\n",
                   "t.ir:2:38: error: run length 0 is out of range");
  expectParseError("graph @g {\n  buffer %m : f32[2] init data(1.0 x)\n}\n",
                   "t.ir:2:37: error: expected a run length after 'x', got ')'");
  expectParseError("graph @g {\n  buffer %m : f32[2] init data(1.0 x 99999999999)\n}\n",
                   "t.ir:2:38: error: run length 99999999999 is out of range");
}
