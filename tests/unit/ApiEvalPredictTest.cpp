//===- ApiEvalPredictTest.cpp - Program::evaluate(data), predict ----------===//
//
// Every sample counts (the last partial batch too), inference runs in eval
// mode (a sample predicts the same alone as inside a batch), and predictions
// save as .npy and .csv.
//
//===----------------------------------------------------------------------===//
#include "ampc/ampc.h"

#include "TempDir.h"

#include "ir/support/NpyFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

using namespace ampc::api;

namespace {

const std::string kModel = std::string(AMPC_SOURCE_DIR) + "/tests/lit/cli/Inputs/tiny-bn.yaml";

/// tiny-bn trained a few steps (so its running statistics are not the
/// initial ones), compiled at batch `batch`.
struct Trained {
  Model model;
  Program program;
};

Trained trainedAt(std::optional<int64_t> batch, const std::string &checkpoint) {
  LoadOptions load;
  load.batch = batch;
  Result<Model> m = Model::loadFile(kModel, load);
  EXPECT_TRUE(m.ok()) << m.status().message();
  PipelineOptions p;
  p.stage = Stage::Train;
  EXPECT_TRUE(m->rewrite(p).ok());
  CompileOptions c;
  c.device = "cpu-ref";
  Result<Program> prog = Program::compile(*m, c);
  EXPECT_TRUE(prog.ok()) << prog.status().message();
  return Trained{std::move(*m), std::move(*prog)};
}

} // namespace

TEST(ApiEvalPredict, EverySampleCountsAndOneSamplePredictsAsInABatch) {
  ampc::testing::TempDir dir;
  std::string ckpt = dir.file("t.ckpt");
  {
    Trained t = trainedAt(std::nullopt, ckpt);
    TrainOptions opts;
    opts.steps = 6;
    ASSERT_TRUE(t.program.train(opts).ok());
    ASSERT_TRUE(t.program.saveCheckpoint(ckpt).ok());
  }
  DataSpec data;
  data.spec = "{synthetic: {seed: 3, size: 10}}";

  // Batch 4: two full batches and a partial one of 2, all counted.
  Trained at4 = trainedAt(4, ckpt);
  ASSERT_TRUE(at4.program.loadCheckpoint(ckpt).ok());
  Result<EvalReport> report = at4.program.evaluate(data);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->samples, 10);
  EXPECT_EQ(report->lossKind, "cross_entropy");
  EXPECT_TRUE(std::isfinite(report->loss));
  ASSERT_TRUE(report->accuracy.has_value());
  EXPECT_GE(*report->accuracy, 0.0);
  EXPECT_LE(*report->accuracy, 1.0);
  EXPECT_FALSE(report->top5.has_value()) << "3 classes have no top-5";

  Result<Predictions> batched = at4.program.predict(data);
  ASSERT_TRUE(batched.ok()) << batched.status().message();
  ASSERT_EQ(batched->shape, (std::vector<int64_t>{10, 3}));

  // Batch 1: each sample alone. Batchnorm on its running statistics gives
  // the same logits as inside a batch (training mode would not).
  Trained at1 = trainedAt(1, ckpt);
  ASSERT_TRUE(at1.program.loadCheckpoint(ckpt).ok());
  Result<Predictions> single = at1.program.predict(data);
  ASSERT_TRUE(single.ok()) << single.status().message();
  ASSERT_EQ(single->values.size(), batched->values.size());
  for (size_t i = 0; i < single->values.size(); ++i)
    EXPECT_NEAR(single->values[i], batched->values[i], 1e-5) << "value " << i;
  Result<EvalReport> one = at1.program.evaluate(data);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->samples, 10);
  EXPECT_NEAR(one->loss, report->loss, 1e-5);

  // Saved as .npy (f32 logits, or i64 class ids) and .csv (a row a sample).
  ASSERT_TRUE(savePredictions(*batched, dir.file("p.npy")).ok());
  ampc::NpyArray a;
  std::string err;
  ASSERT_TRUE(ampc::readNpy(dir.file("p.npy"), a, err)) << err;
  EXPECT_EQ(a.dtype, ampc::DType::F32);
  EXPECT_EQ(std::vector<int64_t>(a.shape.begin(), a.shape.end()), batched->shape);
  ASSERT_TRUE(savePredictions(*batched, dir.file("ids.npy"), /*argmax=*/true).ok());
  ASSERT_TRUE(ampc::readNpy(dir.file("ids.npy"), a, err)) << err;
  EXPECT_EQ(a.dtype, ampc::DType::I64);
  ASSERT_EQ(a.numElements(), 10);
  const int64_t *ids = reinterpret_cast<const int64_t *>(a.data.data());
  for (int64_t s = 0; s < 10; ++s) {
    const float *row = batched->values.data() + s * 3;
    int64_t best = std::max_element(row, row + 3) - row;
    EXPECT_EQ(ids[s], best) << "sample " << s;
  }
  ASSERT_TRUE(savePredictions(*batched, dir.file("p.csv")).ok());
  std::ifstream csv(dir.file("p.csv"));
  int rows = 0;
  for (std::string line; std::getline(csv, line);)
    rows += !line.empty();
  EXPECT_EQ(rows, 10);
  EXPECT_FALSE(savePredictions(*batched, dir.file("p.txt")).ok()) << "unknown extension";
}

TEST(ApiEvalPredict, BadDataIsAnErrorNotACrash) {
  Trained t = trainedAt(4, "");
  DataSpec data;
  data.spec = "{npy: {x: no-such-file.npy, label: nor-this.npy}}";
  EXPECT_FALSE(t.program.evaluate(data).ok());
  EXPECT_FALSE(t.program.predict(data).ok());
  data.spec = "{synthetic: {seed: 1, size: 0}}";
  EXPECT_FALSE(t.program.evaluate(data).ok());
}
