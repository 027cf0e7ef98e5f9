//===- OpFlopsTest.cpp - The registry's flop counts (profiles' GFLOP/s) ---===//
#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/OpRegistry.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

Node *build(Graph &g, llvm::StringRef opName, llvm::ArrayRef<Value *> operands,
            AttrMap attrs = {}) {
  DiagnosticEngine diag;
  const OpInfo *op = OpRegistry::builtin().lookup(opName);
  EXPECT_NE(op, nullptr) << opName.str();
  Node *n = buildNode(g, *op, operands, std::move(attrs), Location(), diag);
  EXPECT_NE(n, nullptr) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  return n;
}

double flops(const Node *n) {
  EXPECT_NE(n->op().flops, nullptr) << n->opName().str();
  return n->op().flops ? n->op().flops(*n) : 0;
}

TEST(OpFlops, DenseOpsCountTwoPerMultiplyAdd) {
  Graph g("flops");
  auto input = [&](const char *name, llvm::ArrayRef<int64_t> dims) {
    return g.addInput(name, TensorType(DType::F32, dims));
  };
  // [8, 16] x [32, 16]^T: 8 x 32 dot products of length 16.
  Value *x = input("x", {8, 16}), *w = input("w", {32, 16});
  EXPECT_EQ(flops(build(g, "linear", {x, w})), 2.0 * 8 * 32 * 16);
  // [5, 6] x [6, 7]; transposed A: [6, 5]^T x [6, 7] contracts over 6 too;
  // batched: [4, 5, 6] x [4, 6, 7].
  Value *a = input("a", {5, 6}), *b = input("b", {6, 7});
  EXPECT_EQ(flops(build(g, "matmul", {a, b})), 2.0 * 5 * 7 * 6);
  Value *ba = input("ba", {4, 5, 6}), *bb = input("bb", {4, 6, 7});
  EXPECT_EQ(flops(build(g, "batch_matmul", {ba, bb})), 2.0 * 4 * 5 * 7 * 6);
  Value *at = input("at", {6, 5});
  EXPECT_EQ(flops(build(g, "matmul", {at, b}, {{"transpose_a", Attribute(true)}})),
            2.0 * 5 * 7 * 6);
  // conv 3x3, 4 -> 8 channels, 10x10 output (padding 1): each output meets
  // 4 x 3 x 3 weights; both backward passes do the same work.
  Value *img = input("img", {2, 4, 10, 10}), *k = input("k", {8, 4, 3, 3});
  Node *conv = build(g, "conv2d", {img, k}, {{"padding", Attribute(std::vector<int64_t>{1, 1})}});
  double forward = 2.0 * 2 * 8 * 10 * 10 * 4 * 3 * 3;
  EXPECT_EQ(flops(conv), forward);
  // Attention, 2 heads of 3 x 4 (query length 3, key length 5): Q K^T and P V.
  Value *q = input("q", {1, 2, 3, 4}), *kk = input("kk", {1, 2, 5, 4}),
        *v = input("v", {1, 2, 5, 4});
  EXPECT_EQ(flops(build(g, "scaled_dot_product_attention", {q, kk, v})), 2.0 * 2 * (3 * 5 * 4) * 2);
  // Memory-bound ops have none: they are measured in bytes.
  EXPECT_EQ(OpRegistry::builtin().lookup("relu")->flops, nullptr);
}

} // namespace
