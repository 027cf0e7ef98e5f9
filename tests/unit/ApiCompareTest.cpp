//===- ApiCompareTest.cpp - recordStep, compareStep, compareSteps ---------===//
//
// The comparison's arithmetic on hand-made records (which value diverges
// first, what counts as noise, inf), and on real steps: a loss-scaled
// level's gradients come back unscaled and match O0's, every O1 value has
// its O0 counterpart, the f64 reference sits within f32's rounding of O0.
//
//===----------------------------------------------------------------------===//
#include "ampc/ampc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

using namespace ampc::api;

namespace {

const std::string kModel =
    std::string(AMPC_SOURCE_DIR) + "/tests/lit/cli/Inputs/tiny-classifier.yaml";

RecordedValue value(std::string name, NodeRole role, uint64_t key, std::vector<float> values,
                    std::vector<uint64_t> operands = {}) {
  RecordedValue v;
  v.name = std::move(name);
  v.op = "op";
  v.role = role;
  v.key = key;
  v.shape = {static_cast<int64_t>(values.size())};
  v.values = std::move(values);
  v.operandKeys = std::move(operands);
  return v;
}

/// The model at `level` (f64: O0 retyped), rewritten for training and
/// compiled with every node's results kept.
struct Compiled {
  Model model;
  Program program;
};
Compiled compileAt(const std::string &level, const std::string &halfType = "") {
  LoadOptions load;
  load.optLevel = level == "f64" ? "O0" : level;
  Result<Model> m = Model::loadFile(kModel, load);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!halfType.empty()) {
    Result<Policy> policy = m->policy();
    EXPECT_TRUE(policy.ok());
    EXPECT_TRUE(policy->set("half_type", halfType).ok());
    EXPECT_TRUE(m->setPolicy(*policy).ok());
  }
  if (level == "f64")
    EXPECT_TRUE(m->widenToF64().ok());
  PipelineOptions p;
  p.stage = Stage::Train;
  EXPECT_TRUE(m->rewrite(p).ok());
  CompileOptions c;
  c.device = level == "f64" ? "cpu-ref" : "cpu";
  c.fuseElementwise = false;
  Result<Program> prog = Program::compile(*m, c);
  EXPECT_TRUE(prog.ok()) << prog.status().message();
  return Compiled{std::move(*m), std::move(*prog)};
}

} // namespace

TEST(ApiCompare, TheFirstValuePastTheToleranceInScheduleOrder) {
  StepRecord ref, cand;
  ref.level = "O0";
  cand.level = "O2";
  ref.values = {value("a", NodeRole::Forward, 1, {1, 2}),
                value("b", NodeRole::Forward, 2, {3, 4}, {1}),
                value("g", NodeRole::Backward, 3, {1, 1})};
  // a: 1 % off, b: 50 % off (its input a is fine), g: exact.
  cand.values = {value("a", NodeRole::Forward, 1, {1.01f, 2.02f}),
                 value("b2", NodeRole::Forward, 2, {1.5f, 2}, {1}),
                 value("g", NodeRole::Backward, 3, {1, 1}),
                 value("extra", NodeRole::Forward, 9, {0})};
  ComparisonReport r = compareSteps(ref, cand);
  ASSERT_EQ(r.values.size(), 3u);
  EXPECT_EQ(r.unmatched, 1u) << "'extra' has no counterpart";
  EXPECT_NEAR(r.values[0].relativeError, 0.01, 1e-6);
  EXPECT_NEAR(r.values[1].relativeError, 0.5, 1e-6);
  EXPECT_EQ(r.values[1].referenceName, "b");
  ASSERT_TRUE(r.firstDivergent.has_value());
  EXPECT_EQ(*r.firstDivergent, 1u);
  EXPECT_FALSE(r.firstDivergentGradient.has_value());
  ASSERT_EQ(r.values[1].operands.size(), 1u);
  EXPECT_EQ(r.values[1].operands[0], 0u);
  std::string text = r.str();
  EXPECT_NE(text.find("forward and loss: first past the tolerance: %b2 (%b)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("its inputs: %a op 1.00e-02"), std::string::npos) << text;
  EXPECT_NE(text.find("gradients: all 1 within the tolerance"), std::string::npos) << text;
}

TEST(ApiCompare, NoiseGradientsAndNonFiniteValues) {
  StepRecord ref, cand;
  ref.level = "O0";
  cand.level = "O1";
  // A gradient ~1e-9 beside one ~1: its 100 % error is noise, not a
  // divergence. An inf is always one.
  ref.values = {value("w.grad", NodeRole::Backward, 1, {1, -1}),
                value("b.grad", NodeRole::Backward, 2, {1e-9f, -1e-9f}),
                value("h", NodeRole::Forward, 3, {1, 2})};
  cand.values = {value("w.grad", NodeRole::Backward, 1, {1, -1}),
                 value("b.grad", NodeRole::Backward, 2, {2e-9f, 0}),
                 value("h", NodeRole::Forward, 3, {1, std::numeric_limits<float>::infinity()})};
  ComparisonReport r = compareSteps(ref, cand);
  ASSERT_EQ(r.values.size(), 3u);
  EXPECT_TRUE(r.values[1].negligible);
  EXPECT_FALSE(r.values[0].negligible);
  EXPECT_TRUE(std::isinf(r.values[2].relativeError));
  EXPECT_EQ(r.values[2].nonFinite, 1u);
  ASSERT_TRUE(r.firstDivergent.has_value());
  EXPECT_EQ(*r.firstDivergent, 2u);
  EXPECT_FALSE(r.firstDivergentGradient.has_value());
  std::string text = r.str();
  EXPECT_NE(text.find("1 gradient is ~0 at O0"), std::string::npos) << text;
  EXPECT_NE(text.find("relative error inf"), std::string::npos) << text;
  EXPECT_NE(text.find("1 values inf or NaN"), std::string::npos) << text;
}

TEST(ApiCompare, LossScaledGradientsComeBackUnscaledAndMatchO0) {
  Compiled o0 = compileAt("O0"), o1 = compileAt("O1", "f16");
  Result<StepRecord> ref = o0.program.recordStep();
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  EXPECT_EQ(ref->level, "O0");
  EXPECT_EQ(ref->lossScale, 1.0);
  Result<StepRecord> cand = o1.program.recordStep();
  ASSERT_TRUE(cand.ok()) << cand.status().message();
  EXPECT_EQ(cand->lossScale, 65536.0);

  ComparisonReport r = compareSteps(*ref, *cand);
  EXPECT_EQ(r.unmatched, 0u) << r.str();
  // Every O0 value has its O1 counterpart but autodiff's unit seed, which
  // the loss scale (a state tensor, not a node's result) replaced.
  EXPECT_EQ(r.values.size(), ref->values.size() - 1) << r.str();
  size_t gradients = 0;
  for (const ValueComparison &v : r.values) {
    gradients += v.role == NodeRole::Backward;
    // f16 keeps 11 bits: a few 1e-3 after a few ops; 65536x off if the
    // scale were left in.
    EXPECT_LT(v.relativeError, 0.02) << v.name << " (" << v.op << ")";
  }
  EXPECT_GE(gradients, 5u);
  EXPECT_FALSE(r.firstDivergent.has_value()) << r.str();

  // compareStep measures the same step without keeping O1's values.
  Compiled again = compileAt("O1", "f16");
  Result<ComparisonReport> streamed = again.program.compareStep(*ref);
  ASSERT_TRUE(streamed.ok()) << streamed.status().message();
  ASSERT_EQ(streamed->values.size(), r.values.size());
  for (size_t i = 0; i < r.values.size(); ++i)
    EXPECT_EQ(streamed->values[i].relativeError, r.values[i].relativeError) << r.values[i].name;
}

TEST(ApiCompare, TheF64ReferenceIsWithinF32RoundingOfO0) {
  Compiled exact = compileAt("f64"), o0 = compileAt("O0");
  Result<StepRecord> f64 = exact.program.recordStep();
  ASSERT_TRUE(f64.ok()) << f64.status().message();
  EXPECT_EQ(f64->level, "f64");
  ASSERT_FALSE(f64->values.empty());
  EXPECT_FALSE(f64->values[0].values64.empty()) << "an f64 step keeps doubles";
  Result<StepRecord> ref = o0.program.recordStep();
  ASSERT_TRUE(ref.ok());
  ComparisonReport r = compareSteps(*f64, *ref);
  EXPECT_EQ(r.values.size(), f64->values.size());
  for (const ValueComparison &v : r.values) {
    EXPECT_EQ(v.referenceDType, DType::F64);
    EXPECT_LT(v.relativeError, 1e-5) << v.name;
  }
}

TEST(ApiCompare, WhatCannotBeRecorded) {
  LoadOptions load;
  load.optLevel = "O1";
  Result<Model> m = Model::loadFile(kModel, load);
  ASSERT_TRUE(m.ok());
  Status widened = m->widenToF64();
  EXPECT_FALSE(widened.ok());
  EXPECT_NE(widened.message().find("at O1"), std::string::npos) << widened.message();

  // A forward graph has no training step to record.
  PipelineOptions p;
  p.stage = Stage::Forward;
  ASSERT_TRUE(m->rewrite(p).ok());
  Result<Program> prog = Program::compile(*m);
  ASSERT_TRUE(prog.ok());
  Result<StepRecord> r = prog->recordStep();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Train stage"), std::string::npos) << r.status().message();
}
