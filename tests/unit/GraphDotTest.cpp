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

#include <regex>
#include <set>
#include <sstream>

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

/// As PyTorch exports a model to ONNX: values named by module path
/// ("/enc/layer0/fc/MatMul_output_0"), each node and initializer at a
/// location of its own, weights with dotted names. `layers` instances of
/// a block (a linear, an importer's numbered helper op, a relu), then a
/// head; with `training`, a backward op per instance (at its relu's
/// location, numbered) and an optimizer update per weight (at the
/// weight's location).
void exportedByTorch(Graph &g, unsigned layers, bool training) {
  DiagnosticEngine diag;
  auto at = [](const std::string &what) { return Location::inFile("m.onnx: " + what, 0, 0); };
  Value *cur = g.addInput("x", TensorType(DType::F32, {4, 4}), at("input 'x'"));
  std::vector<Value *> weights, acts;
  for (unsigned k = 0; k < layers; ++k) {
    std::string mod = "/enc/layer" + std::to_string(k);
    std::string wName = "enc.layer" + std::to_string(k) + ".fc.weight";
    Value *w = g.addState(wName, TensorType(DType::F32, {4, 4}), StateKind::Parameter,
                          {InitSpec::Kind::Zeros, 0, 0, {}}, at("initializer '" + wName + "'"));
    Node *fc = buildNode(g, op("linear"), {cur, w}, {}, at("node '" + mod + "/fc/MatMul'"), diag,
                         {mod + "/fc/MatMul_output_0"});
    Node *helper = buildNode(g, op("tanh"), {fc->result()}, {}, at("node '" + mod + "/fc/Add'"),
                             diag, {std::to_string(100 + k)});
    Node *act = buildNode(g, op("relu"), {helper->result()}, {}, at("node '" + mod + "/act/Relu'"),
                          diag, {mod + "/act/Relu_output_0"});
    EXPECT_TRUE(fc && helper && act);
    cur = act->result();
    weights.push_back(w);
    acts.push_back(cur);
  }
  Value *hw = g.addState("head.weight", TensorType(DType::F32, {3, 4}), StateKind::Parameter,
                         {InitSpec::Kind::Zeros, 0, 0, {}}, at("initializer 'head.weight'"));
  Node *head = buildNode(g, op("linear"), {cur, hw}, {}, at("node '/head/Gemm'"), diag,
                         {"/head/Gemm_output_0"});
  g.setOutputs({head->result()});
  if (!training)
    return;
  std::vector<Value *> grads(layers);
  for (unsigned k = layers; k-- > 0;) {
    std::string mod = "/enc/layer" + std::to_string(k);
    Node *grad = buildNode(g, op("relu"), {acts[k]}, {}, at("node '" + mod + "/act/Relu'"), diag,
                           {std::to_string(200 + k)});
    grad->setRole(NodeRole::Backward);
    grads[k] = grad->result();
  }
  for (unsigned k = 0; k < layers; ++k) {
    std::string wName = "enc.layer" + std::to_string(k) + ".fc.weight";
    Node *next = buildNode(g, op("add"), {weights[k], grads[k]}, {},
                           at("initializer '" + wName + "'"), diag, {wName + ".next"});
    next->setRole(NodeRole::Optimizer);
  }
}

TEST(GraphDot, SlashPathsMakeBlocksLabelledByTheirLastComponent) {
  Graph g("torch-export");
  exportedByTorch(g, 2, false);
  std::string dot = dotOf(g);
  // "/enc" around "/enc/layer0" and "/enc/layer1"; "/enc/layer0/fc" is one
  // node (one location): no block.
  EXPECT_EQ(count(dot, "class=\"block r-forward\""), 3u) << dot;
  EXPECT_NE(dot.find("graph [label=\"enc\", class=\"block r-forward\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("graph [label=\"layer0\", class=\"block r-forward\""), std::string::npos);
  EXPECT_NE(dot.find("graph [label=\"layer1\", class=\"block r-forward\""), std::string::npos);
  EXPECT_EQ(dot.find("label=\"/enc"), std::string::npos) << "labels are relative: " << dot;
  // Dotted names keep their own blocks (GraphDot.BlocksAndLayers...), and
  // a dotted weight of a path-named layer makes none.
  EXPECT_EQ(dot.find("label=\"enc.layer0\""), std::string::npos);
}

/// Every edge's ends are nodes the DOT declares.
void expectNoDanglingEdges(const std::string &dot) {
  std::set<std::string> declared;
  std::vector<std::pair<std::string, std::string>> edges;
  std::istringstream lines(dot);
  std::string line;
  std::regex node(R"re(^\s*("(?:[^"\\]|\\.)*") \[id=)re");
  std::regex edge(R"re(^\s*("(?:[^"\\]|\\.)*") -> ("(?:[^"\\]|\\.)*") \[)re");
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, node))
      declared.insert(m[1]);
    else if (std::regex_search(line, m, edge))
      edges.emplace_back(m[1], m[2]);
  }
  EXPECT_FALSE(edges.empty());
  for (const auto &[tail, head] : edges) {
    EXPECT_TRUE(declared.count(tail)) << tail << " -> " << head;
    EXPECT_TRUE(declared.count(head)) << tail << " -> " << head;
  }
}

TEST(GraphDot, FoldingDrawsEachBlockInstanceAsOneBox) {
  Graph g("torch-export");
  exportedByTorch(g, 3, true);
  DotDrawing d(g);
  EXPECT_EQ(d.maxFoldDepth(), 2u);
  DotSize all = d.size(0), folded = d.size(2);
  // 3 x (weight, linear, helper, relu) + x, head and its weight; 3
  // backward ops and 3 updates.
  EXPECT_EQ(all.nodes, 21u);
  EXPECT_EQ(all.boxes, 0u);
  // A box per instance and role (forward, backward, optimizer): 9, and
  // x, the head and its weight.
  EXPECT_EQ(folded.boxes, 9u);
  EXPECT_EQ(folded.nodes, 12u);
  EXPECT_LT(folded.edges, all.edges);

  std::vector<DotBox> boxes = d.boxes(2);
  ASSERT_EQ(boxes.size(), 9u);
  const DotBox &first = boxes[0];
  EXPECT_EQ(first.id, "blk_0");
  EXPECT_EQ(first.block, "/enc/layer0");
  EXPECT_EQ(first.label, "layer0");
  EXPECT_EQ(first.role, NodeRole::Forward);
  // The numbered helper goes with the ops around it, the weight with its
  // reader.
  EXPECT_EQ(first.ops, (std::vector<unsigned>{0, 1, 2}));
  EXPECT_EQ(first.state, (std::vector<unsigned>{0}));
  EXPECT_EQ(first.dtype, "f32");
  EXPECT_EQ(first.kinds.size(), 3u);
  // Backward and optimizer nodes go with their forward node's instance.
  auto boxOf = [&](llvm::StringRef block, NodeRole role) -> const DotBox * {
    for (const DotBox &b : boxes)
      if (b.block == block && b.role == role)
        return &b;
    return nullptr;
  };
  for (const char *block : {"/enc/layer0", "/enc/layer1", "/enc/layer2"}) {
    ASSERT_TRUE(boxOf(block, NodeRole::Backward)) << block;
    EXPECT_EQ(boxOf(block, NodeRole::Backward)->ops.size(), 1u);
    ASSERT_TRUE(boxOf(block, NodeRole::Optimizer)) << block;
    EXPECT_EQ(boxOf(block, NodeRole::Optimizer)->ops.size(), 1u);
  }

  std::string dot;
  llvm::raw_string_ostream os(dot);
  d.print(os, 2);
  os.flush();
  EXPECT_EQ(count(dot, "class=\"fold r-forward dt-f32\""), 3u) << dot;
  EXPECT_NE(dot.find("[id=\"blk_0\", class=\"fold r-forward dt-f32\", shape=box3d"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("label=\"layer0\\n3 ops\\nf32 3\""), std::string::npos) << dot;
  // The folded ops are not drawn; the boxes inside "/enc" are.
  EXPECT_EQ(dot.find("id=\"op_0\""), std::string::npos);
  EXPECT_NE(dot.find("graph [label=\"enc\", class=\"block r-forward\""), std::string::npos);
  // One edge between consecutive instances, however many values cross.
  EXPECT_EQ(count(dot, "\"box#0\" -> \"box#1\""), 1u) << dot;
  EXPECT_EQ(count(dot, "\"box#1\" -> \"box#2\""), 1u) << dot;
  expectNoDanglingEdges(dot);
  expectNoDanglingEdges(dotOf(g));

  // At depth 1, "/enc" is one box per role.
  EXPECT_EQ(d.size(1).boxes, 3u);

  if (!api::canLayOutGraphs())
    GTEST_SKIP() << "built without Graphviz";
  api::Result<std::string> svg = api::layoutSvg(dot);
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_NE(svg->find("<g id=\"blk_0\" class=\"node fold r&#45;forward dt&#45;f32\">"),
            std::string::npos);
}

TEST(GraphPage, FoldsALargeGraphAndSaysSo) {
  if (!api::canLayOutGraphs())
    GTEST_SKIP() << "built without Graphviz";
  api::LoadOptions load;
  load.optLevel = "O1";
  api::Result<api::Model> m =
      api::Model::loadFile(std::string(AMPC_SOURCE_DIR) + "/examples/transformer.yaml", load);
  ASSERT_TRUE(m.ok()) << m.status().message();
  api::PipelineOptions p;
  p.stage = api::Stage::Train;
  p.resolveEpochs = false;
  ASSERT_TRUE(m->rewrite(p).ok());
  // Small enough to draw every node...
  api::ViewOptions opts;
  api::Result<api::ViewPlan> plan = api::planView(*m, opts);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_FALSE(plan->folded());
  EXPECT_EQ(plan->drawn, plan->nodes);
  // ...unless asked, or above the limits: then each encoder block is one
  // box in the forward, backward and optimizer parts.
  for (api::ViewDetail detail : {api::ViewDetail::Blocks, api::ViewDetail::Auto}) {
    opts.detail = detail;
    opts.foldAboveNodes = detail == api::ViewDetail::Auto ? 100 : 1500;
    plan = api::planView(*m, opts);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_TRUE(plan->folded());
    EXPECT_EQ(plan->foldDepth, 1u);
    EXPECT_EQ(plan->boxes, 6u);
    EXPECT_LT(plan->drawn, plan->nodes / 4);
  }
  api::Result<std::string> page = api::graphPage(*m, nullptr, opts);
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_NE(page->find("<p id=\"fold-note\" class=\"folded\"><b>Folded.</b>"), std::string::npos);
  EXPECT_NE(page->find("<code>ampc view --detail ops</code>"), std::string::npos);
  EXPECT_NE(page->find("<g id=\"blk_0\" data-node=\"layer0\" class=\"node fold r&#45;forward"),
            std::string::npos);
  EXPECT_NE(page->find("\"blk_0\": {\"kind\": \"block\", \"name\": \"layer0\""), std::string::npos);
  EXPECT_NE(page->find("\"name\": \"layer0 (backward)\""), std::string::npos);
  // Every node keeps its details, and names the box it is drawn in.
  EXPECT_NE(page->find("\"name\": \"%layer0.q\", "), std::string::npos);
  EXPECT_NE(page->find("\"box\": \"blk_0\"}"), std::string::npos);
  // Drawn: the boxes and what no block holds, not the blocks' nodes.
  EXPECT_EQ(page->find("data-node=\"%layer0.q\""), std::string::npos);
  EXPECT_NE(page->find("data-node=\"%tok_emb\""), std::string::npos);

  // Every node, as asked, up to the limit.
  opts.detail = api::ViewDetail::Ops;
  plan = api::planView(*m, opts);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->folded());
  opts.maxDrawnNodes = plan->nodes - 1;
  EXPECT_FALSE(api::planView(*m, opts).ok());
  // Folded into fewer boxes than the limit is drawn.
  opts.detail = api::ViewDetail::Auto;
  plan = api::planView(*m, opts);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->folded());
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

  // 8 nodes, 2 inputs and 6 parameters: one more than allowed is refused
  // (mlp has no blocks to fold).
  opts.maxDrawnNodes = m->graph().numNodes() + 2 + 6 - 1;
  api::Result<std::string> big = api::graphPage(*m, nullptr, opts);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("a page draws at most"), std::string::npos)
      << big.status().message();
}

} // namespace
