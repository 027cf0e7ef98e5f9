//===- AssignPrecisionBackendTest.cpp - The target's capabilities count --===//
//
// assign-precision asks the target backend (PassContext::target) whether it
// runs an op in the half type; an op it cannot run stays fp32 with reason
// "backend", and an explicit per-node request for half is an error.
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/ModelLoader.h"
#include "ir/Verifier.h"
#include "passes/AssignPrecision.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

/// A backend that runs everything except the named ops in bf16.
class NoHalfFor final : public BackendCapabilities {
public:
  explicit NoHalfFor(std::vector<std::string> ops) : ops_(std::move(ops)) {}
  llvm::StringRef name() const override { return "test-target"; }
  bool supports(const OpInfo &op, DType dtype) const override {
    return dtype != DType::BF16 || !llvm::is_contained(ops_, op.name);
  }

private:
  std::vector<std::string> ops_;
};

const char *kModel = R"(
model: m
batch: 4
inputs:
  x: {shape: [B, 8]}
  target: {shape: [B, 8]}
layers:
  - linear: {out_features: 8, name: fc1}
  - relu: {name: act}
  - linear: {out_features: 8, name: fc2, precision: PRECISION}
loss: {mse_loss: {input: fc2, target: target}}
)";

std::unique_ptr<Graph> assign(const BackendCapabilities *target, DiagnosticEngine &diag,
                              const char *fc2Precision = "half") {
  std::string text = kModel;
  text.replace(text.find("PRECISION"), 9, fc2Precision);
  std::unique_ptr<Graph> g = loadModelString(text, "m.yaml", diag);
  if (!g || !setPolicyOverride(g->meta(), "opt_level", "O1", diag))
    return nullptr;
  PassManager pm;
  pm.setTarget(target);
  if (!pm.addByNames("assign-precision", diag) || !pm.run(*g, diag) || !verifyGraph(*g, diag))
    return nullptr;
  return g;
}

const Node *producer(const Graph &g, llvm::StringRef name) {
  const Value *v = g.lookup(name);
  return v && v->isResult() ? v->definingNode() : nullptr;
}

TEST(AssignPrecisionBackend, WithoutATargetEveryOpCanBeHalf) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = assign(nullptr, diag);
  ASSERT_TRUE(g) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  std::optional<PrecisionDecision> fc1 = precisionDecision(*producer(*g, "fc1"));
  ASSERT_TRUE(fc1);
  EXPECT_EQ(fc1->dtype, DType::BF16);
  EXPECT_EQ(fc1->reason, PrecisionReason::Category);
}

TEST(AssignPrecisionBackend, AnOpTheTargetCannotRunInHalfStaysFp32) {
  DiagnosticEngine diag;
  NoHalfFor target({"linear"});
  std::unique_ptr<Graph> g = assign(&target, diag, "fp32");
  ASSERT_TRUE(g) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  std::optional<PrecisionDecision> fc1 = precisionDecision(*producer(*g, "fc1"));
  ASSERT_TRUE(fc1);
  EXPECT_EQ(fc1->dtype, DType::F32);
  EXPECT_EQ(fc1->reason, PrecisionReason::Backend);
  EXPECT_EQ(fc1->reasonString(), "backend: test-target has no bf16 kernel");
  // Nothing else asks for half, so no cast is needed anywhere.
  for (const Node &n : g->nodes())
    EXPECT_NE(n.kind(), OpKind::Cast) << n.result()->name().str();
}

TEST(AssignPrecisionBackend, AnExplicitHalfRequestTheTargetCannotRunIsAnError) {
  DiagnosticEngine diag;
  NoHalfFor target({"linear"});
  EXPECT_FALSE(assign(&target, diag, "half"));
  ASSERT_FALSE(diag.diagnostics().empty());
  EXPECT_NE(diag.diagnostics()[0].message.find("backend 'test-target' cannot run"),
            std::string::npos)
      << diag.diagnostics()[0].message;
}

} // namespace
