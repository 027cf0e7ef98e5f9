//===- TokenDataTest.cpp - Token streams: windows, draws, bad files --------===//
#include "runtime/data/DataSource.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "runtime/HostTensor.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

using namespace ampc;
using ampc::testing::TempDir;

namespace {

constexpr int64_t kContext = 8, kVocab = 50;

/// A token model: embedding -> linear over the vocabulary, the next tokens
/// as targets; `data` is its train.data, `extra` more inputs.
std::string tokenModel(const std::string &data, const std::string &extraInputs = "",
                       const std::string &idsType = "i64") {
  return "model: tiny_lm\nbatch: 4\ninputs:\n  tokens: {shape: [B, 8], dtype: " + idsType +
         "}\n  targets: {shape: [B, 8], dtype: i64}\n" + extraInputs +
         "layers:\n"
         "  - embedding: {num_embeddings: 50, embedding_dim: 16, input: tokens, name: emb}\n"
         "  - linear: {out_features: 50, name: logits3}\n"
         "  - reshape: {shape: [-1, 50], name: logits}\n"
         "  - reshape: {shape: [-1], input: targets, name: flat_targets}\n"
         "loss: {cross_entropy: {input: logits, target: flat_targets}}\n"
         "optimizer: {sgd: {lr: 0.1}}\n"
         "train: {seed: 3, data: " +
         data + "}\n";
}

template <typename T> void writeTokens(const std::string &path, const std::vector<T> &tokens) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char *>(tokens.data()),
          static_cast<std::streamsize>(tokens.size() * sizeof(T)));
}

/// The stream 0, 1, 2, ... mod the vocabulary: a token's value says where it is.
std::vector<uint16_t> countingStream(int64_t length) {
  std::vector<uint16_t> t(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i)
    t[i] = static_cast<uint16_t>(i % kVocab);
  return t;
}

struct Opened {
  std::unique_ptr<Graph> graph;
  std::unique_ptr<DataSource> source;
  std::string error;
};

Opened open(const std::string &model, const std::string &dir) {
  Opened o;
  DiagnosticEngine diag;
  o.graph = loadModelString(model, dir + "/m.yaml", diag);
  if (!o.graph) {
    o.error = diag.diagnostics().empty() ? "no graph" : diag.diagnostics()[0].str();
    return o;
  }
  o.source = createDataSource(*o.graph, dir, diag);
  if (!o.source)
    o.error = diag.diagnostics().empty() ? "no source" : diag.diagnostics()[0].str();
  return o;
}

/// Sample `index` drawn in `epoch`: the x and y rows.
std::pair<std::vector<int64_t>, std::vector<int64_t>> draw(Opened &o, int64_t index,
                                                           int64_t epoch) {
  auto batch = makeBatchTensors(*o.graph);
  std::string err;
  EXPECT_TRUE(o.source->loadDrawnSample(index, epoch, batch, 1, err)) << err;
  const int64_t *x = batch[0].values<int64_t>().data() + kContext;
  const int64_t *y = batch[1].values<int64_t>().data() + kContext;
  return {std::vector<int64_t>(x, x + kContext), std::vector<int64_t>(y, y + kContext)};
}

TEST(TokenData, AnEpochIsTheWindowsThatFitAndEvaluationDrawsAreFixedWindows) {
  TempDir dir;
  writeTokens(dir.file("train.bin"), countingStream(203));
  Opened o = open(tokenModel("{tokens: {path: train.bin}}"), std::string(dir.path));
  ASSERT_TRUE(o.source) << o.error;
  EXPECT_EQ(o.source->kind(), "tokens");
  EXPECT_EQ(o.source->numSamples(), (203 - 1) / kContext);
  for (int64_t i : {int64_t(0), int64_t(7), o.source->numSamples() - 1}) {
    auto [x, y] = draw(o, i, kEvaluationDraw);
    for (int64_t j = 0; j < kContext; ++j) {
      EXPECT_EQ(x[j], (i * kContext + j) % kVocab) << i << " " << j;
      EXPECT_EQ(y[j], (i * kContext + j + 1) % kVocab) << i << " " << j;
    }
  }
}

TEST(TokenData, TrainingDrawsAreSeededRandomWindowsCoveringTheStream) {
  TempDir dir;
  const int64_t length = 1000;
  // Tokens count 0..49 over and over: a window's first token gives its
  // offset mod 50.
  writeTokens(dir.file("train.bin"), countingStream(length));
  Opened a = open(tokenModel("{tokens: {path: train.bin}}"), std::string(dir.path));
  Opened b = open(tokenModel("{tokens: {path: train.bin}}"), std::string(dir.path));
  Opened other = open(tokenModel("{tokens: {path: train.bin, seed: 4}}"), std::string(dir.path));
  ASSERT_TRUE(a.source && b.source && other.source) << a.error << other.error;
  std::set<int64_t> residues;
  int sameAcrossEpochs = 0, sameAcrossSeeds = 0;
  for (int64_t i = 0; i < a.source->numSamples(); ++i) {
    auto [x, y] = draw(a, i, 2);
    // A window of the stream: consecutive tokens, y one ahead of x.
    for (int64_t j = 0; j < kContext; ++j) {
      EXPECT_EQ(x[j], (x[0] + j) % kVocab);
      EXPECT_EQ(y[j], (x[0] + j + 1) % kVocab);
    }
    residues.insert(x[0]);
    // The same (seed, epoch, sample) gives the same window in another source.
    EXPECT_EQ(draw(b, i, 2).first, x);
    sameAcrossEpochs += draw(a, i, 3).first == x;
    sameAcrossSeeds += draw(other, i, 2).first == x;
  }
  // 124 windows over 992 offsets: about 2 in 50 match by chance.
  EXPECT_LT(sameAcrossEpochs, 12);
  EXPECT_LT(sameAcrossSeeds, 12);
  // Offsets are spread: 124 draws hit most of the 50 residues.
  EXPECT_GT(residues.size(), 35u);
}

TEST(TokenData, RandomOffsetsAreUniformOverEveryWindowThatFits) {
  TempDir dir;
  // 0..kVocab-1 once: every offset of a 50-token stream reads back exactly.
  const int64_t length = kVocab;
  writeTokens(dir.file("train.bin"), countingStream(length));
  Opened o = open(tokenModel("{tokens: {path: train.bin}}"), std::string(dir.path));
  ASSERT_TRUE(o.source) << o.error;
  const int64_t offsets = length - kContext; // [0, 41]
  std::vector<int64_t> hits(static_cast<size_t>(offsets), 0);
  const int64_t draws = 200 * offsets;
  for (int64_t e = 0; e < draws / o.source->numSamples(); ++e)
    for (int64_t i = 0; i < o.source->numSamples(); ++i) {
      int64_t first = draw(o, i, e).first[0];
      ASSERT_GE(first, 0);
      ASSERT_LT(first, offsets); // the target's last token stays in the stream
      ++hits[first];
    }
  // A chi-squared test of uniformity, 41 degrees of freedom: the 0.1%
  // critical value is about 74.7 (a fixed seed makes it deterministic).
  int64_t total = 0;
  for (int64_t h : hits)
    total += h;
  double expected = double(total) / double(offsets), chi2 = 0;
  for (int64_t h : hits)
    chi2 += (double(h) - expected) * (double(h) - expected) / expected;
  EXPECT_LT(chi2, 74.7);
  EXPECT_GT(hits.front(), 0);
  EXPECT_GT(hits.back(), 0);
}

TEST(TokenData, EveryDtypeAndI32InputsAndPositions) {
  TempDir dir;
  std::vector<int64_t> values;
  for (int64_t i = 0; i < 40; ++i)
    values.push_back((i * 7) % kVocab);
  writeTokens(dir.file("u16.bin"), std::vector<uint16_t>(values.begin(), values.end()));
  writeTokens(dir.file("u32.bin"), std::vector<uint32_t>(values.begin(), values.end()));
  writeTokens(dir.file("i32.bin"), std::vector<int32_t>(values.begin(), values.end()));
  writeTokens(dir.file("i64.bin"), values);
  for (const char *type : {"uint16", "uint32", "int32", "int64"}) {
    SCOPED_TRACE(type);
    std::string file = std::string(type[0] == 'u' ? "u" : "i") + (type + (type[0] == 'u' ? 4 : 3));
    Opened o = open(tokenModel("{tokens: {path: " + file + ".bin, dtype: " + type + "}}"),
                    std::string(dir.path));
    ASSERT_TRUE(o.source) << o.error;
    auto [x, y] = draw(o, 2, kEvaluationDraw);
    for (int64_t j = 0; j < kContext; ++j) {
      EXPECT_EQ(x[j], values[16 + j]);
      EXPECT_EQ(y[j], values[17 + j]);
    }
  }
  std::string positions = "  pos: {shape: [B, 8], dtype: i32}\n";
  std::string model = tokenModel("{tokens: {path: u16.bin, positions: pos}}", positions, "i32");
  // The position input needs a use: an embedding over it.
  model.replace(model.find("  - linear"), 0,
                "  - embedding: {num_embeddings: 8, embedding_dim: 16, input: pos, name: pemb}\n"
                "  - add: {inputs: [emb, pemb], name: x}\n");
  Opened o = open(model, std::string(dir.path));
  ASSERT_TRUE(o.source) << o.error;
  auto batch = makeBatchTensors(*o.graph);
  std::string err;
  ASSERT_TRUE(o.source->loadDrawnSample(1, kEvaluationDraw, batch, 2, err)) << err;
  const int32_t *pos = batch[2].values<int32_t>().data() + 2 * kContext;
  const int32_t *ids = batch[0].values<int32_t>().data() + 2 * kContext;
  for (int64_t j = 0; j < kContext; ++j) {
    EXPECT_EQ(pos[j], j);
    EXPECT_EQ(ids[j], values[kContext + j]);
  }
}

TEST(TokenData, BadStreamsAreErrorsNamingTheFile) {
  TempDir dir;
  std::string d(dir.path);
  writeTokens(dir.file("odd.bin"), std::vector<uint8_t>{1, 2, 3});
  writeTokens(dir.file("short.bin"), countingStream(kContext));
  std::vector<uint16_t> big = countingStream(100);
  big[57] = kVocab; // one past the vocabulary
  writeTokens(dir.file("big.bin"), big);
  writeTokens(dir.file("neg.bin"), std::vector<int32_t>(20, -1));
  writeTokens(dir.file("ok.bin"), countingStream(100));
  struct Case {
    std::string data, message;
  } cases[] = {
      {"{tokens: {path: missing.bin}}", "missing.bin': cannot read"},
      {"{tokens: {path: odd.bin}}", "holds 3 bytes, not a whole number of uint16 tokens"},
      {"{tokens: {path: short.bin}}", "holds 8 tokens; a window of context 8 needs 9"},
      {"{tokens: {path: big.bin}}", "token 57 is 50, outside the vocabulary [0, 50)"},
      {"{tokens: {path: neg.bin, dtype: int32}}", "token 0 is -1"},
      {"{tokens: {path: ok.bin, context: 16}}",
       "tokens data has context 16 but input 'tokens' [B,8] takes 8 tokens a sample"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.data);
    Opened o = open(tokenModel(c.data), d);
    EXPECT_FALSE(o.source);
    EXPECT_NE(o.error.find(c.message), std::string::npos) << o.error;
  }
  // A model file's mistakes are the model loader's errors, at their place.
  DiagnosticEngine diag;
  EXPECT_FALSE(
      loadModelString(tokenModel("{tokens: {path: ok.bin, dtype: uint8}}"), "m.yaml", diag));
  ASSERT_FALSE(diag.diagnostics().empty());
  EXPECT_NE(diag.diagnostics()[0].str().find("'dtype' must be one of uint16, uint32, int32, int64"),
            std::string::npos)
      << diag.diagnostics()[0].str();
  // An input that is neither ids nor targets (nor named as positions).
  std::string extra = "  pos: {shape: [B, 8], dtype: i64}\n";
  std::string model = tokenModel("{tokens: {path: ok.bin}}", extra);
  model.replace(model.find("  - linear"), 0,
                "  - embedding: {num_embeddings: 8, embedding_dim: 16, input: pos, name: pemb}\n"
                "  - add: {inputs: [emb, pemb], name: x}\n");
  Opened o = open(model, d);
  EXPECT_FALSE(o.source);
  EXPECT_NE(o.error.find("input 'pos' [B,8] is a second such input; a positions input is named by"),
            std::string::npos)
      << o.error;
}

TEST(TokenData, BatchesRepeatAcrossThreadCountsAndResumeMidEpoch) {
  TempDir dir;
  writeTokens(dir.file("train.bin"), countingStream(2000));
  Opened o = open(tokenModel("{tokens: {path: train.bin}}"), std::string(dir.path));
  ASSERT_TRUE(o.source) << o.error;
  BatchOptions opts = batchOptionsFromMeta(*o.graph);
  Batcher whole(*o.source, opts);
  int64_t perEpoch = whole.batchesPerEpoch();
  ASSERT_GT(perEpoch, 3);
  std::vector<std::vector<int64_t>> batches;
  auto batch = makeBatchTensors(*o.graph);
  std::string err;
  for (int64_t s = 0; s < perEpoch + 3; ++s) {
    int64_t rows;
    ASSERT_TRUE(whole.next(batch, rows, err)) << err;
    auto ids = batch[0].values<int64_t>();
    batches.emplace_back(ids.begin(), ids.end());
  }
  // Resumed mid-epoch, and loaded a row at a time (the prefetcher's way).
  Batcher resumed(*o.source, opts);
  resumed.skipTo(perEpoch - 1);
  for (int64_t s = perEpoch - 1; s < perEpoch + 3; ++s) {
    BatchTicket ticket;
    ASSERT_TRUE(resumed.take(ticket, err)) << err;
    auto again = makeBatchTensors(*o.graph);
    for (int64_t r = ticket.count - 1; r >= 0; --r)
      ASSERT_TRUE(resumed.loadRow(ticket, again, r, err)) << err;
    auto ids = again[0].values<int64_t>();
    EXPECT_EQ(std::vector<int64_t>(ids.begin(), ids.end()), batches[s]) << "step " << s;
  }
}

} // namespace
