//===- LossScaleTest.cpp - Dynamic loss scaling as graph ops ---------------===//
//
// The two loss-scaling kernels against hand-worked GradScaler sequences, the
// loss-scale pass's rewrite, and training steps on the reference backend: a
// scaled step equals the unscaled one, an injected inf/NaN gradient skips
// the step bit for bit and backs the scale off (which grows back after the
// interval), accumulation checks once per optimizer step, and a checkpoint
// carries the scaler state so that resuming is bit-identical.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "TempDir.h"

#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"
#include "passes/LossScale.h"
#include "passes/MasterWeights.h"
#include "passes/PassManager.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"
#include "runtime/train/Checkpoint.h"

#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

using namespace ampc;
using namespace ampc::testing;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

TensorType scalarF32() { return TensorType(DType::F32, {}); }
TensorType vec(DType t, int64_t n) { return TensorType(t, {n}); }

//===----------------------------------------------------------------------===//
// unscale_check
//===----------------------------------------------------------------------===//

TEST(UnscaleCheck, ReportsTheScaleAndItsInverseAndOnlyReadsTheGradients) {
  KernelRun r = runKernel("unscale_check", {scalarF32(), vec(DType::BF16, 3), vec(DType::F32, 2)},
                          {{1024}, {1024, -2048, 512}, {3072, 0.5}});
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.outputs.size(), 3u);
  EXPECT_EQ(r.outputs[0], std::vector<double>{0});          // found_inf
  EXPECT_EQ(r.outputs[1], std::vector<double>{1024});       // the scale used
  EXPECT_EQ(r.outputs[2], std::vector<double>{1.0 / 1024}); // what the updates multiply by
  EXPECT_EQ(r.outputTypes[2], scalarF32());
}

TEST(UnscaleCheck, FindsInfAndNaNAnywhere) {
  std::vector<TensorType> types = {scalarF32(), vec(DType::F16, 2), vec(DType::F32, 2)};
  for (double bad : {kInf, -kInf, kNaN}) {
    KernelRun first = runKernel("unscale_check", types, {{8}, {bad, 1}, {1, 1}});
    KernelRun last = runKernel("unscale_check", types, {{8}, {1, 1}, {1, bad}});
    ASSERT_TRUE(first.ok && last.ok) << first.error << last.error;
    EXPECT_EQ(first.outputs[0][0], 1) << bad;
    EXPECT_EQ(last.outputs[0][0], 1) << bad;
  }
  // The check is on the unscaled value: a scale below 1 can overflow f32.
  KernelRun overflow =
      runKernel("unscale_check", {scalarF32(), vec(DType::F32, 1)}, {{0.5}, {3e38}});
  ASSERT_TRUE(overflow.ok) << overflow.error;
  EXPECT_EQ(overflow.outputs[0][0], 1);
  EXPECT_EQ(overflow.outputs[2][0], 2);
}

TEST(UnscaleCheck, ChecksF64GradientsInF64) {
  // 1e300 / 0.5 overflows f32 but not f64.
  KernelRun r = runKernel("unscale_check", {scalarF32(), vec(DType::F64, 1)}, {{0.5}, {1e300}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.outputs[0][0], 0);
}

TEST(UnscaleCheck, ReportsOnlyOnTheLastMicroStep) {
  std::vector<TensorType> types = {scalarF32(), vec(DType::F32, 2)};
  AttrMap k2 = {{"accumulate", 2}};
  KernelRun first = runKernel("unscale_check", types, {{2}, {kInf, 4}}, k2, /*step=*/4);
  KernelRun last = runKernel("unscale_check", types, {{2}, {kInf, 4}}, k2, /*step=*/5);
  ASSERT_TRUE(first.ok && last.ok);
  EXPECT_EQ(first.outputs[0][0], 0);
  EXPECT_EQ(last.outputs[0][0], 1);
  EXPECT_EQ(first.outputs[2][0], 0.5);
}

//===----------------------------------------------------------------------===//
// update_loss_scale
//===----------------------------------------------------------------------===//

struct ScalerState {
  double scale, tracker;
};

/// Runs update_loss_scale once per flag, carrying the state over.
std::vector<ScalerState> scaleSequence(ScalerState s, const std::vector<bool> &foundInf,
                                       AttrMap attrs, uint64_t firstStep = 0) {
  std::vector<ScalerState> out;
  uint64_t step = firstStep;
  for (bool inf : foundInf) {
    KernelRun r = runKernel("update_loss_scale", {scalarF32(), scalarF32(), scalarF32()},
                            {{s.scale}, {s.tracker}, {inf ? 1.0 : 0.0}}, attrs, step++);
    EXPECT_TRUE(r.ok) << r.error;
    if (!r.ok)
      break;
    s = {r.outputs[0][0], r.outputs[1][0]};
    out.push_back(s);
  }
  return out;
}

bool operator==(const ScalerState &a, const ScalerState &b) {
  return a.scale == b.scale && a.tracker == b.tracker;
}
void PrintTo(const ScalerState &s, std::ostream *os) {
  *os << "{scale " << s.scale << ", tracker " << s.tracker << "}";
}

// torch.cuda.amp.GradScaler(init_scale=8, growth_interval=3): the tracker
// counts finite steps; the third in a row doubles the scale and restarts it;
// an inf halves the scale and restarts it.
TEST(UpdateLossScale, FollowsGradScaler) {
  std::vector<ScalerState> s =
      scaleSequence({8, 0}, {false, false, false, true, false, true, false, false, false},
                    {{"growth_interval", 3}});
  ASSERT_EQ(s.size(), 9u);
  EXPECT_EQ(s[0], (ScalerState{8, 1}));
  EXPECT_EQ(s[1], (ScalerState{8, 2}));
  EXPECT_EQ(s[2], (ScalerState{16, 0}));
  EXPECT_EQ(s[3], (ScalerState{8, 0}));
  EXPECT_EQ(s[4], (ScalerState{8, 1}));
  EXPECT_EQ(s[5], (ScalerState{4, 0}));
  EXPECT_EQ(s[6], (ScalerState{4, 1}));
  EXPECT_EQ(s[7], (ScalerState{4, 2}));
  EXPECT_EQ(s[8], (ScalerState{8, 0}));
}

TEST(UpdateLossScale, ClampsToMinAndMaxAndNeverGrowsToInf) {
  // Apex's floor: the default min scale is 1.
  EXPECT_EQ(scaleSequence({1, 5}, {true}, {})[0], (ScalerState{1, 0}));
  EXPECT_EQ(scaleSequence({1, 5}, {true}, {{"min_scale", 0.25}})[0], (ScalerState{0.5, 0}));
  // The default max is 2^24.
  EXPECT_EQ(scaleSequence({16777216, 1}, {false}, {{"growth_interval", 2}})[0],
            (ScalerState{16777216, 0}));
  EXPECT_EQ(scaleSequence({1024, 0}, {false}, {{"growth_interval", 1}, {"max_scale", 1500.0}})[0],
            (ScalerState{1500, 0}));
  // 2e38 * 2 is inf in f32: the scale stays (PyTorch's guard), the tracker restarts.
  EXPECT_EQ(scaleSequence({2e38, 0}, {false}, {{"growth_interval", 1}, {"max_scale", 3.0e38}})[0],
            (ScalerState{static_cast<double>(2e38f), 0}));
  // Other factors.
  EXPECT_EQ(scaleSequence({64, 0}, {true}, {{"backoff_factor", 0.25}})[0], (ScalerState{16, 0}));
  EXPECT_EQ(scaleSequence({64, 0}, {false}, {{"growth_interval", 1}, {"growth_factor", 4.0}})[0],
            (ScalerState{256, 0}));
}

TEST(UpdateLossScale, ActsOnTheLastMicroStepOnly) {
  std::vector<ScalerState> s = scaleSequence({8, 0}, {true, true, false, false},
                                             {{"accumulate", 2}, {"growth_interval", 1}});
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0], (ScalerState{8, 0})); // micro-step 0: nothing
  EXPECT_EQ(s[1], (ScalerState{4, 0})); // micro-step 1: the optimizer step backs off
  EXPECT_EQ(s[2], (ScalerState{4, 0}));
  EXPECT_EQ(s[3], (ScalerState{8, 0}));
}

TEST(UpdateLossScale, RejectsBadSettings) {
  auto err = [](AttrMap attrs) {
    return runKernel("update_loss_scale", {scalarF32(), scalarF32(), scalarF32()}, {{1}, {0}, {0}},
                     std::move(attrs))
        .error;
  };
  EXPECT_NE(err({{"growth_factor", 0.5}}).find("growth_factor must be >= 1"), std::string::npos);
  EXPECT_NE(err({{"backoff_factor", 0.0}}).find("backoff_factor must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(err({{"growth_interval", 0}}).find("growth_interval must be in [1, 16777216]"),
            std::string::npos);
  EXPECT_NE(err({{"min_scale", 4.0}, {"max_scale", 2.0}}).find("min_scale and max_scale"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// The pass and training steps
//===----------------------------------------------------------------------===//

/// A linear layer + mse loss with parameters stored in `dtype` (bf16: the
/// graph O2's assign-precision pass would give, with casts at the edges).
std::string model(DType dtype, const std::string &meta, int batch = 4) {
  std::string t = dtypeName(dtype).str(), b = std::to_string(batch);
  bool half = dtype != DType::F32;
  std::string s = "graph @tiny {\n  meta {" + meta + "}\n";
  s += "  input %x : f32[" + b + ",3]\n  input %y : f32[" + b + ",2]\n";
  s += "  param %fc.weight : " + t + "[2,3] init uniform(-0.5, 0.5)\n";
  s += "  param %fc.bias : " + t + "[2] init uniform(-0.5, 0.5)\n";
  std::string x = "%x";
  if (half) {
    s += "  %x.h = cast(%x) {to = " + t + "} : (f32[" + b + ",3]) -> " + t + "[" + b + ",3]\n";
    x = "%x.h";
  }
  s += "  %fc = linear(" + x + ", %fc.weight, %fc.bias) : (" + t + "[" + b + ",3], " + t +
       "[2,3], " + t + "[2]) -> " + t + "[" + b + ",2]\n";
  std::string out = "%fc";
  if (half) {
    s += "  %fc.f = cast(%fc) {to = f32} : (" + t + "[" + b + ",2]) -> f32[" + b + ",2]\n";
    out = "%fc.f";
  }
  s += "  %loss = mse_loss(" + out + ", %y) : (f32[" + b + ",2], f32[" + b +
       ",2]) -> f32[] role(loss)\n  output %loss\n}\n";
  return s;
}

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const auto &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

/// Multiplies the gradient of fc.weight by a new scalar input %poison (fed 1,
/// inf or NaN per step): an overflow injected where the backward produces it.
void addPoison(Graph &g, DiagnosticEngine &diag) {
  Value *grad = g.lookup("fc.weight.grad");
  ASSERT_TRUE(grad);
  Value *poison = g.addInput("poison", TensorType(grad->dtype(), {}));
  g.renameValue(grad, "fc.weight.grad.raw");
  Node *mul = buildNode(g, OpRegistry::builtin().get(OpKind::Mul), {grad, poison}, {}, grad->loc(),
                        diag, {"fc.weight.grad"});
  ASSERT_TRUE(mul) << diagText(diag);
  mul->setRole(NodeRole::Backward);
  std::vector<Value *> outputs(g.outputs().begin(), g.outputs().end());
  std::replace(outputs.begin(), outputs.end(), grad, mul->result());
  g.setOutputs(std::move(outputs));
}

/// Parses `text`, runs autodiff (adding the poison input when asked), then
/// `passes`. nullptr with the diagnostics in `error` on failure.
std::unique_ptr<Graph> lower(const std::string &text, bool poison, std::string &error,
                             const char *passes = "optimizer,master-weights,loss-scale") {
  DiagnosticEngine diag;
  auto g = parseGraph(text, "tiny.ir", diag);
  PassManager autodiff, rest;
  if (!g || !autodiff.addByNames("autodiff", diag) || !autodiff.run(*g, diag)) {
    error = diagText(diag);
    return nullptr;
  }
  if (poison)
    addPoison(*g, diag);
  if (!rest.addByNames(passes, diag) || !rest.run(*g, diag) || !verifyGraph(*g, diag)) {
    error = diagText(diag);
    return nullptr;
  }
  return g;
}

/// Rows [first, first + count) of a deterministic data set, `width` wide.
std::vector<double> rows(int first, int count, int width, uint64_t stream) {
  std::vector<double> v;
  for (int r = first; r < first + count; ++r)
    for (int c = 0; c < width; ++c)
      v.push_back(-1 + 2 * kernels::uniform01Double(7, stream, r * width + c));
  return v;
}

/// A lowered graph compiled on the reference backend.
struct Step {
  std::unique_ptr<Graph> g;
  std::unique_ptr<Backend> backend = createCpuRefBackend();
  std::unique_ptr<Program> p;
  int batch = 4;

  bool build(const std::string &text, bool poison, std::string &error, int batchSize = 4) {
    batch = batchSize;
    g = lower(text, poison, error);
    if (!g)
      return false;
    DiagnosticEngine diag;
    p = Program::compile(*g, *backend, diag);
    error = diagText(diag);
    return p != nullptr;
  }
  std::vector<double> read(llvm::StringRef name) const {
    const Value *v = g->lookup(name);
    EXPECT_TRUE(v) << name.str();
    std::vector<double> out(v->type().numElements());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = kernels::loadAsDouble(v->dtype(), p->data(v), i);
    return out;
  }
  double scalar(llvm::StringRef name) const { return read(name)[0]; }
  void write(llvm::StringRef name, const std::vector<double> &values) {
    const Value *v = g->lookup(name);
    ASSERT_TRUE(v) << name.str();
    for (size_t i = 0; i < values.size(); ++i)
      kernels::storeFromDouble(v->dtype(), p->data(v), i, values[i]);
  }
  /// Micro-step `step` on data rows `dataIndex` (default: the step's own).
  void run(uint64_t step, double poison = 1, int64_t dataIndex = -1) {
    int64_t d = dataIndex < 0 ? static_cast<int64_t>(step) : dataIndex;
    write("x", rows(d * batch, batch, 3, 1));
    write("y", rows(d * batch, batch, 2, 2));
    if (g->lookup("poison"))
      write("poison", {poison});
    p->run(step);
  }
  /// Every state tensor's bytes by name, optionally leaving some out.
  std::map<std::string, std::string> state(std::set<std::string> except = {}) const {
    std::map<std::string, std::string> s;
    for (const Value *v : g->state())
      if (!except.count(v->name().str()))
        s[v->name().str()] =
            std::string(static_cast<const char *>(p->data(v)), v->type().sizeInBytes());
    return s;
  }
};

const std::set<std::string> kScaler = {"loss_scale.scale", "loss_scale.growth_tracker"};

TEST(LossScalePass, RewritesTheTrainingStep) {
  std::string error;
  auto g = lower(model(DType::BF16, "amp.opt_level = \"O2\", optimizer = \"sgd\", "
                                    "optimizer.lr = 0.1, optimizer.momentum = 0.9"),
                 false, error);
  ASSERT_TRUE(g) << error;
  std::vector<std::string> scaler;
  for (const Value *v : g->state(StateKind::ScalerState))
    scaler.push_back(v->name().str());
  EXPECT_EQ(scaler, (std::vector<std::string>{"loss_scale.scale", "loss_scale.growth_tracker"}));
  const Value *scale = g->lookup("loss_scale.scale");
  EXPECT_EQ(scale->type(), scalarF32());
  EXPECT_EQ(scale->init().kind, InitSpec::Kind::Constant);
  EXPECT_EQ(scale->init().a, 65536.0); // O2's initial scale
  EXPECT_FALSE(g->lookup("loss.grad")) << "the seed fill is gone";

  const Node *check = g->lookup("skipped")->definingNode();
  ASSERT_EQ(check->kind(), OpKind::UnscaleCheck);
  EXPECT_EQ(check->role(), NodeRole::LossScale);
  EXPECT_EQ(check->operand(0), scale);
  EXPECT_EQ(check->operand(1)->name(), "fc.weight.grad");
  EXPECT_EQ(g->lookup("loss_scale")->definingNode(), check);
  // The updates read the scaled gradients and unscale them with 1 / scale
  // as their grad_scale: no unscaled copy is stored.
  for (const char *param : {"fc.weight", "fc.bias"}) {
    const Node *update = g->lookup((std::string(param) + ".next").c_str())->definingNode();
    EXPECT_EQ(update->operand(1)->name(), std::string(param) + ".grad");
    EXPECT_EQ(update->operand(update->numOperands() - 3)->name(), "loss_scale.inverse");
    EXPECT_EQ(update->operand(update->numOperands() - 2)->name(), "skipped");
  }
  EXPECT_FALSE(g->lookup(kUnitGradScaleName)) << "the unit placeholder is replaced and erased";
  const Node *counter = g->lookup("optimizer.step.next")->definingNode();
  ASSERT_EQ(counter->numOperands(), 2u);
  EXPECT_EQ(counter->operand(1)->name(), "skipped");
  EXPECT_FALSE(g->lookup(kNoSkipName)) << "the placeholder is replaced and erased";

  const Node *update = g->lookup("loss_scale.scale.next")->definingNode();
  ASSERT_EQ(update->kind(), OpKind::UpdateLossScale);
  EXPECT_EQ(update->attr("growth_interval").getInt(), 2000);
  EXPECT_EQ(update->attr("max_scale").getFloat(), 16777216.0);
  std::vector<std::string> outputs;
  for (const Value *v : g->outputs())
    outputs.push_back(v->name().str());
  EXPECT_EQ(outputs, (std::vector<std::string>{"loss", "lr", "loss_scale", "skipped"}));
}

TEST(LossScalePass, DoesNothingWithoutAScale) {
  for (const char *amp : {"amp.opt_level = \"O0\"", "amp.opt_level = \"O3\"",
                          "amp.opt_level = \"O2\", amp.loss_scale = \"static\""}) {
    std::string error;
    auto g =
        lower(model(DType::BF16, std::string(amp) + ", optimizer = \"sgd\", optimizer.lr = 0.1"),
              false, error, "optimizer");
    ASSERT_TRUE(g) << error;
    DiagnosticEngine diag;
    PassContext ctx{diag};
    EXPECT_EQ(LossScalePass().run(*g, ctx), PassResult::Unchanged) << amp;
    EXPECT_TRUE(g->state(StateKind::ScalerState).empty());
    EXPECT_TRUE(g->lookup("loss.grad"));
  }
}

TEST(LossScalePass, StaticScaleHasNoUpdateButSkips) {
  std::string error;
  auto g = lower(model(DType::F32, "amp.loss_scale = \"static\", amp.loss_scale.value = 128.0, "
                                   "optimizer = \"sgd\", optimizer.lr = 0.1"),
                 false, error);
  ASSERT_TRUE(g) << error;
  EXPECT_EQ(g->lookup("loss_scale.scale")->init().a, 128.0);
  EXPECT_FALSE(g->lookup("loss_scale.growth_tracker"));
  for (const Node &n : g->nodes())
    EXPECT_NE(n.kind(), OpKind::UpdateLossScale);
  EXPECT_EQ(g->lookup("fc.weight.next")->definingNode()->operand(4)->name(), "skipped");
}

TEST(LossScalePass, ReportsMisuse) {
  std::string error;
  std::string meta = "amp.opt_level = \"O1\", optimizer = \"sgd\", optimizer.lr = 0.1";
  EXPECT_FALSE(lower(model(DType::F32, meta), false, error, "loss-scale"));
  EXPECT_NE(error.find("loss-scale: the graph has no optimizer updates (run the optimizer pass "
                       "before loss-scale)"),
            std::string::npos)
      << error;
  std::string taken = model(DType::F32, meta);
  taken.replace(taken.find("input %y"), 8, "input %skipped : f32[]\n  input %y");
  EXPECT_FALSE(lower(taken, false, error));
  EXPECT_NE(error.find("loss-scale: the name 'skipped' is taken"), std::string::npos) << error;
  EXPECT_FALSE(lower(model(DType::F32, meta), false, error, "optimizer,loss-scale,loss-scale"));
  EXPECT_NE(error.find("loss-scale: the graph already has loss scaling"), std::string::npos)
      << error;
}

// Scaling the seed by 1024 scales every gradient by 1024 (exactly, a power of
// two); unscaled, the step is the unscaled run's.
TEST(LossScaleTraining, ScaledStepEqualsUnscaledStep) {
  struct Case {
    DType dtype;
    std::string scaled, plain;
  };
  std::string sgd = ", optimizer = \"sgd\", optimizer.lr = 0.1, optimizer.momentum = 0.9";
  std::string adam = ", optimizer = \"adam\", optimizer.lr = 0.01, train.clip_grad_norm = 0.5";
  std::vector<Case> cases = {
      {DType::F32, "amp.loss_scale = \"dynamic\", amp.loss_scale.init = 1024.0" + sgd,
       "amp.opt_level = \"O0\"" + sgd},
      {DType::BF16, "amp.opt_level = \"O2\", amp.loss_scale.init = 1024.0" + adam,
       "amp.opt_level = \"O2\", amp.loss_scale = \"static\"" + adam},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.scaled);
    Step scaled, plain;
    std::string error;
    ASSERT_TRUE(scaled.build(model(c.dtype, c.scaled), false, error)) << error;
    ASSERT_TRUE(plain.build(model(c.dtype, c.plain), false, error)) << error;
    ASSERT_TRUE(scaled.g->lookup("loss_scale") && !plain.g->lookup("loss_scale"));
    for (uint64_t step = 0; step < 3; ++step) {
      scaled.run(step);
      plain.run(step);
      EXPECT_EQ(scaled.scalar("loss_scale"), 1024);
      EXPECT_EQ(scaled.scalar("skipped"), 0);
      // The loss the user sees is not scaled.
      EXPECT_NEAR(scaled.scalar("loss"), plain.scalar("loss"), 1e-6);
      for (const char *name : {"fc.weight", "fc.bias"}) {
        EXPECT_TRUE(allClose(scaled.read(name), plain.read(name), 1e-6)) << name;
        if (c.dtype != DType::F32) {
          EXPECT_TRUE(allClose(scaled.read(std::string(name) + ".master"),
                               plain.read(std::string(name) + ".master"), 1e-6))
              << name;
        }
      }
      EXPECT_NE(scaled.read("fc.weight"), std::vector<double>(6, 0.0));
    }
  }
}

// O2 with SGD + momentum (a momentum buffer and a step count), growth every
// 3 finite steps. An inf gradient on step 2 and a NaN on step 6 skip those
// steps: everything but the scaler is bit-identical to before them, and the
// run ends exactly where a run that never saw those batches ends.
TEST(LossScaleTraining, ForcedOverflowSkipsTheStepAndBacksOff) {
  std::string meta = "amp.opt_level = \"O2\", amp.loss_scale.init = 1024.0, "
                     "amp.loss_scale.growth_interval = 3, optimizer = \"sgd\", "
                     "optimizer.lr = 0.1, optimizer.momentum = 0.9";
  Step run, clean;
  std::string error;
  ASSERT_TRUE(run.build(model(DType::BF16, meta), true, error)) << error;
  ASSERT_TRUE(clean.build(model(DType::BF16, meta), true, error)) << error;

  std::vector<double> poison = {1, 1, kInf, 1, 1, 1, kNaN, 1};
  // The scale each step uses, and the scaler state after it.
  std::vector<double> usedScale = {1024, 1024, 1024, 512, 512, 512, 1024, 512};
  std::vector<ScalerState> after = {{1024, 1}, {1024, 2}, {512, 0}, {512, 1},
                                    {512, 2},  {1024, 0}, {512, 0}, {512, 1}};
  int64_t cleanStep = 0;
  for (uint64_t step = 0; step < poison.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto before = run.state(kScaler);
    run.run(step, poison[step]);
    bool skipped = poison[step] != 1;
    EXPECT_EQ(run.scalar("skipped"), skipped ? 1 : 0);
    EXPECT_EQ(run.scalar("loss_scale"), usedScale[step]);
    EXPECT_TRUE(std::isfinite(run.scalar("loss"))) << "the loss is computed before the poison";
    EXPECT_EQ(run.scalar("loss_scale.scale"), after[step].scale);
    EXPECT_EQ(run.scalar("loss_scale.growth_tracker"), after[step].tracker);
    auto now = run.state(kScaler);
    if (skipped) {
      // Parameters, master weights, momentum and the step count: bit for bit.
      EXPECT_EQ(now, before);
      EXPECT_EQ(now.size(), 7u);
    } else {
      EXPECT_NE(now.at("fc.weight.master"), before.at("fc.weight.master"));
      EXPECT_NE(now.at("fc.weight.momentum_buffer"), before.at("fc.weight.momentum_buffer"));
      // The clean run sees only the batches that were applied.
      clean.run(cleanStep++, 1, static_cast<int64_t>(step));
    }
  }
  EXPECT_EQ(run.scalar("optimizer.step"), 6);
  EXPECT_EQ(run.state(kScaler), clean.state(kScaler));
}

// Two micro-batches per optimizer step, growth every 2 optimizer steps: an
// inf in the first micro-batch of a group is found in the accumulated
// gradient at the end of the group, once; the scale changes once per group.
TEST(LossScaleTraining, AccumulationChecksOncePerOptimizerStep) {
  std::string meta = "amp.opt_level = \"O2\", amp.loss_scale.init = 1024.0, "
                     "amp.loss_scale.growth_interval = 2, train.accumulate = 2, "
                     "optimizer = \"adam\", optimizer.lr = 0.01";
  Step run;
  std::string error;
  ASSERT_TRUE(run.build(model(DType::BF16, meta, 2), true, error, 2)) << error;
  const Node *check = run.g->lookup("skipped")->definingNode();
  EXPECT_EQ(check->operand(1)->name(), "fc.weight.grad_accum.next")
      << "the accumulated gradient is checked";

  std::vector<double> poison = {kInf, 1, 1, 1, 1, 1, 1, kInf};
  std::vector<double> skipped = {0, 1, 0, 0, 0, 0, 0, 1};
  std::vector<ScalerState> after = {{1024, 0}, {512, 0},  {512, 0},  {512, 1},
                                    {512, 1},  {1024, 0}, {1024, 0}, {512, 0}};
  std::vector<double> optimizerSteps = {0, 0, 0, 1, 1, 2, 2, 2};
  auto start = run.state(kScaler);
  for (uint64_t micro = 0; micro < poison.size(); ++micro) {
    SCOPED_TRACE("micro-step " + std::to_string(micro));
    auto before = run.state(kScaler);
    run.run(micro, poison[micro]);
    EXPECT_EQ(run.scalar("skipped"), skipped[micro]);
    EXPECT_EQ(run.scalar("loss_scale.scale"), after[micro].scale);
    EXPECT_EQ(run.scalar("loss_scale.growth_tracker"), after[micro].tracker);
    EXPECT_EQ(run.scalar("optimizer.step"), optimizerSteps[micro]);
    auto now = run.state(kScaler);
    bool applied = micro % 2 == 1 && skipped[micro] == 0;
    EXPECT_EQ(now.at("fc.weight.master") != before.at("fc.weight.master"), applied);
    EXPECT_EQ(now.at("fc.weight.exp_avg") != before.at("fc.weight.exp_avg"), applied);
  }
  // The first group was skipped whole: nothing moved before micro-step 2.
  EXPECT_NE(run.state(kScaler).at("fc.weight"), start.at("fc.weight"));
}

// Save after 3 steps (one of them skipped, so the scale is not the initial
// one), load into a fresh program, continue: bit for bit the straight run.
TEST(LossScaleTraining, CheckpointCarriesScalerAndMasterWeights) {
  std::string meta = "amp.opt_level = \"O2\", amp.loss_scale.init = 1024.0, "
                     "amp.loss_scale.growth_interval = 2, optimizer = \"adam\", "
                     "optimizer.lr = 0.01";
  std::vector<double> poison = {1, kInf, 1, 1, 1, 1};
  Step straight, first, second;
  std::string error;
  for (Step *s : {&straight, &first, &second})
    ASSERT_TRUE(s->build(model(DType::BF16, meta), true, error)) << error;
  for (uint64_t step = 0; step < poison.size(); ++step)
    straight.run(step, poison[step]);

  TempDir dir;
  std::string path = dir.file("run.ckpt");
  for (uint64_t step = 0; step < 3; ++step)
    first.run(step, poison[step]);
  EXPECT_EQ(first.scalar("loss_scale.scale"), 512);
  EXPECT_EQ(first.scalar("loss_scale.growth_tracker"), 1);
  CheckpointInfo info;
  info.model = "tiny";
  info.modelHash = modelHash(*first.g);
  info.step = info.microStep = 3;
  ASSERT_TRUE(saveCheckpoint(path, *first.p, info, error)) << error;

  CheckpointInfo loaded;
  ASSERT_TRUE(loadCheckpoint(path, *second.p, loaded, error)) << error;
  EXPECT_EQ(loaded.step, 3u);
  EXPECT_EQ(second.state(), first.state());
  EXPECT_EQ(second.scalar("loss_scale.scale"), 512);
  EXPECT_NE(second.read("fc.weight.master"), std::vector<double>(6, 0.0));
  for (uint64_t step = 3; step < poison.size(); ++step)
    second.run(step, poison[step]);
  EXPECT_EQ(second.state(), straight.state());
}

} // namespace
