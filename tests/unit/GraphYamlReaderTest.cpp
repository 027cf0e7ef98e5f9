//===- GraphYamlReaderTest.cpp - --emit yaml, read back ---------------------===//
#include "frontends/yaml/GraphYamlEmitter.h"
#include "frontends/yaml/ModelLoader.h"

#include "ir/Builder.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace ampc;

namespace {

const char *kModel = R"(model: small
batch: 2
inputs:
  image: {shape: [B, 1, 4, 4]}
  label: {shape: [B], dtype: i64}
layers:
  - conv2d: {out_channels: 2, kernel: 3, padding: 1, name: conv}
  - batchnorm2d: {name: bn}
  - relu: {}
  - global_avgpool: {}
  - flatten: {}
  - linear: {out_features: 3, name: logits, precision: fp32, trainable: false}
loss: {cross_entropy: {input: logits, target: label}}
optimizer: {adam: {lr: 0.5}}
)";

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  llvm::raw_string_ostream os(s);
  diag.print(os);
  return os.str();
}

/// The model imported, and rewritten at `level` (the whole training step)
/// unless level is empty.
std::unique_ptr<Graph> model(const char *level) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelString(kModel, "m.yaml", diag);
  EXPECT_TRUE(g) << diagText(diag);
  if (!g || !*level)
    return g;
  PassManager pm;
  EXPECT_TRUE(setPolicyOverride(g->meta(), "opt_level", level, diag) &&
              addStandardPipeline(pm, PipelineStage::Train, diag) && pm.run(*g, diag))
      << diagText(diag);
  return g;
}

/// Reads emitted YAML back; the graph must load.
std::unique_ptr<Graph> readBack(const std::string &yaml, const LoadOptions &opts = {}) {
  DiagnosticEngine diag;
  YamlContent content = YamlContent::Model;
  std::unique_ptr<Graph> g = loadModelString(yaml, "g.yaml", diag, opts, ".", &content);
  EXPECT_TRUE(g) << diagText(diag);
  EXPECT_EQ(content, YamlContent::Graph);
  return g;
}

/// The first diagnostic of a graph file that must not load.
std::string firstError(const std::string &yaml, const LoadOptions &opts = {}) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelString(yaml, "g.yaml", diag, opts);
  EXPECT_FALSE(g);
  EXPECT_TRUE(diag.hasErrors());
  return diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str();
}

/// `text` with the first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

/// The 1-based line of the first occurrence of `needle` in `text`.
unsigned lineOf(const std::string &text, const std::string &needle) {
  size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return 1 + static_cast<unsigned>(std::count(text.begin(), text.begin() + at, '\n'));
}

TEST(GraphYamlReaderTest, ImportedGraphReadsBackExactly) {
  std::unique_ptr<Graph> g = model("");
  ASSERT_TRUE(g);
  std::string yaml = emitGraphYaml(*g);
  std::unique_ptr<Graph> back = readBack(yaml);
  ASSERT_TRUE(back);
  EXPECT_EQ(emitGraphYaml(*back), yaml);
  // The textual IR shows every attribute's type (2 versus 2.0), each
  // value's type, roles, precision overrides, frozen and locations.
  EXPECT_EQ(printGraphToString(*back), printGraphToString(*g));
}

TEST(GraphYamlReaderTest, TrainingGraphsReadBackExactlyAtEveryLevel) {
  for (const char *level : {"O0", "O1", "O2", "O3"}) {
    SCOPED_TRACE(level);
    std::unique_ptr<Graph> g = model(level);
    ASSERT_TRUE(g);
    std::string yaml = emitGraphYaml(*g);
    std::unique_ptr<Graph> back = readBack(yaml);
    ASSERT_TRUE(back);
    EXPECT_EQ(emitGraphYaml(*back), yaml);
    EXPECT_EQ(printGraphToString(*back), printGraphToString(*g));
    ASSERT_EQ(back->stateUpdates().size(), g->stateUpdates().size());
    EXPECT_EQ(back->outputs().size(), g->outputs().size());
  }
}

TEST(GraphYamlReaderTest, AttributeTypesComeFromTheirSpelling) {
  Graph g("attrs");
  AttrMap &meta = g.meta();
  meta["int"] = Attribute(int64_t(-100));
  meta["float"] = Attribute(1e-08);
  meta["whole"] = Attribute(2.0);
  meta["negzero"] = Attribute(-0.0);
  meta["big"] = Attribute(1e300);
  meta["inf"] = Attribute(std::numeric_limits<double>::infinity());
  meta["-inf"] = Attribute(-std::numeric_limits<double>::infinity());
  meta["nan"] = Attribute(std::nan(""));
  meta["yes"] = Attribute(true);
  meta["str"] = Attribute("mlp");
  meta["str.true"] = Attribute("true");
  meta["str.number"] = Attribute("12");
  meta["str.dtype"] = Attribute("f16");
  meta["str.escapes"] = Attribute("a \"quoted\"\\ line\nand\ttab");
  meta["str.empty"] = Attribute("");
  meta["ints"] = Attribute(std::vector<int64_t>{1, -2});
  meta["floats"] = Attribute(std::vector<double>{0.9, 2.0});
  meta["empty"] = Attribute(std::vector<int64_t>{});
  meta["dtype"] = Attribute(DType::BF16);
  meta["odd key: with colon"] = Attribute(int64_t(1));
  std::string yaml = emitGraphYaml(g);
  std::unique_ptr<Graph> back = readBack(yaml);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->meta().size(), meta.size());
  for (const auto &[key, value] : meta) {
    SCOPED_TRACE(key.str());
    ASSERT_TRUE(back->meta().count(key));
    const Attribute &read = back->meta().at(key);
    EXPECT_EQ(read.type(), value.type());
    EXPECT_EQ(read.str(), value.str());
  }
  EXPECT_TRUE(std::signbit(back->meta().at("negzero").getFloat()));
  EXPECT_EQ(emitGraphYaml(*back), yaml);
}

TEST(GraphYamlReaderTest, LocationsReadBackAsWritten) {
  DiagnosticEngine diag;
  Graph g("locs");
  Value *x = g.addInput("x", TensorType(DType::F32, {2}), Location::inFile("dir:a/m.yaml", 3, 4));
  Value *y = g.addInput("y", TensorType(DType::F32, {2}));
  Node *n =
      buildNode(g, OpRegistry::builtin().get(OpKind::Add), {x, y}, {},
                Location::inFile("m.onnx: node 'add_1' (op Add, opset 17)", 0, 0), diag, {"sum"});
  ASSERT_TRUE(n) << diagText(diag);
  g.addOutput(n->result());
  std::string yaml = emitGraphYaml(g);
  std::unique_ptr<Graph> back = readBack(yaml);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->inputs()[0]->loc(), x->loc());
  // A declaration without a location is placed at its entry in this file.
  EXPECT_EQ(back->inputs()[1]->loc().file(), "g.yaml");
  EXPECT_EQ(back->inputs()[1]->loc().line(), lineOf(yaml, "name: y"));
  EXPECT_EQ(back->nodes().front().loc(), n->loc());
}

TEST(GraphYamlReaderTest, ForwardReferencesResolve) {
  // Nodes may name values defined further down, as in the textual IR; the
  // verifier then reports the use before the definition.
  std::string yaml = R"(graph: g
meta: {}
inputs:
  - {name: x, dtype: f32, shape: [2]}
state: []
nodes:
  - {op: relu, inputs: [a], outputs: [{name: b, dtype: f32, shape: [2]}], attrs: {}, role: forward, precision: none}
  - {op: relu, inputs: [x], outputs: [{name: a, dtype: f32, shape: [2]}], attrs: {}, role: forward, precision: none}
updates: []
outputs: [b]
)";
  EXPECT_NE(firstError(yaml).find("g.yaml:7:5: error:"), std::string::npos) << firstError(yaml);
}

//===----------------------------------------------------------------------===//
// Errors: each at the YAML node, file:line:col
//===----------------------------------------------------------------------===//

class GraphYamlErrorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::unique_ptr<Graph> g = model("O2");
    ASSERT_TRUE(g);
    yaml = emitGraphYaml(*g);
  }
  std::string yaml;
};

TEST_F(GraphYamlErrorsTest, UnknownOp) {
  std::string bad = replaced(yaml, "op: relu\n", "op: frobnicate\n");
  EXPECT_EQ(firstError(bad), "g.yaml:" + std::to_string(lineOf(bad, "op: frobnicate")) +
                                 ":9: error: unknown op 'frobnicate'");
}

TEST_F(GraphYamlErrorsTest, UnknownKeySuggestsTheRightOne) {
  std::string bad = replaced(yaml, "    role: forward\n", "    rol: forward\n");
  EXPECT_NE(firstError(bad).find("error: unknown key 'rol' in a node; did you mean 'role'?"),
            std::string::npos)
      << firstError(bad);
}

TEST_F(GraphYamlErrorsTest, UndefinedOperandsAreAllReported) {
  std::string bad = replaced(yaml, "inputs: [bn]", "inputs: [nope]");
  bad = replaced(bad, "inputs: [relu_0]", "inputs: [nope2]");
  DiagnosticEngine diag;
  EXPECT_FALSE(loadModelString(bad, "g.yaml", diag));
  std::string all = diagText(diag);
  EXPECT_NE(all.find("use of undefined value 'nope'"), std::string::npos) << all;
  EXPECT_NE(all.find("use of undefined value 'nope2'"), std::string::npos) << all;
}

TEST_F(GraphYamlErrorsTest, MissingOperand) {
  std::string bad =
      replaced(yaml, "inputs: [conv, bn.weight, bn.bias, bn.running_mean, bn.running_var]",
               "inputs: [conv, bn.weight]");
  std::string e = firstError(bad);
  EXPECT_NE(e.find("g.yaml:" + std::to_string(lineOf(bad, "inputs: [conv, bn.weight]")) +
                   ":13: error: batchnorm2d: expected 5 operands, got 2"),
            std::string::npos)
      << e;
}

TEST_F(GraphYamlErrorsTest, WrongResultTypeIsTheVerifiersAtTheNode) {
  std::string bad = replaced(yaml, "{name: relu_0, dtype: bf16", "{name: relu_0, dtype: f16");
  std::string e = firstError(bad);
  // At the node's entry in this file, not at the model file it came from.
  EXPECT_EQ(e.rfind("g.yaml:" + std::to_string(lineOf(bad, "{name: relu_0, dtype: f16") - 3) +
                        ":5: error: ",
                    0),
            0u)
      << e;
}

TEST_F(GraphYamlErrorsTest, WrongAttributeType) {
  std::string bad = replaced(yaml, "keepdim: false", "keepdim: 3");
  EXPECT_NE(firstError(bad).find(":7: error: reduce_sum: "), std::string::npos) << firstError(bad);
}

TEST_F(GraphYamlErrorsTest, TruncatedFiles) {
  // Cut at a line's end: the sections after it are missing.
  std::string cut = yaml.substr(0, yaml.find("updates:"));
  EXPECT_EQ(firstError(cut), "g.yaml:1:1: error: a graph written by 'ampc --emit yaml' needs "
                             "'updates' (is the file cut short?)");
  // Inside a node: its last keys are missing.
  cut = yaml.substr(0, yaml.find("    precision: none"));
  EXPECT_NE(firstError(cut).find("error: a node needs 'precision'"), std::string::npos)
      << firstError(cut);
  // Inside a flow list: the YAML itself is malformed.
  cut = yaml.substr(0, yaml.rfind(']'));
  EXPECT_NE(firstError(cut).find("error: invalid YAML"), std::string::npos) << firstError(cut);
}

TEST_F(GraphYamlErrorsTest, BadDeclarations) {
  EXPECT_NE(
      firstError(replaced(yaml, "dtype: i64", "dtype: i65"))
          .find("error: unknown dtype 'i65' (expected f32, f16, bf16, f64, i64, i32 or bool)"),
      std::string::npos);
  EXPECT_NE(firstError(replaced(yaml, "shape: [2]\n", "shape: [-2]\n")).find("is negative"),
            std::string::npos);
  EXPECT_NE(firstError(replaced(yaml, "kind: buffer", "kind: bufer"))
                .find("error: unknown state kind 'bufer'"),
            std::string::npos);
  EXPECT_NE(firstError(replaced(yaml, "init: zeros", "init: zeroes"))
                .find("error: invalid initializer 'zeroes': unknown initializer 'zeroes'"),
            std::string::npos);
  EXPECT_NE(firstError(replaced(yaml, "name: label\n", "name: image\n"))
                .find("error: redefinition of value 'image' (first defined at "),
            std::string::npos);
  EXPECT_NE(firstError(replaced(yaml, "role: backward", "role: sideways"))
                .find("error: unknown role 'sideways'"),
            std::string::npos);
  EXPECT_NE(firstError(replaced(yaml, "precision: none", "precision: fp16"))
                .find("error: unknown precision 'fp16' (expected none, fp32 or half)"),
            std::string::npos);
}

TEST_F(GraphYamlErrorsTest, BadUpdatesAndOutputs) {
  std::string bad = replaced(yaml, "{state: bn.running_mean,", "{state: image,");
  EXPECT_NE(firstError(bad).find("error: update target 'image' is not a state tensor"),
            std::string::npos)
      << firstError(bad);
  bad = replaced(yaml, "{state: bn.running_var,", "{state: bn.running_mean,");
  EXPECT_NE(firstError(bad).find("error: state 'bn.running_mean' is updated more than once"),
            std::string::npos)
      << firstError(bad);
  bad = replaced(yaml, "outputs: [loss", "outputs: [lost");
  EXPECT_NE(firstError(bad).find("error: use of undefined value 'lost'"), std::string::npos);
}

TEST_F(GraphYamlErrorsTest, Limits) {
  LoadOptions opts;
  opts.maxNodes = 3;
  EXPECT_NE(firstError(yaml, opts)
                .find("more than the limit of 3; raise the limit with "
                      "--max-nodes"),
            std::string::npos);
  opts = {};
  opts.maxElements = 10;
  EXPECT_NE(firstError(yaml, opts)
                .find("more than the limit of 10; raise the limit with "
                      "--max-elements"),
            std::string::npos);
}

} // namespace
