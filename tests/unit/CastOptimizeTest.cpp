//===- CastOptimizeTest.cpp - Cast folding changes structure, not numbers --===//
//
// A training graph full of redundant casts (lossless round trips, duplicate
// casts, casts of weights not marked cacheable) trains bit for bit the same
// with and without cast-optimize, on the reference backend, while the
// optimized graph has fewer casts. Plus the table of lossless casts.
//
//===----------------------------------------------------------------------===//
#include "passes/CastOptimize.h"

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "kernels/common/Random.h"
#include "kernels/common/Storage.h"
#include "passes/PassManager.h"
#include "runtime/Program.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace ampc;

namespace {

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const Diagnostic &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

TEST(CastOptimizeTest, LosslessCasts) {
  EXPECT_TRUE(isLosslessCast(DType::F16, DType::F32));
  EXPECT_TRUE(isLosslessCast(DType::BF16, DType::F32));
  EXPECT_TRUE(isLosslessCast(DType::BF16, DType::F64));
  EXPECT_TRUE(isLosslessCast(DType::F32, DType::F64));
  EXPECT_TRUE(isLosslessCast(DType::I32, DType::I64));
  EXPECT_TRUE(isLosslessCast(DType::F32, DType::F32));
  // Narrowing, and the two half types into each other, round.
  EXPECT_FALSE(isLosslessCast(DType::F32, DType::F16));
  EXPECT_FALSE(isLosslessCast(DType::F32, DType::BF16));
  EXPECT_FALSE(isLosslessCast(DType::F16, DType::BF16));
  EXPECT_FALSE(isLosslessCast(DType::BF16, DType::F16));
  EXPECT_FALSE(isLosslessCast(DType::F64, DType::F32));
  EXPECT_FALSE(isLosslessCast(DType::I64, DType::I32));
  EXPECT_FALSE(isLosslessCast(DType::I64, DType::F64));
}

// Forward of a small regression net, in bf16 with redundant casts: a lossless
// round trip (%h1.h), two casts of one value to one dtype (%a.f, %a.f2 and
// %w2.h, %w2.h2), weight casts not marked cacheable, and a narrowing round
// trip of the target (%t.f), which must stay.
const char *kRedundantCasts = R"(graph @redundant {
  meta {optimizer = "sgd", optimizer.dampening = 0.0, optimizer.lr = 0.1, optimizer.momentum = 0.0, optimizer.nesterov = false, optimizer.weight_decay = 0.0}
  input %x : f32[4,8]
  input %target : f32[4,4]
  param %w1 : f32[16,8] init uniform(-0.3, 0.3)
  param %w2 : f32[4,16] init uniform(-0.3, 0.3)
  %x.h = cast(%x) {to = bf16} : (f32[4,8]) -> bf16[4,8]
  %w1.h = cast(%w1) {to = bf16} : (f32[16,8]) -> bf16[16,8]
  %h1 = linear(%x.h, %w1.h) : (bf16[4,8], bf16[16,8]) -> bf16[4,16]
  %h1.f = cast(%h1) {to = f32} : (bf16[4,16]) -> f32[4,16]
  %h1.h = cast(%h1.f) {to = bf16} : (f32[4,16]) -> bf16[4,16]
  %a = relu(%h1.h) : (bf16[4,16]) -> bf16[4,16]
  %a.f = cast(%a) {to = f32} : (bf16[4,16]) -> f32[4,16]
  %a.f2 = cast(%a) {to = f32} : (bf16[4,16]) -> f32[4,16]
  %s = add(%a.f, %a.f2) : (f32[4,16], f32[4,16]) -> f32[4,16]
  %s.h = cast(%s) {to = bf16} : (f32[4,16]) -> bf16[4,16]
  %w2.h = cast(%w2) {to = bf16} : (f32[4,16]) -> bf16[4,16]
  %w2.h2 = cast(%w2) {to = bf16} : (f32[4,16]) -> bf16[4,16]
  %o1 = linear(%s.h, %w2.h) : (bf16[4,16], bf16[4,16]) -> bf16[4,4]
  %o2 = linear(%s.h, %w2.h2) : (bf16[4,16], bf16[4,16]) -> bf16[4,4]
  %sum = add(%o1, %o2) : (bf16[4,4], bf16[4,4]) -> bf16[4,4]
  %sum.f = cast(%sum) {to = f32} : (bf16[4,4]) -> f32[4,4]
  %t.h = cast(%target) {to = bf16} : (f32[4,4]) -> bf16[4,4]
  %t.f = cast(%t.h) {to = f32} : (bf16[4,4]) -> f32[4,4]
  %loss = mse_loss(%sum.f, %t.f) : (f32[4,4], f32[4,4]) -> f32[] role(loss)
  output %loss
})";

std::unique_ptr<Graph> trainingGraph(bool optimizeCasts, DiagnosticEngine &diag) {
  std::unique_ptr<Graph> g = parseGraph(kRedundantCasts, "redundant.ir", diag);
  if (!g)
    return nullptr;
  PassManager pm;
  pm.setVerifyEach(true);
  if (!pm.addByNames(optimizeCasts ? "autodiff,optimizer,cast-optimize,dce"
                                   : "autodiff,optimizer,dce",
                     diag) ||
      !pm.run(*g, diag))
    return nullptr;
  return g;
}

unsigned countCasts(const Graph &g) {
  unsigned n = 0;
  for (const Node &node : g.nodes())
    n += node.kind() == OpKind::Cast;
  return n;
}

/// Trains `steps` steps on fixed data; returns the loss of each step and the
/// bytes of every state tensor afterwards, by name.
std::pair<std::vector<std::string>, std::map<std::string, std::string>> train(const Graph &g,
                                                                              int steps) {
  DiagnosticEngine diag;
  std::unique_ptr<Backend> backend = createCpuRefBackend();
  std::unique_ptr<Program> program = Program::compile(g, *backend, diag);
  EXPECT_TRUE(program) << diagText(diag);
  if (!program)
    return {};
  for (unsigned index = 0; index < g.inputs().size(); ++index) {
    const Value *in = g.inputs()[index];
    for (int64_t i = 0; i < in->type().numElements(); ++i)
      kernels::storeFromDouble(in->dtype(), program->data(in), i,
                               2 * kernels::uniform01Double(5, index, i) - 1);
  }
  std::vector<std::string> losses;
  const Value *loss = g.lookup("loss");
  for (int step = 0; step < steps; ++step) {
    program->run(step);
    losses.emplace_back(static_cast<const char *>(program->data(loss)), sizeof(float));
  }
  std::map<std::string, std::string> state;
  for (const Value *v : g.state())
    state[v->name().str()] =
        std::string(static_cast<const char *>(program->data(v)), v->type().sizeInBytes());
  return {losses, state};
}

TEST(CastOptimizeTest, TrainsBitForBitTheSameWithFewerCasts) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> plain = trainingGraph(false, diag);
  std::unique_ptr<Graph> optimized = trainingGraph(true, diag);
  ASSERT_TRUE(plain && optimized) << diagText(diag);

  // The forward's lossless round trip and its backward mirror image are
  // gone, duplicates are shared; the narrowing round trip of the target stays.
  EXPECT_LT(countCasts(*optimized), countCasts(*plain)) << printGraphToString(*optimized);
  EXPECT_EQ(optimized->lookup("h1.h"), nullptr);
  EXPECT_EQ(optimized->lookup("a.f2"), nullptr);
  EXPECT_EQ(optimized->lookup("w2.h2"), nullptr);
  ASSERT_NE(optimized->lookup("t.f"), nullptr);
  EXPECT_EQ(optimized->lookup("a")->definingNode()->operand(0), optimized->lookup("h1"));
  for (const Node &n : optimized->nodes()) {
    if (n.kind() != OpKind::Cast)
      continue;
    EXPECT_EQ(n.attr("cacheable").getBool(), n.operand(0)->isState()) << n.result()->name().str();
    const Node *inner = n.operand(0)->isResult() ? n.operand(0)->definingNode() : nullptr;
    if (inner && inner->kind() == OpKind::Cast) {
      EXPECT_FALSE(isLosslessCast(inner->operand(0)->dtype(), n.operand(0)->dtype()))
          << "a cast of a lossless widening survived: " << n.result()->name().str();
    }
  }

  auto [plainLosses, plainState] = train(*plain, 3);
  auto [optLosses, optState] = train(*optimized, 3);
  ASSERT_EQ(plainLosses.size(), 3u);
  EXPECT_EQ(plainLosses, optLosses);
  EXPECT_EQ(plainState, optState);
  // Training moved the weights: the comparison covers real updates.
  auto [initialLosses, initialState] = train(*plain, 0);
  EXPECT_NE(initialState.at("w1"), plainState.at("w1"));
}

TEST(CastOptimizeTest, UnchangedWhenThereIsNothingToDo) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(R"(graph @g {
  input %x : f32[2]
  param %w : f32[2] init ones
  %w.h = cast(%w) {cacheable = true, to = bf16} : (f32[2]) -> bf16[2]
  %x.h = cast(%x) {to = bf16} : (f32[2]) -> bf16[2]
  %y = mul(%x.h, %w.h) : (bf16[2], bf16[2]) -> bf16[2]
  output %y
})",
                                        "g.ir", diag);
  ASSERT_TRUE(g) << diagText(diag);
  PassContext ctx{diag};
  EXPECT_EQ(CastOptimizePass().run(*g, ctx), PassResult::Unchanged);
}

} // namespace
