//===- RefLossTest.cpp - Reference mse_loss, cross_entropy, binary_cross_entropy ===//
#include "KernelTestUtil.h"

#include <cmath>
#include <limits>

using namespace ampc;
using namespace ampc::testing;

namespace {

const DType kComputeDTypes[] = {DType::F32, DType::F16, DType::BF16};

// log_softmax([1, 2, 3]) = [1, 2, 3] - log(e + e^2 + e^3).
const double kLogP1 = -2.40760596444438, kLogP2 = -1.4076059644443801,
             kLogP3 = -0.40760596444438013;

KernelRun runPairwise(const std::string &op, DType t, const std::vector<double> &input,
                      const std::vector<double> &target) {
  int64_t n = input.size();
  return runKernel(op, {TensorType(t, {n}), TensorType(t, {n})}, {input, target});
}

KernelRun runCrossEntropy(DType t, int64_t rows, int64_t classes, const std::vector<double> &logits,
                          const std::vector<double> &labels, AttrMap attrs = {},
                          DType labelType = DType::I64) {
  return runKernel("cross_entropy", {TensorType(t, {rows, classes}), TensorType(labelType, {rows})},
                   {logits, labels}, std::move(attrs));
}

/// A mean over n terms accumulated in f32 may lose up to about n * 2^-24 of
/// relative accuracy; for half dtypes the final rounding dominates.
double meanTolerance(DType t, int64_t n) {
  return std::max(defaultTolerance(t), static_cast<double>(n) * std::ldexp(1.0, -24));
}

} // namespace

TEST(RefLossTest, MseHandComputed) {
  // ((1 - 1.5)^2 + 0 + (3 - 5)^2) / 3 = 4.25 / 3
  KernelRun run = runPairwise("mse_loss", DType::F64, {1, 2, 3}, {1.5, 2, 5});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(run.outputTypes[0].dims().empty()) << "losses are rank 0";
  EXPECT_EQ(run.outputs[0], std::vector<double>{1.4166666666666667});

  // The same in f16: f32 math, one rounding: 1.41666 = 1450.67 * 2^-10 ->
  // 1451 * 2^-10 = 1.4169921875 (0x3dab).
  KernelRun half = runPairwise("mse_loss", DType::F16, {1, 2, 3}, {1.5, 2, 5});
  ASSERT_TRUE(half.ok) << half.error;
  EXPECT_EQ(half.outputs[0][0], 1.4169921875);
}

TEST(RefLossTest, MseRandom) {
  const int64_t n = 256;
  std::vector<TensorType> types = {TensorType(DType::F32, {16, 16}),
                                   TensorType(DType::F32, {16, 16})};
  std::vector<std::vector<double>> values = {randomValues(n, 61, -3, 3),
                                             randomValues(n, 62, -3, 3)};
  for (DType t : kComputeDTypes)
    EXPECT_TRUE(matchesF64("mse_loss", types, values, {}, t, meanTolerance(t, n)));
  EXPECT_TRUE(halfEmulationExact("mse_loss", types, values, {}, DType::F16));
  EXPECT_TRUE(halfEmulationExact("mse_loss", types, values, {}, DType::BF16));
}

TEST(RefLossTest, BinaryCrossEntropyHandComputed) {
  // (-log 0.5 - log(1 - 0.9)) / 2
  KernelRun run = runPairwise("binary_cross_entropy", DType::F64, {0.5, 0.9}, {1, 0});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_NEAR(run.outputs[0][0], 1.4978661367769954, 1e-15);

  // Soft targets: -(0.25 log 0.5 + 0.75 log 0.5) = log 2.
  KernelRun soft = runPairwise("binary_cross_entropy", DType::F64, {0.5}, {0.25});
  ASSERT_TRUE(soft.ok) << soft.error;
  EXPECT_NEAR(soft.outputs[0][0], std::log(2.0), 1e-15);
}

TEST(RefLossTest, BinaryCrossEntropyClampsLogsAtMinus100) {
  // A confident wrong prediction: log 0 = -inf is clamped to -100, as PyTorch
  // does, so each term is 100 and the loss is finite.
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    KernelRun wrong = runPairwise("binary_cross_entropy", t, {0, 1}, {1, 0});
    ASSERT_TRUE(wrong.ok) << wrong.error;
    EXPECT_EQ(wrong.outputs[0][0], 100) << dtypeName(t).str();
    // A confident right prediction costs nothing (0 * -100, not 0 * -inf = NaN).
    KernelRun right = runPairwise("binary_cross_entropy", t, {0, 1}, {0, 1});
    ASSERT_TRUE(right.ok) << right.error;
    EXPECT_EQ(right.outputs[0][0], 0) << dtypeName(t).str();
  }
  // Just above the clamp: log(1e-40) = -92.1 is kept (f64).
  KernelRun near = runPairwise("binary_cross_entropy", DType::F64, {1e-40}, {1});
  ASSERT_TRUE(near.ok) << near.error;
  EXPECT_NEAR(near.outputs[0][0], 40 * std::log(10.0), 1e-12);
}

TEST(RefLossTest, BinaryCrossEntropyRandom) {
  const int64_t n = 200;
  std::vector<TensorType> types = {TensorType(DType::F32, {n}), TensorType(DType::F32, {n})};
  // Probabilities away from 0 and 1, where log is well conditioned in every dtype.
  std::vector<std::vector<double>> values = {randomValues(n, 71, 0.05, 0.95),
                                             randomValues(n, 72, 0, 1)};
  for (DType t : kComputeDTypes)
    EXPECT_TRUE(matchesF64("binary_cross_entropy", types, values, {}, t, meanTolerance(t, n)));
  EXPECT_TRUE(halfEmulationExact("binary_cross_entropy", types, values, {}, DType::F16));
  EXPECT_TRUE(halfEmulationExact("binary_cross_entropy", types, values, {}, DType::BF16));
}

TEST(RefLossTest, CrossEntropyHandComputed) {
  // Both rows are logits [1, 2, 3]; labels 2 and 0.
  std::vector<double> logits = {1, 2, 3, 1, 2, 3};
  for (DType labelType : {DType::I64, DType::I32}) {
    KernelRun run = runCrossEntropy(DType::F64, 2, 3, logits, {2, 0}, {}, labelType);
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_TRUE(run.outputTypes[0].dims().empty());
    EXPECT_NEAR(run.outputs[0][0], -(kLogP3 + kLogP1) / 2, 1e-15);
  }
  // Large logits need the max subtraction: row [1000, 1000] has loss log 2.
  KernelRun large = runCrossEntropy(DType::F32, 1, 2, {1000, 1000}, {1});
  ASSERT_TRUE(large.ok) << large.error;
  EXPECT_NEAR(large.outputs[0][0], std::log(2.0), 1e-7);
}

TEST(RefLossTest, CrossEntropyIgnoreIndexIsExcludedFromTheMean) {
  std::vector<double> logits = {1, 2, 3, 1, 2, 3, 3, 2, 1};
  // Default ignore_index -100: the mean is over the two counted rows.
  KernelRun run = runCrossEntropy(DType::F64, 3, 3, logits, {2, -100, 1});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_NEAR(run.outputs[0][0], -(kLogP3 + kLogP2) / 2, 1e-15);
  // A custom ignore_index that is a real class.
  KernelRun custom = runCrossEntropy(DType::F64, 3, 3, logits, {2, 0, 0}, {{"ignore_index", 0}});
  ASSERT_TRUE(custom.ok) << custom.error;
  EXPECT_NEAR(custom.outputs[0][0], -kLogP3, 1e-15);
  // Every row ignored: 0 / 0 = NaN, as PyTorch.
  KernelRun none = runCrossEntropy(DType::F64, 2, 3, {1, 2, 3, 1, 2, 3}, {-100, -100});
  ASSERT_TRUE(none.ok) << none.error;
  EXPECT_TRUE(std::isnan(none.outputs[0][0]));
}

TEST(RefLossTest, CrossEntropyLabelSmoothing) {
  // (1 - 0.1) * -log p[2] + 0.1 / 3 * -(log p[0] + log p[1] + log p[2])
  KernelRun run = runCrossEntropy(DType::F64, 1, 3, {1, 2, 3}, {2}, {{"label_smoothing", 0.1}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_NEAR(run.outputs[0][0], 0.5076059644443801, 1e-15);
  // Ignored rows count in neither mean.
  KernelRun ignored =
      runCrossEntropy(DType::F64, 2, 3, {1, 2, 3, 5, -5, 0}, {2, -100}, {{"label_smoothing", 0.1}});
  ASSERT_TRUE(ignored.ok) << ignored.error;
  EXPECT_NEAR(ignored.outputs[0][0], 0.5076059644443801, 1e-15);
  // label_smoothing 1: the target is uniform, the loss is -mean_c log p[c].
  KernelRun uniform = runCrossEntropy(DType::F64, 1, 3, {1, 2, 3}, {0}, {{"label_smoothing", 1.0}});
  ASSERT_TRUE(uniform.ok) << uniform.error;
  EXPECT_NEAR(uniform.outputs[0][0], -(kLogP1 + kLogP2 + kLogP3) / 3, 1e-15);
}

TEST(RefLossTest, CrossEntropyBadLabelGivesNaN) {
  // Label 3 of 3 classes is neither a class nor ignore_index: NaN, and no
  // read outside the row.
  KernelRun run = runCrossEntropy(DType::F32, 2, 3, {1, 2, 3, 1, 2, 3}, {0, 3});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(std::isnan(run.outputs[0][0]));
}

TEST(RefLossTest, CrossEntropyRandom) {
  const int64_t rows = 8, classes = 10;
  std::vector<TensorType> types = {TensorType(DType::F32, {rows, classes}),
                                   TensorType(DType::I64, {rows})};
  std::vector<double> labels = {0, 9, 3, 3, -100, 7, 1, 5};
  std::vector<std::vector<double>> values = {randomValues(rows * classes, 81, -5, 5), labels};
  for (AttrMap attrs : {AttrMap{}, AttrMap{{"label_smoothing", 0.2}}}) {
    for (DType t : kComputeDTypes)
      EXPECT_TRUE(
          matchesF64("cross_entropy", types, values, attrs, t, meanTolerance(t, rows * classes)));
    EXPECT_TRUE(halfEmulationExact("cross_entropy", types, values, attrs, DType::F16));
    EXPECT_TRUE(halfEmulationExact("cross_entropy", types, values, attrs, DType::BF16));
  }
}
