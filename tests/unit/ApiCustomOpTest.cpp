//===- ApiCustomOpTest.cpp - Ops a host program registers -----------------===//
//
// A custom op registered through the public API is used from a model file,
// gets its precision from its category under O1 (and from the device's
// kernel dtypes), is differentiated by its gradient rule (checked against
// finite differences with the same harness as the built-in ops) and trains.
//
//===----------------------------------------------------------------------===//
#include "ampc/ampc.h"

#include "GradCheckUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace ampc::api;

namespace {

/// y = scale * tanh(x); its backward is a custom op too.
void registerScaledTanh() {
  static bool done = [] {
    CustomOpSpec grad;
    grad.name = "api_test_scaled_tanh_grad";
    grad.inputs = {{"input"}, {"grad"}};
    grad.attrs = {{"scale", AttrKind::Float, 1.0}};
    grad.category = Category::Follow;
    grad.shape = [](const ShapeContext &ctx, std::vector<TensorInfo> &out) {
      out.push_back(ctx.input(0));
      return Status();
    };
    grad.cpuKernel = [](const KernelContext &k) {
      double scale = k.floatAttr("scale");
      for (int64_t i = 0; i < k.output().numElements(); ++i) {
        double t = std::tanh(k.input(0).get(i));
        k.output().set(i, scale * (1 - t * t) * k.input(1).get(i));
      }
    };
    Status sg = registerCustomOp(grad);
    EXPECT_TRUE(sg.ok()) << sg.message();

    CustomOpSpec op;
    op.name = "api_test_scaled_tanh";
    op.inputs = {{"input"}};
    op.attrs = {{"scale", AttrKind::Float, 1.0}};
    op.category = Category::Half;
    op.shape = [](const ShapeContext &ctx, std::vector<TensorInfo> &out) {
      if (ctx.input(0).dtype == DType::I64)
        return Status::error("input must be floating");
      out.push_back(ctx.input(0));
      return Status();
    };
    op.gradient = [](GradientContext &g) {
      ValueView dx = g.build1("api_test_scaled_tanh_grad", {g.input(0), g.outputGrad(0)},
                              {{"scale", *g.forward().attr("scale")}});
      if (!dx)
        return Status::error("cannot build the backward");
      g.setInputGrad(0, dx);
      return Status();
    };
    op.cpuKernel = [](const KernelContext &k) {
      double scale = k.floatAttr("scale");
      for (int64_t i = 0; i < k.output().numElements(); ++i)
        k.output().set(i, scale * std::tanh(k.input(0).get(i)));
    };
    Status s = registerCustomOp(op);
    EXPECT_TRUE(s.ok()) << s.message();

    // The same, but with kernels for f32 (and the f64 of tests) only.
    op.name = "api_test_tanh_f32_only";
    op.gradient = nullptr;
    op.kernelDTypes = {DType::F32, DType::F64};
    Status s2 = registerCustomOp(op);
    EXPECT_TRUE(s2.ok()) << s2.message();
    return true;
  }();
  (void)done;
}

std::string modelWith(const std::string &layer) {
  return R"(model: custom
batch: 8
inputs:
  x: {shape: [B, 16]}
  target: {shape: [B, 4]}
init:
  seed: 0
layers:
  - linear: {out_features: 32, name: fc1}
  - )" + layer +
         R"(
  - linear: {out_features: 4, name: out}
loss: {mse_loss: {input: out, target: target}}
optimizer: {sgd: {lr: 0.05}}
train:
  steps: 8
  data: {synthetic: {seed: 0, size: 64}}
)";
}

NodeView findOp(const GraphView &g, const std::string &op) {
  for (NodeView n : g.nodes())
    if (n.op() == op)
      return n;
  return {};
}

} // namespace

TEST(ApiCustomOpTest, RegistrationRefusesIncompleteSpecs) {
  CustomOpSpec spec;
  spec.name = "api_test_incomplete";
  spec.inputs = {{"input"}};
  spec.shape = [](const ShapeContext &ctx, std::vector<TensorInfo> &out) {
    out.push_back(ctx.input(0));
    return Status();
  };
  spec.cpuKernel = [](const KernelContext &) {};
  // No category: refused, never "follow" by default.
  Status s = registerCustomOp(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("declares no precision category"), std::string::npos) << s.message();
  EXPECT_FALSE(isRegisteredOp("api_test_incomplete"));

  spec.category = Category::Follow;
  CustomOpSpec noShape = spec;
  noShape.shape = nullptr;
  EXPECT_FALSE(registerCustomOp(noShape).ok());
  CustomOpSpec noKernel = spec;
  noKernel.cpuKernel = nullptr;
  EXPECT_FALSE(registerCustomOp(noKernel).ok());
  CustomOpSpec builtinName = spec;
  builtinName.name = "linear";
  EXPECT_NE(registerCustomOp(builtinName).message().find("already registered"), std::string::npos);
  CustomOpSpec badName = spec;
  badName.name = "has space";
  EXPECT_FALSE(registerCustomOp(badName).ok());
  CustomOpSpec badDefault = spec;
  badDefault.attrs = {{"k", AttrKind::Int, std::string("three")}};
  EXPECT_FALSE(registerCustomOp(badDefault).ok());
  CustomOpSpec intKernel = spec;
  intKernel.kernelDTypes = {DType::I64};
  EXPECT_FALSE(registerCustomOp(intKernel).ok());
  EXPECT_FALSE(isRegisteredOp("api_test_incomplete"));
}

TEST(ApiCustomOpTest, ModelFilesUseItAndShapeErrorsPointAtTheLayer) {
  registerScaledTanh();
  ASSERT_TRUE(isRegisteredOp("api_test_scaled_tanh"));
  Result<Model> m = Model::loadString(modelWith("api_test_scaled_tanh: {scale: 2.0}"), "c.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  NodeView n = findOp(m->graph(), "api_test_scaled_tanh");
  ASSERT_TRUE(n.valid());
  EXPECT_TRUE(n.isCustomOp());
  EXPECT_EQ(n.category(), Category::Half);
  EXPECT_EQ(n.location(), "c.yaml:10:5");
  EXPECT_EQ(std::get<double>(*n.attr("scale")), 2.0);

  Result<Model> bad = Model::loadString(modelWith("api_test_scaled_tanh: {scale: yes}"), "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().diagnostics().front().line, 10u) << bad.status().message();
}

TEST(ApiCustomOpTest, ParticipatesInO1ByCategoryAndKernelDTypes) {
  registerScaledTanh();
  Result<Model> m = Model::loadString(modelWith("api_test_scaled_tanh: {scale: 2.0}"), "c.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(m->setPolicy(*Policy::fromLevel("O1")).ok());
  Status s = m->rewrite();
  ASSERT_TRUE(s.ok()) << s.message();
  NodeView n = findOp(m->graph(), "api_test_scaled_tanh");
  ASSERT_TRUE(n.valid());
  EXPECT_EQ(n.precision(), DType::BF16);
  EXPECT_EQ(n.reason(), "category: half");
  EXPECT_EQ(n.output().dtype(), DType::BF16);
  // Its backward is there, built by the host's gradient rule.
  NodeView g = findOp(m->graph(), "api_test_scaled_tanh_grad");
  ASSERT_TRUE(g.valid());
  EXPECT_EQ(g.role(), NodeRole::Backward);

  // Overridden to fp32 by the policy, as a built-in op would be.
  Result<Model> pinned =
      Model::loadString(modelWith("api_test_scaled_tanh: {scale: 2.0}"), "c.yaml");
  ASSERT_TRUE(pinned.ok());
  ASSERT_TRUE(
      pinned->setPolicy(*Policy::fromLevel("O1", {{"fp32_ops", "api_test_scaled_tanh"}})).ok());
  ASSERT_TRUE(pinned->rewrite().ok());
  NodeView p = findOp(pinned->graph(), "api_test_scaled_tanh");
  EXPECT_EQ(p.precision(), DType::F32);
  EXPECT_EQ(p.reason(), "op-override: amp.fp32_ops");

  // Kernels without bf16: the device cannot run it in half, so it stays f32.
  Result<Model> f32 = Model::loadString(modelWith("api_test_tanh_f32_only: {}"), "c.yaml");
  ASSERT_TRUE(f32.ok());
  ASSERT_TRUE(f32->setPolicy(*Policy::fromLevel("O1")).ok());
  PipelineOptions fwd;
  fwd.stage = Stage::Forward;
  ASSERT_TRUE(f32->rewrite(fwd).ok());
  EXPECT_EQ(findOp(f32->graph(), "api_test_tanh_f32_only").precision(), DType::F32);
}

TEST(ApiCustomOpTest, GradientMatchesFiniteDifferences) {
  registerScaledTanh();
  using ampc::testing::checkGradients;
  ampc::TensorType t(ampc::DType::F64, {3, 5});
  EXPECT_TRUE(checkGradients("api_test_scaled_tanh", {{t}}, {{"scale", ampc::Attribute(1.5)}}));
  EXPECT_TRUE(checkGradients("api_test_scaled_tanh", {{ampc::TensorType(ampc::DType::F64, {7})}},
                             {}, {.seed = 3, .lo = -3, .hi = 3}));
  // Without a gradient rule, autodiff says so instead of guessing.
  EXPECT_FALSE(checkGradients("api_test_tanh_f32_only", {{t}}));
}

TEST(ApiCustomOpTest, TrainsUnderO1) {
  registerScaledTanh();
  Result<Model> m = Model::loadString(modelWith("api_test_scaled_tanh: {scale: 1.0}"), "c.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(m->setPolicy(*Policy::fromLevel("O1")).ok());
  ASSERT_TRUE(m->rewrite().ok());
  CompileOptions onCpu;
  onCpu.device = "cpu";
  Result<Program> p = Program::compile(*m, onCpu);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // The loss over all the data, before and after: single batches are noisy.
  Result<EvalReport> before = p->evaluate();
  ASSERT_TRUE(before.ok()) << before.status().message();
  TrainOptions quiet;
  quiet.log = [](std::string_view) {};
  Result<TrainReport> r = p->train(quiet);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->steps, 8);
  EXPECT_TRUE(std::isfinite(r->finalLoss));
  Result<EvalReport> after = p->evaluate();
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_LT(after->loss, before->loss);
}
