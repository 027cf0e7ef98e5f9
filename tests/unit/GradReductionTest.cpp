//===- GradReductionTest.cpp - Gradients of reduce_sum and reduce_mean ----===//
//
// Finite-difference checks (f64) of reduce_sum's and reduce_mean's gradient
// rules (a scale by 1/count for the mean, a reshape to the keepdim shape,
// then broadcast_to) over every kind of dims list, with and without keepdim.
// broadcast_to's own kernel is tested against f64 in GradShapeTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"

#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::checkGradients;

TensorType f64(std::vector<int64_t> dims) { return TensorType(DType::F64, dims); }

TEST(GradReduction, ReduceSumAndMeanDimsAndKeepdim) {
  const std::vector<std::vector<int64_t>> dimLists = {
      {}, {0}, {1}, {-1}, {0, 2}, {2, 0}, {-1, -3}, {0, 1, 2},
  };
  for (const char *op : {"reduce_sum", "reduce_mean"})
    for (const std::vector<int64_t> &dims : dimLists)
      for (bool keepdim : {false, true}) {
        std::string trace = std::string(op) + " dims [";
        for (int64_t d : dims)
          trace += std::to_string(d) + ",";
        SCOPED_TRACE(trace + "] keepdim " + std::to_string(keepdim));
        EXPECT_TRUE(checkGradients(op, {{f64({2, 3, 4})}},
                                   {{"dims", Attribute(dims)}, {"keepdim", Attribute(keepdim)}}));
      }
}

TEST(GradReduction, ReduceMeanOfVectorsScalarsAndUnitDims) {
  EXPECT_TRUE(checkGradients("reduce_mean", {{f64({5})}}));
  EXPECT_TRUE(checkGradients("reduce_mean", {{f64({})}}));
  EXPECT_TRUE(checkGradients("reduce_mean", {{f64({3, 1, 2})}},
                             {{"dims", Attribute(std::vector<int64_t>{1})}}));
  EXPECT_TRUE(checkGradients("reduce_mean", {{f64({4, 7})}},
                             {{"dims", Attribute(std::vector<int64_t>{-1})}}, {.seed = 5}));
}

TEST(GradReduction, ReduceSumOfVectorsScalarsAndUnitDims) {
  EXPECT_TRUE(checkGradients("reduce_sum", {{f64({5})}}));
  EXPECT_TRUE(checkGradients("reduce_sum", {{f64({})}}));
  // A size-1 dim reduced: the gradient needs no broadcast, only a reshape.
  EXPECT_TRUE(checkGradients("reduce_sum", {{f64({3, 1, 2})}},
                             {{"dims", Attribute(std::vector<int64_t>{1})}}));
  EXPECT_TRUE(
      checkGradients("reduce_sum", {{f64({1, 4})}},
                     {{"dims", Attribute(std::vector<int64_t>{0})}, {"keepdim", Attribute(true)}}));
}

TEST(GradReduction, ReduceSumGradientShape) {
  // reduce_sum over dim 1 of [2, 3, 4]: the gradient is dy [2, 4] reshaped to
  // [2, 1, 4] and broadcast to [2, 3, 4] -- one reshape, one broadcast_to.
  Graph g("reduce");
  DiagnosticEngine diag;
  const OpRegistry &reg = OpRegistry::builtin();
  InitSpec uniform;
  uniform.kind = InitSpec::Kind::Uniform;
  uniform.a = -1;
  uniform.b = 1;
  Value *x = g.addState("x", f64({2, 3, 4}), StateKind::Parameter, uniform);
  Node *partial = buildNode(g, reg.get(OpKind::ReduceSum), {x},
                            {{"dims", Attribute(std::vector<int64_t>{1})}}, Location(), diag);
  ASSERT_TRUE(partial);
  Node *square = buildNode(g, reg.get(OpKind::Mul), {partial->result(), partial->result()}, {},
                           Location(), diag);
  ASSERT_TRUE(square);
  Node *loss = buildNode(g, reg.get(OpKind::ReduceSum), {square->result()}, {}, Location(), diag);
  ASSERT_TRUE(loss);
  loss->setRole(NodeRole::Loss);
  // The values first (d sum_ik (sum_j x_ijk)^2 / d x_ijk = 2 sum_j x_ijk),
  // then the shape of what autodiff built.
  EXPECT_TRUE(ampc::testing::checkGraphGradients(g));
  Value *grad = g.lookup(gradientName("x"));
  ASSERT_TRUE(grad && grad->isResult());
  const Node *broadcast = grad->definingNode();
  ASSERT_EQ(broadcast->kind(), OpKind::BroadcastTo);
  EXPECT_EQ(broadcast->attr("shape"), Attribute(std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(broadcast->operand(0)->type(), f64({2, 1, 4}));
  EXPECT_EQ(broadcast->operand(0)->definingNode()->kind(), OpKind::Reshape);
}

TEST(GradReduction, ReduceMeanScalesBeforeTheBroadcast) {
  // reduce_mean over dim 1 of [2, 3, 4]: dy [2, 4] scaled by 1/3 (on 8
  // elements, not 24), reshaped to [2, 1, 4], broadcast to [2, 3, 4].
  Graph g("mean");
  DiagnosticEngine diag;
  const OpRegistry &reg = OpRegistry::builtin();
  InitSpec uniform;
  uniform.kind = InitSpec::Kind::Uniform;
  uniform.a = -1;
  uniform.b = 1;
  Value *x = g.addState("x", f64({2, 3, 4}), StateKind::Parameter, uniform);
  Node *mean = buildNode(g, reg.get(OpKind::ReduceMean), {x},
                         {{"dims", Attribute(std::vector<int64_t>{1})}}, Location(), diag);
  ASSERT_TRUE(mean);
  Node *square =
      buildNode(g, reg.get(OpKind::Mul), {mean->result(), mean->result()}, {}, Location(), diag);
  ASSERT_TRUE(square);
  Node *loss = buildNode(g, reg.get(OpKind::ReduceSum), {square->result()}, {}, Location(), diag);
  ASSERT_TRUE(loss);
  loss->setRole(NodeRole::Loss);
  EXPECT_TRUE(ampc::testing::checkGraphGradients(g));
  Value *grad = g.lookup(gradientName("x"));
  ASSERT_TRUE(grad && grad->isResult());
  const Node *broadcast = grad->definingNode();
  ASSERT_EQ(broadcast->kind(), OpKind::BroadcastTo);
  const Node *reshape = broadcast->operand(0)->definingNode();
  ASSERT_EQ(reshape->kind(), OpKind::Reshape);
  const Node *scale = reshape->operand(0)->definingNode();
  ASSERT_EQ(scale->kind(), OpKind::Scale);
  EXPECT_EQ(scale->operand(0)->type(), f64({2, 4}));
  EXPECT_DOUBLE_EQ(scale->attr("factor").getNumber(), 1.0 / 3);
}

} // namespace

// slice runs forward in imported models (ONNX Slice, Gather of a constant
// index): its gradient is dy inside the range and zeros on either side.
TEST(GradReduction, SliceAlongEachAxisAndAtTheEdges) {
  for (int64_t axis : {0, 1, -1})
    for (auto [start, end] : {std::pair<int64_t, int64_t>{1, 3}, {0, 2}, {2, 4}, {0, 4}}) {
      int64_t size = axis == 0 ? 4 : axis == 1 ? 4 : 5;
      if (end > size)
        continue;
      SCOPED_TRACE("axis " + std::to_string(axis) + " [" + std::to_string(start) + ", " +
                   std::to_string(end) + ")");
      EXPECT_TRUE(checkGradients(
          "slice", {{f64({4, 4, 5})}},
          {{"axis", Attribute(axis)}, {"start", Attribute(start)}, {"end", Attribute(end)}}));
    }
}
