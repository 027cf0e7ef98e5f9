//===- OneDnnKeptWeightsTest.cpp - Weights kept in oneDNN's layout --------===//
//
// A convolution whose weight keeps its bytes between runs (a state tensor
// the graph never updates, or a cached cast of one) is reordered into the
// primitive's layout once and kept: the kernel skips the reorder while the
// weight's buffer and version stay as they were, redoes it when the version
// moves on, and the results equal, bit for bit, those of a program that
// reorders every run. A graph that updates its weights keeps nothing.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/Builder.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/OneDnn.h"
#include "passes/EvalMode.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::randomValues;

AttrMap convAttrs() {
  return {{"stride", Attribute(std::vector<int64_t>{1, 1})},
          {"padding", Attribute(std::vector<int64_t>{1, 1})},
          {"dilation", Attribute(std::vector<int64_t>{1, 1})},
          {"groups", Attribute(int64_t(1))}};
}

const TensorType kX(DType::F32, {2, 19, 7, 7});
const TensorType kW(DType::F32, {32, 19, 3, 3});

void fill(DType t, void *data, int64_t n, uint64_t seed) {
  std::vector<double> v = randomValues(n, seed);
  for (int64_t i = 0; i < n; ++i)
    kernels::storeFromDouble(t, data, i, v[i]);
}

std::vector<char> bytesOf(const void *data, const TensorType &t) {
  const char *p = static_cast<const char *>(data);
  return std::vector<char>(p, p + t.sizeInBytes());
}

TEST(OneDnnKeptWeights, KernelReordersAStableWeightOnlyWhenItsVersionMoves) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtypeName(dtype).str());
    Graph g("kept");
    TensorType xType(dtype, kX.dims()), wType(dtype, kW.dims());
    Value *x = g.addInput("x", xType);
    Value *w = g.addInput("w", wType);
    DiagnosticEngine diag;
    Node *conv = buildNode(g, OpRegistry::builtin().get(OpKind::Conv2d), {x, w}, convAttrs(),
                           Location(), diag);
    ASSERT_TRUE(conv);
    const TensorType &yType = conv->result()->type();
    std::unique_ptr<kernels::NodeKernel> kept = kernels::cpu::prepareCpuKernel(*conv);
    std::unique_ptr<kernels::NodeKernel> fresh = kernels::cpu::prepareCpuKernel(*conv);
    ASSERT_TRUE(kept && kernels::cpu::isOneDnnKernel(*kept));

    std::vector<char> xs(xType.sizeInBytes()), ws(wType.sizeInBytes()), y(yType.sizeInBytes()),
        yFresh(yType.sizeInBytes());
    fill(dtype, xs.data(), xType.numElements(), 1);
    fill(dtype, ws.data(), wType.numElements(), 2);
    uint64_t version = 0;
    kernels::TensorArg ins[] = {{xs.data(), &xType}, {ws.data(), &wType, &version}};
    kernels::TensorArg outs[] = {{y.data(), &yType}};
    kernels::TensorArg freshIns[] = {{xs.data(), &xType}, {ws.data(), &wType}};
    kernels::TensorArg freshOuts[] = {{yFresh.data(), &yType}};
    kernels::KernelArgs args, freshArgs;
    args.node = freshArgs.node = conv;
    args.inputs = ins;
    args.outputs = outs;
    freshArgs.inputs = freshIns;
    freshArgs.outputs = freshOuts;

    kept->run(args);
    kernels::cpu::OneDnnReorderCounts counts = kernels::cpu::oneDnnReorderCounts(*kept);
    ASSERT_GE(counts.operands, 1u) << "the primitive takes the weight as it is: nothing to keep";
    EXPECT_EQ(counts.skipped, 0u);
    EXPECT_GT(kept->heldBytes(), 0u);

    // Same version, new activations: the weight's reorder is skipped.
    fill(dtype, xs.data(), xType.numElements(), 3);
    kept->run(args);
    EXPECT_EQ(kernels::cpu::oneDnnReorderCounts(*kept).skipped, 1u);
    fresh->run(freshArgs);
    EXPECT_EQ(y, yFresh);

    // New weight bytes under a new version: reordered again.
    fill(dtype, ws.data(), wType.numElements(), 4);
    ++version;
    kept->run(args);
    EXPECT_EQ(kernels::cpu::oneDnnReorderCounts(*kept).skipped, 0u);
    fresh->run(freshArgs);
    EXPECT_EQ(y, yFresh);

    // Without a version nothing is kept (the workspace stages the weight).
    std::unique_ptr<kernels::NodeKernel> plain = kernels::cpu::prepareCpuKernel(*conv);
    plain->run(freshArgs);
    EXPECT_EQ(plain->heldBytes(), 0u);
  }
}

/// x -> conv2d(x, w) -> y with w a parameter; with `update`, the graph also
/// writes relu(w) back into w after each step (a stand-in for an optimizer).
struct ConvGraph {
  Graph g{"conv"};
  Value *x = nullptr, *w = nullptr, *y = nullptr;

  explicit ConvGraph(bool update) {
    x = g.addInput("x", kX);
    w = g.addState("w", kW, StateKind::Parameter);
    DiagnosticEngine diag;
    const OpRegistry &ops = OpRegistry::builtin();
    Node *conv = buildNode(g, ops.get(OpKind::Conv2d), {x, w}, convAttrs(), Location(), diag);
    y = conv->result();
    g.addOutput(y);
    if (update) {
      Node *relu = buildNode(g, ops.get(OpKind::Relu), {w}, {}, Location(), diag);
      g.addStateUpdate(w, relu->result());
    }
  }
};

std::unique_ptr<Program> compileCpu(const Graph &g, Backend &backend, bool markStable) {
  DiagnosticEngine diag;
  CompileOptions opts;
  opts.markStableInputs = markStable;
  std::unique_ptr<Program> p = Program::compile(g, backend, diag, opts);
  EXPECT_TRUE(p) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  return p;
}

TEST(OneDnnKeptWeights, ProgramKeepsUnupdatedWeightsAndRefreshesThemAfterHostWrites) {
  ConvGraph cg(/*update=*/false);
  std::unique_ptr<Backend> backend = createCpuBackend();
  std::unique_ptr<Program> kept = compileCpu(cg.g, *backend, true);
  std::unique_ptr<Program> plain = compileCpu(cg.g, *backend, false);
  ASSERT_TRUE(kept && plain);
  for (Program *p : {kept.get(), plain.get()}) {
    fill(DType::F32, p->data(cg.x), kX.numElements(), 1);
    fill(DType::F32, p->data(cg.w), kW.numElements(), 2);
    p->run(0);
  }
  EXPECT_GT(kept->measure().kernelHeldBytes, 0u);
  EXPECT_EQ(plain->measure().kernelHeldBytes, 0u);
  std::vector<char> first = bytesOf(std::as_const(*kept).data(cg.y), cg.y->type());
  EXPECT_EQ(first, bytesOf(std::as_const(*plain).data(cg.y), cg.y->type()));

  // The host writes a new weight (writable access moves its version on).
  for (Program *p : {kept.get(), plain.get()}) {
    fill(DType::F32, p->data(cg.w), kW.numElements(), 5);
    p->run(1);
  }
  std::vector<char> second = bytesOf(std::as_const(*kept).data(cg.y), cg.y->type());
  EXPECT_NE(first, second) << "the kept copy of the old weight was used";
  EXPECT_EQ(second, bytesOf(std::as_const(*plain).data(cg.y), cg.y->type()));
}

TEST(OneDnnKeptWeights, UpdatedWeightsAreNotKept) {
  ConvGraph cg(/*update=*/true);
  std::unique_ptr<Backend> backend = createCpuBackend();
  std::unique_ptr<Program> p = compileCpu(cg.g, *backend, true);
  ASSERT_TRUE(p);
  fill(DType::F32, p->data(cg.x), kX.numElements(), 1);
  fill(DType::F32, p->data(cg.w), kW.numElements(), 2);
  p->run(0);
  p->run(1);
  EXPECT_EQ(p->measure().kernelHeldBytes, 0u);
}

// The trainer's evaluation graph at O1: bf16 weights come from cached casts
// of the f32 parameters, and the convolutions keep those.
const char *kConvNet = R"(
model: tiny_convnet
batch: 4
inputs:
  image: {shape: [B, 3, 12, 12]}
  label: {shape: [B], dtype: i64}
layers:
  - conv2d: {out_channels: 32, kernel: 3, padding: 1}
  - batchnorm2d: {}
  - relu: {}
  - conv2d: {out_channels: 32, kernel: 3, padding: 1}
  - relu: {}
  - global_avgpool: {}
  - flatten: {}
  - linear: {out_features: 10, name: logits}
loss: {cross_entropy: {input: logits, target: label}}
optimizer: {sgd: {lr: 0.1}}
)";

TEST(OneDnnKeptWeights, EvaluationAtO1KeepsCachedCastsAndMatchesBitForBit) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelString(kConvNet, "tiny.yaml", diag);
  ASSERT_TRUE(g);
  ASSERT_TRUE(setPolicyOverride(g->meta(), "opt_level", "O1", diag));
  std::unique_ptr<Backend> backend = createCpuBackend();
  PassManager pm;
  pm.setTarget(backend.get());
  pm.add(std::make_unique<EvalModePass>());
  ASSERT_TRUE(addStandardPipeline(pm, PipelineStage::Forward, diag));
  ASSERT_TRUE(pm.run(*g, diag));
  std::unique_ptr<Program> kept = compileCpu(*g, *backend, true);
  std::unique_ptr<Program> plain = compileCpu(*g, *backend, false);
  ASSERT_TRUE(kept && plain);
  const Value *loss = g->outputs()[0];
  for (int run = 0; run < 3; ++run) {
    for (Program *p : {kept.get(), plain.get()})
      for (const Value *in : g->inputs()) {
        if (isFloating(in->dtype())) {
          fill(in->dtype(), p->data(in), in->type().numElements(), 10 + run);
          continue;
        }
        auto *labels = static_cast<int64_t *>(p->data(in));
        for (int64_t i = 0; i < in->type().numElements(); ++i)
          labels[i] = (i + run) % 10;
      }
    kept->run(run);
    plain->run(run);
    EXPECT_EQ(bytesOf(std::as_const(*kept).data(loss), loss->type()),
              bytesOf(std::as_const(*plain).data(loss), loss->type()))
        << "run " << run;
  }
  EXPECT_GT(kept->measure().kernelHeldBytes, 0u);
  EXPECT_GT(kept->castCacheStats().hits, 0u) << "the weights' casts were not served from the cache";
}

} // namespace
