//===- CheckpointTest.cpp - Save, restore, and refuse what does not fit ---===//
#include "runtime/train/Checkpoint.h"

#include "TempDir.h"
#include "ir/Builder.h"
#include "runtime/Program.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>

using namespace ampc;
using ampc::testing::readFile;
using ampc::testing::TempDir;

namespace {

/// y = linear(x, w, b) with a buffer and an optimizer-state tensor, so every
/// kind of state goes through the file.
struct Model {
  Graph g;
  DiagnosticEngine diag;
  Value *w, *b, *stat, *moment;
  std::unique_ptr<Backend> backend = createCpuRefBackend();
  std::unique_ptr<Program> program;

  explicit Model(const std::string &name = "m", int64_t out = 3) : g(name) {
    Value *x = g.addInput("x", TensorType(DType::F32, {2, 4}));
    w = g.addState("w", TensorType(DType::F32, {out, 4}), StateKind::Parameter,
                   InitSpec{InitSpec::Kind::Uniform, -1, 1, ""});
    b = g.addState("b", TensorType(DType::F32, {out}), StateKind::Parameter,
                   InitSpec{InitSpec::Kind::Uniform, -1, 1, ""});
    stat = g.addState("stat", TensorType(DType::F64, {out}), StateKind::Buffer);
    moment = g.addState("w.exp_avg", TensorType(DType::F32, {out, 4}), StateKind::OptimizerState);
    Node *y = buildNode(g, *OpRegistry::builtin().lookup("linear"), {x, w, b}, {}, {}, diag);
    g.addOutput(y->result());
    program = Program::compile(g, *backend, diag);
  }

  /// Fills every state tensor with a pattern that depends on `salt`.
  void fill(float salt) {
    for (Value *v : g.state()) {
      int64_t n = v->type().numElements();
      if (v->dtype() == DType::F64)
        for (int64_t i = 0; i < n; ++i)
          static_cast<double *>(program->data(v))[i] = salt * 10 + i;
      else
        for (int64_t i = 0; i < n; ++i)
          static_cast<float *>(program->data(v))[i] = salt + 0.25f * i;
    }
  }
  std::string bytesOf(const Value *v) const {
    return std::string(static_cast<const char *>(program->data(v)), v->type().sizeInBytes());
  }
  std::vector<std::string> snapshot() const {
    std::vector<std::string> s;
    for (const Value *v : g.state())
      s.push_back(bytesOf(v));
    return s;
  }
};

CheckpointInfo infoFor(const Model &m, uint64_t step) {
  CheckpointInfo info;
  info.model = m.g.name();
  info.modelHash = modelHash(m.g);
  info.optLevel = "O0";
  info.step = step;
  info.microStep = step * 2;
  return info;
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(Checkpoint, RoundTripsEveryStateTensorAndTheHeader) {
  TempDir dir;
  Model a, b;
  ASSERT_TRUE(a.program && b.program);
  a.fill(1.5f);
  b.fill(-7.0f);
  std::string err;
  ASSERT_TRUE(saveCheckpoint(dir.file("c.ckpt"), *a.program, infoFor(a, 42), err)) << err;
  CheckpointInfo info;
  ASSERT_TRUE(loadCheckpoint(dir.file("c.ckpt"), *b.program, info, err)) << err;
  EXPECT_EQ(b.snapshot(), a.snapshot());
  EXPECT_EQ(info.model, "m");
  EXPECT_EQ(info.step, 42u);
  EXPECT_EQ(info.microStep, 84u);
  EXPECT_EQ(info.optLevel, "O0");
  CheckpointInfo headerOnly;
  ASSERT_TRUE(readCheckpointInfo(dir.file("c.ckpt"), headerOnly, err)) << err;
  EXPECT_EQ(headerOnly.modelHash, modelHash(a.g));
  // Only the checkpoint itself is left (the temporary file was renamed).
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"c.ckpt"});
}

TEST(Checkpoint, ModelHashIgnoresOptimizerStateButNotShapes) {
  Model a, b;
  EXPECT_EQ(modelHash(a.g), modelHash(b.g));
  b.g.addState("w.exp_avg_sq", TensorType(DType::F32, {3, 4}), StateKind::OptimizerState);
  EXPECT_EQ(modelHash(a.g), modelHash(b.g));
  Model wider("m", 5), renamed("other");
  EXPECT_NE(modelHash(a.g), modelHash(wider.g));
  EXPECT_NE(modelHash(a.g), modelHash(renamed.g));
}

TEST(Checkpoint, RefusesAnotherModelAndLeavesTheProgramUntouched) {
  TempDir dir;
  Model a, wider("m", 5);
  a.fill(1);
  wider.fill(2);
  std::string err;
  ASSERT_TRUE(saveCheckpoint(dir.file("a.ckpt"), *a.program, infoFor(a, 1), err)) << err;
  auto before = wider.snapshot();
  CheckpointInfo info;
  EXPECT_FALSE(loadCheckpoint(dir.file("a.ckpt"), *wider.program, info, err));
  EXPECT_NE(err.find("checkpoint was written for model 'm'"), std::string::npos) << err;
  EXPECT_NE(err.find("a.ckpt"), std::string::npos) << err;
  EXPECT_EQ(wider.snapshot(), before);
}

TEST(Checkpoint, RefusesMissingOptimizerState) {
  TempDir dir;
  Model a, b;
  b.g.addState("w.exp_avg_sq", TensorType(DType::F32, {3, 4}), StateKind::OptimizerState);
  auto bProgram = Program::compile(b.g, *b.backend, b.diag);
  ASSERT_TRUE(bProgram);
  std::string err;
  ASSERT_TRUE(saveCheckpoint(dir.file("a.ckpt"), *a.program, infoFor(a, 1), err)) << err;
  CheckpointInfo info;
  EXPECT_FALSE(loadCheckpoint(dir.file("a.ckpt"), *bProgram, info, err));
  EXPECT_NE(err.find("no optstate tensor 'w.exp_avg_sq'"), std::string::npos) << err;
}

TEST(Checkpoint, RefusesTruncatedCorruptAndForeignFiles) {
  TempDir dir;
  Model a;
  a.fill(3);
  std::string err;
  ASSERT_TRUE(saveCheckpoint(dir.file("a.ckpt"), *a.program, infoFor(a, 1), err)) << err;
  std::string good = readFile(dir.file("a.ckpt"));
  auto before = a.snapshot();
  CheckpointInfo info;

  writeBytes(dir.file("t.ckpt"), good.substr(0, good.size() / 2));
  EXPECT_FALSE(loadCheckpoint(dir.file("t.ckpt"), *a.program, info, err));
  EXPECT_NE(err.find("truncated or corrupt"), std::string::npos) << err;

  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  writeBytes(dir.file("f.ckpt"), flipped);
  EXPECT_FALSE(loadCheckpoint(dir.file("f.ckpt"), *a.program, info, err));
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;

  writeBytes(dir.file("n.ckpt"), "model: m\nthis is not a checkpoint\n");
  EXPECT_FALSE(loadCheckpoint(dir.file("n.ckpt"), *a.program, info, err));
  EXPECT_NE(err.find("not an ampc checkpoint"), std::string::npos) << err;

  std::string future = good;
  future[8] = 9; // format version 9
  writeBytes(dir.file("v.ckpt"), future);
  EXPECT_FALSE(loadCheckpoint(dir.file("v.ckpt"), *a.program, info, err));
  EXPECT_NE(err.find("format version 9 is not supported"), std::string::npos) << err;

  EXPECT_FALSE(loadCheckpoint(dir.file("missing.ckpt"), *a.program, info, err));
  EXPECT_NE(err.find("cannot read checkpoint"), std::string::npos) << err;
  EXPECT_EQ(a.snapshot(), before);
}

// A forged header with a valid checksum: a step past int64 tripped an
// assertion in the batcher on resume; a micro-step count that is not a whole
// number of steps is as impossible.
TEST(Checkpoint, RefusesStepsThatNoRunCanHaveTaken) {
  TempDir dir;
  Model a;
  a.fill(3);
  auto before = a.snapshot();
  std::string err;
  CheckpointInfo forged = infoFor(a, 1);
  forged.step = ~uint64_t(0);
  forged.microStep = ~uint64_t(0);
  ASSERT_TRUE(saveCheckpoint(dir.file("huge.ckpt"), *a.program, forged, err)) << err;
  CheckpointInfo info;
  EXPECT_FALSE(loadCheckpoint(dir.file("huge.ckpt"), *a.program, info, err));
  EXPECT_FALSE(readCheckpointInfo(dir.file("huge.ckpt"), info, err));
  forged = infoFor(a, 4);
  forged.microStep = 9;
  ASSERT_TRUE(saveCheckpoint(dir.file("odd.ckpt"), *a.program, forged, err)) << err;
  EXPECT_FALSE(loadCheckpoint(dir.file("odd.ckpt"), *a.program, info, err));
  EXPECT_EQ(a.snapshot(), before);
  // The largest step int64 holds still loads.
  forged = infoFor(a, 0);
  forged.step = forged.microStep = uint64_t(std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(saveCheckpoint(dir.file("max.ckpt"), *a.program, forged, err)) << err;
  EXPECT_TRUE(loadCheckpoint(dir.file("max.ckpt"), *a.program, info, err)) << err;
}

TEST(Checkpoint, AFailedWriteKeepsThePreviousFile) {
  TempDir dir;
  Model a;
  a.fill(1);
  std::string err;
  ASSERT_TRUE(saveCheckpoint(dir.file("a.ckpt"), *a.program, infoFor(a, 1), err)) << err;
  std::string first = readFile(dir.file("a.ckpt"));
  EXPECT_FALSE(saveCheckpoint(dir.file("no-such-dir/a.ckpt"), *a.program, infoFor(a, 2), err));
  EXPECT_FALSE(err.empty());
  EXPECT_EQ(readFile(dir.file("a.ckpt")), first);
}

} // namespace
