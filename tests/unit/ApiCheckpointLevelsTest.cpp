//===- ApiCheckpointLevelsTest.cpp - Checkpoints across opt levels, export -===//
//
// Through the public API: a checkpoint written at one opt level resumes at
// another (the fp32 masters are the truth; moments and the scaler carry over
// by name), the same level still resumes bit for bit, a checkpoint that does
// not fit names what differs, and the npy export writes the fp32 truth.
//
//===----------------------------------------------------------------------===//
#include "ampc/ampc.h"

#include "TempDir.h"
#include "ir/support/NpyFile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace ampc::api;

namespace {

/// A small MLP with SGD momentum (optimizer state per parameter) on
/// learnable data. `fc1` is `width` wide; `optimizer` replaces SGD.
std::string mlpText(int width = 32,
                    const std::string &optimizer = "{sgd: {lr: 0.5, momentum: 0.9}}") {
  return "model: levels\n"
         "batch: 16\n"
         "inputs:\n"
         "  x: {shape: [B, 16]}\n"
         "  target: {shape: [B, 8]}\n"
         "init:\n"
         "  seed: 3\n"
         "layers:\n"
         "  - linear: {out_features: " +
         std::to_string(width) +
         ", name: fc1}\n"
         "  - relu: {}\n"
         "  - linear: {out_features: 8, name: out}\n"
         "loss: {mse_loss: {input: out, target: target}}\n"
         "optimizer: " +
         optimizer +
         "\n"
         "train:\n"
         "  steps: 40\n"
         "  data: {synthetic: {seed: 0, size: 256}}\n";
}

const char *const kParams[] = {"fc1.weight", "fc1.bias", "out.weight", "out.bias"};

/// A model rewritten for training at `level`, kept alive with its program.
struct LevelRun {
  std::optional<Model> model;
  std::optional<Program> program;

  explicit LevelRun(const std::string &level, const std::string &text = mlpText()) {
    LoadOptions load;
    load.optLevel = level;
    Result<Model> m = Model::loadString(text, "levels.yaml", load);
    EXPECT_TRUE(m.ok()) << m.status().message();
    model.emplace(std::move(m).value());
    Status s = model->rewrite();
    EXPECT_TRUE(s.ok()) << s.message();
    CompileOptions c;
    c.device = "cpu-ref";
    Result<Program> p = Program::compile(*model, c);
    EXPECT_TRUE(p.ok()) << p.status().message();
    program.emplace(std::move(p).value());
  }

  TrainReport train(int64_t steps) {
    TrainOptions t;
    t.steps = steps;
    t.log = [](std::string_view) {};
    Result<TrainReport> r = program->train(t);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : TrainReport{};
  }
  std::vector<double> read(const std::string &name) const {
    Result<std::vector<double>> v = program->read(name);
    EXPECT_TRUE(v.ok()) << v.status().message();
    return v.ok() ? *v : std::vector<double>{};
  }
  /// Every state tensor's values, by name.
  std::vector<std::pair<std::string, std::vector<double>>> state() const {
    std::vector<std::pair<std::string, std::vector<double>>> s;
    for (const ValueView &v : model->graph().state())
      s.emplace_back(v.name(), read(v.name()));
    return s;
  }
  bool has(const std::string &name) const {
    for (const ValueView &v : model->graph().state())
      if (v.name() == name)
        return true;
    return false;
  }
};

/// bf16 rounding (round to nearest even) of an f32 value.
double roundBf16(double v) {
  float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&f, &bits, 4);
  return f;
}

class CheckpointLevels : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new ampc::testing::TempDir;
    // 20 steps at O2, the checkpoint, and the same run straight to 25.
    LevelRun o2("O2");
    o2.train(20);
    ASSERT_TRUE(o2.program->saveCheckpoint(o2Ckpt()).ok());
    for (const char *p : kParams)
      masters_.push_back(o2.read(std::string(p) + ".master"));
    for (const char *p : kParams)
      halves_.push_back(o2.read(p));
    momenta_ = o2.read("fc1.weight.momentum_buffer");
    scale_ = o2.read("loss_scale.scale")[0];
    // The loss of step 21, run straight through.
    LevelRun straight("O2");
    straightLoss21_ = straight.train(21).finalLoss;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string o2Ckpt() { return dir_->file("o2.ckpt"); }

  static ampc::testing::TempDir *dir_;
  static std::vector<std::vector<double>> masters_, halves_;
  static std::vector<double> momenta_;
  static double scale_, straightLoss21_;
};
ampc::testing::TempDir *CheckpointLevels::dir_ = nullptr;
std::vector<std::vector<double>> CheckpointLevels::masters_, CheckpointLevels::halves_;
std::vector<double> CheckpointLevels::momenta_;
double CheckpointLevels::scale_ = 0, CheckpointLevels::straightLoss21_ = 0;

TEST_F(CheckpointLevels, O2ResumesAtO0AndO1FromTheMasters) {
  for (const char *level : {"O0", "O1"}) {
    SCOPED_TRACE(level);
    LevelRun r(level);
    Status s = r.program->loadCheckpoint(o2Ckpt());
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(r.program->stepsDone(), 20);
    // The note says what was rebuilt.
    ASSERT_FALSE(s.diagnostics().empty());
    const std::string note = s.diagnostics()[0].message;
    EXPECT_EQ(s.diagnostics()[0].severity, Severity::Note);
    EXPECT_NE(note.find("written at O2, loaded at " + std::string(level)), std::string::npos)
        << note;
    EXPECT_NE(note.find("4 parameters taken from their fp32 masters"), std::string::npos) << note;
    EXPECT_NE(note.find("optimizer state carried over"), std::string::npos) << note;
    for (size_t i = 0; i < std::size(kParams); ++i)
      EXPECT_EQ(r.read(kParams[i]), masters_[i]) << kParams[i];
    EXPECT_EQ(r.read("fc1.weight.momentum_buffer"), momenta_);
    if (std::string(level) == "O1") {
      EXPECT_EQ(r.read("loss_scale.scale")[0], scale_);
      EXPECT_NE(note.find("loss scaler carried over"), std::string::npos) << note;
    } else {
      EXPECT_FALSE(r.has("loss_scale.scale"));
      EXPECT_NE(note.find("loss scaler state"), std::string::npos) << note;
      EXPECT_NE(note.find("is dropped"), std::string::npos) << note;
    }
    // The loss continues where the O2 run was: step 21 within 2 % of the
    // uninterrupted O2 run's (a fresh model's loss is far higher).
    TrainReport t = r.train(25);
    EXPECT_EQ(t.firstStep, 20);
    EXPECT_NEAR(t.firstLoss, straightLoss21_, 0.02 * straightLoss21_);
  }
}

TEST_F(CheckpointLevels, O2ResumesAtO3WithItsHalfCopies) {
  LevelRun r("O3");
  Status s = r.program->loadCheckpoint(o2Ckpt());
  ASSERT_TRUE(s.ok()) << s.message();
  for (size_t i = 0; i < std::size(kParams); ++i) {
    EXPECT_EQ(r.read(kParams[i]), halves_[i]) << kParams[i];
    // ... which are the masters rounded.
    for (size_t j = 0; j < masters_[i].size(); ++j)
      ASSERT_EQ(halves_[i][j], roundBf16(masters_[i][j])) << kParams[i] << "[" << j << "]";
  }
  EXPECT_EQ(r.read("fc1.weight.momentum_buffer"), momenta_);
  EXPECT_NE(s.diagnostics().at(0).message.find("master weights are dropped"), std::string::npos);
  TrainReport t = r.train(25);
  EXPECT_NEAR(t.firstLoss, straightLoss21_, 0.02 * straightLoss21_);
}

TEST_F(CheckpointLevels, O0ResumesAtO2WithMastersBuiltFromItsParameters) {
  LevelRun o0("O0");
  o0.train(10);
  std::string ckpt = dir_->file("o0.ckpt");
  ASSERT_TRUE(o0.program->saveCheckpoint(ckpt).ok());
  LevelRun r("O2");
  Status s = r.program->loadCheckpoint(ckpt);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string note = s.diagnostics().at(0).message;
  EXPECT_NE(note.find("4 parameters converted from f32 to bf16"), std::string::npos) << note;
  EXPECT_NE(note.find("4 fp32 master weights built"), std::string::npos) << note;
  EXPECT_NE(note.find("loss scaler starts afresh"), std::string::npos) << note;
  for (const char *p : kParams) {
    std::vector<double> f32 = o0.read(p), master = r.read(std::string(p) + ".master"),
                        half = r.read(p);
    EXPECT_EQ(master, f32) << p;
    for (size_t j = 0; j < f32.size(); ++j)
      ASSERT_EQ(half[j], roundBf16(f32[j])) << p << "[" << j << "]";
  }
  EXPECT_EQ(r.read("loss_scale.scale")[0], 65536.0); // the initial scale
  // The loss of step 11 at O0, run straight through.
  double o0Loss11 = LevelRun("O0").train(11).finalLoss;
  TrainReport t = r.train(15);
  EXPECT_EQ(t.firstStep, 10);
  EXPECT_NEAR(t.firstLoss, o0Loss11, 0.02 * o0Loss11);
}

TEST_F(CheckpointLevels, SameLevelStillResumesBitForBitWithoutANote) {
  LevelRun straight("O2");
  straight.train(25);
  LevelRun resumed("O2");
  Status s = resumed.program->loadCheckpoint(o2Ckpt());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(s.diagnostics().empty()) << s.message();
  resumed.train(25);
  EXPECT_EQ(resumed.state(), straight.state());
}

TEST_F(CheckpointLevels, ACheckpointThatDoesNotFitNamesWhatDiffers) {
  LevelRun wide("O1", mlpText(33));
  auto before = wide.state();
  Status s = wide.program->loadCheckpoint(o2Ckpt());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("parameter 'fc1.weight' has shape [32,16] there, [33,16] here"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("parameter 'fc1.bias' has shape [32] there, [33] here"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(wide.state(), before); // untouched

  LevelRun adam("O2", mlpText(32, "{adam: {lr: 0.01}}"));
  s = adam.program->loadCheckpoint(o2Ckpt());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("optimizer 'sgd', this model trains with 'adam'"), std::string::npos)
      << s.message();
}

TEST_F(CheckpointLevels, ExportWritesTheMastersAsNpyUnderTheParametersNames) {
  // From an O2 program holding the checkpoint: the masters, not the halves.
  LevelRun o2("O2");
  ASSERT_TRUE(o2.program->loadCheckpoint(o2Ckpt()).ok());
  Result<std::vector<Weight>> weights = weightsOf(*o2.program);
  ASSERT_TRUE(weights.ok()) << weights.status().message();
  ASSERT_EQ(weights->size(), std::size(kParams));
  for (size_t i = 0; i < std::size(kParams); ++i) {
    const Weight &w = (*weights)[i];
    EXPECT_EQ(w.name, kParams[i]);
    EXPECT_TRUE(w.fromMaster);
    EXPECT_EQ(std::vector<double>(w.values.begin(), w.values.end()), masters_[i]) << w.name;
  }

  std::string out = dir_->file("npy/nested");
  ExportOptions opts;
  opts.format = "npy";
  opts.output = out;
  ASSERT_TRUE(checkExport(opts).ok());
  Result<ExportReport> report = exportProgram(*o2.program, opts);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->files.size(), std::size(kParams));
  std::vector<std::string> names;
  for (const std::string &f : report->files)
    names.push_back(f.substr(out.size() + 1));
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight.npy", "fc1.bias.npy", "out.weight.npy",
                                             "out.bias.npy"}));
  for (size_t i = 0; i < std::size(kParams); ++i) {
    ampc::NpyArray a;
    std::string err;
    ASSERT_TRUE(ampc::readNpy(out + "/" + kParams[i] + ".npy", a, err)) << err;
    EXPECT_EQ(a.dtype, ampc::DType::F32);
    const float *f = reinterpret_cast<const float *>(a.data.data());
    EXPECT_EQ(std::vector<double>(f, f + a.numElements()), masters_[i]) << kParams[i];
  }
  // Exporting again replaces the files.
  EXPECT_TRUE(exportProgram(*o2.program, opts).ok());

  // Formats: onnx writes one file (a directory in its place is refused);
  // an unknown one names them.
  opts.format = "onnx";
  opts.output = dir_->file("");
  Status s = checkExport(opts);
  EXPECT_FALSE(s.ok());
  opts.format = "tflite";
  s = checkExport(opts);
  EXPECT_NE(s.message().find("formats: npy, onnx"), std::string::npos) << s.message();
  // A file where the directory should be.
  std::ofstream(dir_->file("plain")) << "x";
  opts.format = "npy";
  opts.output = dir_->file("plain/sub");
  EXPECT_FALSE(checkExport(opts).ok());
}

} // namespace
