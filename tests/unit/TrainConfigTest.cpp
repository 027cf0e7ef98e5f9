//===- TrainConfigTest.cpp - `optimizer:` and `train:` settings in meta ----===//
//
// The learning-rate schedule and gradient clipping keys of `train:` (the
// optimizer kinds themselves are covered in ModelLoaderTest), and that a
// loaded model's meta drives the optimizer pass.
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/ModelLoader.h"
#include "passes/Autodiff.h"
#include "passes/Optimizer.h"
#include "runtime/data/DataSource.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

/// A one-layer regression model with the given optimizer and train sections.
std::string model(llvm::StringRef optimizer, llvm::StringRef train) {
  return (R"(model: m
batch: 2
inputs: {x: {shape: [B, 3]}, y: {shape: [B, 2]}}
layers: [{linear: {out_features: 2, name: out}}]
loss: {mse_loss: {input: out, target: y}}
optimizer: )" +
          optimizer + "\ntrain: " + train + "\n")
      .str();
}

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const auto &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

std::unique_ptr<Graph> loadOk(const std::string &text) {
  DiagnosticEngine diag;
  auto g = loadModelString(text, "m.yaml", diag, {}, ".");
  EXPECT_TRUE(g) << diagText(diag);
  return g;
}

std::string firstError(const std::string &text) {
  DiagnosticEngine diag;
  auto g = loadModelString(text, "m.yaml", diag, {}, ".");
  EXPECT_FALSE(g) << "the model loaded";
  return diag.diagnostics().empty() ? "<no diagnostic>" : diag.diagnostics().front().str();
}

#define EXPECT_ERROR(text, position, message)                                                      \
  do {                                                                                             \
    std::string err = firstError(text);                                                            \
    EXPECT_EQ(err.rfind("m.yaml:" position ": error: ", 0), 0u) << err;                            \
    EXPECT_NE(err.find(message), std::string::npos) << err;                                        \
  } while (0)

TEST(TrainConfigTest, DefaultsToAConstantScheduleWithoutClipping) {
  auto g = loadOk(model("{sgd: {lr: 0.1}}", "{steps: 10}"));
  ASSERT_TRUE(g);
  const AttrMap &m = g->meta();
  EXPECT_EQ(m.at("train.lr_schedule").getString(), "constant");
  EXPECT_EQ(m.at("train.lr_schedule.warmup_steps").getInt(), 0);
  EXPECT_FALSE(m.count("train.clip_grad_norm"));
}

TEST(TrainConfigTest, ReadsEverySchedule) {
  auto g =
      loadOk(model("{sgd: {lr: 0.1}}", "{steps: 10, lr_schedule: {constant: {warmup_steps: 3}}}"));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->meta().at("train.lr_schedule.warmup_steps").getInt(), 3);

  g = loadOk(model("{sgd: {lr: 0.1}}", "{steps: 10, lr_schedule: {step: {step_size: 30}}}"));
  ASSERT_TRUE(g);
  const AttrMap *m = &g->meta();
  EXPECT_EQ(m->at("train.lr_schedule").getString(), "step");
  EXPECT_EQ(m->at("train.lr_schedule.step_size").getInt(), 30);
  EXPECT_DOUBLE_EQ(m->at("train.lr_schedule.gamma").getFloat(), 0.1);

  g = loadOk(model("{adam: {lr: 0.01}}",
                   "{steps: 1000, lr_schedule: {cosine: {warmup_steps: 100, min_lr: 1.0e-4}}, "
                   "clip_grad_norm: 1}"));
  ASSERT_TRUE(g);
  m = &g->meta();
  EXPECT_EQ(m->at("train.lr_schedule").getString(), "cosine");
  EXPECT_EQ(m->at("train.lr_schedule.warmup_steps").getInt(), 100);
  EXPECT_DOUBLE_EQ(m->at("train.lr_schedule.min_lr").getFloat(), 1e-4);
  EXPECT_FALSE(m->count("train.lr_schedule.total_steps"));         // train.steps is the total
  EXPECT_DOUBLE_EQ(m->at("train.clip_grad_norm").getFloat(), 1.0); // widened from an int

  g = loadOk(model("{adam: {}}", "{epochs: 3, lr_schedule: {cosine: {total_steps: 50}}}"));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->meta().at("train.lr_schedule.total_steps").getInt(), 50);
}

TEST(TrainConfigTest, RejectsBadSchedulesAndClipping) {
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{lr_schedule: {linear: {}}}"), "7:23",
               "unknown lr_schedule 'linear'; expected constant, step or cosine");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{lr_schedule: {step: {}}}"), "7:23",
               "missing 'step_size' for the step schedule");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{lr_schedule: {step: {step_size: 0}}}"), "7:41",
               "'step_size' must be > 0, got '0'");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{lr_schedule: {step: {step_size: 2, gama: 0.5}}}"),
               "7:44", "unknown argument 'gama' for the step schedule; did you mean 'gamma'?");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{lr_schedule: {constant: {min_lr: 0.1}}}"), "7:34",
               "unknown argument 'min_lr' for the constant schedule");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{lr_schedule: {cosine: {warmup_steps: -1}}}"), "7:46",
               "'warmup_steps' must be >= 0, got '-1'");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{steps: 10, lr_schedule: {cosine: {warmup_steps: 10}}}"),
               "7:57", "'warmup_steps' (10) must be less than the schedule's total of 10 steps");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{steps: 10, lr_schedule: {cosine: {min_lr: 0.5}}}"),
               "7:51", "'min_lr' (0.5) must not exceed the optimizer's lr (0.1)");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{lr_schedule: cosine}"), "7:22",
               "'lr_schedule' must be a map with one key");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{clip_grad_norm: 0}"), "7:25",
               "'clip_grad_norm' must be > 0.0, got '0'");
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}", "{clip_grad_norm: big}"), "7:25",
               "'clip_grad_norm' must be a number");
}

TEST(TrainConfigTest, LoadedSettingsDriveTheOptimizerPass) {
  auto g = loadOk(model("{sgd: {lr: 0.5, momentum: 0.9, nesterov: true}}",
                        "{steps: 20, accumulate: 2, clip_grad_norm: 2.5, "
                        "lr_schedule: {cosine: {warmup_steps: 5, min_lr: 0.05}}}"));
  ASSERT_TRUE(g);
  DiagnosticEngine diag;
  PassContext ctx{diag};
  ASSERT_NE(AutodiffPass().run(*g, ctx), PassResult::Failed) << diagText(diag);
  ASSERT_NE(OptimizerPass().run(*g, ctx), PassResult::Failed) << diagText(diag);
  const Node *lr = g->lookup("lr")->definingNode();
  EXPECT_EQ(lr->attr("schedule").getString(), "cosine");
  EXPECT_DOUBLE_EQ(lr->attr("lr").getFloat(), 0.5);
  EXPECT_EQ(lr->attr("warmup_steps").getInt(), 5);
  EXPECT_EQ(lr->attr("total_steps").getInt(), 20);
  EXPECT_DOUBLE_EQ(lr->attr("min_lr").getFloat(), 0.05);
  EXPECT_EQ(lr->attr("accumulate").getInt(), 2);
  const Node *clip = g->lookup("grad_clip_coef")->definingNode();
  EXPECT_DOUBLE_EQ(clip->attr("max_norm").getFloat(), 2.5);
  const Node *update = g->lookup("out.weight.next")->definingNode();
  EXPECT_EQ(update->kind(), OpKind::SgdMomentumUpdate);
  EXPECT_TRUE(update->attr("nesterov").getBool());
  EXPECT_DOUBLE_EQ(update->attr("momentum").getFloat(), 0.9);
  EXPECT_EQ(update->attr("accumulate").getInt(), 2);
}

// normalize's mean and std: one number, alone or in a list, stands for all
// three channels (and is what a grayscale input takes); two are an error.
TEST(TrainConfigTest, ImageFolderNormalizeTakesOneValueOrThree) {
  auto g =
      loadOk(model("{sgd: {lr: 0.1}}",
                   "{data: {image_folder: {path: imgs, normalize: {mean: [0.5], std: 0.25}}}}"));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->meta().at("train.data.normalize.mean").getFloats(),
            std::vector<double>({0.5, 0.5, 0.5}));
  EXPECT_EQ(g->meta().at("train.data.normalize.std").getFloats(),
            std::vector<double>({0.25, 0.25, 0.25}));
  EXPECT_ERROR(model("{sgd: {lr: 0.1}}",
                     "{data: {image_folder: {path: imgs, normalize: {mean: [0.1, 0.2]}}}}"),
               "7:61", "'mean' must be one number or a list of 3 numbers");
}

// A grayscale input ([B, 1, H, W]) takes one mean and one std; three
// different ones are an error when the data opens, before any file is read.
TEST(TrainConfigTest, GrayscaleImageFolderRefusesThreeDifferentMeans) {
  auto gray = [](llvm::StringRef normalize) {
    return (R"(model: m
batch: 2
inputs: {image: {shape: [B, 1, 8, 8]}, label: {shape: [B], dtype: i64}}
layers: [{flatten: {input: image, name: flat}}, {linear: {out_features: 2, name: out}}]
loss: {cross_entropy: {input: out, target: label}}
optimizer: {sgd: {lr: 0.1}}
train: {data: {image_folder: {path: no-such-folder, normalize: )" +
            normalize + "}}}\n")
        .str();
  };
  auto g = loadOk(gray("{mean: [0.1, 0.2, 0.3]}"));
  ASSERT_TRUE(g);
  DiagnosticEngine diag;
  EXPECT_FALSE(createDataSource(*g, ".", diag));
  ASSERT_FALSE(diag.diagnostics().empty());
  EXPECT_NE(diag.diagnostics().front().str().find(
                "feeds grayscale images to input 'image' [B,1,8,8], one channel, but normalize "
                "gives three different means; give one value"),
            std::string::npos)
      << diag.diagnostics().front().str();
  // One mean: the transform is fine, and the missing folder is what fails.
  g = loadOk(gray("{mean: [0.1307], std: [0.3081]}"));
  ASSERT_TRUE(g);
  DiagnosticEngine diag2;
  EXPECT_FALSE(createDataSource(*g, ".", diag2));
  ASSERT_FALSE(diag2.diagnostics().empty());
  EXPECT_NE(diag2.diagnostics().front().str().find("no such folder"), std::string::npos)
      << diag2.diagnostics().front().str();
}

} // namespace
