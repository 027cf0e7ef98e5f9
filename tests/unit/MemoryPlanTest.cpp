//===- MemoryPlanTest.cpp - Liveness, reuse, classes, plan vs measured ----===//
#include "runtime/MemoryPlan.h"
#include "ir/Builder.h"
#include "kernels/common/Storage.h"
#include "runtime/Program.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

const OpInfo &op(llvm::StringRef name) { return *OpRegistry::builtin().lookup(name); }

std::vector<const Node *> scheduleOf(const Graph &g) {
  std::vector<const Node *> s;
  for (const Node &n : g.nodes())
    s.push_back(&n);
  return s;
}

/// x -> relu -> relu -> relu (output), each f32[16,16] = 1024 bytes.
struct ReluChain {
  Graph g{"chain"};
  DiagnosticEngine diag;
  Value *x;
  std::vector<Node *> nodes;
  ReluChain() {
    x = g.addInput("x", TensorType(DType::F32, {16, 16}));
    Value *cur = x;
    for (int i = 0; i < 3; ++i) {
      nodes.push_back(buildNode(g, op("relu"), {cur}, {}, {}, diag));
      cur = nodes.back()->result();
    }
    g.addOutput(cur);
  }
};

TEST(MemoryPlan, ChainReusesBuffers) {
  ReluChain c;
  MemoryPlan plan = planMemory(c.g, scheduleOf(c.g));
  // The input stays live for the whole step; of the three intermediates at
  // most two 1 KiB tensors are live at once (a node's operand and result).
  EXPECT_EQ(plan.stepBytes, 3072u);
  EXPECT_EQ(plan.stepBytesWithoutReuse, 4096u);
  EXPECT_EQ(plan.persistentBytes, 0u);
  // Operand and result of one node never overlap.
  for (const Node *n : c.nodes) {
    const PlannedBuffer *in = plan.find(n->operand(0)), *out = plan.find(n->result());
    ASSERT_TRUE(in && out);
    bool disjoint = in->offset + in->bytes <= out->offset || out->offset + out->bytes <= in->offset;
    EXPECT_TRUE(disjoint);
  }
}

// reshape and flatten (OpInfo::resultViewsOperand) take their operand's
// buffer: no copy, no second buffer; the shared buffer lives until the last
// reader of any of them, and a state operand is never aliased.
TEST(MemoryPlan, ReshapeAndFlattenShareTheirOperandsBuffer) {
  Graph g;
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {4, 2, 8}));
  Value *w = g.addState("w", TensorType(DType::F32, {4, 16}), StateKind::Parameter);
  Value *a = buildNode(g, op("relu"), {x}, {}, {}, diag)->result();
  Value *r = buildNode(g, op("reshape"), {a}, {{"shape", Attribute(std::vector<int64_t>{4, 16})}},
                       {}, diag)
                 ->result();
  Value *f = buildNode(g, op("flatten"), {r}, {}, {}, diag)->result();
  Value *b = buildNode(g, op("relu"), {f}, {}, {}, diag)->result();
  Value *c = buildNode(g, op("add"), {b, f}, {}, {}, diag)->result();
  Value *rw =
      buildNode(g, op("reshape"), {w}, {{"shape", Attribute(std::vector<int64_t>{64})}}, {}, diag)
          ->result();
  ASSERT_TRUE(diag.diagnostics().empty()) << diag.diagnostics()[0].str();
  g.addOutput(c);
  g.addOutput(rw);
  MemoryPlan plan = planMemory(g, scheduleOf(g));
  EXPECT_EQ(plan.views, 2u);
  EXPECT_EQ(plan.find(r)->offset, plan.find(a)->offset);
  EXPECT_EQ(plan.find(f)->offset, plan.find(a)->offset);
  // f is read by the add, after b is made: b must not take a's bytes.
  const PlannedBuffer *pa = plan.find(a), *pb = plan.find(b);
  EXPECT_TRUE(pb->offset + pb->bytes <= pa->offset || pa->offset + pa->bytes <= pb->offset);
  // The parameter's reshape is a copy of its own, in the step arena.
  EXPECT_EQ(plan.find(rw)->arena, ArenaKind::Step);
  PlanOptions noViews;
  noViews.aliasViews = false;
  MemoryPlan copies = planMemory(g, scheduleOf(g), noViews);
  EXPECT_EQ(copies.views, 0u);
  EXPECT_GT(copies.stepBytesWithoutReuse, plan.stepBytesWithoutReuse);
}

TEST(MemoryPlan, LiveBuffersNeverOverlap) {
  // A diamond with a long-lived value: x -> a; a -> b; a -> c; add(b, c).
  Graph g;
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {8, 8}));
  Node *a = buildNode(g, op("relu"), {x}, {}, {}, diag);
  Node *b = buildNode(g, op("tanh"), {a->result()}, {}, {}, diag);
  Node *c = buildNode(g, op("sigmoid"), {a->result()}, {}, {}, diag);
  Node *d = buildNode(g, op("add"), {b->result(), c->result()}, {}, {}, diag);
  g.addOutput(d->result());
  MemoryPlan plan = planMemory(g, scheduleOf(g));
  for (const PlannedBuffer &p : plan.buffers)
    for (const PlannedBuffer &q : plan.buffers) {
      if (&p == &q || p.arena != q.arena)
        continue;
      bool timeOverlap = !(p.last < q.first + 1 || q.last < p.first + 1);
      bool spaceOverlap = p.offset < q.offset + q.bytes && q.offset < p.offset + p.bytes;
      EXPECT_FALSE(timeOverlap && spaceOverlap)
          << p.value->name().str() << " and " << q.value->name().str();
    }
}

TEST(MemoryPlan, StateIsPersistentAndClassified) {
  Graph g;
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {4, 8}));
  Value *w = g.addState("w", TensorType(DType::F32, {2, 8}), StateKind::Parameter);
  g.addState("m", TensorType(DType::F32, {2, 8}), StateKind::OptimizerState);
  g.addState("master", TensorType(DType::F32, {3}), StateKind::MasterWeight);
  Node *cast = buildNode(g, op("cast"), {w}, {{"to", Attribute(DType::BF16)}}, {}, diag);
  Node *cx = buildNode(g, op("cast"), {x}, {{"to", Attribute(DType::BF16)}}, {}, diag);
  Node *fc = buildNode(g, op("linear"), {cx->result(), cast->result()}, {}, {}, diag);
  ASSERT_TRUE(fc) << diag.diagnostics()[0].str();
  g.addOutput(fc->result());
  MemoryPlan plan = planMemory(g, scheduleOf(g));
  EXPECT_EQ(plan.bytesAtPeak[unsigned(BufferClass::Parameter)], 64u);
  EXPECT_EQ(plan.bytesAtPeak[unsigned(BufferClass::OptimizerState)], 64u);
  EXPECT_EQ(plan.bytesAtPeak[unsigned(BufferClass::MasterWeight)], 12u);
  EXPECT_EQ(plan.persistentBytes, 64u * 3); // each aligned to 64
  EXPECT_EQ(plan.find(cast->result())->cls, BufferClass::CastCopy);
  EXPECT_EQ(plan.find(x)->cls, BufferClass::Input);
  EXPECT_EQ(plan.find(fc->result())->cls, BufferClass::Temporary);
}

TEST(Program, RunsAChainAndMeasuredMemoryMatchesThePlan) {
  ReluChain c;
  auto backend = createCpuRefBackend();
  DiagnosticEngine diag;
  auto program = Program::compile(c.g, *backend, diag);
  ASSERT_TRUE(program) << diag.diagnostics()[0].str();
  float *x = static_cast<float *>(program->data(c.x));
  for (int i = 0; i < 256; ++i)
    x[i] = static_cast<float>(i % 7) - 3.0f;
  program->run(0);
  const float *y = static_cast<const float *>(program->data(c.g.outputs()[0]));
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(y[i], std::max(0.0f, static_cast<float>(i % 7) - 3.0f)) << i;
  MeasuredMemory m = program->measure();
  EXPECT_TRUE(m.guardsIntact);
  EXPECT_EQ(m.allocatedBytes, program->plan().peakBytes());
  EXPECT_EQ(m.touchedStepBytes, program->plan().stepBytes);
}

TEST(Program, InitialisesStateDeterministically) {
  Graph g;
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 4}));
  Value *w = g.addState("w", TensorType(DType::F32, {3, 4}), StateKind::Parameter,
                        {InitSpec::Kind::Uniform, -0.5, 0.5, {}});
  Value *b = g.addState("b", TensorType(DType::F32, {3}), StateKind::Parameter,
                        {InitSpec::Kind::Ones, 0, 0, {}});
  Node *fc = buildNode(g, op("linear"), {x, w, b}, {}, {}, diag);
  g.addOutput(fc->result());
  auto backend = createCpuRefBackend();
  CompileOptions opts;
  opts.initSeed = 42;
  auto p1 = Program::compile(g, *backend, diag, opts);
  auto p2 = Program::compile(g, *backend, diag, opts);
  ASSERT_TRUE(p1 && p2);
  const float *w1 = static_cast<const float *>(p1->data(w));
  const float *w2 = static_cast<const float *>(p2->data(w));
  bool allSame = true;
  for (int i = 0; i < 12; ++i) {
    EXPECT_GE(w1[i], -0.5f);
    EXPECT_LT(w1[i], 0.5f);
    EXPECT_EQ(w1[i], w2[i]);
    allSame = allSame && w1[i] == w1[0];
  }
  EXPECT_FALSE(allSame);
  EXPECT_EQ(static_cast<const float *>(p1->data(b))[2], 1.0f);
  opts.initSeed = 43;
  auto p3 = Program::compile(g, *backend, diag, opts);
  EXPECT_NE(static_cast<const float *>(p3->data(w))[0], w1[0]);
}

} // namespace
