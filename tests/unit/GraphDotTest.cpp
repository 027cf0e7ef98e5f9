//===- GraphDotTest.cpp - The DOT printer: quoting, clusters, layout ------===//
//
// Names reach the graph from ONNX files with any bytes in them; the DOT must
// still parse, and Graphviz (through the API's layoutSvg) must lay it out.
//
//===----------------------------------------------------------------------===//
#include "passes/GraphDot.h"

#include "ampc/ampc.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

const OpInfo &op(llvm::StringRef name) {
  const OpInfo *info = OpRegistry::builtin().lookup(name);
  EXPECT_NE(info, nullptr) << name.str();
  return *info;
}

std::string dotOf(const Graph &g) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printDot(g, os);
  return os.str();
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(GraphDot, QuotesNamesGraphvizWouldMisread) {
  Graph g("odd \"model\"");
  DiagnosticEngine diag;
  // A quote, a backslash (a label would read "\n" as a line break), "::",
  // a leading '%' (Graphviz's own anonymous names), a line break and a
  // byte that is not UTF-8.
  Value *x =
      g.addInput("in\"put\\n::x", TensorType(DType::F32, {2, 3}), Location::inFile("m.yaml", 1, 1));
  Node *r =
      buildNode(g, op("relu"), {x}, {}, Location::inFile("m.yaml", 2, 3), diag, {"%odd\nname\xff"});
  ASSERT_NE(r, nullptr);
  g.setOutputs({r->result()});
  std::string dot = dotOf(g);
  EXPECT_NE(dot.find("digraph \"odd \\\"model\\\"\" {"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"input:in\\\"put\\\\n::x\""), std::string::npos) << dot;
  // The line break is DOT's \n and the invalid byte U+FFFD.
  EXPECT_NE(dot.find("\"op:%odd\\nname\xEF\xBF\xBD\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"input:in\\\"put\\\\n::x\" -> \"op:%odd\\nname\xEF\xBF\xBD\""),
            std::string::npos)
      << dot;

  if (!api::canLayOutGraphs())
    GTEST_SKIP() << "built without Graphviz";
  api::Result<std::string> svg = api::layoutSvg(dot);
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  // Both nodes and the edge survive, under the ids the page relies on.
  EXPECT_NE(svg->find("<g id=\"op_0\" class=\"node op r&#45;forward dt&#45;f32 output\">"),
            std::string::npos)
      << *svg;
  EXPECT_NE(svg->find("<g id=\"in_0\" class=\"node value input r&#45;forward dt&#45;f32\">"),
            std::string::npos);
  EXPECT_EQ(count(*svg, "class=\"edge"), 1u);
}

TEST(GraphDot, BlocksAndLayersFromLocationsAndNamePrefixes) {
  // Two instances of a two-layer block ("b0", "b1": one location per layer,
  // shared between the instances), then a plain layer "fc" with its
  // parameter (same location as the layer: not a block).
  Graph g("blocks");
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 4}), Location::inFile("m.yaml", 1, 1));
  Value *cur = x;
  for (const char *block : {"b0", "b1"}) {
    std::string b = block;
    Node *a =
        buildNode(g, op("relu"), {cur}, {}, Location::inFile("m.yaml", 5, 7), diag, {b + ".act"});
    Node *t = buildNode(g, op("tanh"), {a->result()}, {}, Location::inFile("m.yaml", 6, 7), diag,
                        {b + ".squash"});
    ASSERT_NE(t, nullptr);
    cur = t->result();
  }
  Value *w = g.addState("fc.weight", TensorType(DType::F32, {3, 4}), StateKind::Parameter,
                        {InitSpec::Kind::Zeros, 0, 0, {}}, Location::inFile("m.yaml", 9, 5));
  Node *fc =
      buildNode(g, op("linear"), {cur, w}, {}, Location::inFile("m.yaml", 9, 5), diag, {"fc"});
  ASSERT_NE(fc, nullptr);
  g.setOutputs({fc->result()});
  std::string dot = dotOf(g);
  EXPECT_EQ(count(dot, "class=\"block r-forward\""), 2u) << dot;
  EXPECT_NE(dot.find("graph [label=\"b0\", class=\"block r-forward\""), std::string::npos);
  EXPECT_NE(dot.find("graph [label=\"b1\", class=\"block r-forward\""), std::string::npos);
  // One layer box: fc and its weight. A block's one-node layers need none.
  EXPECT_EQ(count(dot, "class=\"layer r-forward\""), 1u) << dot;
  EXPECT_NE(dot.find("graph [label=\"fc\", class=\"layer r-forward\""), std::string::npos);
  EXPECT_EQ(count(dot, "class=\"role r-forward\""), 1u);
  // The weight is laid out below the layer's other input.
  EXPECT_NE(dot.find("\"op:b1.squash\" -> \"state:fc.weight\" [style=invis, weight=0];"),
            std::string::npos)
      << dot;
}

TEST(GraphDot, CastsAndStateAloneMakeNoBlock) {
  // As an ONNX file locates them: each initializer at a place of its own.
  // "conv" has nodes from two locations, but only state and casts.
  Graph g("onnx-like");
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 4}), Location::inFile("m.onnx", 1, 0));
  Value *w = g.addState("conv.weight", TensorType(DType::F32, {3, 4}), StateKind::Parameter,
                        {InitSpec::Kind::Zeros, 0, 0, {}}, Location::inFile("m.onnx", 2, 0));
  Value *b = g.addState("conv.bias", TensorType(DType::F32, {3}), StateKind::Parameter,
                        {InitSpec::Kind::Zeros, 0, 0, {}}, Location::inFile("m.onnx", 3, 0));
  AttrMap toBf16{{"to", Attribute(DType::BF16)}};
  Node *cw = buildNode(g, op("cast"), {w}, toBf16, Location::inFile("m.onnx", 2, 0), diag,
                       {"conv.weight.bf16"});
  Node *cb = buildNode(g, op("cast"), {b}, toBf16, Location::inFile("m.onnx", 3, 0), diag,
                       {"conv.bias.bf16"});
  Node *cx =
      buildNode(g, op("cast"), {x}, toBf16, Location::inFile("m.onnx", 1, 0), diag, {"x.bf16"});
  ASSERT_TRUE(cw && cb && cx) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  Node *fc = buildNode(g, op("linear"), {cx->result(), cw->result(), cb->result()}, {},
                       Location::inFile("m.onnx", 4, 0), diag, {"c"});
  ASSERT_NE(fc, nullptr);
  std::string dot = dotOf(g);
  EXPECT_EQ(dot.find("class=\"block"), std::string::npos) << dot;
}

TEST(GraphPage, DrawsTheRewrittenModelAndRefusesOneTooBigToLayOut) {
  if (!api::canLayOutGraphs())
    GTEST_SKIP() << "built without Graphviz";
  api::LoadOptions load;
  load.optLevel = "O2";
  api::Result<api::Model> m =
      api::Model::loadFile(std::string(AMPC_SOURCE_DIR) + "/examples/mlp.yaml", load);
  ASSERT_TRUE(m.ok()) << m.status().message();
  api::PipelineOptions p;
  p.stage = api::Stage::Forward;
  p.resolveEpochs = false;
  ASSERT_TRUE(m->rewrite(p).ok());
  // Without a program: the page says why there is no memory plan.
  api::ViewOptions opts;
  opts.memoryNote = "no plan here";
  api::Result<std::string> page = api::graphPage(*m, nullptr, opts);
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_NE(page->find("data-node=\"%fc1\""), std::string::npos);
  EXPECT_NE(page->find("<p class=\"note\">no plan here</p>"), std::string::npos);
  EXPECT_EQ(page->find("<?xml"), std::string::npos) << "the SVG's prologue belongs to no page";

  // 8 nodes, 2 inputs and 6 parameters: one more than allowed is refused.
  opts.maxDrawnNodes = m->graph().numNodes() + 2 + 6 - 1;
  api::Result<std::string> big = api::graphPage(*m, nullptr, opts);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("a page draws at most"), std::string::npos)
      << big.status().message();
}

} // namespace
