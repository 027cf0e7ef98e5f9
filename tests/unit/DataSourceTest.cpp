//===- DataSourceTest.cpp - Data sources, batching, bad files ----------------===//
#include "runtime/data/DataSource.h"

#include "kernels/common/Random.h"
#include "runtime/data/DataInternal.h"
#include "runtime/data/Prefetch.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/support/NpyFile.h"
#include "runtime/HostTensor.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sched.h>
#include <set>
#include <thread>

using namespace ampc;

namespace {

const OpInfo &op(llvm::StringRef name) {
  const OpInfo *info = OpRegistry::builtin().lookup(name);
  EXPECT_NE(info, nullptr) << name.str();
  return *info;
}

Value *param(Graph &g, llvm::StringRef name, llvm::ArrayRef<int64_t> dims) {
  InitSpec zeros;
  zeros.kind = InitSpec::Kind::Zeros;
  return g.addState(name, TensorType(DType::F32, dims), StateKind::Parameter, zeros);
}

Node *build(Graph &g, llvm::StringRef opName, llvm::ArrayRef<Value *> operands, AttrMap attrs,
            llvm::StringRef name) {
  DiagnosticEngine diag;
  Node *n = buildNode(g, op(opName), operands, std::move(attrs), Location(), diag, {name.str()});
  EXPECT_NE(n, nullptr) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  return n;
}

/// image f32[B,1,h,w] -> flatten -> linear(classes) -> cross_entropy(label i64[B]).
std::unique_ptr<Graph> classifier(int64_t batch, int64_t h, int64_t w, int64_t classes) {
  auto g = std::make_unique<Graph>("classifier");
  Value *image = g->addInput("image", TensorType(DType::F32, {batch, 1, h, w}));
  Value *label = g->addInput("label", TensorType(DType::I64, {batch}));
  Node *flat = build(*g, "flatten", {image}, {}, "flat");
  Node *fc = build(
      *g, "linear",
      {flat->result(), param(*g, "fc.weight", {classes, h * w}), param(*g, "fc.bias", {classes})},
      {}, "logits");
  Node *loss = build(*g, "cross_entropy", {fc->result(), label}, {}, "loss");
  g->addOutput(loss->result());
  g->meta()["batch"] = Attribute(batch);
  return g;
}

/// x f32[B,features] -> linear(outputs) -> mse_loss(y f32[B,outputs]).
std::unique_ptr<Graph> regression(int64_t batch, int64_t features, int64_t outputs) {
  auto g = std::make_unique<Graph>("regression");
  Value *x = g->addInput("x", TensorType(DType::F32, {batch, features}));
  Value *y = g->addInput("y", TensorType(DType::F32, {batch, outputs}));
  Node *fc =
      build(*g, "linear",
            {x, param(*g, "fc.weight", {outputs, features}), param(*g, "fc.bias", {outputs})}, {},
            "pred");
  Node *loss = build(*g, "mse_loss", {fc->result(), y}, {}, "loss");
  g->addOutput(loss->result());
  return g;
}

/// tokens i64[B,seq] -> embedding(vocab, 4) -> flatten -> linear(classes) -> cross_entropy.
std::unique_ptr<Graph> tokenModel(int64_t batch, int64_t seq, int64_t vocab, int64_t classes) {
  auto g = std::make_unique<Graph>("tokens");
  Value *tokens = g->addInput("tokens", TensorType(DType::I64, {batch, seq}));
  Value *label = g->addInput("label", TensorType(DType::I64, {batch}));
  Node *emb = build(*g, "embedding", {tokens, param(*g, "emb.weight", {vocab, 4})}, {}, "emb");
  Node *flat = build(*g, "flatten", {emb->result()}, {}, "flat");
  Node *fc = build(
      *g, "linear",
      {flat->result(), param(*g, "fc.weight", {classes, seq * 4}), param(*g, "fc.bias", {classes})},
      {}, "logits");
  Node *loss = build(*g, "cross_entropy", {fc->result(), label}, {}, "loss");
  g->addOutput(loss->result());
  return g;
}

void setSynthetic(Graph &g, int64_t seed, int64_t size) {
  g.meta()["train.data"] = Attribute("synthetic");
  g.meta()["train.data.seed"] = Attribute(seed);
  g.meta()["train.data.size"] = Attribute(size);
}

std::string firstError(const DiagnosticEngine &diag) {
  return diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str();
}

/// A fresh temporary folder, removed with its files at the end of the test.
class TempDir {
public:
  TempDir() {
    llvm::SmallString<128> path;
    std::error_code ec = llvm::sys::fs::createUniqueDirectory("ampc-data-test", path);
    EXPECT_FALSE(ec) << ec.message();
    dir_ = std::string(path);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(dir_); }
  const std::string &path() const { return dir_; }
  std::string file(llvm::StringRef name) const { return dir_ + "/" + name.str(); }
  void write(llvm::StringRef name, const std::string &bytes) const {
    std::ofstream out(file(name), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

private:
  std::string dir_;
};

std::string bigEndian32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)};
}

std::string idxImages(uint32_t n, uint32_t rows, uint32_t cols, uint8_t first = 0) {
  std::string s = bigEndian32(0x803) + bigEndian32(n) + bigEndian32(rows) + bigEndian32(cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i)
    s.push_back(char(uint8_t(first + i)));
  return s;
}

std::string idxLabels(llvm::ArrayRef<uint8_t> labels) {
  std::string s = bigEndian32(0x801) + bigEndian32(labels.size());
  for (uint8_t l : labels)
    s.push_back(char(l));
  return s;
}

void writeF32Npy(const std::string &path, llvm::ArrayRef<int64_t> shape,
                 llvm::ArrayRef<float> values) {
  std::string err;
  ASSERT_TRUE(writeNpy(path, DType::F32, shape, values.data(), err)) << err;
}

void writeI64Npy(const std::string &path, llvm::ArrayRef<int64_t> values) {
  std::string err;
  int64_t n = values.size();
  ASSERT_TRUE(writeNpy(path, DType::I64, {n}, values.data(), err)) << err;
}

/// A [n, 4] f32 file whose sample i is {i, i, i, i} (so a batch row tells
/// which sample it holds) and labels i % classes.
void writeIndexedNpy(const TempDir &dir, Graph &g, int64_t n, int64_t classes) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) {
    x.insert(x.end(), 4, float(i));
    y.push_back(i % classes);
  }
  writeF32Npy(dir.file("x.npy"), {n, 4}, x);
  writeI64Npy(dir.file("y.npy"), y);
  g.meta()["train.data"] = Attribute("npy");
  g.meta()["train.data.image"] = Attribute("x.npy");
  g.meta()["train.data.label"] = Attribute("y.npy");
}

/// The sample index held in each row of a batch built by writeIndexedNpy.
std::vector<int64_t> rowsOf(const HostTensor &image, int64_t rows) {
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < rows; ++r)
    ids.push_back(static_cast<int64_t>(image.getAsDouble(r * 4)));
  return ids;
}

// --- HostTensor --------------------------------------------------------------

TEST(HostTensor, AlignedZeroedAndDeepCopied) {
  HostTensor t(TensorType(DType::F32, {3, 5}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % HostTensor::kAlignment, 0u);
  EXPECT_EQ(t.numElements(), 15);
  EXPECT_EQ(t.rowElements(), 5);
  EXPECT_EQ(t.sizeInBytes(), 60);
  for (float v : t.values<float>())
    EXPECT_EQ(v, 0.0f);
  t.values<float>()[7] = 2.5f;
  HostTensor copy = t;
  t.values<float>()[7] = -1.0f;
  EXPECT_EQ(copy.values<float>()[7], 2.5f);
  EXPECT_NE(copy.data(), t.data());
  HostTensor moved = std::move(copy);
  EXPECT_EQ(moved.getAsDouble(7), 2.5);
  EXPECT_EQ(copy.numElements(), 0);
}

TEST(HostTensor, ConvertsThroughTheDType) {
  HostTensor h(TensorType(DType::F16, {4}));
  h.setFromDouble(1, 1.0 + 1.0 / 4096); // below half an f16 ulp above 1: rounds to 1
  h.setFromDouble(2, -3.5);
  EXPECT_EQ(h.getAsDouble(1), 1.0);
  EXPECT_EQ(h.getAsDouble(2), -3.5);
  EXPECT_EQ(h.values<uint16_t>()[2], 0xC300); // -3.5 in binary16
  HostTensor i(TensorType(DType::I64, {2, 2}));
  i.setFromDouble(3, 9.0);
  EXPECT_EQ(i.values<int64_t>()[3], 9);
  i.zeroFrom(2);
  EXPECT_EQ(i.values<int64_t>()[3], 0);
  EXPECT_EQ(i.arg().data, i.data());
  EXPECT_EQ(i.arg().numElements(), 4);
}

// --- Synthetic ---------------------------------------------------------------

TEST(SyntheticData, SameSeedSameSamplesOtherSeedOthers) {
  auto g = classifier(8, 4, 4, 5);
  setSynthetic(*g, 7, 100);
  DiagnosticEngine diag;
  auto a = createDataSource(*g, "", diag);
  ASSERT_TRUE(a) << firstError(diag);
  EXPECT_EQ(a->kind(), "synthetic");
  EXPECT_EQ(a->numSamples(), 100);
  auto b = createDataSource(*g, "", diag);
  setSynthetic(*g, 8, 100);
  auto c = createDataSource(*g, "", diag);
  auto ba = makeBatchTensors(*g), bb = makeBatchTensors(*g), bc = makeBatchTensors(*g);
  std::string err;
  // Sample 42 into different rows, after other samples: the values depend on
  // the sample index only.
  ASSERT_TRUE(a->loadSample(42, ba, 3, err)) << err;
  ASSERT_TRUE(b->loadSample(5, bb, 3, err)) << err;
  ASSERT_TRUE(b->loadSample(42, bb, 6, err)) << err;
  ASSERT_TRUE(c->loadSample(42, bc, 3, err)) << err;
  int differing = 0;
  for (int64_t j = 0; j < 16; ++j) {
    EXPECT_EQ(ba[0].getAsDouble(3 * 16 + j), bb[0].getAsDouble(6 * 16 + j));
    differing += ba[0].getAsDouble(3 * 16 + j) != bc[0].getAsDouble(3 * 16 + j);
  }
  EXPECT_EQ(ba[1].values<int64_t>()[3], bb[1].values<int64_t>()[6]);
  EXPECT_EQ(differing, 16);
  EXPECT_FALSE(a->loadSample(100, ba, 0, err));
  EXPECT_EQ(err, "sample 100 is out of range [0, 100)");
}

TEST(SyntheticData, FeaturesAreStandardNormal) {
  auto g = classifier(1, 8, 8, 3);
  setSynthetic(*g, 1, 256);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, "", diag);
  ASSERT_TRUE(src);
  auto batch = makeBatchTensors(*g);
  double sum = 0, sumSq = 0;
  std::string err;
  for (int64_t i = 0; i < 256; ++i) {
    ASSERT_TRUE(src->loadSample(i, batch, 0, err));
    for (int64_t j = 0; j < 64; ++j) {
      double v = batch[0].getAsDouble(j);
      sum += v;
      sumSq += v * v;
    }
  }
  double n = 256 * 64, mean = sum / n, var = sumSq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(var, 1.0, 0.05);
}

// The fast generator against the exact Box-Muller on the same two 24-bit
// uniforms, its moments and tail, and its AVX-512 copy against the baseline
// loop bit for bit.
TEST(SyntheticData, FastNormalsMatchBoxMullerAndBothLoops) {
  constexpr int64_t n = 1 << 18;
  uint64_t key = kernels::streamKey(7, 11);
  std::vector<float> wide(n), base(n);
  data::fillStandardNormals(wide.data(), n, key, 1000, /*allowWide=*/true);
  data::fillStandardNormals(base.data(), n, key, 1000, /*allowWide=*/false);
  double sum = 0, sumSq = 0, sumQuad = 0, maxAbs = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::memcmp(&wide[i], &base[i], sizeof(float)), 0) << "element " << i;
    ASSERT_EQ(wide[i], kernels::fastStandardNormal(key, 1000 + i)) << "element " << i;
    uint64_t bits = kernels::randomBits(7, 11, 1000 + i);
    double y = double(16777216 - int64_t(bits >> 40)) / 16777216.0;
    double u2 = double((bits >> 16) & 0xffffff) / 16777216.0;
    double exact = std::sqrt(-2.0 * std::log(y)) * std::cos(6.283185307179586 * u2);
    ASSERT_NEAR(wide[i], exact, 2e-6 * (1 + std::fabs(exact))) << "element " << i;
    sum += wide[i];
    sumSq += double(wide[i]) * wide[i];
    sumQuad += double(wide[i]) * wide[i] * wide[i] * wide[i];
    maxAbs = std::max(maxAbs, std::fabs(double(wide[i])));
  }
  double mean = sum / n, var = sumSq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.01);
  EXPECT_NEAR(sumQuad / n, 3.0, 0.1); // a normal's fourth moment
  EXPECT_GT(maxAbs, 4.0);             // the tails are there
  EXPECT_LE(maxAbs, 5.8);             // 24-bit uniforms bound them
}

// Trains a softmax regression on the synthetic samples; a linear teacher's
// labels are (nearly) perfectly separable, random labels would not be.
TEST(SyntheticData, TeacherLabelsAreLearnable) {
  const int64_t n = 512, f = 16, classes = 4;
  auto g = classifier(1, 4, 4, classes);
  setSynthetic(*g, 3, n);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, "", diag);
  ASSERT_TRUE(src);
  auto batch = makeBatchTensors(*g);
  std::vector<double> x(n * f);
  std::vector<int64_t> y(n);
  std::map<int64_t, int> histogram;
  std::string err;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(src->loadSample(i, batch, 0, err));
    for (int64_t j = 0; j < f; ++j)
      x[i * f + j] = batch[0].getAsDouble(j);
    y[i] = batch[1].values<int64_t>()[0];
    ASSERT_GE(y[i], 0);
    ASSERT_LT(y[i], classes);
    ++histogram[y[i]];
  }
  // Every class occurs, none dominates.
  ASSERT_EQ(histogram.size(), size_t(classes));
  for (auto [label, count] : histogram)
    EXPECT_GT(count, n / 10) << "class " << label;
  // Stable: the same sample gets the same label again.
  ASSERT_TRUE(src->loadSample(17, batch, 0, err));
  EXPECT_EQ(batch[1].values<int64_t>()[0], y[17]);

  std::vector<double> w(classes * f, 0.0);
  for (int epoch = 0; epoch < 300; ++epoch) {
    std::vector<double> grad(classes * f, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      double logits[classes], maxLogit = -1e300, total = 0;
      for (int64_t c = 0; c < classes; ++c) {
        logits[c] = 0;
        for (int64_t j = 0; j < f; ++j)
          logits[c] += w[c * f + j] * x[i * f + j];
        maxLogit = std::max(maxLogit, logits[c]);
      }
      for (double &l : logits)
        total += (l = std::exp(l - maxLogit));
      for (int64_t c = 0; c < classes; ++c)
        for (int64_t j = 0; j < f; ++j)
          grad[c * f + j] += (logits[c] / total - (c == y[i])) * x[i * f + j];
    }
    for (int64_t k = 0; k < classes * f; ++k)
      w[k] -= 0.5 * grad[k] / n;
  }
  int correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    double bestLogit = -1e300;
    for (int64_t c = 0; c < classes; ++c) {
      double l = 0;
      for (int64_t j = 0; j < f; ++j)
        l += w[c * f + j] * x[i * f + j];
      if (l > bestLogit) {
        bestLogit = l;
        best = c;
      }
    }
    correct += best == y[i];
  }
  EXPECT_GT(correct, n * 9 / 10);
}

// Wide inputs go through the hashed sketch; the labels still use every class.
TEST(SyntheticData, WideInputsGiveEveryClass) {
  auto g = classifier(1, 28, 28, 10);
  setSynthetic(*g, 0, 400);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, "", diag);
  ASSERT_TRUE(src);
  auto batch = makeBatchTensors(*g);
  std::map<int64_t, int> histogram;
  std::string err;
  for (int64_t i = 0; i < 400; ++i) {
    ASSERT_TRUE(src->loadSample(i, batch, 0, err));
    ++histogram[batch[1].values<int64_t>()[0]];
  }
  ASSERT_EQ(histogram.size(), 10u);
  for (auto [label, count] : histogram)
    EXPECT_GT(count, 10) << "class " << label;
}

// An mse_loss target is a fixed linear map of the features: exact least
// squares over the samples leaves no residual.
TEST(SyntheticData, RegressionTargetIsLinearInTheFeatures) {
  const int64_t n = 64, f = 3;
  auto g = regression(4, f, 2);
  setSynthetic(*g, 11, n);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, "", diag);
  ASSERT_TRUE(src);
  auto batch = makeBatchTensors(*g);
  std::string err;
  // Normal equations (X^T X) a = X^T y for output 0.
  double xtx[f][f] = {}, xty[f] = {};
  std::vector<std::pair<std::vector<double>, double>> samples;
  double ySq = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(src->loadSample(i, batch, 1, err));
    std::vector<double> xi(f);
    for (int64_t j = 0; j < f; ++j)
      xi[j] = batch[0].getAsDouble(1 * f + j);
    double yi = batch[1].getAsDouble(1 * 2 + 0);
    ySq += yi * yi;
    for (int64_t a = 0; a < f; ++a) {
      xty[a] += xi[a] * yi;
      for (int64_t b = 0; b < f; ++b)
        xtx[a][b] += xi[a] * xi[b];
    }
    samples.push_back({xi, yi});
  }
  EXPECT_GT(ySq / n, 0.05);       // a real signal, not all zeros
  for (int64_t p = 0; p < f; ++p) // Gaussian elimination (X^T X is positive definite)
    for (int64_t r = p + 1; r < f; ++r) {
      double m = xtx[r][p] / xtx[p][p];
      for (int64_t c = p; c < f; ++c)
        xtx[r][c] -= m * xtx[p][c];
      xty[r] -= m * xty[p];
    }
  double coef[f];
  for (int64_t r = f - 1; r >= 0; --r) {
    double s = xty[r];
    for (int64_t c = r + 1; c < f; ++c)
      s -= xtx[r][c] * coef[c];
    coef[r] = s / xtx[r][r];
  }
  for (auto &[xi, yi] : samples) {
    double pred = 0;
    for (int64_t j = 0; j < f; ++j)
      pred += coef[j] * xi[j];
    EXPECT_NEAR(pred, yi, 1e-5);
  }
}

TEST(SyntheticData, EmbeddingIndicesStayInTheTable) {
  auto g = tokenModel(2, 5, 7, 3);
  setSynthetic(*g, 0, 50);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, "", diag);
  ASSERT_TRUE(src) << firstError(diag);
  auto batch = makeBatchTensors(*g);
  std::set<int64_t> seenTokens, seenLabels;
  std::string err;
  for (int64_t i = 0; i < 50; ++i) {
    ASSERT_TRUE(src->loadSample(i, batch, 1, err));
    for (int64_t j = 0; j < 5; ++j)
      seenTokens.insert(batch[0].values<int64_t>()[5 + j]);
    seenLabels.insert(batch[1].values<int64_t>()[1]);
  }
  EXPECT_EQ(seenTokens, (std::set<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(seenLabels, (std::set<int64_t>{0, 1, 2}));
}

TEST(SyntheticData, DefaultsWithoutMetaAndRejectsBadSize) {
  auto g = classifier(4, 2, 2, 3);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, "", diag);
  ASSERT_TRUE(src);
  EXPECT_EQ(src->numSamples(), 1024);
  setSynthetic(*g, 0, 0);
  EXPECT_FALSE(createDataSource(*g, "", diag));
  EXPECT_EQ(firstError(diag), "error: synthetic data size must be positive, got 0");
  diag.clear();
  g->meta()["train.data"] = Attribute("parquet");
  EXPECT_FALSE(createDataSource(*g, "", diag));
  EXPECT_EQ(firstError(diag), "error: unknown data source 'parquet'; expected synthetic, idx, npy, "
                              "csv, tokens or image_folder");
}

// --- Batcher -----------------------------------------------------------------

TEST(Batcher, ShuffledEpochIsAPermutationAndKeepsThePartialBatch) {
  TempDir dir;
  auto g = classifier(3, 2, 2, 4);
  writeIndexedNpy(dir, *g, 10, 4);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src) << firstError(diag);
  Batcher batcher(*src, {3, /*shuffle=*/true, /*seed=*/5, /*dropLast=*/false});
  EXPECT_EQ(batcher.batchesPerEpoch(), 4);
  auto batch = makeBatchTensors(*g);
  std::string err;
  std::vector<int64_t> epoch0, epoch1;
  for (int b = 0; b < 8; ++b) {
    EXPECT_EQ(batcher.epoch(), b / 4);
    EXPECT_EQ(batcher.batchInEpoch(), b % 4);
    int64_t rows;
    ASSERT_TRUE(batcher.next(batch, rows, err)) << err;
    EXPECT_EQ(rows, b % 4 == 3 ? 1 : 3);
    std::vector<int64_t> ids = rowsOf(batch[0], rows);
    (b < 4 ? epoch0 : epoch1).insert((b < 4 ? epoch0 : epoch1).end(), ids.begin(), ids.end());
    for (int64_t r = 0; r < rows; ++r) // labels travel with their images
      EXPECT_EQ(batch[1].values<int64_t>()[r], ids[r] % 4);
    if (rows == 1) { // the rows past a partial batch are zero
      EXPECT_EQ(batch[0].getAsDouble(4), 0.0);
      EXPECT_EQ(batch[1].values<int64_t>()[2], 0);
    }
  }
  std::vector<int64_t> sorted0 = epoch0, sorted1 = epoch1;
  std::sort(sorted0.begin(), sorted0.end());
  std::sort(sorted1.begin(), sorted1.end());
  std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(sorted0, all);
  EXPECT_EQ(sorted1, all);
  EXPECT_NE(epoch0, all);    // shuffled
  EXPECT_NE(epoch0, epoch1); // a new order each epoch
  EXPECT_EQ(batcher.step(), 8);
}

TEST(Batcher, DropLastAndUnshuffledOrder) {
  TempDir dir;
  auto g = classifier(3, 2, 2, 4);
  writeIndexedNpy(dir, *g, 10, 4);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src);
  Batcher batcher(*src, {3, /*shuffle=*/false, 0, /*dropLast=*/true});
  EXPECT_EQ(batcher.batchesPerEpoch(), 3);
  auto batch = makeBatchTensors(*g);
  std::string err;
  std::vector<int64_t> seen;
  for (int b = 0; b < 4; ++b) {
    int64_t rows;
    ASSERT_TRUE(batcher.next(batch, rows, err));
    EXPECT_EQ(rows, 3);
    for (int64_t id : rowsOf(batch[0], rows))
      seen.push_back(id);
  }
  // Sample 9 never comes: the epoch ends after 9 samples and restarts at 0.
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2}));
  EXPECT_EQ(batcher.epoch(), 1);
}

// Data-parallel shards (issue 21): at every step rank 0's rows followed by
// rank 1's are the rows one process with the global batch gets, shuffled or
// not, across epochs, and after a resume.
TEST(Batcher, RanksSplitEachGlobalBatchInRankOrder) {
  TempDir dir;
  auto g = classifier(4, 2, 2, 4);
  writeIndexedNpy(dir, *g, 22, 4);
  auto global = classifier(8, 2, 2, 4);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src) << firstError(diag);
  for (bool shuffle : {false, true}) {
    SCOPED_TRACE(shuffle ? "shuffled" : "in order");
    Batcher whole(*src, {8, shuffle, 3, true});
    Batcher rank0(*src, {4, shuffle, 3, true, /*ranks=*/2, /*rank=*/0});
    Batcher rank1(*src, {4, shuffle, 3, true, 2, 1});
    EXPECT_EQ(rank0.batchesPerEpoch(), whole.batchesPerEpoch());
    EXPECT_EQ(whole.batchesPerEpoch(), 2); // 22 samples, global batch 8
    auto big = makeBatchTensors(*global), small = makeBatchTensors(*g);
    std::string err;
    for (int step = 0; step < 5; ++step) {
      if (step == 3) { // resume mid-epoch
        for (Batcher *b : {&whole, &rank0, &rank1})
          b->skipTo(3);
      }
      int64_t rows;
      ASSERT_TRUE(whole.next(big, rows, err)) << err;
      std::vector<int64_t> want = rowsOf(big[0], rows), got;
      for (Batcher *b : {&rank0, &rank1}) {
        ASSERT_TRUE(b->next(small, rows, err)) << err;
        EXPECT_EQ(rows, 4);
        for (int64_t id : rowsOf(small[0], rows))
          got.push_back(id);
      }
      EXPECT_EQ(got, want) << "step " << step;
    }
  }
  // Too few samples for one global batch names the ranks.
  Batcher tooBig(*src, {8, false, 0, true, /*ranks=*/3, /*rank=*/2});
  auto batch = makeBatchTensors(*classifier(8, 2, 2, 4));
  int64_t rows;
  std::string err;
  EXPECT_FALSE(tooBig.next(batch, rows, err));
  EXPECT_EQ(err, "the data has 22 samples, fewer than one batch of 24 (3 ranks x 8); use a "
                 "smaller batch or drop_last: false");
}

TEST(Batcher, SeedDecidesTheOrderAndSkipToResumes) {
  TempDir dir;
  auto g = classifier(4, 2, 2, 4);
  writeIndexedNpy(dir, *g, 22, 4);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src);
  auto run = [&](uint64_t seed, int64_t from, int64_t count) {
    Batcher b(*src, {4, true, seed, true});
    b.skipTo(from);
    auto batch = makeBatchTensors(*g);
    std::vector<int64_t> ids;
    std::string err;
    for (int64_t i = 0; i < count; ++i) {
      int64_t rows;
      EXPECT_TRUE(b.next(batch, rows, err)) << err;
      for (int64_t id : rowsOf(batch[0], rows))
        ids.push_back(id);
    }
    return ids;
  };
  std::vector<int64_t> full = run(9, 0, 12); // 5 batches per epoch: crosses 2 epochs
  EXPECT_EQ(run(9, 0, 12), full);
  EXPECT_NE(run(10, 0, 12), full);
  std::vector<int64_t> resumed = run(9, 7, 5);
  EXPECT_EQ(resumed, std::vector<int64_t>(full.begin() + 7 * 4, full.end()));

  Batcher b(*src, {4, true, 9, true});
  auto batch = makeBatchTensors(*g);
  int64_t rows;
  std::string err;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(b.next(batch, rows, err));
  b.reset();
  ASSERT_TRUE(b.next(batch, rows, err));
  EXPECT_EQ(rowsOf(batch[0], rows), std::vector<int64_t>(full.begin(), full.begin() + 4));
}

// The prefetcher hands out the batcher's batches in its order, whether the
// caller announces the next one or not, and passes a failure on.
TEST(Batcher, PrefetcherKeepsTheOrderAndPassesFailuresOn) {
  TempDir dir;
  auto g = classifier(4, 2, 2, 4);
  writeIndexedNpy(dir, *g, 22, 4);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src);
  auto ids = [&](int workers) {
    Batcher b(*src, {4, true, 9, true});
    std::vector<int64_t> out;
    std::string err;
    BatchPrefetcher prefetcher(b, *g, workers);
    EXPECT_EQ(prefetcher.workers(), workers);
    for (int i = 0; i < 12; ++i) {
      llvm::MutableArrayRef<HostTensor> batch;
      int64_t rows = 0;
      // Every third call says no batch follows: the next call asks anew.
      EXPECT_TRUE(prefetcher.next(batch, rows, /*another=*/i % 3 != 2, err)) << err;
      for (int64_t id : rowsOf(batch[0], rows))
        out.push_back(id);
    }
    return out;
  };
  Batcher plain(*src, {4, true, 9, true});
  auto batch = makeBatchTensors(*g);
  std::vector<int64_t> expected;
  std::string err;
  for (int i = 0; i < 12; ++i) {
    int64_t rows;
    ASSERT_TRUE(plain.next(batch, rows, err)) << err;
    for (int64_t id : rowsOf(batch[0], rows))
      expected.push_back(id);
  }
  EXPECT_EQ(ids(1), expected);
  EXPECT_EQ(ids(3), expected); // rows shared by three workers
  EXPECT_EQ(ids(0), expected);

  // Three samples make no batch of four: the worker's error comes back.
  auto tiny = classifier(4, 2, 2, 4);
  setSynthetic(*tiny, 0, 3);
  auto few = createDataSource(*tiny, "", diag);
  ASSERT_TRUE(few);
  Batcher b(*few, {4, true, 0, true});
  BatchPrefetcher prefetcher(b, *tiny, /*workers=*/2);
  llvm::MutableArrayRef<HostTensor> out;
  int64_t rows = 0;
  EXPECT_FALSE(prefetcher.next(out, rows, true, err));
  EXPECT_NE(err.find("fewer than one batch"), std::string::npos) << err;
}

/// Loads through `base`; a load on the prefetch worker (the thread at idle
/// priority) stops before row `stallAt` of its batches until released: a
/// worker that lost its core mid-batch.
class StallingSource final : public DataSource {
public:
  StallingSource(DataSource &base, int64_t stallAt) : base_(base), stallAt_(stallAt) {}
  llvm::StringRef kind() const override { return base_.kind(); }
  int64_t numSamples() const override { return base_.numSamples(); }
  bool concurrentLoads() const override { return true; }
  bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                  std::string &err) override {
    if (sched_getscheduler(0) == SCHED_IDLE) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (row == stallAt_ && !released_) {
        stalled_ = true;
        changed_.notify_all();
        changed_.wait(lock, [this] { return released_; });
      }
    }
    return base_.loadSample(index, batch, row, err);
  }
  void waitUntilStalled() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return stalled_; });
  }

  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

private:
  DataSource &base_;
  int64_t stallAt_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stalled_ = false, released_ = false;
};

/// 40 indexed npy samples in batches of 4 (seed 5), and the batches a plain
/// Batcher hands out, to check a prefetcher's against one by one.
struct StallTestData {
  StallTestData() : g(classifier(4, 2, 2, 4)) {
    writeIndexedNpy(dir, *g, 40, 4);
    base = createDataSource(*g, dir.path(), diag);
    if (base) {
      plain = std::make_unique<Batcher>(*base, BatchOptions{4, true, 5, true});
      expected = makeBatchTensors(*g);
    }
  }
  /// The next batch must be the plain batcher's next.
  void expectNext(llvm::ArrayRef<HostTensor> got, int64_t rows) {
    int64_t want = 0;
    std::string err;
    ASSERT_TRUE(plain->next(expected, want, err)) << err;
    EXPECT_EQ(rows, want);
    EXPECT_EQ(rowsOf(got[0], rows), rowsOf(expected[0], want));
    EXPECT_EQ(std::memcmp(got[1].data(), expected[1].data(), got[1].sizeInBytes()), 0);
  }
  TempDir dir;
  std::unique_ptr<Graph> g;
  DiagnosticEngine diag;
  std::unique_ptr<DataSource> base;
  std::unique_ptr<Batcher> plain;
  llvm::SmallVector<HostTensor, 4> expected;
};

// A worker stuck mid-batch never holds the step up: the caller copies the
// rows it finished, loads the rest, and the batches are the batcher's.
TEST(Batcher, PrefetcherTakesOverABatchItsWorkerStalledOn) {
  StallTestData data;
  ASSERT_TRUE(data.base) << firstError(data.diag);
  auto &g = data.g;
  auto &base = data.base;

  StallingSource stalling(*base, /*stallAt=*/2);
  Batcher b(stalling, {4, true, 5, true});
  {
    BatchPrefetcher prefetcher(b, *g, /*workers=*/1);
    ASSERT_TRUE(prefetcher.background());
    stalling.waitUntilStalled(); // rows 0 and 1 of batch 0 are made
    llvm::MutableArrayRef<HostTensor> batch;
    int64_t rows = 0;
    std::string err;
    ASSERT_TRUE(prefetcher.next(batch, rows, /*another=*/true, err)) << err;
    data.expectNext(batch, rows);
    EXPECT_EQ(prefetcher.counts().takenOver, 1);
    EXPECT_EQ(prefetcher.counts().rowsCopied, 2);
    // Still stuck: the batch posted after it has not started either.
    ASSERT_TRUE(prefetcher.next(batch, rows, /*another=*/true, err)) << err;
    data.expectNext(batch, rows);
    EXPECT_EQ(prefetcher.counts().byCaller, 1);
    stalling.release();
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(prefetcher.next(batch, rows, /*another=*/i < 5, err)) << err;
      data.expectNext(batch, rows);
    }
    PrefetchCounts c = prefetcher.counts();
    EXPECT_EQ(c.fromWorker + c.takenOver + c.byCaller, 8);
  }
}

// With several workers, one stuck on a row holds up neither the caller nor
// the others' rows: the caller copies the three rows they made, and the
// batch after waits until the stuck worker has left (it writes that slot).
TEST(Batcher, PrefetcherWorkersShareRowsAndOneStallingHoldsNobodyUp) {
  StallTestData data;
  ASSERT_TRUE(data.base) << firstError(data.diag);
  auto &g = data.g;
  auto &base = data.base;
  StallingSource stalling(*base, /*stallAt=*/2);
  Batcher b(stalling, {4, true, 5, true});
  BatchPrefetcher prefetcher(b, *g, /*workers=*/3);
  ASSERT_EQ(prefetcher.workers(), 3);
  stalling.waitUntilStalled();
  while (prefetcher.rowsReady() < 3) // rows 0, 1 and 3 of batch 0
    std::this_thread::yield();
  llvm::MutableArrayRef<HostTensor> batch;
  int64_t rows = 0;
  std::string err;
  ASSERT_TRUE(prefetcher.next(batch, rows, /*another=*/true, err)) << err;
  data.expectNext(batch, rows);
  EXPECT_EQ(prefetcher.counts().takenOver, 1);
  EXPECT_EQ(prefetcher.counts().rowsCopied, 3);
  ASSERT_TRUE(prefetcher.next(batch, rows, /*another=*/true, err)) << err;
  data.expectNext(batch, rows);
  EXPECT_EQ(prefetcher.counts().byCaller, 1);
  stalling.release();
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(prefetcher.next(batch, rows, /*another=*/i < 7, err)) << err;
    data.expectNext(batch, rows);
  }
  PrefetchCounts c = prefetcher.counts();
  EXPECT_EQ(c.fromWorker + c.takenOver + c.byCaller, 10);
}

/// Rows that take a random 0-200 us to load, each filled from its sample
/// index: batches made by racing workers and callers can be checked.
class SlowRowsSource final : public DataSource {
public:
  llvm::StringRef kind() const override { return "slow"; }
  int64_t numSamples() const override { return 64; }
  bool concurrentLoads() const override { return true; }
  bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                  std::string &err) override {
    thread_local std::mt19937 rng(std::hash<std::thread::id>()(std::this_thread::get_id()));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
    auto *x = static_cast<float *>(batch[0].rowData(row));
    for (int64_t i = 0; i < batch[0].rowElements(); ++i)
      x[i] = float(index * 1000 + i);
    return true;
  }
};

// Workers that finish rows in any order, and a caller that asks at random
// moments (taking batches over part made, or not started) and sometimes
// says no batch follows: every batch is the batcher's, for 1 to 4 workers.
// (Under ThreadSanitizer too: no race, while one planted by letting a batch
// start before the workers left a dropped one is reported.)
TEST(Batcher, PrefetcherWorkersRacingTheCallerGiveTheBatchersBatches) {
  Graph g("slow");
  g.addInput("x", TensorType(DType::F32, {8, 16}));
  SlowRowsSource src;
  for (int round = 0; round < 16; ++round) {
    std::mt19937 rng(round);
    BatchOptions opts;
    opts.batchSize = 8;
    opts.seed = round;
    opts.dropLast = round % 2 == 0; // 64 = 8 x 8: kept or not, no partial batch
    Batcher reference(src, opts), b(src, opts);
    auto want = makeBatchTensors(g);
    BatchPrefetcher prefetcher(b, g, 1 + round % 4);
    std::string err;
    for (int i = 0; i < 12; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1500));
      llvm::MutableArrayRef<HostTensor> got;
      int64_t rows = 0, wantRows = 0;
      ASSERT_TRUE(prefetcher.next(got, rows, /*another=*/rng() % 5 != 0, err)) << err;
      ASSERT_TRUE(reference.next(want, wantRows, err)) << err;
      ASSERT_EQ(rows, wantRows);
      ASSERT_EQ(std::memcmp(got[0].data(), want[0].data(), got[0].sizeInBytes()), 0)
          << "round " << round << ", batch " << i;
    }
  }
}

TEST(Batcher, TooFewSamplesForOneBatch) {
  auto g = classifier(8, 2, 2, 4);
  setSynthetic(*g, 0, 5);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, "", diag);
  ASSERT_TRUE(src);
  auto batch = makeBatchTensors(*g);
  int64_t rows;
  std::string err;
  Batcher drop(*src, {8, true, 0, true});
  EXPECT_FALSE(drop.next(batch, rows, err));
  EXPECT_EQ(err, "the data has 5 samples, fewer than one batch of 8; use a smaller batch or "
                 "drop_last: false");
  Batcher keep(*src, {8, true, 0, false});
  ASSERT_TRUE(keep.next(batch, rows, err)) << err;
  EXPECT_EQ(rows, 5);
}

TEST(Batcher, OptionsFromMeta) {
  auto g = classifier(16, 2, 2, 4);
  BatchOptions d = batchOptionsFromMeta(*g);
  EXPECT_EQ(d.batchSize, 16);
  EXPECT_TRUE(d.shuffle);
  EXPECT_TRUE(d.dropLast);
  EXPECT_EQ(d.seed, 0u);
  g->meta()["train.shuffle"] = Attribute(false);
  g->meta()["train.drop_last"] = Attribute(false);
  g->meta()["train.seed"] = Attribute(int64_t(42));
  BatchOptions o = batchOptionsFromMeta(*g);
  EXPECT_FALSE(o.shuffle);
  EXPECT_FALSE(o.dropLast);
  EXPECT_EQ(o.seed, 42u);
}

// --- npy ---------------------------------------------------------------------

TEST(NpyData, ConvertsDTypesAndAcceptsAnyShapeWithTheSampleSize) {
  TempDir dir;
  auto g = classifier(2, 2, 2, 3);
  double x[] = {0.5, 1.5, 2.5, 3.5, -1, -2, -3, -4};
  std::string err;
  ASSERT_TRUE(writeNpy(dir.file("x.npy"), DType::F64, {2, 2, 2}, x, err)) << err;
  uint8_t y[] = {2, 0};
  ASSERT_TRUE(writeNpyUint8(dir.file("y.npy"), {2}, y, err)) << err;
  g->meta()["train.data"] = Attribute("npy");
  g->meta()["train.data.image"] = Attribute("x.npy");
  g->meta()["train.data.label"] = Attribute(dir.file("y.npy")); // absolute path
  DiagnosticEngine diag;
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src) << firstError(diag);
  EXPECT_EQ(src->kind(), "npy");
  EXPECT_EQ(src->numSamples(), 2);
  auto batch = makeBatchTensors(*g);
  ASSERT_TRUE(src->loadSample(1, batch, 0, err));
  ASSERT_TRUE(src->loadSample(0, batch, 1, err));
  EXPECT_EQ(batch[0].values<float>()[0], -1.0f);
  EXPECT_EQ(batch[0].values<float>()[7], 3.5f);
  EXPECT_EQ(batch[1].values<int64_t>()[0], 0);
  EXPECT_EQ(batch[1].values<int64_t>()[1], 2);
}

TEST(NpyData, U8IsNotScaled) {
  TempDir dir;
  auto g = classifier(1, 1, 2, 3);
  std::string err;
  uint8_t x[] = {255, 7};
  ASSERT_TRUE(writeNpyUint8(dir.file("x.npy"), {1, 2}, x, err));
  writeI64Npy(dir.file("y.npy"), {1});
  g->meta()["train.data"] = Attribute("npy");
  g->meta()["train.data.image"] = Attribute("x.npy");
  g->meta()["train.data.label"] = Attribute("y.npy");
  DiagnosticEngine diag;
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src) << firstError(diag);
  auto batch = makeBatchTensors(*g);
  ASSERT_TRUE(src->loadSample(0, batch, 0, err));
  EXPECT_EQ(batch[0].values<float>()[0], 255.0f);
  EXPECT_EQ(batch[0].values<float>()[1], 7.0f);
}

struct NpyErrorCase : ::testing::Test {
  TempDir dir;
  std::unique_ptr<Graph> g = classifier(4, 28, 28, 10);
  DiagnosticEngine diag;
  void useFiles(llvm::StringRef image, llvm::StringRef label) {
    g->meta()["train.data"] = Attribute("npy");
    g->meta()["train.data.image"] = Attribute(image.str());
    g->meta()["train.data.label"] = Attribute(label.str());
  }
  std::string error() {
    EXPECT_FALSE(createDataSource(*g, dir.path(), diag));
    return firstError(diag);
  }
};

TEST_F(NpyErrorCase, WrongElementCount) {
  writeF32Npy(dir.file("x.npy"), {3, 700}, std::vector<float>(2100));
  writeI64Npy(dir.file("y.npy"), {1, 2, 3});
  useFiles("x.npy", "y.npy");
  EXPECT_EQ(error(), "error: data file '" + dir.file("x.npy") +
                         "': expected 784 values per sample for input 'image' [B,1,28,28], "
                         "found 700");
}

TEST_F(NpyErrorCase, MismatchedSampleCounts) {
  writeF32Npy(dir.file("x.npy"), {3, 784}, std::vector<float>(3 * 784));
  writeI64Npy(dir.file("y.npy"), {1, 2});
  useFiles("x.npy", "y.npy");
  EXPECT_EQ(error(), "error: data file '" + dir.file("y.npy") + "': has 2 samples but '" +
                         dir.file("x.npy") + "' has 3");
}

TEST_F(NpyErrorCase, MissingFile) {
  writeI64Npy(dir.file("y.npy"), {1, 2});
  useFiles("nope.npy", "y.npy");
  std::string msg = error();
  EXPECT_EQ(msg.rfind("error: data file '" + dir.file("nope.npy") + "': ", 0), 0u) << msg;
}

TEST_F(NpyErrorCase, TruncatedFile) {
  writeF32Npy(dir.file("x.npy"), {3, 784}, std::vector<float>(3 * 784));
  writeI64Npy(dir.file("y.npy"), {1, 2, 3});
  std::string bytes;
  {
    std::ifstream in(dir.file("x.npy"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  dir.write("x.npy", bytes.substr(0, 1000));
  useFiles("x.npy", "y.npy");
  std::string msg = error();
  EXPECT_EQ(msg.rfind("error: data file '" + dir.file("x.npy") + "': ", 0), 0u) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST_F(NpyErrorCase, FloatLabelsAndOutOfRangeLabels) {
  writeF32Npy(dir.file("x.npy"), {2, 784}, std::vector<float>(2 * 784));
  writeF32Npy(dir.file("yf.npy"), {2}, {1.0f, 2.0f});
  writeI64Npy(dir.file("y.npy"), {3, 10});
  useFiles("x.npy", "yf.npy");
  EXPECT_EQ(error(), "error: data file '" + dir.file("yf.npy") +
                         "': input 'label' [B] is i64 but the file holds f32 values; store "
                         "integers (e.g. int64)");
  diag.clear();
  useFiles("x.npy", "y.npy");
  EXPECT_EQ(error(), "error: data file '" + dir.file("y.npy") +
                         "': sample 1: class label 10 for input 'label' [B] is outside [0, 10)");
}

TEST_F(NpyErrorCase, NoFileForAnInput) {
  g->meta()["train.data"] = Attribute("npy");
  g->meta()["train.data.image"] = Attribute("x.npy");
  EXPECT_EQ(error(), "error: npy data has no file for input 'label'");
}

// --- CSV ---------------------------------------------------------------------

TEST(CsvData, ReadsFeaturesAndLabelColumn) {
  TempDir dir;
  auto g = classifier(2, 1, 3, 4);
  dir.write("d.csv", "a,b,c,label\n1, 2, 3, 0\r\n\n4,5.5,-6,3\n");
  g->meta()["train.data"] = Attribute("csv");
  g->meta()["train.data.path"] = Attribute("d.csv");
  g->meta()["train.data.header"] = Attribute(true);
  DiagnosticEngine diag;
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src) << firstError(diag);
  EXPECT_EQ(src->kind(), "csv");
  ASSERT_EQ(src->numSamples(), 2);
  auto batch = makeBatchTensors(*g);
  std::string err;
  ASSERT_TRUE(src->loadSample(1, batch, 0, err));
  EXPECT_EQ(batch[0].values<float>()[1], 5.5f);
  EXPECT_EQ(batch[0].values<float>()[2], -6.0f);
  EXPECT_EQ(batch[1].values<int64_t>()[0], 3);

  // The label first instead.
  dir.write("e.csv", "2,9,8,7\n");
  g->meta()["train.data.path"] = Attribute("e.csv");
  g->meta()["train.data.header"] = Attribute(false);
  g->meta()["train.data.label_column"] = Attribute(int64_t(0));
  src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src) << firstError(diag);
  ASSERT_TRUE(src->loadSample(0, batch, 1, err));
  EXPECT_EQ(batch[0].values<float>()[3], 9.0f);
  EXPECT_EQ(batch[0].values<float>()[5], 7.0f);
  EXPECT_EQ(batch[1].values<int64_t>()[1], 2);
}

TEST(CsvData, RegressionTarget) {
  TempDir dir;
  auto g = regression(2, 2, 1);
  dir.write("r.csv", "1,2,0.25\n");
  g->meta()["train.data"] = Attribute("csv");
  g->meta()["train.data.path"] = Attribute("r.csv");
  DiagnosticEngine diag;
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src) << firstError(diag);
  auto batch = makeBatchTensors(*g);
  std::string err;
  ASSERT_TRUE(src->loadSample(0, batch, 0, err));
  EXPECT_EQ(batch[0].values<float>()[1], 2.0f);
  EXPECT_EQ(batch[1].values<float>()[0], 0.25f);
}

TEST(CsvData, BadFiles) {
  TempDir dir;
  auto g = classifier(2, 1, 3, 4);
  g->meta()["train.data"] = Attribute("csv");
  DiagnosticEngine diag;
  auto errorFor = [&](llvm::StringRef name, const std::string &contents) {
    if (!contents.empty())
      dir.write(name, contents);
    g->meta()["train.data.path"] = Attribute(name.str());
    diag.clear();
    EXPECT_FALSE(createDataSource(*g, dir.path(), diag));
    return firstError(diag);
  };
  std::string prefix = "error: data file '" + dir.file("bad.csv") + "': ";
  EXPECT_EQ(errorFor("bad.csv", "1,2,3,0\n1,2,0\n"),
            prefix + "line 2: expected 4 columns (3 values for input 'image' [B,1,1,3] and a "
                     "label), found 3");
  EXPECT_EQ(errorFor("bad.csv", "1,x,3,0\n"), prefix + "line 1, column 2: 'x' is not a number");
  EXPECT_EQ(errorFor("bad.csv", "1,2,3,1.5\n"),
            prefix + "line 1: label '1.5' for input 'label' [B] is not an integer");
  EXPECT_EQ(errorFor("bad.csv", "1,2,3,4\n"),
            prefix + "sample 0: class label 4 for input 'label' [B] is outside [0, 4)");
  EXPECT_EQ(errorFor("bad.csv", "\n"), prefix + "holds no samples");
  std::string missing = errorFor("missing.csv", "");
  EXPECT_EQ(missing.rfind("error: data file '" + dir.file("missing.csv") + "': cannot open: ", 0),
            0u)
      << missing;
}

// NaN or inf in a file's data is found when the file is opened, with the
// line, not later as a diverged loss blamed on the learning rate (O0) or as
// every step skipped by the loss scaler (O1-O3).
TEST(CsvData, NonFiniteValuesAreAnErrorOrSkipped) {
  TempDir dir;
  auto g = classifier(2, 1, 3, 4);
  g->meta()["train.data"] = Attribute("csv");
  g->meta()["train.data.path"] = Attribute("n.csv");
  g->meta()["train.data.header"] = Attribute(true);
  dir.write("n.csv", "a,b,c,label\n1,2,3,0\n4,nan,6,1\n7,8,-inf,2\n9,10,11,3\n");
  DiagnosticEngine diag;
  EXPECT_FALSE(createDataSource(*g, dir.path(), diag));
  EXPECT_EQ(firstError(diag),
            "error: data file '" + dir.file("n.csv") +
                "': line 3: value 1 of input 'image' [B,1,1,3] is nan; fix the data, or set "
                "'non_finite_data: skip' in 'train' to leave such samples out");

  g->meta()["train.non_finite_data"] = Attribute("skip");
  diag.clear();
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src) << firstError(diag);
  ASSERT_EQ(src->numSamples(), 2);
  EXPECT_EQ(src->skippedSamples(), 2);
  ASSERT_EQ(diag.diagnostics().size(), 1u);
  EXPECT_NE(diag.diagnostics()[0].message.find("skipped 2 of 4 samples holding NaN or inf"),
            std::string::npos)
      << diag.diagnostics()[0].message;
  auto batch = makeBatchTensors(*g);
  std::string err;
  ASSERT_TRUE(src->loadSample(1, batch, 0, err)) << err;
  EXPECT_EQ(batch[0].values<float>()[0], 9.0f);
  EXPECT_EQ(batch[1].values<int64_t>()[0], 3);

  dir.write("n.csv", "a,b,c,label\n1,nan,3,0\n");
  diag.clear();
  EXPECT_FALSE(createDataSource(*g, dir.path(), diag));
  EXPECT_NE(firstError(diag).find("every sample holds NaN or inf"), std::string::npos)
      << firstError(diag);
}

// --- IDX ---------------------------------------------------------------------

struct IdxCase : ::testing::Test {
  TempDir dir;
  std::unique_ptr<Graph> g = classifier(2, 2, 3, 10);
  DiagnosticEngine diag;
  void useFiles() {
    g->meta()["train.data"] = Attribute("idx");
    g->meta()["train.data.images"] = Attribute("images.idx");
    g->meta()["train.data.labels"] = Attribute("labels.idx");
  }
  std::string error() {
    useFiles();
    EXPECT_FALSE(createDataSource(*g, dir.path(), diag));
    return firstError(diag);
  }
  std::string imagesPrefix() { return "error: data file '" + dir.file("images.idx") + "': "; }
};

TEST_F(IdxCase, ReadsScaledImagesAndLabels) {
  std::string images = idxImages(3, 2, 3);
  images[16 + 6] = char(255); // sample 1, first pixel
  images[16 + 7] = char(51);
  dir.write("images.idx", images);
  dir.write("labels.idx", idxLabels({7, 9, 0}));
  useFiles();
  auto src = createDataSource(*g, dir.path(), diag);
  ASSERT_TRUE(src) << firstError(diag);
  EXPECT_EQ(src->kind(), "idx");
  EXPECT_EQ(src->numSamples(), 3);
  auto batch = makeBatchTensors(*g);
  std::string err;
  ASSERT_TRUE(src->loadSample(1, batch, 1, err));
  EXPECT_EQ(batch[0].values<float>()[6], 1.0f);
  EXPECT_EQ(batch[0].values<float>()[7], 0.2f);
  EXPECT_EQ(batch[0].values<float>()[8], float(8.0 / 255.0));
  EXPECT_EQ(batch[1].values<int64_t>()[1], 9);
}

TEST_F(IdxCase, WrongMagic) {
  dir.write("images.idx", idxLabels({1, 2}));
  dir.write("labels.idx", idxLabels({1, 2}));
  EXPECT_EQ(error(), imagesPrefix() +
                         "wrong magic 0x00000801; expected 0x00000803 (IDX unsigned-byte images)");
}

TEST_F(IdxCase, Truncated) {
  std::string images = idxImages(2, 2, 3);
  images.resize(images.size() - 1);
  dir.write("images.idx", images);
  dir.write("labels.idx", idxLabels({1, 2}));
  EXPECT_EQ(error(), imagesPrefix() + "truncated: the header announces 12 bytes of data (file "
                                      "size 28), found a file of 27 bytes");
  diag.clear();
  dir.write("images.idx", images.substr(0, 10));
  EXPECT_EQ(error(), imagesPrefix() + "truncated: 10 bytes, shorter than its 16-byte header");
}

TEST_F(IdxCase, GzipIsNamed) {
  dir.write("images.idx", std::string("\x1f\x8b\x08\x00", 4));
  dir.write("labels.idx", idxLabels({1, 2}));
  EXPECT_EQ(error(), imagesPrefix() + "is gzip-compressed; decompress it first (gunzip)");
}

TEST_F(IdxCase, WrongImageSizeAndMismatchedCounts) {
  dir.write("images.idx", idxImages(2, 3, 3));
  dir.write("labels.idx", idxLabels({1, 2}));
  EXPECT_EQ(error(),
            imagesPrefix() + "expected 6 values per sample for input 'image' [B,1,2,3], found 9");
  diag.clear();
  dir.write("images.idx", idxImages(2, 2, 3));
  dir.write("labels.idx", idxLabels({1, 2, 3}));
  EXPECT_EQ(error(), "error: data file '" + dir.file("labels.idx") + "': has 3 samples but '" +
                         dir.file("images.idx") + "' has 2");
}

// With no samples the data-size bound did not stop sample dims whose
// product overflows int64 (tests/fuzz/corpus/idx/regress-*).
TEST_F(IdxCase, HugeDimsOfAnEmptyFile) {
  dir.write("images.idx", bigEndian32(0x803) + bigEndian32(0) + bigEndian32(0xffffffffu) +
                              bigEndian32(0xffffffffu));
  dir.write("labels.idx", idxLabels({}));
  EXPECT_EQ(error(), imagesPrefix() + "implausible dimensions in the header");
}

TEST_F(IdxCase, MissingFile) {
  dir.write("images.idx", idxImages(2, 2, 3));
  std::string msg = error();
  EXPECT_EQ(msg.rfind("error: data file '" + dir.file("labels.idx") + "': cannot open: ", 0), 0u)
      << msg;
}

// --- Optional inputs (predicting reads no labels) ---------------------------

// An input the run does not read may be missing from the data: an npy file,
// a CSV column, an idx labels file. Its rows stay zero; any other input
// missing is still an error, as is a CSV row of the other width.
TEST(OptionalInputs, NpyCsvAndIdxDataMayLackThem) {
  TempDir dir;
  auto g = classifier(2, 1, 4, 10);
  writeIndexedNpy(dir, *g, 3, 10);
  g->meta().erase("train.data.label");
  DiagnosticEngine diag;
  EXPECT_FALSE(createDataSource(*g, dir.path(), diag)) << "the label is needed by default";
  EXPECT_EQ(firstError(diag), "error: npy data has no file for input 'label'");
  const std::vector<std::string> label{"label"};
  diag.clear();
  auto src = createDataSource(*g, dir.path(), diag, "train.data", label);
  ASSERT_TRUE(src) << firstError(diag);
  ASSERT_EQ(src->numSamples(), 3);
  auto batch = makeBatchTensors(*g);
  batch[1].values<int64_t>()[1] = 5; // a stale value the source must clear
  std::string err;
  ASSERT_TRUE(src->loadSample(2, batch, 1, err)) << err;
  EXPECT_EQ(rowsOf(batch[0], 2)[1], 2);
  EXPECT_EQ(batch[1].values<int64_t>()[1], 0);
  diag.clear();
  g->meta().erase("train.data.image");
  EXPECT_FALSE(createDataSource(*g, dir.path(), diag, "train.data", label))
      << "the image is not optional";
  EXPECT_EQ(firstError(diag), "error: npy data has no file for input 'image'");

  // CSV: the first row says whether the label column is there.
  g->meta()["train.data"] = Attribute("csv");
  g->meta()["train.data.path"] = Attribute("x.csv");
  dir.write("x.csv", "1,2,3,4\n5,6,7,8\n");
  diag.clear();
  src = createDataSource(*g, dir.path(), diag, "train.data", label);
  ASSERT_TRUE(src) << firstError(diag);
  ASSERT_EQ(src->numSamples(), 2);
  ASSERT_TRUE(src->loadSample(1, batch, 0, err)) << err;
  EXPECT_EQ(batch[0].values<float>()[3], 8.0f);
  EXPECT_EQ(batch[1].values<int64_t>()[0], 0);
  dir.write("x.csv", "1,2,3,4\n5,6,7,8,1\n");
  diag.clear();
  EXPECT_FALSE(createDataSource(*g, dir.path(), diag, "train.data", label));
  EXPECT_EQ(firstError(diag), "error: data file '" + dir.file("x.csv") +
                                  "': line 2: expected 4 columns (4 values for input 'image' "
                                  "[B,1,1,4], as the first row), found 5");
  dir.write("x.csv", "1,2,3,4,9\n");
  diag.clear();
  src = createDataSource(*g, dir.path(), diag, "train.data", label);
  ASSERT_TRUE(src) << firstError(diag);
  ASSERT_TRUE(src->loadSample(0, batch, 0, err)) << err;
  EXPECT_EQ(batch[1].values<int64_t>()[0], 9) << "a label column present is read";
  dir.write("x.csv", "1,2,3,4\n");
  diag.clear();
  EXPECT_FALSE(createDataSource(*g, dir.path(), diag)) << "without the label optional";

  // idx: no labels file.
  auto image = classifier(2, 2, 3, 10);
  dir.write("images.idx", idxImages(2, 2, 3));
  image->meta()["train.data"] = Attribute("idx");
  image->meta()["train.data.images"] = Attribute("images.idx");
  diag.clear();
  src = createDataSource(*image, dir.path(), diag, "train.data", label);
  ASSERT_TRUE(src) << firstError(diag);
  EXPECT_EQ(src->numSamples(), 2);
  auto images = makeBatchTensors(*image);
  ASSERT_TRUE(src->loadSample(1, images, 0, err)) << err;
  EXPECT_EQ(images[0].values<float>()[0], float(6.0 / 255.0));
}

} // namespace
