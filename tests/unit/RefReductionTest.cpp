//===- RefReductionTest.cpp - Reference reduce_sum and reduce_mean ---------===//
//
// Hand-computed sums and means over each kind of dims list, the mean's
// division (sum / count, as torch.mean on the CPU), an empty mean (NaN), and
// random values against f64 in f32/f16/bf16 (accumulated in f32, rounded
// once).
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include <cmath>
#include <vector>

using namespace ampc;
using namespace ampc::testing;

namespace {

using Ints = std::vector<int64_t>;

KernelRun reduce(const std::string &op, DType t, Ints dims, const std::vector<double> &x, Ints axes,
                 bool keepdim = false) {
  return runKernel(op, {TensorType(t, dims)}, {x},
                   {{"dims", Attribute(axes)}, {"keepdim", Attribute(keepdim)}});
}

} // namespace

TEST(RefReductionTest, SumAndMeanHandComputed) {
  // [2, 3] = [[1, 2, 3], [4, 5, 9]].
  const std::vector<double> x = {1, 2, 3, 4, 5, 9};
  struct Case {
    Ints axes;
    bool keepdim;
    std::vector<double> sum, mean;
  };
  const Case cases[] = {
      {{}, false, {24}, {4}},
      {{0}, false, {5, 7, 12}, {2.5, 3.5, 6}},
      {{-1}, true, {6, 18}, {2, 6}},
      {{1, 0}, false, {24}, {4}},
  };
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16})
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(t).str());
      KernelRun sum = reduce("reduce_sum", t, {2, 3}, x, c.axes, c.keepdim);
      KernelRun mean = reduce("reduce_mean", t, {2, 3}, x, c.axes, c.keepdim);
      ASSERT_TRUE(sum.ok && mean.ok) << sum.error << mean.error;
      EXPECT_TRUE(allClose(sum.outputs[0], c.sum, 0));
      EXPECT_TRUE(allClose(mean.outputs[0], c.mean, 0));
    }
}

TEST(RefReductionTest, MeanDividesTheSum) {
  // sum / 3, not sum * (1/3): 1 + 1 + 1 = 3 gives exactly 1 (3 * fl(1/3) is
  // 1 too, but 10 / 3 and 10 * fl(1/3) differ in f32 at 2^-22).
  KernelRun run = reduce("reduce_mean", DType::F32, {3}, {3, 3, 4}, {});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(static_cast<float>(run.outputs[0][0]), 10.0f / 3.0f);
}

TEST(RefReductionTest, EmptyMeanIsNaN) {
  // torch.mean of an empty tensor is NaN (0 / 0); the sum is 0.
  KernelRun mean = reduce("reduce_mean", DType::F32, {0, 2}, {}, {0});
  KernelRun sum = reduce("reduce_sum", DType::F32, {0, 2}, {}, {0});
  ASSERT_TRUE(mean.ok && sum.ok) << mean.error << sum.error;
  ASSERT_EQ(mean.outputs[0].size(), 2u);
  EXPECT_TRUE(std::isnan(mean.outputs[0][0]) && std::isnan(mean.outputs[0][1]));
  EXPECT_EQ(sum.outputs[0], (std::vector<double>{0, 0}));
}

TEST(RefReductionTest, MeanRandomAgainstF64) {
  std::vector<TensorType> types = {TensorType(DType::F32, {4, 5, 6})};
  std::vector<std::vector<double>> values = {randomValues(120, 3, -4, 4)};
  for (const Ints &axes : {Ints{}, Ints{0}, Ints{1, 2}, Ints{-2}}) {
    AttrMap attrs{{"dims", Attribute(axes)}};
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      EXPECT_TRUE(matchesF64("reduce_mean", types, values, attrs, t, defaultTolerance(t)));
    EXPECT_TRUE(halfEmulationExact("reduce_mean", types, values, attrs, DType::F16));
    EXPECT_TRUE(halfEmulationExact("reduce_mean", types, values, attrs, DType::BF16));
  }
}
