//===- DataParallelTest.cpp - The gradients' all-reduce -------------------===//
//
// The data-parallel pass (buckets, placement, what reads the averages) and
// all_reduce's kernel run by a Program over a stand-in communicator that
// plays a second rank. The real job (mpirun, 2 ranks against 1) is
// tests/dist/check_data_parallel.py.
//
//===----------------------------------------------------------------------===//
#include "ir/HalfConversion.h"
#include "ir/OpAttrs.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "kernels/common/Storage.h"
#include "passes/PassManager.h"
#include "runtime/Backend.h"
#include "runtime/HostBackend.h"
#include "runtime/Program.h"
#include "runtime/dist/Communicator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace ampc;

namespace {

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const auto &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

/// Rank 0 of two, where the other rank holds `other` in every element:
/// a sum adds it, a mean averages with it. Counts the calls.
class TwoRanks final : public dist::Communicator {
public:
  explicit TwoRanks(float other) : other_(other) {}
  llvm::StringRef name() const override { return "two-ranks"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  bool allReduce(void *data, int64_t count, DType t, dist::ReduceOp op, std::string &) override {
    EXPECT_EQ(t, DType::F32);
    ++wideCalls;
    auto *x = static_cast<float *>(data);
    for (int64_t i = 0; i < count; ++i)
      x[i] = op == dist::ReduceOp::Sum ? x[i] + other_ : (x[i] + other_) / 2;
    return true;
  }
  bool allReduceHalfWire(uint16_t *data, int64_t count, DType t, dist::ReduceOp op,
                         std::string &) override {
    ++halfCalls;
    for (int64_t i = 0; i < count; ++i) {
      float sum = bf16BitsToFloat(floatToBf16Bits(bf16BitsToFloat(data[i]) + other_));
      data[i] = floatToBf16Bits(op == dist::ReduceOp::Sum ? sum : sum / 2);
    }
    return true;
  }
  bool broadcast(void *, size_t, int, std::string &) override { return true; }
  bool barrier(std::string &) override { return true; }

  int wideCalls = 0, halfCalls = 0;

private:
  float other_;
};

std::unique_ptr<Graph> parse(const std::string &text) {
  DiagnosticEngine diag;
  auto g = parseGraph(text, "data-parallel.ir", diag);
  EXPECT_TRUE(g && verifyGraph(*g, diag)) << diagText(diag);
  return g;
}

std::string bucketGraph(const std::string &attrs) {
  return "graph @bucket {\n"
         "  input %a : bf16[3]\n"
         "  input %b : f32[2]\n"
         "  %a.avg, %b.avg = all_reduce(%a, %b) {" +
         attrs +
         "} : (bf16[3], f32[2]) -> (bf16[3], f32[2])\n"
         "  output %a.avg, %b.avg\n"
         "}\n";
}

std::vector<double> read(const Program &p, const Value *v) {
  std::vector<double> out(v->type().numElements());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = kernels::loadAsDouble(v->dtype(), p.data(v), i);
  return out;
}

void write(Program &p, const Value *v, const std::vector<double> &values) {
  for (size_t i = 0; i < values.size(); ++i)
    kernels::storeFromDouble(v->dtype(), p.data(v), i, values[i]);
}

/// `g` compiled on `backend` with `comm` as the job's communicator; with
/// `diagnostics` the compile is expected to fail and they receive its
/// messages.
std::unique_ptr<Program> compileWith(const Graph &g, Backend &backend, dist::Communicator &comm,
                                     std::string *diagnostics = nullptr, bool fuse = true) {
  DiagnosticEngine diag;
  CompileOptions opts;
  opts.communicator = &comm;
  opts.fuseElementwise = fuse;
  auto p = Program::compile(g, backend, diag, opts);
  if (diagnostics) {
    EXPECT_FALSE(p);
    *diagnostics = diagText(diag);
  } else {
    EXPECT_TRUE(p) << diagText(diag);
  }
  return p;
}

TEST(DataParallel, KernelAveragesABucketInF32AndRoundsOnce) {
  auto g = parse(bucketGraph("ranks = 2"));
  ASSERT_TRUE(g);
  TwoRanks comm(1.0f);
  auto backend = createCpuRefBackend();
  auto p = compileWith(*g, *backend, comm);
  ASSERT_TRUE(p);
  write(*p, g->lookup("a"), {1.0, 2.0, 0.00390625});
  write(*p, g->lookup("b"), {3.0, -1.0});
  p->run(0);
  EXPECT_EQ(comm.wideCalls, 1); // one collective for the whole bucket
  // (x + 1) / 2 in f32, then bf16 once: 0.501953125 (= 0.5 + 2^-9) needs
  // 8 mantissa bits, bf16 has 7: it ties to even, 0.5.
  EXPECT_EQ(read(*p, g->lookup("a.avg")), (std::vector<double>{1.0, 1.5, 0.5}));
  EXPECT_EQ(read(*p, g->lookup("b.avg")), (std::vector<double>{2.0, 0.0}));
}

TEST(DataParallel, KernelSendsHalfGradientsAsTheyAre) {
  std::string text = "graph @half {\n"
                     "  input %a : bf16[2]\n"
                     "  %a.avg = all_reduce(%a) {dtype = bf16, ranks = 2, reduce = \"sum\"} : "
                     "(bf16[2]) -> bf16[2]\n"
                     "  output %a.avg\n"
                     "}\n";
  auto g = parse(text);
  ASSERT_TRUE(g);
  TwoRanks comm(0.5f);
  auto backend = createCpuRefBackend();
  auto p = compileWith(*g, *backend, comm);
  ASSERT_TRUE(p);
  write(*p, g->lookup("a"), {1.0, 256.0});
  p->run(0);
  EXPECT_EQ(comm.halfCalls, 1);
  EXPECT_EQ(comm.wideCalls, 0);
  // 256 + 0.5 rounds to 256 in bf16 (8 bits of mantissa).
  EXPECT_EQ(read(*p, g->lookup("a.avg")), (std::vector<double>{1.5, 256.0}));
}

TEST(DataParallel, KernelReducesOncePerAccumulationGroup) {
  auto g = parse(bucketGraph("accumulate = 2, ranks = 2"));
  ASSERT_TRUE(g);
  TwoRanks comm(1.0f);
  auto backend = createCpuRefBackend();
  auto p = compileWith(*g, *backend, comm);
  ASSERT_TRUE(p);
  write(*p, g->lookup("a"), {1.0, 2.0, 3.0});
  write(*p, g->lookup("b"), {3.0, -1.0});
  p->run(0); // mid-group: passed through
  EXPECT_EQ(comm.wideCalls, 0);
  EXPECT_EQ(read(*p, g->lookup("b.avg")), (std::vector<double>{3.0, -1.0}));
  p->run(1); // the group's last micro-step
  EXPECT_EQ(comm.wideCalls, 1);
  EXPECT_EQ(read(*p, g->lookup("b.avg")), (std::vector<double>{2.0, 0.0}));
}

TEST(DataParallel, ProgramRefusesAJobOfAnotherSizeOrNone) {
  auto g = parse(bucketGraph("ranks = 3"));
  ASSERT_TRUE(g);
  auto backend = createCpuRefBackend();
  TwoRanks comm(0);
  for (dist::Communicator *c :
       {static_cast<dist::Communicator *>(nullptr), static_cast<dist::Communicator *>(&comm)}) {
    DiagnosticEngine diag;
    CompileOptions opts;
    opts.communicator = c;
    EXPECT_FALSE(Program::compile(*g, *backend, diag, opts));
    EXPECT_NE(diagText(diag).find(c ? "rewritten for 3 ranks, but this job has 2"
                                    : "run it under a launcher (mpirun -np 3 ampc ...)"),
              std::string::npos)
        << diagText(diag);
  }
}

/// A two-layer MLP through the training pipeline at O2 for `ranks`, with
/// `bucketBytes` per bucket.
std::unique_ptr<Graph> trainGraph(int64_t ranks, int64_t bucketBytes, const char *wire = "f32",
                                  int64_t accumulate = 1) {
  std::string text = "graph @mlp {\n"
                     "  meta {amp.opt_level = \"O2\", dist.allreduce_dtype = \"" +
                     std::string(wire) + "\", dist.bucket_bytes = " + std::to_string(bucketBytes) +
                     ", dist.ranks = " + std::to_string(ranks) +
                     ", optimizer = \"sgd\", optimizer.lr = 0.1, train.accumulate = " +
                     std::to_string(accumulate) +
                     "}\n"
                     "  input %x : f32[4,8]\n"
                     "  input %y : f32[4,2]\n"
                     "  param %w1 : f32[16,8] init uniform(-0.5, 0.5)\n"
                     "  param %b1 : f32[16] init zeros\n"
                     "  param %w2 : f32[2,16] init uniform(-0.5, 0.5)\n"
                     "  %h = linear(%x, %w1, %b1) : (f32[4,8], f32[16,8], f32[16]) -> f32[4,16]\n"
                     "  %r = relu(%h) : (f32[4,16]) -> f32[4,16]\n"
                     "  %z = linear(%r, %w2) : (f32[4,16], f32[2,16]) -> f32[4,2]\n"
                     "  %loss = mse_loss(%z, %y) : (f32[4,2], f32[4,2]) -> f32[] role(loss)\n"
                     "  output %loss\n"
                     "}\n";
  DiagnosticEngine diag;
  auto g = parseGraph(text, "mlp.ir", diag);
  PassManager pm;
  pm.setVerifyEach(true);
  EXPECT_TRUE(g &&
              pm.addByNames("assign-precision,autodiff,optimizer,master-weights,"
                            "data-parallel,loss-scale,cast-optimize,dce",
                            diag) &&
              pm.run(*g, diag))
      << diagText(diag);
  return diag.hasErrors() ? nullptr : std::move(g);
}

std::vector<const Node *> allReduces(const Graph &g) {
  std::vector<const Node *> out;
  for (const Node &n : g.nodes())
    if (n.kind() == OpKind::AllReduce)
      out.push_back(&n);
  return out;
}

TEST(DataParallel, OneRankLeavesTheGraphAlone) {
  auto g = trainGraph(1, 1 << 20);
  ASSERT_TRUE(g);
  EXPECT_TRUE(allReduces(*g).empty());
}

TEST(DataParallel, BucketsFollowTheBackwardAndTheUpdatesReadTheAverages) {
  // 64 bytes a bucket: w2's gradient (32 f32 = 128 B) alone, then w1's
  // (512 B), then b1's (64 B): three buckets, in the order the backward
  // completes them (the last layer's first).
  auto g = trainGraph(2, 64);
  ASSERT_TRUE(g);
  std::vector<const Node *> reduces = allReduces(*g);
  ASSERT_EQ(reduces.size(), 3u);
  EXPECT_EQ(reduces[0]->operand(0)->name(), "w2.grad");
  EXPECT_EQ(reduces[1]->operand(0)->name(), "w1.grad");
  EXPECT_EQ(reduces[2]->operand(0)->name(), "b1.grad");
  for (const Node *r : reduces) {
    attrs::AllReduce a(*r);
    EXPECT_EQ(r->opName(), "all_reduce");
    EXPECT_EQ(a.ranks(), 2);
    EXPECT_EQ(a.dtype(), DType::F32);
    // Right after the node that completes its bucket.
    EXPECT_EQ(&*std::prev(r->getIterator()), r->operand(0)->definingNode());
    // Only the all-reduce reads the rank's own gradient.
    EXPECT_EQ(r->operand(0)->uses().size(), 1u);
    for (const Use &u : r->result(0)->uses())
      EXPECT_TRUE(u.user->kind() == OpKind::UnscaleCheck || u.user->role() == NodeRole::Optimizer)
          << u.user->opName().str();
  }
}

TEST(DataParallel, HalfWireKeepsHalfGradientsHalf) {
  auto g = trainGraph(2, 1 << 20, "half");
  ASSERT_TRUE(g);
  std::vector<const Node *> reduces = allReduces(*g);
  ASSERT_EQ(reduces.size(), 1u); // every gradient is bf16 at O2 on the cpu
  EXPECT_EQ(attrs::AllReduce(*reduces[0]).dtype(), DType::BF16);
}

TEST(DataParallel, AccumulationReducesTheAccumulatedGradients) {
  auto g = trainGraph(2, 1 << 20, "f32", 2);
  ASSERT_TRUE(g);
  std::vector<const Node *> reduces = allReduces(*g);
  ASSERT_EQ(reduces.size(), 1u);
  EXPECT_EQ(attrs::AllReduce(*reduces[0]).accumulate(), 2);
  for (const Value *v : reduces[0]->operands())
    EXPECT_EQ(v->definingNode()->kind(), OpKind::AccumulateGrad) << v->name().str();
}

/// A host backend with a collective engine of its own, as the CUDA backend
/// has NCCL: it serves (at once, or starting in run() and finishing later,
/// as NCCL on its own stream), declines or fails
/// Backend::deviceCollective. Every kernel logs its runs.
class EngineBackend final : public HostBackend {
public:
  enum class Mode { Serve, ServeLater, Decline, Fail };
  explicit EngineBackend(Mode mode) : mode_(mode) {}
  llvm::StringRef name() const override { return "engine"; }
  std::unique_ptr<kernels::NodeKernel> prepare(const Node &n) override {
    struct Logged final : kernels::NodeKernel {
      std::unique_ptr<kernels::NodeKernel> kernel;
      std::vector<std::string> *log;
      void run(const kernels::KernelArgs &args) override {
        log->push_back(args.node->result(0)->name().str());
        kernel->run(args);
      }
    };
    auto logged = std::make_unique<Logged>();
    logged->kernel = HostBackend::prepare(n);
    logged->log = &log;
    return logged->kernel ? std::move(logged) : nullptr;
  }
  std::unique_ptr<kernels::NodeKernel> deviceCollective(const Node &n, dist::Communicator &comm,
                                                        std::string &err) override {
    ++asked;
    if (mode_ == Mode::Fail)
      err = "the engine did not start";
    if (mode_ != Mode::Serve && mode_ != Mode::ServeLater)
      return nullptr;
    // Doubles every operand: what the engine computed shows in the results.
    struct Doubling final : kernels::NodeKernel {
      EngineBackend *engine;
      bool later;
      Doubling(EngineBackend *e, bool l) : engine(e), later(l) {}
      bool finishesLater() const override { return later; }
      void run(const kernels::KernelArgs &args) override {
        ++engine->runs;
        engine->log.push_back("start " + args.node->result(0)->name().str());
        if (!later)
          compute(args);
      }
      void finish(const kernels::KernelArgs &args) override {
        engine->log.push_back("finish " + args.node->result(0)->name().str());
        compute(args);
      }
      static void compute(const kernels::KernelArgs &args) {
        for (size_t i = 0; i < args.inputs.size(); ++i)
          for (int64_t e = 0; e < args.in(i).numElements(); ++e)
            kernels::storeFromDouble(
                args.out(i).dtype(), args.out(i).data, e,
                2 * kernels::loadAsDouble(args.in(i).dtype(), args.in(i).data, e));
      }
    };
    return std::make_unique<Doubling>(this, mode_ == Mode::ServeLater);
  }
  int asked = 0, runs = 0;
  std::vector<std::string> log;

private:
  Mode mode_;
};

TEST(DataParallel, ABackendsOwnEngineRunsTheCollective) {
  auto g = parse(bucketGraph("ranks = 2"));
  ASSERT_TRUE(g);
  TwoRanks comm(1.0f);
  EngineBackend backend(EngineBackend::Mode::Serve);
  auto p = compileWith(*g, backend, comm);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->deviceActivity().deviceCollectiveNodes, 1u);
  EXPECT_EQ(p->deviceActivity().hostFallbackNodes, 0u);
  write(*p, g->lookup("b"), {3.0, -1.0});
  p->run(0);
  EXPECT_EQ(backend.runs, 1);
  EXPECT_EQ(comm.wideCalls, 0); // the communicator only set the engine up
  EXPECT_EQ(read(*p, g->lookup("b.avg")), (std::vector<double>{6.0, -2.0}));
}

TEST(DataParallel, WithoutAnEngineTheCommunicatorRunsIt) {
  auto g = parse(bucketGraph("ranks = 2"));
  ASSERT_TRUE(g);
  TwoRanks comm(1.0f);
  EngineBackend backend(EngineBackend::Mode::Decline);
  auto p = compileWith(*g, backend, comm);
  ASSERT_TRUE(p);
  EXPECT_EQ(backend.asked, 1);
  EXPECT_EQ(p->deviceActivity().deviceCollectiveNodes, 0u);
  write(*p, g->lookup("b"), {3.0, -1.0});
  p->run(0);
  EXPECT_EQ(comm.wideCalls, 1);
  EXPECT_EQ(read(*p, g->lookup("b.avg")), (std::vector<double>{2.0, 0.0}));
}

TEST(DataParallel, AnEngineThatFailsFailsTheCompile) {
  auto g = parse(bucketGraph("ranks = 2"));
  ASSERT_TRUE(g);
  TwoRanks comm(1.0f);
  EngineBackend backend(EngineBackend::Mode::Fail);
  std::string messages;
  compileWith(*g, backend, comm, &messages);
  EXPECT_NE(messages.find("the engine did not start"), std::string::npos) << messages;
}

TEST(DataParallel, AnEngineIsNotAskedForAJobOfAnotherSize) {
  auto g = parse(bucketGraph("ranks = 3"));
  ASSERT_TRUE(g);
  TwoRanks comm(1.0f);
  EngineBackend backend(EngineBackend::Mode::Serve);
  std::string messages;
  compileWith(*g, backend, comm, &messages);
  EXPECT_EQ(backend.asked, 0);
  EXPECT_NE(messages.find("rewritten for 3 ranks, but this job has 2"), std::string::npos)
      << messages;
}

/// %a.avg's reduction is started, %c (which does not need it) runs, and it
/// is finished before %d reads it; %b.avg, which only the graph's outputs
/// read, is finished at the end of the step.
std::string laterGraph() {
  return "graph @later {\n"
         "  input %a : f32[2]\n"
         "  input %b : f32[2]\n"
         "  %a.avg = all_reduce(%a) {ranks = 2} : (f32[2]) -> f32[2]\n"
         "  %b.avg = all_reduce(%b) {ranks = 2} : (f32[2]) -> f32[2]\n"
         "  %c = mul(%b, %b) : (f32[2], f32[2]) -> f32[2]\n"
         "  %d = add(%a.avg, %c) : (f32[2], f32[2]) -> f32[2]\n"
         "  %e = add(%c, %c) : (f32[2], f32[2]) -> f32[2]\n"
         "  output %d, %e, %b.avg\n"
         "}\n";
}

TEST(DataParallel, AnEngineMayFinishBeforeTheFirstReader) {
  auto g = parse(laterGraph());
  ASSERT_TRUE(g);
  TwoRanks comm(1.0f);
  EngineBackend backend(EngineBackend::Mode::ServeLater);
  auto p = compileWith(*g, backend, comm, nullptr, /*fuse=*/false); // one log line a node
  ASSERT_TRUE(p);
  write(*p, g->lookup("a"), {1.0, 2.0});
  write(*p, g->lookup("b"), {3.0, -1.0});
  for (uint64_t step = 0; step < 2; ++step) {
    backend.log.clear();
    p->run(step);
    EXPECT_EQ(backend.log, (std::vector<std::string>{"start a.avg", "start b.avg", "c",
                                                     "finish a.avg", "d", "e", "finish b.avg"}));
  }
  EXPECT_EQ(read(*p, g->lookup("d")), (std::vector<double>{11.0, 5.0}));
  EXPECT_EQ(read(*p, g->lookup("b.avg")), (std::vector<double>{6.0, -2.0}));
}

TEST(DataParallel, AnObserverSeesAFinishedCollective) {
  auto g = parse(laterGraph());
  ASSERT_TRUE(g);
  TwoRanks comm(1.0f);
  EngineBackend backend(EngineBackend::Mode::ServeLater);
  auto p = compileWith(*g, backend, comm, nullptr, /*fuse=*/false); // one log line a node
  ASSERT_TRUE(p);
  write(*p, g->lookup("a"), {1.0, 2.0});
  write(*p, g->lookup("b"), {3.0, -1.0});
  std::vector<double> seen;
  p->setKernelObserver([&](unsigned position) {
    if (position == 0)
      seen = read(*p, g->lookup("a.avg"));
  });
  p->run(0);
  EXPECT_EQ(seen, (std::vector<double>{2.0, 4.0}));
  EXPECT_EQ(backend.log[1], "finish a.avg");
}

} // namespace
