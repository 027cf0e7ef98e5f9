//===- ApiEvalPredictTest.cpp - Program::evaluate(data), predict ----------===//
//
// Every sample counts (the last partial batch too), inference runs in eval
// mode (a sample predicts the same alone as inside a batch), predictions
// save as .npy and .csv, an output whose dim 0 is not the batch ([B*T, V])
// is written whole, sample by sample, or refused when its rows are not one
// sample's each, predicting needs no labels, and a team that adapts to
// the cores changes nothing in the results.
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
const std::string kInputs = std::string(AMPC_SOURCE_DIR) + "/tests/lit/cli/Inputs/";

/// tiny-bn trained a few steps (so its running statistics are not the
/// initial ones), compiled at batch `batch` on `device`.
struct Trained {
  Model model;
  Program program;
};

Trained trainedAt(std::optional<int64_t> batch, const std::string &checkpoint,
                  const std::string &device = "cpu-ref") {
  LoadOptions load;
  load.batch = batch;
  Result<Model> m = Model::loadFile(kModel, load);
  EXPECT_TRUE(m.ok()) << m.status().message();
  PipelineOptions p;
  p.stage = Stage::Train;
  EXPECT_TRUE(m->rewrite(p).ok());
  CompileOptions c;
  c.device = device;
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

// With adaptThreads the team follows the cores between batches (the
// governor's policy is tested in ThreadGovernorTest); here: the cpu
// device's evaluation and prediction give the same results as a fixed
// team and leave the team as they found it.
TEST(ApiEvalPredict, AnAdaptingTeamGivesTheFixedTeamsResultsAndIsRestored) {
  Trained t = trainedAt(4, "", "cpu");
  Program *prog = &t.program;
  int before = threads();
  setThreads(2);
  DataSpec data;
  data.spec = "{synthetic: {seed: 3, size: 50}}";
  InferenceRunOptions adapt;
  adapt.adaptThreads = true;
  Result<EvalReport> fixedEval = prog->evaluate(data);
  Result<EvalReport> adaptedEval = prog->evaluate(data, adapt);
  ASSERT_TRUE(fixedEval.ok() && adaptedEval.ok());
  EXPECT_EQ(threads(), 2);
  EXPECT_NEAR(adaptedEval->loss, fixedEval->loss, 1e-6);
  EXPECT_EQ(adaptedEval->samples, 50);
  Result<Predictions> fixedPred = prog->predict(data);
  Result<Predictions> adaptedPred = prog->predict(data, adapt);
  ASSERT_TRUE(fixedPred.ok() && adaptedPred.ok());
  EXPECT_EQ(threads(), 2);
  ASSERT_EQ(adaptedPred->values.size(), fixedPred->values.size());
  for (size_t i = 0; i < fixedPred->values.size(); ++i)
    EXPECT_NEAR(adaptedPred->values[i], fixedPred->values[i], 1e-6) << "value " << i;
  setThreads(before);
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

namespace {

/// A model file at `batch`, rewritten at the Forward stage (inference) and
/// compiled for cpu-ref, on its initial weights.
struct Inference {
  Model model;
  Program program;
};

Inference inferenceAt(const std::string &path, int64_t batch) {
  LoadOptions load;
  load.batch = batch;
  Result<Model> m = Model::loadFile(path, load);
  EXPECT_TRUE(m.ok()) << m.status().message();
  PipelineOptions p;
  p.stage = Stage::Forward;
  EXPECT_TRUE(m->rewrite(p).ok());
  CompileOptions c;
  c.device = "cpu-ref";
  Result<Program> prog = Program::compile(*m, c);
  EXPECT_TRUE(prog.ok()) << prog.status().message();
  return Inference{std::move(*m), std::move(*prog)};
}

const Weight *findWeight(const std::vector<Weight> &weights, const std::string &name) {
  for (const Weight &w : weights)
    if (w.name == name)
      return &w;
  return nullptr;
}

constexpr int64_t kSamples = 10, kSeq = 3, kVocab = 7, kWidth = 5;

/// tiny-lm's tokens and targets, [10, 3] each, as .npy files in `dir`.
void writeTokens(const ampc::testing::TempDir &dir, std::vector<int64_t> &tokens,
                 std::vector<int64_t> &targets) {
  for (int64_t i = 0; i < kSamples * kSeq; ++i) {
    tokens.push_back((i * 5 + 1) % kVocab);
    targets.push_back((i * 3 + 2) % kVocab);
  }
  std::string err;
  ASSERT_TRUE(ampc::writeNpy(dir.file("tokens.npy"), ampc::DType::I64, {kSamples, kSeq},
                             tokens.data(), err))
      << err;
  ASSERT_TRUE(ampc::writeNpy(dir.file("targets.npy"), ampc::DType::I64, {kSamples, kSeq},
                             targets.data(), err))
      << err;
}

} // namespace

// tiny-lm's logits are [B*3, 7]: every sample owns 3 rows. predict() used to
// copy `rows x 7` values a batch (its first rows only: 4 of 12 at batch 4);
// now it writes [10, 3, 7], every value equal to the embedding and
// projection worked out here, with or without the targets, at batch 4
// (4 + 4 + 2) and 1, and evaluate()'s loss is the cross-entropy of those
// very logits.
TEST(ApiEvalPredict, AFlattenedOutputIsWrittenWholeSampleBySample) {
  ampc::testing::TempDir dir;
  std::vector<int64_t> tokens, targets;
  writeTokens(dir, tokens, targets);
  DataSpec tokensOnly{"{npy: {tokens: tokens.npy}}", std::string(dir.path)};
  DataSpec withTargets{"{npy: {tokens: tokens.npy, targets: targets.npy}}", std::string(dir.path)};

  Inference at4 = inferenceAt(kInputs + "tiny-lm.yaml", 4);
  Result<Predictions> p = at4.program.predict(tokensOnly);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->name, "logits");
  ASSERT_EQ(p->shape, (std::vector<int64_t>{kSamples, kSeq, kVocab}));
  ASSERT_EQ(p->values.size(), size_t(kSamples * kSeq * kVocab));

  Result<std::vector<Weight>> weights = weightsOf(at4.program);
  ASSERT_TRUE(weights.ok()) << weights.status().message();
  const Weight *emb = findWeight(*weights, "emb.weight");
  const Weight *w = findWeight(*weights, "proj.weight");
  const Weight *b = findWeight(*weights, "proj.bias");
  ASSERT_TRUE(emb && w && b);
  ASSERT_EQ(emb->values.size(), size_t(kVocab * kWidth));
  ASSERT_EQ(w->values.size(), size_t(kVocab * kWidth));
  double meanLoss = 0;
  for (int64_t row = 0; row < kSamples * kSeq; ++row) {
    std::vector<double> logits(kVocab);
    for (int64_t v = 0; v < kVocab; ++v) {
      double ref = b->values[v];
      for (int64_t e = 0; e < kWidth; ++e)
        ref += double(emb->values[tokens[row] * kWidth + e]) * w->values[v * kWidth + e];
      logits[v] = ref;
      EXPECT_NEAR(p->values[row * kVocab + v], ref, 1e-5)
          << "sample " << row / kSeq << ", token " << row % kSeq << ", class " << v;
    }
    double top = *std::max_element(logits.begin(), logits.end()), sum = 0;
    for (double l : logits)
      sum += std::exp(l - top);
    meanLoss += (top + std::log(sum) - logits[targets[row]]) / double(kSamples * kSeq);
  }

  // The targets, when given, change nothing; alone at batch 1, the same.
  Result<Predictions> labelled = at4.program.predict(withTargets);
  ASSERT_TRUE(labelled.ok()) << labelled.status().message();
  EXPECT_EQ(labelled->values, p->values);
  Inference at1 = inferenceAt(kInputs + "tiny-lm.yaml", 1);
  Result<Predictions> single = at1.program.predict(tokensOnly);
  ASSERT_TRUE(single.ok()) << single.status().message();
  EXPECT_EQ(single->shape, p->shape);
  EXPECT_EQ(single->values, p->values);

  Result<EvalReport> report = at4.program.evaluate(withTargets);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->samples, kSamples);
  EXPECT_NEAR(report->loss, meanLoss, 1e-5);
  EXPECT_FALSE(at4.program.evaluate(tokensOnly).ok()) << "evaluating needs the targets";

  // Saved as [10, 3, 7] f32, or [10, 3] class ids.
  ASSERT_TRUE(savePredictions(*p, dir.file("p.npy")).ok());
  ampc::NpyArray a;
  std::string err;
  ASSERT_TRUE(ampc::readNpy(dir.file("p.npy"), a, err)) << err;
  EXPECT_EQ(std::vector<int64_t>(a.shape.begin(), a.shape.end()), p->shape);
  ASSERT_TRUE(savePredictions(*p, dir.file("ids.npy"), /*argmax=*/true).ok());
  ASSERT_TRUE(ampc::readNpy(dir.file("ids.npy"), a, err)) << err;
  EXPECT_EQ(std::vector<int64_t>(a.shape.begin(), a.shape.end()),
            (std::vector<int64_t>{kSamples, kSeq}));
}

// With the sequence first the logits [3*B, 7] interleave the samples (row
// t*B + b is sample b's): refused, naming the value where the batch leaves
// dim 0, rather than written as rows that are not one sample's.
TEST(ApiEvalPredict, AnOutputThatInterleavesSamplesIsRefused) {
  ampc::testing::TempDir dir;
  std::vector<int64_t> tokens, targets;
  writeTokens(dir, tokens, targets);
  Inference m = inferenceAt(kInputs + "tiny-lm-seqfirst.yaml", 4);
  Result<Predictions> p =
      m.program.predict(DataSpec{"{npy: {tokens: tokens.npy}}", std::string(dir.path)});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cannot be split into samples: 'emb_t' f32[3,4,5] at batch 4 "
                                      "(f32[3,5,5] at batch 5) does not hold the batch in dim 0"),
            std::string::npos)
      << p.status().message();
  // Its loss needs no split: it evaluates.
  Result<EvalReport> r = m.program.evaluate(
      DataSpec{"{npy: {tokens: tokens.npy, targets: targets.npy}}", std::string(dir.path)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->samples, kSamples);
}

// Layouts the split refuses: a concat along dim 0 of two per-sample values
// puts sample 0's second half B rows after its first; an output reduced
// over the batch has no rows of its own; an input whose dim 0 is a number,
// not B, does not grow with the batch.
TEST(ApiEvalPredict, OutputsThatMixSamplesAreRefused) {
  const char *concat = R"(
model: concat0
batch: 4
inputs:
  x: {shape: [B, 2]}
layers:
  - linear: {out_features: 3, input: x, name: a}
  - linear: {out_features: 3, input: x, name: b}
  - concat: {inputs: [a, b], axis: 0, name: out}
)";
  const char *reduced = R"(
model: reduced
batch: 4
inputs:
  x: {shape: [B, 2]}
layers:
  - linear: {out_features: 3, name: a}
  - reduce_mean: {dims: [0], name: out}
)";
  const char *fixed = R"(
model: fixed
batch: 4
inputs:
  x: {shape: [4, 2]}
layers:
  - linear: {out_features: 3, name: out}
)";
  for (auto [yaml, expected] :
       {std::pair{concat,
                  "concat 'out' f32[8,3] has 2 rows per sample from 'a' f32[4,3], which has "
                  "1 (the rows of different samples mix)"},
        std::pair{reduced, "'out' f32[3] at batch 4 (f32[3] at batch 5) does not hold the batch "
                           "in dim 0 alone"},
        std::pair{fixed, "input 'x' f32[4,2] is the same at every batch size (declare its dim 0 "
                         "as the batch B)"}}) {
    Result<Model> m = Model::loadString(yaml);
    ASSERT_TRUE(m.ok()) << m.status().message();
    PipelineOptions po;
    po.stage = Stage::Forward;
    ASSERT_TRUE(m->rewrite(po).ok());
    Result<Program> prog = Program::compile(*m);
    ASSERT_TRUE(prog.ok()) << prog.status().message();
    Result<Predictions> p = prog->predict(DataSpec{"{synthetic: {seed: 1, size: 6}}", ""});
    ASSERT_FALSE(p.ok()) << yaml;
    EXPECT_NE(p.status().message().find(expected), std::string::npos) << p.status().message();
  }
}

// idx data without its labels file predicts as it does with one.
TEST(ApiEvalPredict, IdxImagesWithoutLabelsPredict) {
  ampc::testing::TempDir dir;
  auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff),
                       char(v & 0xff)};
  };
  // tiny-bn's x is [B, 2, 1, 3]: 6 pixels a sample, as 5 images of 2 x 3.
  std::string images = be32(0x803) + be32(5) + be32(2) + be32(3);
  for (int i = 0; i < 5 * 6; ++i)
    images.push_back(char(i * 7 % 256));
  std::string labels = be32(0x801) + be32(5) + std::string{0, 1, 2, 0, 1};
  std::ofstream(dir.file("images.idx"), std::ios::binary) << images;
  std::ofstream(dir.file("labels.idx"), std::ios::binary) << labels;
  Inference m = inferenceAt(kModel, 2);
  Result<Predictions> without =
      m.program.predict(DataSpec{"{idx: {images: images.idx}}", std::string(dir.path)});
  ASSERT_TRUE(without.ok()) << without.status().message();
  EXPECT_EQ(without->shape, (std::vector<int64_t>{5, 3}));
  Result<Predictions> with = m.program.predict(
      DataSpec{"{idx: {images: images.idx, labels: labels.idx}}", std::string(dir.path)});
  ASSERT_TRUE(with.ok()) << with.status().message();
  EXPECT_EQ(with->values, without->values);
  // Evaluating needs them.
  Result<EvalReport> r =
      m.program.evaluate(DataSpec{"{idx: {images: images.idx}}", std::string(dir.path)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing 'labels' for idx data"), std::string::npos)
      << r.status().message();
}
