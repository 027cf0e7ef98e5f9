//===- InPlaceUpdateTest.cpp - State updated over its own buffer ----------===//
//
// The memory planner lets an optimizer update (and batchnorm's running
// statistics, the step counter, the loss scaler) write the new state over
// the old when nothing later reads the old value. Training with and without
// it must agree bit for bit, at every opt level, on both CPU backends; and
// an update whose old value is read afterwards must keep its own buffer.
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/ModelLoader.h"
#include "ir/Builder.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/train/Trainer.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

// Batchnorm (running statistics), SGD with momentum (buffer and step
// counter), and under O1/O2 the loss scaler and master weights.
const char *kModel = R"(
model: inplace
batch: 8
inputs:
  image: {shape: [B, 2, 6, 6]}
  label: {shape: [B], dtype: i64}
layers:
  - conv2d: {out_channels: 4, kernel: 3, padding: 1, name: c1}
  - batchnorm2d: {name: bn}
  - relu: {}
  - flatten: {}
  - linear: {out_features: 3, name: fc}
loss: {cross_entropy: {input: fc, target: label}}
optimizer: {sgd: {lr: 0.05, momentum: 0.9}}
train: {steps: 6, data: {synthetic: {seed: 3, size: 64}}}
)";

struct TrainingRun {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Program> program;
  std::unique_ptr<DataSource> data;

  std::string firstError() const {
    return diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str();
  }

  bool build(const char *level, bool inPlace, bool fastCpu) {
    backend = fastCpu ? createCpuBackend() : createCpuRefBackend();
    graph = loadModelString(kModel, "m.yaml", diag);
    if (!graph || !setPolicyOverride(graph->meta(), "opt_level", level, diag))
      return false;
    PassManager pm;
    if (!addStandardPipeline(pm, PipelineStage::Train, diag) || !pm.run(*graph, diag))
      return false;
    CompileOptions opts;
    opts.inPlaceStateUpdates = inPlace;
    program = Program::compile(*graph, *backend, diag, opts);
    data = createDataSource(*graph, ".", diag);
    return program && data;
  }

  bool train(int64_t steps, std::string &err) {
    TrainOptions t;
    t.steps = steps;
    t.progress = ProgressStyle::None;
    Trainer trainer(*program, *data, batchOptionsFromMeta(*graph), std::move(t));
    std::string log;
    llvm::raw_string_ostream os(log);
    TrainResult result;
    return trainer.run(os, result, err);
  }

  std::vector<std::string> state() const {
    std::vector<std::string> s;
    for (const Value *v : graph->state())
      s.emplace_back(static_cast<const char *>(program->data(v)), v->type().sizeInBytes());
    return s;
  }

  /// State updates whose new value shares the state's buffer.
  unsigned inPlaceUpdates() const {
    unsigned n = 0;
    for (const StateUpdate &u : graph->stateUpdates())
      n += program->data(u.state) == program->data(u.newValue);
    return n;
  }
};

class InPlaceUpdate : public ::testing::TestWithParam<std::tuple<const char *, bool>> {};

TEST_P(InPlaceUpdate, TrainsBitForBitLikeTheDoubleBuffer) {
  auto [level, fastCpu] = GetParam();
  TrainingRun inPlace, copied;
  ASSERT_TRUE(inPlace.build(level, true, fastCpu)) << inPlace.firstError();
  ASSERT_TRUE(copied.build(level, false, fastCpu)) << copied.firstError();
  EXPECT_EQ(copied.inPlaceUpdates(), 0u);
  // Every update but batchnorm's running statistics (its backward reads
  // them, after the forward has computed the next ones) runs in place.
  unsigned runningStats = 2;
  EXPECT_EQ(inPlace.inPlaceUpdates(), inPlace.graph->stateUpdates().size() - runningStats);
  // No second buffer per updated state: fewer step-arena bytes in all.
  EXPECT_LT(inPlace.program->plan().stepBytesWithoutReuse,
            copied.program->plan().stepBytesWithoutReuse);
  std::string err;
  ASSERT_TRUE(inPlace.train(6, err)) << err;
  ASSERT_TRUE(copied.train(6, err)) << err;
  std::vector<std::string> a = inPlace.state(), b = copied.state();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i], b[i]) << inPlace.graph->state()[i]->name().str();
}

INSTANTIATE_TEST_SUITE_P(Levels, InPlaceUpdate,
                         ::testing::Combine(::testing::Values("O0", "O1", "O2", "O3"),
                                            ::testing::Bool()));

TEST(InPlaceUpdatePlan, KeepsItsOwnBufferWhenTheOldValueIsReadLater) {
  Graph g;
  DiagnosticEngine diag;
  const OpRegistry &ops = OpRegistry::builtin();
  Value *w = g.addState("w", TensorType(DType::F32, {4}), StateKind::Parameter);
  Value *grad = g.addInput("g", TensorType(DType::F32, {4}));
  Value *lr = g.addInput("lr", TensorType(DType::F32, {}));
  Node *update = buildNode(g, *ops.lookup("sgd_update"), {w, grad, lr}, {}, {}, diag);
  ASSERT_TRUE(update) << diag.diagnostics()[0].str();
  g.addStateUpdate(w, update->result(0));
  std::vector<const Node *> schedule{update};
  // Nothing reads w after the update: it is updated in place.
  MemoryPlan plan = planMemory(g, schedule);
  EXPECT_EQ(plan.find(update->result(0))->arena, ArenaKind::Persistent);
  EXPECT_EQ(plan.find(update->result(0))->offset, plan.find(w)->offset);
  // A later reader of the old w: the update needs a buffer of its own.
  Node *reader = buildNode(g, *ops.lookup("relu"), {w}, {}, {}, diag);
  g.addOutput(reader->result());
  schedule.push_back(reader);
  plan = planMemory(g, schedule);
  EXPECT_EQ(plan.find(update->result(0))->arena, ArenaKind::Step);
  EXPECT_EQ(plan.find(update->result(0))->cls, BufferClass::NewState);
}

} // namespace
