//===- CudaDeviceTest.cpp - Device selection and device-memory Programs ---===//
//
// Runs everywhere, GPU or not:
//  - discovery: without a device (or without the CUDA backend built),
//    `cuda` is refused with the reason and `auto` falls back to the CPU,
//    saying why in one line; with one, `auto` is cuda.
//  - a Program on a backend whose memory the host cannot address (a fake
//    device: host memory behind the copy hooks of Backend.h) trains bit for
//    bit like the same Program on cpu-ref, at every opt level. That is the
//    transfer protocol the CUDA backend relies on (state initialised in host
//    copies and sent, inputs sent before each step, results fetched when
//    asked for, state written through data() sent back).
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"
#include "frontends/yaml/ModelLoader.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/train/Trainer.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace ampc;
using ampc::testing::FakeDeviceBackend;

namespace {

TEST(CudaDeviceTest, CudaIsRefusedWithTheReasonOrCreated) {
  std::string why;
  bool available = cudaDeviceAvailable(why);
  std::string err;
  std::unique_ptr<Backend> cuda = createBackend("cuda", err);
  if (available) {
    ASSERT_TRUE(cuda);
    EXPECT_EQ(cuda->name(), "cuda");
    EXPECT_FALSE(cuda->hostAccessible());
    return;
  }
  EXPECT_FALSE(cuda);
  EXPECT_EQ(err, "device 'cuda' is not available: " + why);
#ifdef AMPC_HAVE_CUDA
  // Built, but no device: the runtime's own error code is in the message
  // (35 without a driver).
  EXPECT_NE(why.find("no CUDA device (cudaGetDeviceCount"), std::string::npos) << why;
#else
  EXPECT_NE(why.find("the CUDA backend is not built"), std::string::npos) << why;
#endif
}

TEST(CudaDeviceTest, AutoPicksCudaOrFallsBackToTheCpuAndSaysWhy) {
  std::string why;
  bool available = cudaDeviceAvailable(why);
  std::string err, note;
  std::unique_ptr<Backend> backend = createBackend("auto", err, &note);
  ASSERT_TRUE(backend) << err;
  if (available) {
    EXPECT_EQ(backend->name(), "cuda");
    EXPECT_EQ(note.rfind("device: auto -> cuda (", 0), 0u) << note;
    return;
  }
  EXPECT_EQ(backend->name(), "cpu");
  // The reason without the driver's own words (those are --device cuda's):
  // "no CUDA device", not "no CUDA device (cudaGetDeviceCount: error 35, ...)".
  std::string shortWhy = why.substr(0, why.find(" ("));
  EXPECT_EQ(note, "device: auto -> cpu (" + shortWhy + "; the CPU runs the model)");
  EXPECT_EQ(note.find("cudaGetDeviceCount"), std::string::npos) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos) << "one line";
}

TEST(CudaDeviceTest, ProbingTwiceGivesTheSameAnswer) {
  std::string first, second;
  EXPECT_EQ(cudaDeviceAvailable(first), cudaDeviceAvailable(second));
  EXPECT_EQ(first, second);
}

TEST(CudaDeviceTest, UnknownDevicesAreStillRefused) {
  std::string err;
  EXPECT_FALSE(createBackend("tpu", err));
  EXPECT_NE(err.find("unknown device 'tpu'"), std::string::npos);
}

const char *kModel = R"(
model: fakedevice
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
optimizer: {adam: {lr: 0.01}}
train: {steps: 5, data: {synthetic: {seed: 5, size: 64}}}
)";

struct FakeRun {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Program> program;
  std::unique_ptr<DataSource> data;
  TrainResult result;

  std::string firstError() const {
    return diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str();
  }
  bool build(const char *level, Backend &backend) {
    graph = loadModelString(kModel, "m.yaml", diag);
    if (!graph || !setPolicyOverride(graph->meta(), "opt_level", level, diag))
      return false;
    PassManager pm;
    if (!addStandardPipeline(pm, PipelineStage::Train, diag) || !pm.run(*graph, diag))
      return false;
    program = Program::compile(*graph, backend, diag);
    data = createDataSource(*graph, ".", diag);
    return program && data;
  }
  bool train(int64_t steps, std::string &err) {
    TrainOptions t;
    t.steps = steps;
    t.progress = ProgressStyle::None;
    t.logEvery = 0;
    Trainer trainer(*program, *data, batchOptionsFromMeta(*graph), std::move(t));
    std::string log;
    llvm::raw_string_ostream os(log);
    return trainer.run(os, result, err);
  }
  std::vector<std::string> state() const {
    std::vector<std::string> s;
    for (const Value *v : graph->state())
      s.emplace_back(static_cast<const char *>(program->data(v)), v->type().sizeInBytes());
    return s;
  }
};

class FakeDeviceProgram : public ::testing::TestWithParam<const char *> {};

TEST_P(FakeDeviceProgram, TrainsBitForBitLikeHostMemory) {
  const char *level = GetParam();
  std::unique_ptr<Backend> ref = createCpuRefBackend();
  FakeDeviceBackend device;
  FakeRun host, fake;
  ASSERT_TRUE(host.build(level, *ref)) << host.firstError();
  ASSERT_TRUE(fake.build(level, device)) << fake.firstError();
  // The initial state was sent, not written in place.
  EXPECT_GE(device.toDevice, fake.graph->state().size());
  EXPECT_EQ(host.state(), fake.state());
  std::string err;
  ASSERT_TRUE(host.train(5, err)) << err;
  ASSERT_TRUE(fake.train(5, err)) << err;
  EXPECT_EQ(device.steps, 5u);
  EXPECT_GE(device.syncs, 5u);
  EXPECT_EQ(host.result.finalLoss, fake.result.finalLoss);
  EXPECT_EQ(host.state(), fake.state());
}

INSTANTIATE_TEST_SUITE_P(Levels, FakeDeviceProgram, ::testing::Values("O0", "O1", "O2", "O3"));

TEST(FakeDeviceProgramTest, StateWrittenThroughDataIsSentBeforeTheNextStep) {
  std::unique_ptr<Backend> ref = createCpuRefBackend();
  FakeDeviceBackend device;
  FakeRun host, fake;
  ASSERT_TRUE(host.build("O0", *ref)) << host.firstError();
  ASSERT_TRUE(fake.build("O0", device)) << fake.firstError();
  // Overwrite one parameter on both, through the non-const (writable) view.
  const Value *w = fake.graph->lookup("fc.weight");
  ASSERT_TRUE(w);
  for (FakeRun *r : {&host, &fake}) {
    float *p = static_cast<float *>(r->program->data(r->graph->lookup("fc.weight")));
    for (int64_t i = 0; i < w->type().numElements(); ++i)
      p[i] = 0.01f * static_cast<float>(i % 7);
  }
  std::string err;
  ASSERT_TRUE(host.train(2, err)) << err;
  ASSERT_TRUE(fake.train(2, err)) << err;
  EXPECT_EQ(host.result.finalLoss, fake.result.finalLoss);
  EXPECT_EQ(host.state(), fake.state());
}

// Binding a batch overwrites the whole input: nothing of it is fetched from
// the device first (docs/cuda.md, "Transfers"). What does come back per
// step is the loss and the loss-scaling scalars.
TEST(FakeDeviceProgramTest, BindingABatchFetchesNothingOfTheInputs) {
  FakeDeviceBackend device;
  FakeRun fake;
  ASSERT_TRUE(fake.build("O2", device)) << fake.firstError();
  uint64_t inputBytes = 0;
  for (const Value *v : fake.graph->inputs())
    inputBytes += static_cast<uint64_t>(v->type().sizeInBytes());
  uint64_t before = device.toHostBytes;
  std::string err;
  ASSERT_TRUE(fake.train(4, err)) << err;
  EXPECT_LT(device.toHostBytes - before, inputBytes)
      << "four steps fetched " << device.toHostBytes - before << " bytes";
}

// A batch is written into host buffers the backend hands out
// (allocateHostBuffer: pinned on CUDA) and sent from there, one copy per
// input per step; the buffers go with the program.
TEST(FakeDeviceProgramTest, BatchesAreSentFromTheBackendsHostBuffers) {
  FakeDeviceBackend device;
  {
    FakeRun fake;
    ASSERT_TRUE(fake.build("O2", device)) << fake.firstError();
    size_t inputs = fake.graph->inputs().size();
    std::string err;
    ASSERT_TRUE(fake.train(4, err)) << err;
    EXPECT_EQ(device.hostBuffers.size(), inputs);
    EXPECT_GE(device.fromHostBuffers, 4 * inputs);
  }
  EXPECT_TRUE(device.hostBuffers.empty()) << "host buffers outlived their program";
}

// The guard bytes after each device arena are written at compile time and
// read back by measure(): a write past an arena's end is found, as on the
// CPU.
TEST(FakeDeviceProgramTest, ArenaGuardsAreCheckedOnTheDevice) {
  FakeDeviceBackend device;
  FakeRun fake;
  ASSERT_TRUE(fake.build("O0", device)) << fake.firstError();
  std::string err;
  ASSERT_TRUE(fake.train(1, err)) << err;
  EXPECT_TRUE(fake.program->measure().guardsIntact);
  ASSERT_EQ(device.allocations.size(), 2u); // the persistent and step arenas
  auto [arena, bytes] = device.allocations[1];
  arena[bytes - 1] ^= 0x5a; // the step arena's last guard byte
  EXPECT_FALSE(fake.program->measure().guardsIntact);
}

} // namespace
