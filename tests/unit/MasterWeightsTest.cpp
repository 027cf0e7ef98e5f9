//===- MasterWeightsTest.cpp - f32 master copies of half parameters (O2) ---===//
//
// The master-weights pass's rewrite, the update ops' model-weight epilogue,
// the master's initial value (the parameter's, for random and file inits),
// and the point of it all: pure-half SGD loses updates smaller than half an
// ulp of the weight, master weights accumulate them.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "TempDir.h"

#include "ir/HalfConversion.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "ir/support/NpyFile.h"
#include "passes/MasterWeights.h"
#include "passes/PassManager.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include <cmath>
#include <string>
#include <vector>

using namespace ampc;
using namespace ampc::testing;

namespace {

TensorType vec(DType t, int64_t n) { return TensorType(t, {n}); }
TensorType scalarF32() { return TensorType(DType::F32, {}); }

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const auto &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

std::unique_ptr<Graph> lower(const std::string &text, const char *passes, std::string &error) {
  DiagnosticEngine diag;
  auto g = parseGraph(text, "mw.ir", diag);
  PassManager pm;
  if (!g || !pm.addByNames(passes, diag) || !pm.run(*g, diag) || !verifyGraph(*g, diag)) {
    error = diagText(diag);
    return nullptr;
  }
  return g;
}

std::vector<double> read(const Program &p, const Value *v) {
  const void *data = const_cast<Program &>(p).data(v);
  std::vector<double> out(v->type().numElements());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = kernels::loadAsDouble(v->dtype(), data, i);
  return out;
}

/// A bf16 linear layer followed by an f32 gain (a parameter kept in f32, as
/// batchnorm's are under keep_batchnorm_fp32), mse loss.
std::string model(const std::string &meta, const std::string &weightInit = "uniform(-0.5, 0.5)") {
  return "graph @mw {\n  meta {" + meta +
         "}\n"
         "  input %x : f32[4,3]\n"
         "  input %y : f32[4,2]\n"
         "  param %fc.weight : bf16[2,3] init " +
         weightInit +
         "\n"
         "  param %fc.bias : bf16[2] init normal(0.0, 0.5)\n"
         "  param %gain : f32[2] init ones\n"
         "  %x.h = cast(%x) {to = bf16} : (f32[4,3]) -> bf16[4,3]\n"
         "  %fc = linear(%x.h, %fc.weight, %fc.bias) : (bf16[4,3], bf16[2,3], bf16[2]) -> "
         "bf16[4,2]\n"
         "  %fc.f = cast(%fc) {to = f32} : (bf16[4,2]) -> f32[4,2]\n"
         "  %out = mul(%fc.f, %gain) : (f32[4,2], f32[2]) -> f32[4,2]\n"
         "  %loss = mse_loss(%out, %y) : (f32[4,2], f32[4,2]) -> f32[] role(loss)\n"
         "  output %loss\n}\n";
}

const char *kSgdMomentum = ", optimizer = \"sgd\", optimizer.lr = 0.1, optimizer.momentum = 0.9";

TEST(MasterWeightsPass, AddsF32MastersForHalfParameters) {
  std::string error;
  auto g = lower(
      model("amp.opt_level = \"O2\", amp.loss_scale = \"static\"" + std::string(kSgdMomentum)),
      "autodiff,optimizer,master-weights", error);
  ASSERT_TRUE(g) << error;
  std::vector<std::string> masters;
  for (const Value *v : g->state(StateKind::MasterWeight))
    masters.push_back(v->name().str());
  EXPECT_EQ(masters, (std::vector<std::string>{"fc.weight.master", "fc.bias.master"}));
  EXPECT_FALSE(g->lookup("gain.master")) << "f32 parameters train as they are";

  for (const char *name : {"fc.weight", "fc.bias"}) {
    SCOPED_TRACE(name);
    std::string p = name;
    const Value *param = g->lookup(p), *master = g->lookup(p + ".master");
    EXPECT_EQ(master->type(), param->type().withDType(DType::F32));
    EXPECT_EQ(master->init(), param->init());
    EXPECT_EQ(g->lookup(p + ".momentum_buffer")->dtype(), DType::F32);

    const Node *update = g->lookup(p + ".master.next")->definingNode();
    ASSERT_EQ(update->kind(), OpKind::SgdMomentumUpdate);
    ASSERT_EQ(update->numOperands(), 8u);
    EXPECT_EQ(update->operand(0), master);
    EXPECT_EQ(update->operand(1)->name(), p + ".grad");
    EXPECT_EQ(update->operand(5)->name(), kUnitGradScaleName);
    EXPECT_EQ(update->operand(6)->name(), kNoSkipName);
    EXPECT_EQ(update->operand(7), param);
    ASSERT_EQ(update->numResults(), 3u);
    EXPECT_EQ(update->result(2)->name(), p + ".next");
    EXPECT_EQ(update->result(2)->dtype(), DType::BF16);

    std::vector<std::pair<std::string, std::string>> updates;
    for (const StateUpdate &u : g->stateUpdates())
      if (u.state == param || u.state == master)
        updates.push_back({u.state->name().str(), u.newValue->name().str()});
    EXPECT_EQ(updates, (std::vector<std::pair<std::string, std::string>>{
                           {p + ".master", p + ".master.next"}, {p, p + ".next"}}));
  }
  const Node *gainUpdate = g->lookup("gain.next")->definingNode();
  EXPECT_EQ(gainUpdate->operand(0), g->lookup("gain"));
  EXPECT_EQ(gainUpdate->numOperands(), 5u);
}

TEST(MasterWeightsPass, DoesNothingWithoutThePolicy) {
  // O3 is pure half; O0 with half parameters has no policy for them; master
  // weights without half model storage are normalised away.
  for (const char *amp :
       {"amp.opt_level = \"O3\"", "amp.opt_level = \"O0\"", "amp.master_weights = true"}) {
    std::string error;
    auto g = lower(model(amp + std::string(kSgdMomentum)), "autodiff,optimizer", error);
    ASSERT_TRUE(g) << error;
    DiagnosticEngine diag;
    PassContext ctx{diag};
    EXPECT_EQ(MasterWeightsPass().run(*g, ctx), PassResult::Unchanged) << amp;
    EXPECT_TRUE(g->state(StateKind::MasterWeight).empty());
  }
}

TEST(MasterWeightsOps, UpdateRefreshesTheModelWeightInItsEpilogue) {
  EXPECT_EQ(runKernel("sgd_update",
                      {vec(DType::F32, 2), vec(DType::F32, 2), scalarF32(), scalarF32(),
                       scalarF32(), vec(DType::BF16, 2)},
                      {{1, 1}, {0, 0}, {0.1}, {1}, {0}, {1, 1}})
                .outputTypes,
            (std::vector<TensorType>{vec(DType::F32, 2), vec(DType::BF16, 2)}));
  // master 1 - 0.1 * (-0.03125) = 1.003125 in f32; bf16 has 7 fraction bits,
  // so the model weight is 1.0 (ulp 2^-7 = 0.0078125 above 1). 2 + 0.01 =
  // 2.01 is past the midpoint 2.0078125 between 2 and 2.015625 (ulp 2^-6
  // above 2): 2.015625. -3 + 0.05 = -2.95 is nearest to -2.953125.
  std::vector<TensorType> types = {vec(DType::F32, 3), vec(DType::F32, 3), scalarF32(),
                                   scalarF32(),        scalarF32(),        vec(DType::BF16, 3)};
  KernelRun r = runKernel("sgd_update", types,
                          {{1, 2, -3}, {-0.03125, -0.1, -0.5}, {0.1}, {1}, {0}, {1, 2, -3}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.outputs[0][0], static_cast<double>(1.0f + -0.1f * -0.03125f));
  EXPECT_EQ(r.outputs[0][1], static_cast<double>(2.0f + -0.1f * -0.1f));
  EXPECT_EQ(r.outputs[1], (std::vector<double>{1.0, 2.015625, -2.953125}));
  // Skipped: both results are their operands, even a model weight that is not
  // the rounded master (it is copied, not recomputed).
  KernelRun skipped = runKernel("sgd_update", types,
                                {{1, 2, -3}, {-0.03125, -0.1, -0.5}, {0.1}, {1}, {1}, {5, 6, 7}});
  ASSERT_TRUE(skipped.ok) << skipped.error;
  EXPECT_EQ(skipped.outputs[0], (std::vector<double>{1, 2, -3}));
  EXPECT_EQ(skipped.outputs[1], (std::vector<double>{5, 6, 7}));
  // Adam: the model weight comes after the moments.
  KernelRun adam =
      runKernel("adam_update",
                {vec(DType::F32, 1), vec(DType::F32, 1), vec(DType::F32, 1), vec(DType::F32, 1),
                 scalarF32(), scalarF32(), scalarF32(), scalarF32(), vec(DType::F16, 1)},
                {{1}, {0.5}, {0}, {0}, {1}, {0.01}, {1}, {0}, {1}});
  ASSERT_TRUE(adam.ok) << adam.error;
  ASSERT_EQ(adam.outputs.size(), 4u);
  // The first Adam step moves by lr: 0.99 -> f16 0.98999023 (ulp 2^-11 below 1).
  EXPECT_NEAR(adam.outputs[0][0], 0.99, 1e-7);
  EXPECT_EQ(adam.outputTypes[3].dtype(), DType::F16);
  EXPECT_EQ(adam.outputs[3][0],
            static_cast<double>(roundToHalf(static_cast<float>(adam.outputs[0][0]))));
}

/// Compiles `g` and checks that every half parameter starts as its rounded
/// master, and that the masters keep more than the half type holds.
void expectRoundedMasters(const Graph &g, const CompileOptions &opts = {}) {
  auto backend = createCpuRefBackend();
  DiagnosticEngine diag;
  auto p = Program::compile(g, *backend, diag, opts);
  ASSERT_TRUE(p) << diagText(diag);
  for (const Value *master : g.state(StateKind::MasterWeight)) {
    SCOPED_TRACE(master->name().str());
    const Value *param = g.lookup(master->name().drop_back(7));
    std::vector<double> m = read(*p, master), w = read(*p, param);
    bool moreThanHalf = false;
    for (size_t i = 0; i < m.size(); ++i) {
      EXPECT_EQ(w[i], static_cast<double>(roundToBf16(static_cast<float>(m[i])))) << i;
      moreThanHalf |= w[i] != m[i];
    }
    EXPECT_TRUE(moreThanHalf) << "the master holds only half values";
  }
}

TEST(MasterWeightsInit, ParametersStartAsTheirRoundedMasters) {
  std::string error;
  for (uint64_t seed : {0, 11}) {
    auto g = lower(model("amp.opt_level = \"O2\"" + std::string(kSgdMomentum)),
                   "autodiff,optimizer,master-weights,loss-scale", error);
    ASSERT_TRUE(g) << error;
    CompileOptions opts;
    opts.initSeed = seed;
    expectRoundedMasters(*g, opts);
  }

  // From an .npy file: the master is the file's f32 value exactly.
  TempDir dir;
  std::string path = dir.file("w.npy");
  std::vector<float> values = {0.1f, 1.0f / 3, -2.7182817f, 1e-3f, 123.456f, -0.2f};
  ASSERT_TRUE(writeNpy(path, DType::F32, {2, 3}, values.data(), error)) << error;
  auto g =
      lower(model("amp.opt_level = \"O2\"" + std::string(kSgdMomentum), "file(\"" + path + "\")"),
            "autodiff,optimizer,master-weights,loss-scale", error);
  ASSERT_TRUE(g) << error;
  expectRoundedMasters(*g);
  auto backend = createCpuRefBackend();
  DiagnosticEngine diag;
  auto p = Program::compile(*g, *backend, diag);
  ASSERT_TRUE(p) << diagText(diag);
  std::vector<double> master = read(*p, g->lookup("fc.weight.master"));
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(master[i], static_cast<double>(values[i]));
}

/// loss = sum(w * c): the gradient of w is c. One half weight of 1.
std::string smallUpdateModel(DType half, const std::string &amp) {
  std::string t = dtypeName(half).str();
  return "graph @small {\n  meta {" + amp +
         ", optimizer = \"sgd\", optimizer.lr = 0.1}\n"
         "  input %c : " +
         t + "[1]\n  param %w : " + t + "[1] init ones\n  %p = mul(%w, %c) : (" + t + "[1], " + t +
         "[1]) -> " + t + "[1]\n  %pf = cast(%p) {to = f32} : (" + t +
         "[1]) -> f32[1]\n"
         "  %loss = reduce_sum(%pf) : (f32[1]) -> f32[] role(loss)\n  output %loss\n}\n";
}

// lr * grad = 0.1 * 1e-3 = 1e-4 per step, for 100 steps (99 applied in f16). Near 1 the spacing
// of bf16 is 2^-7 (f16: 2^-10), so 1 + 1e-4 rounds back to 1 every time:
// pure half training never moves. The f32 master accumulates the steps to
// about 1.01, and the model weight is its rounding (bf16 1.0078125, f16
// 1.009765625).
TEST(MasterWeightsTraining, PureHalfLosesSmallUpdatesMastersKeepThem) {
  for (DType half : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(half).str());
    auto round = [&](float v) { return half == DType::BF16 ? roundToBf16(v) : roundToHalf(v); };
    std::string halfName = "\"" + dtypeName(half).str() + "\"";
    std::string error;
    auto pure = lower(smallUpdateModel(half, "amp.opt_level = \"O3\", amp.half_type = " + halfName),
                      "autodiff,optimizer,master-weights,loss-scale", error);
    ASSERT_TRUE(pure) << error;
    auto o2 = lower(smallUpdateModel(half, "amp.opt_level = \"O2\", amp.half_type = " + halfName),
                    "autodiff,optimizer,master-weights,loss-scale", error);
    ASSERT_TRUE(o2) << error;
    ASSERT_TRUE(o2->lookup("w.master") && o2->lookup("loss_scale.scale"));
    auto backend = createCpuRefBackend();
    DiagnosticEngine diag;
    auto pp = Program::compile(*pure, *backend, diag);
    auto po = Program::compile(*o2, *backend, diag);
    ASSERT_TRUE(pp && po) << diagText(diag);

    float grad = round(-1e-3f);
    float expectedMaster = 1.0f;
    for (uint64_t step = 0; step < 100; ++step) {
      for (auto [p, g] : {std::pair{pp.get(), pure.get()}, std::pair{po.get(), o2.get()}}) {
        kernels::storeFromDouble(half, p->data(g->lookup("c")), 0, -1e-3);
        p->run(step);
      }
      // f16's range ends at 65504: the initial scale 2^16 overflows the
      // half gradient once, and that step is skipped with the scale halved.
      bool skipped = read(*po, o2->lookup("skipped"))[0] != 0;
      EXPECT_EQ(skipped, half == DType::F16 && step == 0) << "step " << step;
      // The kernel's f32 arithmetic: param + (-lr) * grad.
      if (!skipped)
        expectedMaster = expectedMaster + -0.1f * grad;
      float master = static_cast<float>(read(*po, o2->lookup("w.master"))[0]);
      ASSERT_EQ(master, expectedMaster) << "step " << step;
      ASSERT_EQ(read(*po, o2->lookup("w"))[0], static_cast<double>(round(master)))
          << "step " << step;
    }
    EXPECT_EQ(read(*pp, pure->lookup("w"))[0], 1.0);
    EXPECT_NEAR(expectedMaster, 1.01, 1e-4);
    EXPECT_EQ(read(*po, o2->lookup("w"))[0], half == DType::BF16 ? 1.0078125 : 1.009765625);
  }
}

} // namespace
