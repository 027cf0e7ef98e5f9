//===- RefLogicTest.cpp - Reference compare, logical, where, extrema -------===//
//
// Hand-computed masks with broadcasting for compare and logical, where
// moving every dtype's bits unchanged (f16 and bf16 included), the extremum
// reductions with ties and NaN (NaN wins, as torch.amax), argmax's first
// and last index, and reduce_select_grad sharing a gradient among ties.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include <cmath>
#include <vector>

using namespace ampc;
using namespace ampc::testing;

namespace {

using Ints = std::vector<int64_t>;

TensorType t(DType d, Ints dims) { return TensorType(d, dims); }

} // namespace

TEST(RefLogicTest, CompareEveryPredicateWithBroadcasting) {
  // [2, 1] against [3]: x = [[1], [2]], y = [0, 1, 2].
  struct Case {
    const char *predicate;
    std::vector<double> expected;
  };
  const Case cases[] = {
      {"eq", {0, 1, 0, 0, 0, 1}}, {"ne", {1, 0, 1, 1, 1, 0}}, {"lt", {0, 0, 1, 0, 0, 0}},
      {"le", {0, 1, 1, 0, 0, 1}}, {"gt", {1, 0, 0, 1, 1, 0}}, {"ge", {1, 1, 0, 1, 1, 1}},
  };
  for (DType d : {DType::F32, DType::BF16, DType::I64})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(c.predicate) + " " + dtypeName(d).str());
      KernelRun run = runKernel("compare", {t(d, {2, 1}), t(d, {3})}, {{1, 2}, {0, 1, 2}},
                                {{"predicate", Attribute(std::string(c.predicate))}});
      ASSERT_TRUE(run.ok) << run.error;
      EXPECT_EQ(run.outputTypes[0].str(), "bool[2,3]");
      EXPECT_EQ(run.outputs[0], c.expected);
    }
}

TEST(RefLogicTest, CompareNaNIsUnequal) {
  KernelRun run = runKernel("compare", {t(DType::F32, {2}), t(DType::F32, {2})},
                            {{NAN, 1}, {NAN, 1}}, {{"predicate", Attribute(std::string("eq"))}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0], (std::vector<double>{0, 1}));
}

TEST(RefLogicTest, LogicalAndNot) {
  std::vector<double> a = {0, 1}, b = {0, 1};
  const std::pair<const char *, std::vector<double>> cases[] = {
      {"and", {0, 0, 0, 1}}, {"or", {0, 1, 1, 1}}, {"xor", {0, 1, 1, 0}}};
  for (const auto &[op, expected] : cases) {
    SCOPED_TRACE(op);
    KernelRun run = runKernel("logical", {t(DType::Bool, {2, 1}), t(DType::Bool, {1, 2})}, {a, b},
                              {{"op", Attribute(std::string(op))}});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_EQ(run.outputs[0], expected);
  }
  KernelRun run = runKernel("logical_not", {t(DType::Bool, {3})}, {{1, 0, 1}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0], (std::vector<double>{0, 1, 0}));
}

TEST(RefLogicTest, WhereMovesBitsInEveryDtype) {
  // A causal mask [1, 1, 2, 2] over x [2, 1, 2, 2], y a scalar -inf: the
  // masked_fill of a GPT's attention scores.
  std::vector<double> mask = {1, 0, 1, 1};
  std::vector<double> x = {0.1, 0.2, 0.3, 0.4, 1.5, 2.5, 3.5, 4.5};
  for (DType d : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(d).str());
    std::vector<double> xr = roundedTo(d, x);
    KernelRun run = runKernel("where", {t(DType::Bool, {1, 1, 2, 2}), t(d, {2, 1, 2, 2}), t(d, {})},
                              {mask, xr, {-INFINITY}});
    ASSERT_TRUE(run.ok) << run.error;
    std::vector<double> expected = {xr[0], -INFINITY, xr[2], xr[3], xr[4], -INFINITY, xr[6], xr[7]};
    EXPECT_EQ(run.outputs[0], expected);
  }
  KernelRun ints = runKernel("where", {t(DType::Bool, {3}), t(DType::I64, {3}), t(DType::I64, {})},
                             {{1, 0, 1}, {7, 8, 9}, {-1}});
  ASSERT_TRUE(ints.ok) << ints.error;
  EXPECT_EQ(ints.outputs[0], (std::vector<double>{7, -1, 9}));
}

TEST(RefLogicTest, ExtremaHandComputed) {
  // [2, 3] = [[1, 5, 3], [-2, -7, 4]].
  std::vector<double> x = {1, 5, 3, -2, -7, 4};
  for (DType d : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(d).str());
    auto run = [&](const char *op, Ints dims, bool keep) {
      return runKernel(op, {t(d, {2, 3})}, {x},
                       {{"dims", Attribute(dims)}, {"keepdim", Attribute(keep)}});
    };
    KernelRun rowMax = run("reduce_max", {1}, false), colMin = run("reduce_min", {0}, true),
              all = run("reduce_max", {}, false);
    ASSERT_TRUE(rowMax.ok && colMin.ok && all.ok);
    EXPECT_EQ(rowMax.outputs[0], (std::vector<double>{5, 4}));
    EXPECT_EQ(colMin.outputTypes[0].dims(), llvm::ArrayRef<int64_t>({1, 3}));
    EXPECT_EQ(colMin.outputs[0], (std::vector<double>{-2, -7, 3}));
    EXPECT_EQ(all.outputs[0], (std::vector<double>{5}));
  }
}

TEST(RefLogicTest, ExtremaPropagateNaN) {
  KernelRun run = runKernel("reduce_max", {t(DType::F32, {2, 2})}, {{1, NAN, 2, 3}},
                            {{"dims", Attribute(Ints{1})}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_TRUE(std::isnan(run.outputs[0][0]));
  EXPECT_EQ(run.outputs[0][1], 3);
}

TEST(RefLogicTest, ArgMaxFirstOrLastOfTies) {
  // [2, 4] with a tie in each row.
  std::vector<double> x = {3, 9, 9, 1, 5, 5, 2, 5};
  KernelRun first = runKernel("argmax", {t(DType::F32, {2, 4})}, {x},
                              {{"dim", Attribute(int64_t(1))}, {"keepdim", Attribute(false)}});
  KernelRun last =
      runKernel("argmax", {t(DType::F32, {2, 4})}, {x},
                {{"dim", Attribute(int64_t(-1))}, {"select_last_index", Attribute(true)}});
  KernelRun cols = runKernel("argmax", {t(DType::BF16, {2, 4})}, {x}, {});
  ASSERT_TRUE(first.ok && last.ok && cols.ok);
  EXPECT_EQ(first.outputs[0], (std::vector<double>{1, 0}));
  EXPECT_EQ(last.outputTypes[0].str(), "i64[2,1]");
  EXPECT_EQ(last.outputs[0], (std::vector<double>{2, 3}));
  EXPECT_EQ(cols.outputs[0], (std::vector<double>{1, 0, 0, 1}));
}

TEST(RefLogicTest, SelectGradSharesAmongTies) {
  // Row maxima 9 (twice) and 5 (three times): each tie gets its share.
  std::vector<double> x = {3, 9, 9, 1, 5, 5, 2, 5}, y = {9, 5}, dy = {1, 3};
  KernelRun run = runKernel("reduce_select_grad",
                            {t(DType::F32, {2}), t(DType::F32, {2, 4}), t(DType::F32, {2})},
                            {dy, x, y}, {{"dims", Attribute(Ints{1})}});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.outputs[0], (std::vector<double>{0, 0.5, 0.5, 0, 1, 1, 0, 1}));
}
