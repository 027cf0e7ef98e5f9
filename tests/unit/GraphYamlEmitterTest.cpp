//===- GraphYamlEmitterTest.cpp - --emit yaml -------------------------------===//
#include "frontends/yaml/GraphYamlEmitter.h"
#include "frontends/yaml/ModelLoader.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

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
  - global_avgpool: {}
  - flatten: {}
  - linear: {out_features: 3, name: logits, precision: fp32, trainable: false}
loss: {cross_entropy: {input: logits, target: label}}
optimizer: {adam: {lr: 0.5}}
)";

TEST(GraphYamlEmitterTest, EmitsGraphThatParsesBack) {
  DiagnosticEngine diag;
  auto g = loadModelString(kModel, "m.yaml", diag);
  ASSERT_TRUE(g);
  std::string text = emitGraphYaml(*g);
  YAML::Node y = YAML::Load(text);

  EXPECT_EQ(y["graph"].as<std::string>(), "small");
  EXPECT_EQ(y["meta"]["model"].as<std::string>(), "small");
  EXPECT_EQ(y["meta"]["batch"].as<int>(), 2);
  EXPECT_EQ(y["meta"]["optimizer"].as<std::string>(), "adam");
  EXPECT_DOUBLE_EQ(y["meta"]["optimizer.lr"].as<double>(), 0.5);
  EXPECT_EQ(y["meta"]["optimizer.betas"].size(), 2u);
  EXPECT_DOUBLE_EQ(y["meta"]["optimizer.betas"][1].as<double>(), 0.999);

  ASSERT_EQ(y["inputs"].size(), 2u);
  EXPECT_EQ(y["inputs"][1]["name"].as<std::string>(), "label");
  EXPECT_EQ(y["inputs"][1]["dtype"].as<std::string>(), "i64");
  EXPECT_EQ(y["inputs"][0]["shape"].as<std::vector<int>>(), (std::vector<int>{2, 1, 4, 4}));
  EXPECT_EQ(y["inputs"][0]["loc"].as<std::string>(), "m.yaml:4:3");

  YAML::Node state = y["state"];
  ASSERT_EQ(state.size(), 8u);
  EXPECT_EQ(state[0]["name"].as<std::string>(), "conv.weight");
  EXPECT_EQ(state[0]["kind"].as<std::string>(), "param");
  EXPECT_EQ(state[0]["shape"].as<std::vector<int>>(), (std::vector<int>{2, 1, 3, 3}));
  EXPECT_EQ(state[0]["init"].as<std::string>().rfind("uniform(", 0), 0u);
  EXPECT_TRUE(state[0]["trainable"].as<bool>());
  EXPECT_EQ(state[4]["name"].as<std::string>(), "bn.running_mean");
  EXPECT_EQ(state[4]["kind"].as<std::string>(), "buffer");
  EXPECT_EQ(state[4]["init"].as<std::string>(), "zeros");
  EXPECT_EQ(state[6]["name"].as<std::string>(), "logits.weight");
  EXPECT_FALSE(state[6]["trainable"].as<bool>());

  YAML::Node nodes = y["nodes"];
  ASSERT_EQ(nodes.size(), 6u);
  YAML::Node conv = nodes[0];
  EXPECT_EQ(conv["op"].as<std::string>(), "conv2d");
  EXPECT_EQ(conv["inputs"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"image", "conv.weight", "conv.bias"}));
  EXPECT_EQ(conv["outputs"][0]["name"].as<std::string>(), "conv");
  EXPECT_EQ(conv["outputs"][0]["dtype"].as<std::string>(), "f32");
  EXPECT_EQ(conv["outputs"][0]["shape"].as<std::vector<int>>(), (std::vector<int>{2, 2, 4, 4}));
  EXPECT_EQ(conv["attrs"]["padding"].as<std::vector<int>>(), (std::vector<int>{1, 1}));
  EXPECT_EQ(conv["attrs"]["groups"].as<int>(), 1);
  EXPECT_EQ(conv["role"].as<std::string>(), "forward");
  EXPECT_EQ(conv["precision"].as<std::string>(), "none");
  EXPECT_EQ(conv["loc"].as<std::string>(), "m.yaml:7:5");

  YAML::Node bn = nodes[1];
  EXPECT_EQ(bn["outputs"].size(), 3u);
  EXPECT_EQ(bn["outputs"][2]["name"].as<std::string>(), "bn.running_var.next");
  EXPECT_TRUE(bn["attrs"]["training"].as<bool>());
  EXPECT_DOUBLE_EQ(bn["attrs"]["eps"].as<double>(), 1e-5);

  EXPECT_EQ(nodes[4]["precision"].as<std::string>(), "fp32");
  EXPECT_EQ(nodes[5]["op"].as<std::string>(), "cross_entropy");
  EXPECT_EQ(nodes[5]["role"].as<std::string>(), "loss");
  EXPECT_EQ(nodes[5]["outputs"][0]["shape"].size(), 0u); // a scalar

  ASSERT_EQ(y["updates"].size(), 2u);
  EXPECT_EQ(y["updates"][0]["state"].as<std::string>(), "bn.running_mean");
  EXPECT_EQ(y["updates"][0]["value"].as<std::string>(), "bn.running_mean.next");
  EXPECT_EQ(y["outputs"].as<std::vector<std::string>>(), (std::vector<std::string>{"loss"}));

  // Deterministic: the same graph emits the same text.
  EXPECT_EQ(emitGraphYaml(*g), text);
}

TEST(GraphYamlEmitterTest, QuotesStringAttributesAndEmitsEmptyGraph) {
  Graph g("empty");
  g.meta()["note"] = Attribute("true");
  g.meta()["ratio"] = Attribute(1.0);
  YAML::Node y = YAML::Load(emitGraphYaml(g));
  EXPECT_EQ(y["graph"].as<std::string>(), "empty");
  // A string that looks like a bool stays a string.
  EXPECT_EQ(y["meta"]["note"].Tag(), "!");
  EXPECT_EQ(y["meta"]["ratio"].as<std::string>(), "1.0");
  EXPECT_EQ(y["nodes"].size(), 0u);
  EXPECT_TRUE(y["state"].IsSequence());
  EXPECT_TRUE(y["outputs"].IsSequence());
}

} // namespace
