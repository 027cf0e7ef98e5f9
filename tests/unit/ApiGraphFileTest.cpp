//===- ApiGraphFileTest.cpp - Graph files through the public API ------------===//
//
// What `ampc --emit yaml|ir` wrote, loaded with Model::loadFile/loadString:
// as written (no pass again), training to the model's losses, and refusing
// what would rewrite it.
//
//===----------------------------------------------------------------------===//
#include "ampc/ampc.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

using namespace ampc::api;

namespace {

constexpr const char *kModel = R"(model: small
batch: 8
inputs:
  x: {shape: [B, 2, 1, 3]}
  label: {shape: [B], dtype: i64}
init:
  seed: 0
layers:
  - conv2d: {out_channels: 4, kernel: 1, name: c1}
  - batchnorm2d: {name: bn1}
  - relu: {}
  - flatten: {}
  - linear: {out_features: 3, name: logits}
loss: {cross_entropy: {input: logits, target: label}}
optimizer: {adam: {lr: 0.01}}
train:
  steps: 3
  data: {synthetic: {seed: 0, size: 64}}
)";

/// The model rewritten at `level` for `stage`.
Model rewritten(const char *level, Stage stage) {
  LoadOptions load;
  load.optLevel = level;
  Result<Model> m = Model::loadString(kModel, "small.yaml", load);
  EXPECT_TRUE(m.ok()) << m.status().message();
  PipelineOptions p;
  p.stage = stage;
  p.device = "cpu";
  EXPECT_TRUE(m->rewrite(p).ok());
  return std::move(m).value();
}

void write(const std::string &path, const std::string &text) { std::ofstream(path) << text; }

TEST(ApiGraphFileTest, EmittedGraphsLoadAsWritten) {
  ampc::testing::TempDir dir;
  Model model = rewritten("O2", Stage::Train);
  std::string yaml = model.graph().toYaml(), ir = model.graph().printIR();
  write(dir.file("g.yaml"), yaml);
  write(dir.file("g.ir"), ir);
  for (const char *name : {"g.yaml", "g.ir"}) {
    SCOPED_TRACE(name);
    Result<Model> g = Model::loadFile(dir.file(name));
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_TRUE(g->asWritten());
    EXPECT_EQ(g->rewrittenStage(), Stage::Train);
    EXPECT_TRUE(g->trainable());
    EXPECT_EQ(g->graph().toYaml(), yaml);
    EXPECT_EQ(g->graph().printIR(), ir);
    // No pass runs on it again.
    Status again = g->rewrite();
    EXPECT_FALSE(again.ok());
    EXPECT_NE(again.message().find("holds a training graph rewritten at O2, which runs as "
                                   "written: no pass runs on it again"),
              std::string::npos)
        << again.message();
    TrainSettings lr;
    lr.learningRate = 0.1;
    EXPECT_FALSE(g->setTrainSettings(lr).ok());
    TrainSettings steps;
    steps.steps = 2;
    EXPECT_TRUE(g->setTrainSettings(steps).ok());
  }
  // The model file's text loads the same way.
  Result<Model> fromString = Model::loadString(yaml, "g.yaml");
  ASSERT_TRUE(fromString.ok()) << fromString.status().message();
  EXPECT_TRUE(fromString->asWritten());
  EXPECT_FALSE(Model::loadString(kModel, "small.yaml")->asWritten());
}

TEST(ApiGraphFileTest, TrainsToTheModelsLosses) {
  ampc::testing::TempDir dir;
  Model model = rewritten("O2", Stage::Train);
  write(dir.file("g.yaml"), model.graph().toYaml());
  Result<Model> g = Model::loadFile(dir.file("g.yaml"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  CompileOptions c;
  c.device = "cpu";
  TrainOptions t;
  t.log = [](std::string_view) {};
  Result<Program> fromModel = Program::compile(model, c), fromGraph = Program::compile(*g, c);
  ASSERT_TRUE(fromModel.ok() && fromGraph.ok());
  Result<TrainReport> a = fromModel->train(t), b = fromGraph->train(t);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->steps, 3);
  EXPECT_EQ(b->steps, 3);
  EXPECT_EQ(a->firstLoss, b->firstLoss);
  EXPECT_EQ(a->finalLoss, b->finalLoss);
}

TEST(ApiGraphFileTest, ForwardGraphs) {
  ampc::testing::TempDir dir;
  Model model = rewritten("O0", Stage::Forward);
  write(dir.file("f.ir"), model.graph().printIR());
  Result<Model> g = Model::loadFile(dir.file("f.ir"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->rewrittenStage(), Stage::Forward);
  // Its meta keeps the model's optimizer, but a forward graph does not train.
  EXPECT_FALSE(g->trainable());
  CompileOptions c;
  c.device = "cpu";
  Result<Program> a = Program::compile(model, c), b = Program::compile(*g, c);
  ASSERT_TRUE(a.ok() && b.ok());
  Result<ForwardReport> ra = a->runForward(), rb = b->runForward();
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(ra->outputs.size(), rb->outputs.size());
  EXPECT_EQ(ra->outputs[0].value, rb->outputs[0].value);
}

TEST(ApiGraphFileTest, LoadOptionsThatWouldRewriteAreRefused) {
  ampc::testing::TempDir dir;
  write(dir.file("g.yaml"), rewritten("O2", Stage::Train).graph().toYaml());
  LoadOptions same;
  same.optLevel = "O2";
  same.batch = 8;
  same.policyOverrides = {{"half_type", "bf16"}};
  EXPECT_TRUE(Model::loadFile(dir.file("g.yaml"), same).ok());
  LoadOptions level;
  level.optLevel = "O1";
  Result<Model> r = Model::loadFile(dir.file("g.yaml"), level);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("it cannot be rewritten at O1"), std::string::npos)
      << r.status().message();
  LoadOptions batch;
  batch.batch = 4;
  EXPECT_FALSE(Model::loadFile(dir.file("g.yaml"), batch).ok());
  LoadOptions half;
  half.policyOverrides = {{"half_type", "f16"}};
  r = Model::loadFile(dir.file("g.yaml"), half);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'half_type: bf16' would become 'half_type: f16'"),
            std::string::npos)
      << r.status().message();
}

} // namespace
