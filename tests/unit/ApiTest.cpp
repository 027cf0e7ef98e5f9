//===- ApiTest.cpp - The public API (tools/libampc), step by step ----------===//
//
// Only the public headers: what a host program sees. Load, policy, rewrite
// with hooks and host passes, inspection, compile, train, evaluate and
// checkpoints, and the error values each step returns for bad input.
//
//===----------------------------------------------------------------------===//
#include "ampc/ampc.h"

#include "TempDir.h"
#include "kernels/cpu/OneDnn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

using namespace ampc::api;

namespace {

constexpr const char *kSmallMlp = R"(model: small
batch: 8
inputs:
  x: {shape: [B, 16]}
  target: {shape: [B, 4]}
init:
  seed: 0
layers:
  - linear: {out_features: 32, name: fc1}
  - relu: {}
  - linear: {out_features: 4, name: out}
loss: {mse_loss: {input: out, target: target}}
optimizer: {sgd: {lr: 0.05}}
train:
  steps: 6
  data: {synthetic: {seed: 0, size: 64}}
)";

Model load(const char *text = kSmallMlp) {
  Result<Model> m = Model::loadString(text, "small.yaml");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

CompileOptions onDevice(const char *device) {
  CompileOptions c;
  c.device = device;
  return c;
}

/// Progress lines dropped (or collected), up to `steps` (the model's when unset).
TrainOptions quiet(std::optional<int64_t> steps = std::nullopt) {
  TrainOptions t;
  t.steps = steps;
  t.log = [](std::string_view) {};
  return t;
}

NodeView findNode(const GraphView &g, const std::string &output) {
  for (NodeView n : g.nodes())
    if (n.output().valid() && n.output().name() == output)
      return n;
  return {};
}

} // namespace

TEST(ApiTest, VersionMatchesTheProject) {
  EXPECT_STREQ(version(), AMPC_VERSION_STRING);
  EXPECT_EQ(std::string(AMPC_VERSION_STRING), std::to_string(AMPC_VERSION_MAJOR) + "." +
                                                  std::to_string(AMPC_VERSION_MINOR) + "." +
                                                  std::to_string(AMPC_VERSION_PATCH));
}

TEST(ApiTest, LoadErrorsCarryFileLineAndColumn) {
  std::string bad = kSmallMlp;
  bad.replace(bad.find("linear: {out_features: 32"), 6, "lienar");
  Result<Model> m = Model::loadString(bad, "bad.yaml");
  ASSERT_FALSE(m.ok());
  ASSERT_FALSE(m.status().diagnostics().empty());
  const Diagnostic &d = m.status().diagnostics().front();
  EXPECT_EQ(d.severity, Severity::Error);
  EXPECT_EQ(d.file, "bad.yaml");
  EXPECT_EQ(d.line, 9u);
  EXPECT_EQ(d.column, 5u);
  EXPECT_NE(d.message.find("unknown op or block 'lienar'"), std::string::npos) << d.message;
  EXPECT_NE(d.str().find("bad.yaml:9:5: error: "), std::string::npos) << d.str();

  Result<Model> missing = Model::loadFile("/nonexistent/model.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos)
      << missing.status().message();

  Result<Model> ir = Model::parseIR("graph @g {\n  %y = nosuchop()\n}\n", "bad.ir");
  EXPECT_FALSE(ir.ok());

  // A bad `amp:` section is an import error too.
  std::string badAmp = std::string(kSmallMlp) + "amp: {opt_level: O7}\n";
  EXPECT_FALSE(Model::loadString(badAmp, "amp.yaml").ok());
}

TEST(ApiTest, PolicyFromLevelAndOverrides) {
  Result<Policy> o2 = Policy::fromLevel("O2");
  ASSERT_TRUE(o2.ok()) << o2.status().message();
  EXPECT_EQ(o2->get("cast_model_type"), "half");
  EXPECT_EQ(o2->get("master_weights"), "true");
  EXPECT_EQ(o2->get("amp.opt_level"), "O2");

  Result<Policy> p = Policy::fromLevel("O1", {{"half_type", "f16"}, {"loss_scale", "128"}});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->get("half_type"), "f16");
  EXPECT_NE(p->str().find("(override)"), std::string::npos) << p->str();
  EXPECT_TRUE(p->set("fp32_ops", "linear").ok());
  EXPECT_EQ(p->overrides().size(), 3u);

  // Bad levels, properties, values and op names are errors naming them.
  Result<Policy> badLevel = Policy::fromLevel("O4");
  ASSERT_FALSE(badLevel.ok());
  EXPECT_NE(badLevel.status().message().find("opt_level"), std::string::npos);
  Result<Policy> badValue = Policy::fromLevel("O1", {{"half_type", "f17"}});
  ASSERT_FALSE(badValue.ok());
  EXPECT_NE(badValue.status().message().find("half_type"), std::string::npos);
  EXPECT_FALSE(Policy::fromLevel("O1", {{"frobnicate", "1"}}).ok());
  Result<Policy> badOp = Policy::fromLevel("O1", {{"fp32_ops", "nosuchop"}});
  ASSERT_FALSE(badOp.ok());
  EXPECT_NE(badOp.status().message().find("nosuchop"), std::string::npos);
  EXPECT_FALSE(Policy::fromLevel("O1", {{"fp32_ops", "linear"}, {"half_ops", "linear"}}).ok());
  // A failed set leaves the policy as it was.
  EXPECT_FALSE(p->set("master_weights", "maybe").ok());
  EXPECT_EQ(p->overrides().size(), 3u);
}

TEST(ApiTest, ModelPolicyRoundTrip) {
  Model m = load();
  Result<Policy> none = m.policy();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->level(), "O0");
  Result<Policy> p = Policy::fromLevel("O2", {{"keep_batchnorm_fp32", "false"}});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(m.setPolicy(*p).ok());
  Result<Policy> back = m.policy();
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->level(), "O2");
  EXPECT_EQ(back->get("keep_batchnorm_fp32"), "false");
  EXPECT_EQ(m.graph().meta("amp.opt_level").value_or(""), "O2");
}

TEST(ApiTest, RewriteO1WithHooksAndInspection) {
  Model m = load();
  ASSERT_TRUE(m.setPolicy(*Policy::fromLevel("O1")).ok());
  std::vector<std::string> seen;
  std::vector<std::string> printed;
  bool hostSawDecision = false;
  PipelineOptions opts;
  opts.stage = Stage::Train;
  opts.verifyEach = true;
  opts.afterPass = [&](std::string_view pass, const GraphView &g) {
    seen.emplace_back(pass);
    EXPECT_TRUE(g.valid());
  };
  opts.printAfter = {"autodiff"};
  opts.print = [&](std::string_view pass, std::string_view ir) {
    printed.emplace_back(pass);
    EXPECT_NE(ir.find("role(backward)"), std::string_view::npos);
  };
  opts.insertAfter("assign-precision", {"check-decisions", [&](GraphEditor &g) {
                                          NodeView fc1 = findNode(g, "fc1");
                                          hostSawDecision =
                                              fc1.valid() && fc1.precision() == DType::BF16;
                                          return Status();
                                        }});
  Status s = m.rewrite(opts);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(hostSawDecision);
  std::vector<std::string> expected = standardPasses(Stage::Train);
  expected.insert(std::find(expected.begin(), expected.end(), "assign-precision") + 1,
                  "check-decisions");
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(printed, std::vector<std::string>{"autodiff"});
  EXPECT_EQ(m.rewrittenStage(), Stage::Train);

  GraphView g = m.graph();
  EXPECT_TRUE(g.verify().ok());
  NodeView fc1 = findNode(g, "fc1");
  ASSERT_TRUE(fc1.valid());
  EXPECT_EQ(fc1.op(), "linear");
  EXPECT_EQ(fc1.category(), Category::Half);
  EXPECT_EQ(fc1.precision(), DType::BF16);
  EXPECT_EQ(fc1.reason(), "category: half");
  EXPECT_EQ(fc1.output().dtype(), DType::BF16);
  EXPECT_EQ(fc1.location(), "small.yaml:9:5");
  EXPECT_EQ(fc1.role(), NodeRole::Forward);
  // The parameters stay f32 under O1; their casts to bf16 feed fc1.
  ValueView w = g.findValue("fc1.weight");
  ASSERT_TRUE(w.valid());
  EXPECT_EQ(w.dtype(), DType::F32);
  EXPECT_EQ(w.stateKind(), StateKind::Parameter);
  EXPECT_FALSE(g.casts().empty());
  bool castOfWeight = false;
  for (NodeView c : g.casts()) {
    EXPECT_TRUE(c.isCast());
    if (c.inputs()[0] == w && c.output().dtype() == DType::BF16)
      castOfWeight = true;
  }
  EXPECT_TRUE(castOfWeight);
  // The loss runs in fp32, by policy.
  bool lossFp32 = false;
  for (NodeView n : g.nodes())
    if (n.role() == NodeRole::Loss)
      lossFp32 = n.precision() == DType::F32;
  EXPECT_TRUE(lossFp32);
  PrecisionStats stats = g.precisionStats();
  EXPECT_GT(stats.halfOps, 0u);
  EXPECT_GT(stats.casts, 0u);
  EXPECT_NE(stats.str.find("in half"), std::string::npos) << stats.str;
  EXPECT_NE(g.explain().find("category: half"), std::string::npos);
  EXPECT_NE(g.printIR().find("bf16"), std::string::npos);
  EXPECT_FALSE(fc1.attr("no_such_attr").has_value());

  // A model is rewritten once.
  EXPECT_FALSE(m.rewrite().ok());
}

TEST(ApiTest, RewriteErrors) {
  Model m = load();
  PipelineOptions opts;
  opts.insertAfter("no-such-pass", {"mine", [](GraphEditor &) { return Status(); }});
  Status s = m.rewrite(opts);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no-such-pass"), std::string::npos) << s.message();

  // A failing host pass stops the pipeline with its message.
  Model m2 = load();
  PipelineOptions failing;
  failing.insertBefore("autodiff",
                       {"refuse", [](GraphEditor &) { return Status::error("not today"); }});
  Status s2 = m2.rewrite(failing);
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("refuse: not today"), std::string::npos) << s2.message();

  // A model without an optimizer has no Train stage.
  std::string fwd = kSmallMlp;
  fwd.erase(fwd.find("optimizer:"), std::string("optimizer: {sgd: {lr: 0.05}}\n").size());
  Model m3 = load(fwd.c_str());
  EXPECT_FALSE(m3.trainable());
  EXPECT_FALSE(m3.rewrite().ok());
  PipelineOptions forward;
  forward.stage = Stage::Forward;
  EXPECT_TRUE(m3.rewrite(forward).ok());

  PipelineOptions badDevice;
  badDevice.device = "tpu";
  EXPECT_FALSE(load().rewrite(badDevice).ok());
}

TEST(ApiTest, HostPassEditsTheGraph) {
  Model m = load();
  ASSERT_TRUE(m.setPolicy(*Policy::fromLevel("O1")).ok());
  PipelineOptions opts;
  opts.insertBefore("assign-precision", {"pin-out", [](GraphEditor &g) {
                                           NodeView out = findNode(g, "out");
                                           if (!out)
                                             return Status::error("no out layer");
                                           Status s = g.setPrecisionOverride(out, "fp32");
                                           if (!s)
                                             return s;
                                           // Bad edits are errors, not crashes.
                                           EXPECT_FALSE(g.setPrecisionOverride(out, "f8").ok());
                                           EXPECT_FALSE(g.setAttr(out, "nonsense", 1.0).ok());
                                           EXPECT_FALSE(g.insertNode("nosuchop", {}).ok());
                                           EXPECT_FALSE(g.eraseNode(out).ok()); // still used
                                           return Status();
                                         }});
  ASSERT_TRUE(m.rewrite(opts).ok());
  NodeView out = findNode(m.graph(), "out");
  ASSERT_TRUE(out.valid());
  EXPECT_EQ(out.precision(), DType::F32);
  EXPECT_NE(out.reason().find("precision(fp32)"), std::string::npos) << out.reason();
  EXPECT_EQ(findNode(m.graph(), "fc1").precision(), DType::BF16);
}

TEST(ApiTest, TrainEvaluateAndCheckpoints) {
  ampc::testing::TempDir dir;
  auto build = [](int64_t steps) {
    Model m = load();
    EXPECT_TRUE(m.setPolicy(*Policy::fromLevel("O2")).ok());
    TrainSettings settings;
    settings.steps = steps;
    EXPECT_TRUE(m.setTrainSettings(settings).ok());
    EXPECT_TRUE(m.rewrite().ok());
    return m;
  };
  // Uninterrupted: 6 steps.
  Model whole = build(6);
  Result<Program> pw = Program::compile(whole, onDevice("cpu-ref"));
  ASSERT_TRUE(pw.ok()) << pw.status().message();
  EXPECT_EQ(pw->device(), "cpu-ref");
  EXPECT_GT(pw->plannedBytes(), 0u);
  std::vector<std::string> lines;
  TrainOptions logged;
  logged.logEvery = 2;
  logged.log = [&](std::string_view l) { lines.emplace_back(l); };
  Result<TrainReport> rw = pw->train(logged);
  ASSERT_TRUE(rw.ok()) << rw.status().message();
  EXPECT_EQ(rw->steps, 6);
  EXPECT_FALSE(lines.empty());
  EXPECT_TRUE(std::isfinite(rw->finalLoss));
  EXPECT_TRUE(rw->finalLossScale.has_value()); // O2: dynamic loss scaling
  EXPECT_NE(rw->summary.find("loss"), std::string::npos);
  // Training again without a checkpoint is refused, not silently restarted.
  EXPECT_FALSE(pw->train(quiet()).ok());

  Result<EvalReport> ev = pw->evaluate();
  ASSERT_TRUE(ev.ok()) << ev.status().message();
  EXPECT_TRUE(std::isfinite(ev->loss));
  EXPECT_EQ(ev->samples, 64);

  // Interrupted: 3 steps, checkpoint, a fresh program resumes to 6.
  std::string ckpt = dir.file("run.ckpt");
  Model first = build(6);
  Result<Program> p1 = Program::compile(first, onDevice("cpu-ref"));
  ASSERT_TRUE(p1.ok());
  ASSERT_TRUE(p1->train(quiet(3)).ok());
  ASSERT_TRUE(p1->saveCheckpoint(ckpt).ok());
  Model second = build(6);
  Result<Program> p2 = Program::compile(second, onDevice("cpu-ref"));
  ASSERT_TRUE(p2.ok());
  Status loaded = p2->loadCheckpoint(ckpt);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(p2->stepsDone(), 3);
  Result<TrainReport> r2 = p2->train(quiet());
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_EQ(r2->firstStep, 3);
  EXPECT_EQ(r2->finalLoss, rw->finalLoss); // bit for bit
  Result<std::vector<double>> a = pw->read("fc1.weight"), b = p2->read("fc1.weight");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);

  // Bad checkpoints and names are errors that change nothing.
  std::ofstream(dir.file("junk.ckpt")) << "not a checkpoint";
  EXPECT_FALSE(p2->loadCheckpoint(dir.file("junk.ckpt")).ok());
  EXPECT_FALSE(p2->loadCheckpoint(dir.file("missing.ckpt")).ok());
  EXPECT_FALSE(p2->read("no_such_tensor").ok());
  EXPECT_FALSE(p2->write("x", {1.0, 2.0}).ok()); // wrong element count
  EXPECT_EQ(p2->stepsDone(), 6);
}

TEST(ApiTest, ForwardStepOnWrittenInputs) {
  Model m = load();
  PipelineOptions opts;
  opts.stage = Stage::Forward;
  ASSERT_TRUE(m.rewrite(opts).ok());
  Result<Program> p = Program::compile(m, onDevice("cpu"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  std::vector<double> x(8 * 16, 0.5), t(8 * 4, 0.0);
  ASSERT_TRUE(p->write("x", x).ok());
  ASSERT_TRUE(p->write("target", t).ok());
  ASSERT_TRUE(p->step().ok());
  Result<std::vector<double>> loss = p->read("loss");
  ASSERT_TRUE(loss.ok()) << loss.status().message();
  ASSERT_EQ(loss->size(), 1u);
  EXPECT_TRUE(std::isfinite((*loss)[0]));
  EXPECT_FALSE(Program::compile(m, onDevice("tpu")).ok());
}

TEST(ApiTest, CloneIsIndependent) {
  Model m = load();
  Result<Model> c = m.clone();
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->setPolicy(*Policy::fromLevel("O1")).ok());
  ASSERT_TRUE(c->rewrite().ok());
  EXPECT_FALSE(m.rewrittenStage().has_value());
  EXPECT_LT(m.graph().numNodes(), c->graph().numNodes());
  EXPECT_EQ(m.graph().printIR(), load().graph().printIR());
}

// What the `ampc` command line is built from: overrides at load, the data
// plan, the held-out evaluation, the plan table, a forward batch.
TEST(ApiTest, CommandLineBuildingBlocks) {
  LoadOptions opts;
  opts.optLevel = "O1";
  opts.policyOverrides = {{"half_type", "f16"}, {"fp32_ops", "relu"}};
  Result<Model> loaded = Model::loadString(kSmallMlp, "small.yaml", opts);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  Model m = std::move(loaded).value();
  Result<Policy> policy = m.policy();
  ASSERT_TRUE(policy.ok());
  EXPECT_EQ(policy->level(), "O1");
  EXPECT_EQ(policy->get("half_type"), "f16");
  EXPECT_NE(policy->deviceNote("cpu").find("f16 on the CPU"), std::string::npos);
  EXPECT_EQ(policy->deviceNote("cuda"), "");
  // bf16 on a CPU whose bf16 is no faster than f32 says what runs instead.
  LoadOptions bf16Opts;
  bf16Opts.optLevel = "O2";
  Result<Model> bf16Model = Model::loadString(kSmallMlp, "small.yaml", bf16Opts);
  ASSERT_TRUE(bf16Model.ok()) << bf16Model.status().message();
  Result<Policy> bf16Policy = bf16Model->policy();
  ASSERT_TRUE(bf16Policy.ok());
  EXPECT_EQ(bf16Policy->deviceNote("cpu").find("widened") != std::string::npos,
            ampc::kernels::cpu::bf16GemmsRunWidened());
  EXPECT_EQ(bf16Policy->deviceNote("cpu-ref"), "");

  // A bad override is an error of the load, naming the property.
  LoadOptions bad;
  bad.policyOverrides = {{"loss_scale", "banana"}};
  Result<Model> refused = Model::loadString(kSmallMlp, "small.yaml", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("loss_scale"), std::string::npos);

  // Epochs over the training samples, a tenth held out for evaluation.
  TrainSettings settings;
  settings.epochs = 2;
  settings.evalEvery = 3;
  ASSERT_TRUE(m.setTrainSettings(settings).ok());
  Result<DataInfo> data = m.openData();
  ASSERT_TRUE(data.ok()) << data.status().message();
  EXPECT_EQ(data->samples, 64);
  EXPECT_EQ(data->batchSize, 8);
  Result<DataInfo> plan = m.planTraining();
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->heldOut, 6);
  EXPECT_EQ(plan->trainSamples, 58);
  EXPECT_EQ(plan->batchesPerEpoch, 7);
  EXPECT_EQ(plan->steps, 14);
  EXPECT_EQ(m.graph().meta("train.steps"), "14");
  ASSERT_TRUE(m.rewrite().ok());

  Result<DeviceChoice> device = selectDevice("cpu-ref");
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(device->name, "cpu-ref");
  EXPECT_TRUE(device->note.empty());
  EXPECT_FALSE(selectDevice("tpu").ok());
  Result<DeviceChoice> any = selectDevice("auto");
  ASSERT_TRUE(any.ok());
  EXPECT_NE(any->note.find("device: auto -> "), std::string::npos);

  Result<Program> p = Program::compile(m, onDevice("cpu-ref"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_GT(p->numScheduledOps(), 0u);
  EXPECT_FALSE(p->memoryPlan().empty());
  std::string text;
  TrainOptions t;
  t.evalEvery = 7;
  t.logEvery = 7;
  t.output = [&](std::string_view s) { text += s; };
  Result<TrainReport> r = p->train(t);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->steps, 14);
  ASSERT_TRUE(r->eval.has_value());
  EXPECT_EQ(r->eval->samples, 6);
  EXPECT_NE(text.find("eval loss"), std::string::npos);
  CastCacheStats cache = p->castCacheStats();
  EXPECT_GT(cache.hits + cache.misses, 0u); // O1 casts the f32 weights
  EXPECT_EQ(cache.str.rfind("cast cache: ", 0), 0u);

  // Too few samples to hold a tenth out and fill a batch.
  TrainSettings evalEvery;
  evalEvery.evalEvery = 1;
  LoadOptions big;
  big.batch = 60;
  Result<Model> wide = Model::loadString(kSmallMlp, "small.yaml", big);
  ASSERT_TRUE(wide.ok());
  ASSERT_TRUE(wide->setTrainSettings(evalEvery).ok());
  Result<DataInfo> refusedPlan = wide->planTraining();
  ASSERT_FALSE(refusedPlan.ok());
  EXPECT_NE(refusedPlan.status().message().find("too few to hold out"), std::string::npos);
}

TEST(ApiTest, ForwardBatchAndAtomicWrite) {
  ampc::testing::TempDir dir;
  Model m = load();
  PipelineOptions forward;
  forward.stage = Stage::Forward;
  ASSERT_TRUE(m.rewrite(forward).ok());
  Result<Program> p = Program::compile(m, onDevice("cpu-ref"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  Result<ForwardReport> r = p->runForward();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->samples, 8);
  EXPECT_EQ(r->dataKind, "synthetic");
  ASSERT_FALSE(r->outputs.empty());
  EXPECT_TRUE(r->guardsIntact);
  EXPECT_EQ(r->plannedBytes, p->plannedBytes());

  std::string path = dir.file("small.ir");
  ASSERT_TRUE(writeFileAtomically(path, m.graph().printIR()).ok());
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_FALSE(first.empty());
  EXPECT_FALSE(writeFileAtomically(dir.file("no/such/dir/x.ir"), "x").ok());
  TensorInfo bf16{DType::BF16, {2, 3}};
  EXPECT_EQ(bf16.sizeInBytes(), 12);
}
