//===- TrainerTest.cpp - The training loop end to end on the reference CPU -===//
//
// Small models trained for real: the loss falls on learnable synthetic data,
// runs are deterministic, N steps + checkpoint + resume + M steps equal N+M
// steps bit for bit, and the metrics file has one JSON object per step.
//
//===----------------------------------------------------------------------===//
#include "runtime/train/Trainer.h"

#include "TempDir.h"
#include "frontends/yaml/ModelLoader.h"
#include "ir/Verifier.h"
#include "passes/EvalMode.h"
#include "passes/PassManager.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/TrainLog.h"

#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using namespace ampc;
using ampc::testing::readFile;
using ampc::testing::TempDir;

namespace {

const char *kMlp = R"(
model: tiny_mlp
batch: 16
inputs:
  x: {shape: [B, 8]}
  target: {shape: [B, 4]}
layers:
  - linear: {out_features: 32, name: fc1}
  - relu: {}
  - linear: {out_features: 4, name: out}
loss: {mse_loss: {input: out, target: target}}
optimizer: {sgd: {lr: 0.05, momentum: 0.9}}
train: {steps: 80, data: {synthetic: {seed: 3, size: 512}}}
)";

// Batchnorm (running statistics), dropout (per-step masks), Adam and two
// micro-batches per step: everything the resume test must carry over.
const char *kConvNet = R"(
model: tiny_convnet
batch: 8
inputs:
  image: {shape: [B, 1, 6, 6]}
  label: {shape: [B], dtype: i64}
layers:
  - conv2d: {out_channels: 16, kernel: 3, padding: 1, name: conv}
  - batchnorm2d: {name: bn}
  - relu: {}
  - maxpool2d: {kernel: 2}
  - flatten: {}
  - dropout: {p: 0.1}
  - linear: {out_features: 5, name: fc}
loss: {cross_entropy: {input: fc, target: label}}
optimizer: {adam: {lr: 0.01}}
train: {steps: 40, accumulate: 2, data: {synthetic: {seed: 1, size: 512}}}
)";

/// A model compiled for training on the reference backend, with its data.
struct TrainingRun {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> graph, evalGraph;
  std::unique_ptr<Backend> backend = createCpuRefBackend();
  std::unique_ptr<Program> program, evalProgram;
  std::unique_ptr<DataSource> data, trainPart, evalPart;

  std::string firstError() const {
    return diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str();
  }

  /// Imports `text`, lowers it for training and compiles it. With
  /// `evalHoldOut` > 0, that many trailing samples go to an eval split.
  bool build(const char *text, int64_t evalHoldOut = 0, uint64_t initSeed = 0) {
    graph = loadModelString(text, "m.yaml", diag);
    PassManager pm;
    if (!graph || !pm.addByNames("autodiff,optimizer", diag) || !pm.run(*graph, diag) ||
        !verifyGraph(*graph, diag))
      return false;
    CompileOptions copts;
    copts.initSeed = initSeed;
    program = Program::compile(*graph, *backend, diag, copts);
    data = createDataSource(*graph, ".", diag);
    if (!program || !data)
      return false;
    if (evalHoldOut > 0) {
      int64_t n = data->numSamples();
      trainPart = makeSubset(*data, 0, n - evalHoldOut);
      evalPart = makeSubset(*data, n - evalHoldOut, evalHoldOut);
      LoadOptions load;
      load.batchOverride = 8;
      evalGraph = loadModelString(text, "m.yaml", diag, load);
      PassManager evalPm;
      evalPm.add(std::make_unique<EvalModePass>());
      if (!evalGraph || !evalPm.run(*evalGraph, diag))
        return false;
      for (Node &n : evalGraph->nodes())
        if (n.role() == NodeRole::Loss)
          evalGraph->addOutput(n.operand(0));
      evalProgram = Program::compile(*evalGraph, *backend, diag);
      if (!evalProgram)
        return false;
    }
    return true;
  }

  int64_t metaInt(llvm::StringRef key) const { return graph->meta().at(key.str()).getInt(); }

  TrainOptions options(int64_t steps) const {
    TrainOptions t;
    t.steps = steps;
    t.accumulate = metaInt("train.accumulate");
    t.progress = ProgressStyle::None;
    return t;
  }

  bool train(TrainOptions t, TrainResult &result, std::string &err, int64_t evalEvery = 0) {
    t.evalEvery = evalEvery;
    Trainer trainer(*program, trainPart ? *trainPart : *data, batchOptionsFromMeta(*graph),
                    std::move(t), {evalProgram.get(), evalPart.get()});
    std::string log;
    llvm::raw_string_ostream os(log);
    return trainer.run(os, result, err);
  }

  /// Every state tensor's bytes, in graph order.
  std::vector<std::string> state() const {
    std::vector<std::string> s;
    for (const Value *v : graph->state())
      s.emplace_back(static_cast<const char *>(program->data(v)), v->type().sizeInBytes());
    return s;
  }
};

TEST(Trainer, MlpLossFallsOnLearnableData) {
  TrainingRun run;
  ASSERT_TRUE(run.build(kMlp)) << run.firstError();
  TrainResult result;
  std::string err;
  ASSERT_TRUE(run.train(run.options(80), result, err)) << err;
  EXPECT_EQ(result.steps, 80);
  EXPECT_LT(result.finalLoss, 0.5 * result.firstLoss)
      << "loss " << result.firstLoss << " -> " << result.finalLoss;
  EXPECT_EQ(result.plannedBytes, result.allocatedBytes);
}

TEST(Trainer, ConvNetLearnsAndIsEvaluatedOnHeldOutData) {
  TrainingRun run;
  ASSERT_TRUE(run.build(kConvNet, /*evalHoldOut=*/64)) << run.firstError();
  TrainResult result;
  std::string err;
  ASSERT_TRUE(run.train(run.options(200), result, err, /*evalEvery=*/100)) << err;
  EXPECT_LT(result.finalLoss, 0.5 * result.firstLoss)
      << "loss " << result.firstLoss << " -> " << result.finalLoss;
  ASSERT_TRUE(result.eval.has_value());
  EXPECT_EQ(result.eval->samples, 64);
  ASSERT_TRUE(result.eval->accuracy.has_value());
  // Five classes: chance is 20 %; the teacher's labels are learnable.
  EXPECT_GT(*result.eval->accuracy, 0.35);
}

TEST(Trainer, SameSeedSameRunDifferentSeedDifferentRun) {
  TrainingRun a, b, c;
  ASSERT_TRUE(a.build(kConvNet) && b.build(kConvNet) && c.build(kConvNet, 0, /*initSeed=*/9));
  TrainResult ra, rb, rc;
  std::string err;
  ASSERT_TRUE(a.train(a.options(6), ra, err)) << err;
  ASSERT_TRUE(b.train(b.options(6), rb, err)) << err;
  ASSERT_TRUE(c.train(c.options(6), rc, err)) << err;
  EXPECT_EQ(a.state(), b.state());
  EXPECT_EQ(ra.finalLoss, rb.finalLoss);
  EXPECT_NE(a.state(), c.state());
}

// Batches made on the background thread are the batches made in the step:
// same order across epochs, micro-batches and evaluations in between.
TEST(Trainer, PrefetchedBatchesTrainBitForBitAsInlineOnes) {
  TrainingRun inlineRun, prefetched;
  ASSERT_TRUE(inlineRun.build(kConvNet, /*evalHoldOut=*/64) &&
              prefetched.build(kConvNet, /*evalHoldOut=*/64));
  TrainOptions off = inlineRun.options(60), on = prefetched.options(60);
  off.prefetch = false;
  on.prefetch = true;
  TrainResult a, b;
  std::string err;
  // 448 training samples of batch 8 x 2 micro-batches: 28 steps an epoch.
  ASSERT_TRUE(inlineRun.train(off, a, err, /*evalEvery=*/25)) << err;
  ASSERT_TRUE(prefetched.train(on, b, err, /*evalEvery=*/25)) << err;
  EXPECT_EQ(inlineRun.state(), prefetched.state());
  EXPECT_EQ(a.finalLoss, b.finalLoss);
  ASSERT_TRUE(a.eval && b.eval);
  EXPECT_EQ(a.eval->loss, b.eval->loss);
}

/// A source whose every sample takes 1 ms to load (a slow disk, a decoder).
class SlowSource final : public DataSource {
public:
  explicit SlowSource(DataSource &base) : base_(base) {}
  llvm::StringRef kind() const override { return base_.kind(); }
  int64_t numSamples() const override { return base_.numSamples(); }
  bool concurrentLoads() const override { return true; }
  bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                  std::string &err) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return base_.loadSample(index, batch, row, err);
  }

private:
  DataSource &base_;
};

// When batches take longer to make than the step, the step's reported data
// time is where its time went, prefetching or not.
TEST(Trainer, DataWaitCoversTheTimeSpentOnBatches) {
  for (bool prefetch : {true, false}) {
    TrainingRun run;
    ASSERT_TRUE(run.build(kMlp)) << run.firstError();
    SlowSource slow(*run.data);
    TrainOptions t = run.options(8);
    t.prefetch = prefetch;
    Trainer trainer(*run.program, slow, batchOptionsFromMeta(*run.graph), t);
    TrainResult result;
    std::string err, log;
    llvm::raw_string_ostream os(log);
    ASSERT_TRUE(trainer.run(os, result, err)) << err;
    // 16 samples of 1 ms each, on at most two threads.
    EXPECT_GE(result.meanDataMs, 4.0) << "prefetch " << prefetch;
    EXPECT_GE(result.meanDataMs, 0.6 * result.meanStepMs)
        << "prefetch " << prefetch << ": step " << result.meanStepMs << " ms, data "
        << result.meanDataMs << " ms";
    if (prefetch)
      EXPECT_EQ(result.prefetch.fromWorker + result.prefetch.takenOver + result.prefetch.byCaller,
                8);
  }
}

TEST(Trainer, ResumeContinuesBitForBit) {
  TempDir dir;
  std::string ckpt = dir.file("run.ckpt"), err;
  TrainingRun straight, first, second;
  ASSERT_TRUE(straight.build(kConvNet) && first.build(kConvNet) && second.build(kConvNet));
  TrainResult r;
  ASSERT_TRUE(straight.train(straight.options(10), r, err)) << err;

  TrainOptions t = first.options(4);
  t.checkpointPath = ckpt;
  ASSERT_TRUE(first.train(t, r, err)) << err;
  EXPECT_NE(first.state(), straight.state());

  TrainOptions resume = second.options(10);
  resume.resumePath = ckpt;
  ASSERT_TRUE(second.train(resume, r, err)) << err;
  EXPECT_EQ(r.firstStep, 4);
  EXPECT_EQ(r.steps, 10);
  EXPECT_EQ(second.state(), straight.state());
}

TEST(Trainer, ResumeRefusesAnotherModelsCheckpoint) {
  TempDir dir;
  std::string ckpt = dir.file("mlp.ckpt"), err;
  TrainingRun mlp, conv;
  ASSERT_TRUE(mlp.build(kMlp) && conv.build(kConvNet));
  TrainOptions t = mlp.options(1);
  t.checkpointPath = ckpt;
  TrainResult r;
  ASSERT_TRUE(mlp.train(t, r, err)) << err;
  auto before = conv.state();
  TrainOptions resume = conv.options(3);
  resume.resumePath = ckpt;
  EXPECT_FALSE(conv.train(resume, r, err));
  EXPECT_NE(err.find("written for model 'tiny_mlp'"), std::string::npos) << err;
  EXPECT_EQ(conv.state(), before);
}

TEST(Trainer, MetricsFileHasOneJsonObjectPerStep) {
  TempDir dir;
  TrainingRun run;
  ASSERT_TRUE(run.build(kMlp));
  TrainOptions t = run.options(5);
  t.metricsPath = dir.file("metrics.jsonl");
  TrainResult r;
  std::string err;
  ASSERT_TRUE(run.train(t, r, err)) << err;
  llvm::SmallVector<llvm::StringRef, 8> lines;
  std::string text = readFile(t.metricsPath);
  llvm::StringRef(text).split(lines, '\n', -1, /*KeepEmpty=*/false);
  ASSERT_EQ(lines.size(), 5u) << text;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_TRUE(lines[i].startswith("{\"step\": " + std::to_string(i + 1) + ", \"epoch\": "))
        << lines[i].str();
    EXPECT_TRUE(lines[i].contains(", \"loss\": ")) << lines[i].str();
    EXPECT_TRUE(lines[i].contains("\"lr\": 0.05")) << lines[i].str();
    EXPECT_TRUE(lines[i].contains("\"step_ms\": ")) << lines[i].str();
    EXPECT_TRUE(lines[i].endswith("}")) << lines[i].str();
  }
}

TEST(Trainer, ProgressLinesShowEpochElapsedAndTimeLeft) {
  std::string text;
  llvm::raw_string_ostream os(text);
  {
    TrainLog log(os, ProgressStyle::Lines, /*logEvery=*/1, /*totalSteps=*/6, /*firstStep=*/2,
                 /*totalEpochs=*/3);
    StepRecord r;
    r.step = 3;
    r.epoch = 2;
    r.loss = 0.5;
    std::string err;
    ASSERT_TRUE(log.record(r, err)) << err;
  }
  // Resumed after step 2: one step done this run, three left.
  EXPECT_TRUE(llvm::StringRef(os.str()).startswith("step 3/6  epoch 2/3  loss 0.500000")) << text;
  EXPECT_TRUE(llvm::StringRef(os.str()).contains("  elapsed 0:00, left 0:00\n")) << text;
}

TEST(Trainer, StepRecordJsonWritesNonFiniteAsNull) {
  StepRecord r;
  r.step = 3;
  r.loss = std::numeric_limits<double>::infinity();
  r.lr = 0.5;
  r.stepMs = 2;
  r.dataMs = 0.5;
  r.samplesPerSecond = 100;
  EXPECT_EQ(stepRecordJson(r), "{\"step\": 3, \"loss\": null, \"lr\": 0.5, \"step_ms\": 2, "
                               "\"data_ms\": 0.5, \"samples_per_s\": 100}");
}

} // namespace
