//===- BatchShapesTest.cpp - Which dims of a graph are the batch ----------===//
//
// BatchProbe (frontends/onnx/BatchShapes.h) tells the ONNX export which dims
// follow the batch: from the model imported at two batches, matched before
// the passes and carried through them. A reshape folding the batch into the
// rows must be seen as such, an O2 graph's casts must carry the shapes, and
// a model whose import differs in more than shapes must be refused, saying
// why.
//
//===----------------------------------------------------------------------===//
#if AMPC_HAVE_ONNX
#include "frontends/onnx/BatchShapes.h"
#include "frontends/yaml/ModelLoader.h"
#include "passes/EvalMode.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

const char *kFolding = R"(model: folding
batch: 4
inputs:
  x: {shape: [B, 6, 8]}
layers:
  - reshape: {shape: [-1, 8], name: rows}
  - linear: {out_features: 3, name: proj}
  - reshape: {shape: [B, 18], name: back}
  - flatten: {start_dim: 0, name: flat}
)";

std::unique_ptr<Graph> load(const char *yaml, int64_t batch, DiagnosticEngine &diag) {
  LoadOptions opts;
  opts.batchOverride = batch;
  return loadModelString(yaml, "model.yaml", diag, opts);
}

/// The dims alone ("f32[...]" whatever the dtype the passes chose).
std::string dims(const TensorType &t) { return t.withDType(DType::F32).str(); }

TEST(BatchShapes, FoldedBatchFollowsThroughAnO2Graph) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = load(kFolding, 4, diag), other = load(kFolding, 8, diag);
  ASSERT_TRUE(g && other) << diag.diagnostics().front().str();
  BatchProbe probe;
  std::string why;
  ASSERT_TRUE(probe.match(*g, *other, why)) << why;
  // The passes at O2 add casts (new values) that the shapes must reach.
  ASSERT_TRUE(setPolicyOverride(g->meta(), "opt_level", "O2", diag));
  ASSERT_TRUE(resolvePolicy(g->meta(), diag));
  PassManager pm;
  pm.add(std::make_unique<EvalModePass>());
  ASSERT_TRUE(addStandardPipeline(pm, PipelineStage::Forward, diag) && pm.run(*g, diag))
      << diag.diagnostics().front().str();
  BatchShapes shapes;
  ASSERT_TRUE(probe.propagate(*g, shapes, why)) << why;
  EXPECT_EQ(shapes.batch, 4);
  EXPECT_EQ(shapes.otherBatch, 8);
  const Value *x = g->lookup("x"), *rows = g->lookup("rows"), *back = g->lookup("back"),
              *flat = g->lookup("flat");
  ASSERT_TRUE(x && rows && back && flat);
  EXPECT_EQ(dims(shapes.at(x)), "f32[8,6,8]");
  EXPECT_EQ(dims(shapes.at(rows)), "f32[48,8]");
  EXPECT_EQ(shapes.symbol(x, 0), "batch");
  EXPECT_EQ(shapes.symbol(rows, 0), "batch*6");
  EXPECT_FALSE(shapes.varies(rows, 1));
  EXPECT_EQ(shapes.symbol(back, 0), "batch");
  EXPECT_FALSE(shapes.varies(back, 1));
  EXPECT_EQ(shapes.symbol(flat, 0), "batch*18");
  // Every value of the rewritten graph has its shape at batch 8, the casts
  // O2 made included (a cast keeps its operand's dims).
  bool sawCast = false;
  for (const Node &n : g->nodes()) {
    ASSERT_TRUE(shapes.other.count(n.result())) << n.result()->name().str();
    if (n.kind() == OpKind::Cast) {
      sawCast = true;
      EXPECT_EQ(shapes.at(n.result()).dims(), shapes.at(n.operand(0)).dims());
    }
  }
  EXPECT_TRUE(sawCast);
  // Parameters have no batch.
  const Value *w = g->lookup("proj.weight");
  ASSERT_TRUE(w);
  EXPECT_FALSE(shapes.other.count(w));
  EXPECT_EQ(shapes.at(w), w->type());
}

TEST(BatchShapes, AnAttributeComputedFromTheBatchIsRefused) {
  // fill's shape holds B: no ONNX op of the exporter's computes it.
  const char *fill = R"(model: fill
batch: 2
inputs:
  x: {shape: [B, 3]}
layers:
  - fill: {value: 1.0, shape: [B, 3], name: ones}
  - add: {inputs: [x, ones], name: y}
)";
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = load(fill, 2, diag), other = load(fill, 4, diag);
  ASSERT_TRUE(g && other) << diag.diagnostics().front().str();
  BatchProbe probe;
  std::string why;
  EXPECT_FALSE(probe.match(*g, *other, why));
  EXPECT_EQ(why, "at batch 4 the model imports with other attributes for the op making 'ones' "
                 "(fill): an attribute follows the batch");
}

TEST(BatchShapes, AnotherGraphOrTheSameBatchIsRefused) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = load(kFolding, 4, diag), same = load(kFolding, 4, diag);
  ASSERT_TRUE(g && same);
  BatchProbe probe;
  std::string why;
  EXPECT_FALSE(probe.match(*g, *same, why));
  EXPECT_EQ(why, "the model has no batch size to vary");
  const char *wider = R"(model: folding
batch: 8
inputs:
  x: {shape: [B, 6, 8]}
layers:
  - reshape: {shape: [-1, 8], name: rows}
  - linear: {out_features: 4, name: proj}
)";
  std::unique_ptr<Graph> other = load(wider, 8, diag);
  ASSERT_TRUE(other);
  EXPECT_FALSE(probe.match(*g, *other, why));
  EXPECT_NE(why.find("at batch 8 the model imports with"), std::string::npos) << why;
}

} // namespace
#endif
