//===- RecomputeTest.cpp - train.recompute: same bits, a lower peak -------===//
//
// Each example at each level trains 3 steps with and without recomputing
// cheap values for the backward (passes/Recompute.h): the losses and every
// state tensor afterwards are the same bits, and the memory plan's peak is
// lower (never higher) with it.
//
//===----------------------------------------------------------------------===//
#include "ampc/ampc.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

using namespace ampc::api;

namespace {

struct Trained {
  std::vector<double> losses; ///< the first step's and the last's
  std::vector<std::pair<std::string, std::vector<double>>> state;
  uint64_t plannedBytes = 0;
  size_t recomputed = 0; ///< nodes named *.recomputed
};

Trained train(const std::string &example, const std::string &level, const std::string &recompute) {
  Trained run;
  LoadOptions load;
  load.optLevel = level;
  load.batch = 8;
  Result<Model> m =
      Model::loadFile(std::string(AMPC_SOURCE_DIR) + "/examples/" + example + ".yaml", load);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok())
    return run;
  TrainSettings settings;
  settings.recompute = recompute;
  EXPECT_TRUE(m->setTrainSettings(settings).ok());
  PipelineOptions p;
  p.stage = Stage::Train;
  Status rewritten = m->rewrite(p);
  EXPECT_TRUE(rewritten.ok()) << rewritten.message();
  for (const NodeView &n : m->graph().nodes())
    for (const ValueView &v : n.outputs())
      run.recomputed += v.name().find(".recomputed") != std::string::npos;
  CompileOptions c;
  c.device = "cpu";
  Result<Program> program = Program::compile(*m, c);
  EXPECT_TRUE(program.ok()) << program.status().message();
  if (!program.ok())
    return run;
  run.plannedBytes = program->plannedBytes();
  TrainOptions t;
  t.steps = 3;
  t.log = [](std::string_view) {};
  Result<TrainReport> r = program->train(t);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (r.ok())
    run.losses = {r->firstLoss, r->finalLoss};
  for (const ValueView &v : m->graph().state()) {
    Result<std::vector<double>> values = program->read(v.name());
    EXPECT_TRUE(values.ok()) << v.name();
    run.state.emplace_back(v.name(), values.ok() ? *values : std::vector<double>{});
  }
  return run;
}

class Recompute : public ::testing::TestWithParam<std::tuple<const char *, const char *>> {};

} // namespace

TEST_P(Recompute, TrainsBitForBitWithALowerPeak) {
  auto [example, level] = GetParam();
  Trained kept = train(example, level, "none");
  Trained recomputed = train(example, level, "cheap");
  EXPECT_EQ(kept.recomputed, 0u);
  EXPECT_GT(recomputed.recomputed, 0u) << "something to recompute in " << example;
  ASSERT_EQ(kept.losses.size(), 2u);
  EXPECT_EQ(recomputed.losses, kept.losses);
  ASSERT_EQ(recomputed.state.size(), kept.state.size());
  for (size_t i = 0; i < kept.state.size(); ++i) {
    EXPECT_EQ(recomputed.state[i].first, kept.state[i].first);
    EXPECT_EQ(recomputed.state[i].second, kept.state[i].second)
        << kept.state[i].first << " after 3 steps";
  }
  EXPECT_LE(recomputed.plannedBytes, kept.plannedBytes);
  // The convolutional and attention examples keep activations that cheap
  // ops make (batchnorm's relu, casts, gelu): the peak falls.
  if (std::string(example) != "mlp")
    EXPECT_LT(recomputed.plannedBytes, kept.plannedBytes);
}

INSTANTIATE_TEST_SUITE_P(Examples, Recompute,
                         ::testing::Combine(::testing::Values("mlp", "convnet-cpu", "transformer",
                                                              "resnet"),
                                            ::testing::Values("O0", "O1", "O2", "O3")),
                         [](const auto &info) {
                           std::string name =
                               std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                           for (char &ch : name)
                             if (ch == '-')
                               ch = '_';
                           return name;
                         });

TEST(RecomputeSettings, AnUnknownModeIsAnError) {
  Result<Model> m = Model::loadFile(std::string(AMPC_SOURCE_DIR) + "/examples/mlp.yaml");
  ASSERT_TRUE(m.ok());
  TrainSettings settings;
  settings.recompute = "all";
  Status s = m->setTrainSettings(settings);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("none or cheap"), std::string::npos) << s.message();
}
