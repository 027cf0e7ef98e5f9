//===- GradShapeTest.cpp - Gradients of the shape and data-movement ops ----===//
//
// Finite-difference checks (f64) of flatten, reshape, transpose, permute,
// concat (three inputs, every axis), embedding (the table only: indices are
// integral and get no gradient), cast and broadcast_to; hand-computed and
// f32/f16/bf16 vs f64 checks of the backward kernels slice, broadcast_to and
// embedding_grad. slice itself has no gradient rule (it only appears in
// backward graphs).
//
//===----------------------------------------------------------------------===//
#include "GradCheckUtil.h"
#include "KernelTestUtil.h"

#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::allClose;
using ampc::testing::checkGradients;
using ampc::testing::checkGraphGradients;
using ampc::testing::defaultTolerance;
using ampc::testing::GradCheckOperand;
using ampc::testing::KernelRun;
using ampc::testing::matchesF64;
using ampc::testing::randomValues;
using ampc::testing::runKernel;

TensorType f64(std::vector<int64_t> dims) { return TensorType(DType::F64, dims); }

Attribute ints(std::vector<int64_t> v) { return Attribute(std::move(v)); }

constexpr DType kLowDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr DType kAllFloatDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

// --- finite differences ---------------------------------------------------------

TEST(GradShape, Flatten) {
  EXPECT_TRUE(checkGradients("flatten", {{f64({2, 3, 4})}}));
  EXPECT_TRUE(checkGradients("flatten", {{f64({2, 3, 4})}}, {{"start_dim", Attribute(0)}}));
  EXPECT_TRUE(checkGradients("flatten", {{f64({2, 3, 4, 2})}},
                             {{"start_dim", Attribute(1)}, {"end_dim", Attribute(2)}}));
  EXPECT_TRUE(checkGradients("flatten", {{f64({2, 3, 4})}},
                             {{"start_dim", Attribute(0)}, {"end_dim", Attribute(-2)}}));
  EXPECT_TRUE(checkGradients("flatten", {{f64({})}}, {{"start_dim", Attribute(0)}}));
}

TEST(GradShape, Reshape) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{6, -1}, std::vector<int64_t>{24},
                                     std::vector<int64_t>{4, 3, 2}, std::vector<int64_t>{1, 2, 12}})
    EXPECT_TRUE(checkGradients("reshape", {{f64({2, 3, 4})}}, {{"shape", ints(shape)}}));
}

TEST(GradShape, Transpose) {
  const std::pair<int64_t, int64_t> pairs[] = {{0, 2}, {1, -1}, {0, 0}, {-3, 1}};
  for (auto [d0, d1] : pairs) {
    SCOPED_TRACE(std::to_string(d0) + "," + std::to_string(d1));
    EXPECT_TRUE(checkGradients("transpose", {{f64({2, 3, 4})}},
                               {{"dim0", Attribute(d0)}, {"dim1", Attribute(d1)}}));
  }
}

TEST(GradShape, Permute) {
  // Non-involutive permutations, so using perm instead of its inverse fails.
  EXPECT_TRUE(checkGradients("permute", {{f64({2, 3, 4})}}, {{"dims", ints({2, 0, 1})}}));
  EXPECT_TRUE(checkGradients("permute", {{f64({2, 3, 4})}}, {{"dims", ints({1, 2, 0})}}));
  EXPECT_TRUE(checkGradients("permute", {{f64({2, 3, 4, 5})}}, {{"dims", ints({0, 2, 3, 1})}}));
  EXPECT_TRUE(checkGradients("permute", {{f64({2, 3, 4})}}, {{"dims", ints({-1, 0, 1})}}));
}

TEST(GradShape, ConcatThreeInputsEveryAxis) {
  struct Case {
    int64_t axis;
    std::vector<int64_t> a, b, c;
  };
  const Case cases[] = {
      {0, {1, 3}, {2, 3}, {3, 3}},           {1, {2, 1}, {2, 3}, {2, 2}},
      {-1, {2, 2, 1}, {2, 2, 2}, {2, 2, 3}}, {1, {2, 3, 2}, {2, 1, 2}, {2, 2, 2}},
      {-3, {1, 2, 2}, {2, 2, 2}, {1, 2, 2}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE("axis " + std::to_string(c.axis));
    EXPECT_TRUE(checkGradients("concat", {{f64(c.a)}, {f64(c.b)}, {f64(c.c)}},
                               {{"axis", Attribute(c.axis)}}));
  }
}

TEST(GradShape, ConcatMiddleInputFrozen) {
  // The frozen input's slice is not built; the others keep their offsets.
  GradCheckOperand frozen{f64({2, 3})};
  frozen.differentiate = false;
  EXPECT_TRUE(
      checkGradients("concat", {{f64({2, 2})}, frozen, {f64({2, 1})}}, {{"axis", Attribute(1)}}));
}

TEST(GradShape, EmbeddingWeightOnly) {
  // Repeated indices: their rows' gradients add up. Index 4 is never used:
  // its row's gradient is zero.
  GradCheckOperand indices{TensorType(DType::I64, {2, 3}), {1, 0, 1, 3, 2, 1}};
  EXPECT_TRUE(checkGradients("embedding", {indices, {f64({5, 4})}}));
  GradCheckOperand i32Indices{TensorType(DType::I32, {4}), {2, 2, 0, 2}};
  EXPECT_TRUE(checkGradients("embedding", {i32Indices, {f64({3, 2})}}));
  GradCheckOperand scalarIndex{TensorType(DType::I64, {}), {1}};
  EXPECT_TRUE(checkGradients("embedding", {scalarIndex, {f64({3, 2})}}));
}

TEST(GradShape, EmbeddingPaddingIdxNotLookedUp) {
  // padding_idx is passed on to embedding_grad; a padding row that no index
  // names is not affected (the zeroed-row rule is checked on the kernel
  // below, since finite differences do see the padding row's forward use).
  GradCheckOperand indices{TensorType(DType::I64, {3}), {0, 2, 2}};
  EXPECT_TRUE(
      checkGradients("embedding", {indices, {f64({4, 3})}}, {{"padding_idx", Attribute(1)}}));
}

TEST(GradShape, EmbeddingIndicesGetNoGradient) {
  Graph g("embedding");
  DiagnosticEngine diag;
  const OpRegistry &reg = OpRegistry::builtin();
  Value *indices = g.addInput("indices", TensorType(DType::I64, {3}));
  Value *w = g.addState("w", f64({4, 2}), StateKind::Parameter);
  Node *emb = buildNode(g, reg.get(OpKind::Embedding), {indices, w}, {}, Location(), diag);
  ASSERT_TRUE(emb);
  Node *loss = buildNode(g, reg.get(OpKind::ReduceSum), {emb->result()}, {}, Location(), diag);
  ASSERT_TRUE(loss);
  loss->setRole(NodeRole::Loss);
  EXPECT_TRUE(checkGraphGradients(g, {{"indices", {3, 0, 3}}}));
  // One embedding_grad, reading the indices; nothing else reads them.
  unsigned embeddingGrads = 0;
  for (const Node &n : g.nodes())
    if (n.kind() == OpKind::EmbeddingGrad) {
      ++embeddingGrads;
      EXPECT_EQ(n.operand(1), indices);
      EXPECT_EQ(n.attr("num_embeddings"), Attribute(4));
    }
  EXPECT_EQ(embeddingGrads, 1u);
  EXPECT_EQ(indices->uses().size(), 2u);
  EXPECT_FALSE(g.lookup(gradientName("indices")));
}

TEST(GradShape, CastSameDType) {
  EXPECT_TRUE(checkGradients("cast", {{f64({2, 3})}}, {{"to", Attribute(DType::F64)}}));
}

TEST(GradShape, CastRoundTripThroughF32) {
  // p (f64) -> cast f32 -> cast f64 -> * R -> sum: the gradient is R, cast
  // back to f64 through f32. The forward rounds to f32, so the finite
  // difference needs a step far above f32's resolution.
  Graph g("roundtrip");
  DiagnosticEngine diag;
  const OpRegistry &reg = OpRegistry::builtin();
  Value *p = g.addState("p", f64({2, 3}), StateKind::Parameter);
  Value *r = g.addInput("r", f64({2, 3}));
  Node *down =
      buildNode(g, reg.get(OpKind::Cast), {p}, {{"to", Attribute(DType::F32)}}, Location(), diag);
  ASSERT_TRUE(down);
  Node *up = buildNode(g, reg.get(OpKind::Cast), {down->result()}, {{"to", Attribute(DType::F64)}},
                       Location(), diag);
  ASSERT_TRUE(up);
  Node *prod = buildNode(g, reg.get(OpKind::Mul), {up->result(), r}, {}, Location(), diag);
  ASSERT_TRUE(prod);
  Node *loss = buildNode(g, reg.get(OpKind::ReduceSum), {prod->result()}, {}, Location(), diag);
  ASSERT_TRUE(loss);
  loss->setRole(NodeRole::Loss);
  EXPECT_TRUE(checkGraphGradients(g, {}, {.step = 1e-3, .tolerance = 1e-4}));
  // The gradient came back through an f32 cast and is f64 again.
  Value *grad = g.lookup(gradientName("p"));
  ASSERT_TRUE(grad);
  EXPECT_EQ(grad->dtype(), DType::F64);
  unsigned backwardCasts = 0;
  for (const Node &n : g.nodes())
    backwardCasts += n.role() == NodeRole::Backward && n.kind() == OpKind::Cast;
  EXPECT_EQ(backwardCasts, 2u);
}

TEST(GradShape, BroadcastTo) {
  EXPECT_TRUE(checkGradients("broadcast_to", {{f64({3, 1})}}, {{"shape", ints({2, 3, 4})}}));
  EXPECT_TRUE(checkGradients("broadcast_to", {{f64({4})}}, {{"shape", ints({3, 4})}}));
  EXPECT_TRUE(checkGradients("broadcast_to", {{f64({})}}, {{"shape", ints({2, 2})}}));
  EXPECT_TRUE(checkGradients("broadcast_to", {{f64({1, 2})}}, {{"shape", ints({1, 2})}}));
  EXPECT_TRUE(checkGradients("broadcast_to", {{f64({2, 1, 3})}}, {{"shape", ints({2, 4, 3})}}));
}

// --- backward kernels -------------------------------------------------------------

TEST(GradShape, SliceHandComputed) {
  for (DType t : kAllFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    KernelRun run =
        runKernel("slice", {TensorType(t, {2, 4})}, {{0, 1, 2, 3, 4, 5, 6, 7}},
                  {{"axis", Attribute(1)}, {"start", Attribute(1)}, {"end", Attribute(3)}});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_EQ(run.outputTypes[0], TensorType(t, {2, 2}));
    EXPECT_TRUE(allClose(run.outputs[0], {1, 2, 5, 6}, 0));
    KernelRun rows =
        runKernel("slice", {TensorType(t, {3, 2})}, {{0, 1, 2, 3, 4, 5}},
                  {{"axis", Attribute(0)}, {"start", Attribute(2)}, {"end", Attribute(3)}});
    ASSERT_TRUE(rows.ok) << rows.error;
    EXPECT_TRUE(allClose(rows.outputs[0], {4, 5}, 0));
  }
}

TEST(GradShape, BroadcastToHandComputed) {
  for (DType t : kAllFloatDTypes) {
    SCOPED_TRACE(dtypeName(t).str());
    KernelRun run =
        runKernel("broadcast_to", {TensorType(t, {2, 1})}, {{3, 5}}, {{"shape", ints({2, 2, 3})}});
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_TRUE(allClose(run.outputs[0], {3, 3, 3, 5, 5, 5, 3, 3, 3, 5, 5, 5}, 0));
  }
}

TEST(GradShape, EmbeddingGradHandComputed) {
  // grad rows [1, 2], [3, 4], [5, 6] at indices 1, 0, 1 of a 3-row table.
  for (DType t : kAllFloatDTypes)
    for (DType indexType : {DType::I64, DType::I32}) {
      SCOPED_TRACE(dtypeName(t).str() + " " + dtypeName(indexType).str());
      std::vector<TensorType> types{TensorType(t, {3, 2}), TensorType(indexType, {3})};
      std::vector<std::vector<double>> values{{1, 2, 3, 4, 5, 6}, {1, 0, 1}};
      KernelRun plain =
          runKernel("embedding_grad", types, values, {{"num_embeddings", Attribute(3)}});
      ASSERT_TRUE(plain.ok) << plain.error;
      EXPECT_TRUE(allClose(plain.outputs[0], {3, 4, 6, 8, 0, 0}, 0));
      // padding_idx 1: that row gets no gradient, as in PyTorch.
      KernelRun padded =
          runKernel("embedding_grad", types, values,
                    {{"num_embeddings", Attribute(3)}, {"padding_idx", Attribute(1)}});
      ASSERT_TRUE(padded.ok) << padded.error;
      EXPECT_TRUE(allClose(padded.outputs[0], {3, 4, 0, 0, 0, 0}, 0));
    }
}

TEST(GradShape, BackwardKernelsMatchF64) {
  TensorType x = f64({3, 5, 4});
  std::vector<double> xv = randomValues(60, 1, -3, 3);
  TensorType narrow = f64({3, 1, 4});
  std::vector<double> narrowValues = randomValues(12, 2, -3, 3);
  // 20 lookups into 6 rows: every row is summed several times.
  TensorType grad = f64({4, 5, 3});
  std::vector<double> gradValues = randomValues(60, 3, -2, 2);
  std::vector<double> indexValues;
  for (int i = 0; i < 20; ++i)
    indexValues.push_back((i * 7) % 6);
  for (DType t : kLowDTypes) {
    // Data movement is exact in every dtype.
    EXPECT_TRUE(matchesF64("slice", {x}, {xv},
                           {{"axis", Attribute(1)}, {"start", Attribute(1)}, {"end", Attribute(4)}},
                           t, 0));
    EXPECT_TRUE(matchesF64(
        "slice", {x}, {xv},
        {{"axis", Attribute(-1)}, {"start", Attribute(0)}, {"end", Attribute(2)}}, t, 0));
    EXPECT_TRUE(matchesF64("broadcast_to", {narrow}, {narrowValues},
                           {{"shape", ints({2, 3, 6, 4})}}, t, 0));
    EXPECT_TRUE(matchesF64("embedding_grad", {grad, TensorType(DType::I64, {4, 5})},
                           {gradValues, indexValues}, {{"num_embeddings", Attribute(6)}}, t,
                           defaultTolerance(t)));
  }
}

} // namespace
