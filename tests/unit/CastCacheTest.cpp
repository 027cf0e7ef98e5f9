//===- CastCacheTest.cpp - Cached casts of state tensors in the runtime ---===//
//
// Counts of hits and misses in training, under gradient accumulation, in
// evaluation and around skipped updates; state versions; bit-identical
// results with the cache on and off; the cached copies' place in the memory
// plan and the plan against measured bytes.
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "kernels/common/Random.h"
#include "kernels/common/Storage.h"
#include "passes/PassManager.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace ampc;

namespace {

/// A weight tied across two layers, cast to bf16 once for each (two
/// cacheable cast nodes with one key, as if nothing merged them):
/// z = (x W^T) W^T in bf16, mse against y in f32. W is f32[3,3], so each
/// cached copy is 9 bf16 elements = 18 bytes.
std::string tiedModel(const std::string &meta) {
  return "graph @tied {\n"
         "  meta {" +
         meta +
         "}\n"
         "  input %x : f32[4,3]\n"
         "  input %y : f32[4,3]\n"
         "  param %w : f32[3,3] init uniform(-0.5, 0.5)\n"
         "  %x16 = cast(%x) {to = bf16} : (f32[4,3]) -> bf16[4,3]\n"
         "  %w16 = cast(%w) {cacheable = true, to = bf16} : (f32[3,3]) -> bf16[3,3]\n"
         "  %h = linear(%x16, %w16) : (bf16[4,3], bf16[3,3]) -> bf16[4,3]\n"
         "  %w16b = cast(%w) {cacheable = true, to = bf16} : (f32[3,3]) -> bf16[3,3]\n"
         "  %z = linear(%h, %w16b) : (bf16[4,3], bf16[3,3]) -> bf16[4,3]\n"
         "  %z32 = cast(%z) {to = f32} : (bf16[4,3]) -> f32[4,3]\n"
         "  %loss = mse_loss(%z32, %y) : (f32[4,3], f32[4,3]) -> f32[] role(loss)\n"
         "  output %loss\n"
         "}\n";
}
constexpr uint64_t kCopyBytes = 18;

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const auto &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

/// Parses `text`, runs `passes` (comma-separated; empty: none) and verifies.
std::unique_ptr<Graph> lower(const std::string &text, llvm::StringRef passes) {
  DiagnosticEngine diag;
  auto g = parseGraph(text, "cast-cache.ir", diag);
  if (g && !passes.empty()) {
    PassManager pm;
    if (!pm.addByNames(passes, diag) || !pm.run(*g, diag))
      g.reset();
  }
  if (g && !verifyGraph(*g, diag))
    g.reset();
  EXPECT_TRUE(g) << diagText(diag);
  return g;
}

std::unique_ptr<Program> compile(const Graph &g, Backend &backend, bool castCache) {
  DiagnosticEngine diag;
  CompileOptions opts;
  opts.initSeed = 7;
  opts.castCache = castCache;
  auto p = Program::compile(g, backend, diag, opts);
  EXPECT_TRUE(p) << diagText(diag);
  return p;
}

/// Reads through a const Program, which does not count as a write.
std::vector<double> read(const Program &p, const Value *v) {
  const void *data = p.data(v);
  std::vector<double> out(v->type().numElements());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = kernels::loadAsDouble(v->dtype(), data, i);
  return out;
}

void write(Program &p, const Value *v, const std::vector<double> &values) {
  ASSERT_EQ(values.size(), static_cast<size_t>(v->type().numElements()));
  void *dst = p.data(v);
  for (size_t i = 0; i < values.size(); ++i)
    kernels::storeFromDouble(v->dtype(), dst, i, values[i]);
}

/// `count` deterministic values in [-1, 1) from stream `stream`.
std::vector<double> values(int count, uint64_t stream, int first = 0) {
  std::vector<double> v;
  for (int i = first; i < first + count; ++i)
    v.push_back(-1 + 2 * kernels::uniform01Double(11, stream, i));
  return v;
}

/// Fills x and y with the batch of `step`.
void bindBatch(Program &p, const Graph &g, int step) {
  write(p, g.lookup("x"), values(12, 1, step * 12));
  write(p, g.lookup("y"), values(12, 2, step * 12));
}

std::string bytesOf(const Program &p, const Value *v) {
  return std::string(static_cast<const char *>(p.data(v)), v->type().sizeInBytes());
}

TEST(CastCache, TrainingCastsAWeightOncePerStep) {
  auto g = lower(tiedModel("optimizer = \"sgd\", optimizer.lr = 0.1"), "autodiff,optimizer");
  ASSERT_TRUE(g);
  auto backend = createCpuRefBackend();
  auto p = compile(*g, *backend, true);
  ASSERT_TRUE(p);
  const Value *w = g->lookup("w");
  const int steps = 5;
  for (int step = 0; step < steps; ++step) {
    bindBatch(*p, *g, step);
    p->run(step);
  }
  // Each step: the first cast of w misses (w changed after the last step),
  // the second, with the same key, hits.
  const CastCacheStats &s = p->castCacheStats();
  EXPECT_EQ(s.misses, 5u);
  EXPECT_EQ(s.hits, 5u);
  EXPECT_EQ(s.bytesSaved, 5 * kCopyBytes);
  EXPECT_EQ(p->stateVersion(w), 5u);

  std::string line;
  llvm::raw_string_ostream os(line);
  s.print(os);
  EXPECT_EQ(os.str(), "cast cache: 5 casts of weights reused (90 bytes not recast), 5 made after a "
                      "weight change\n");
}

TEST(CastCache, AccumulationCastsOncePerOptimizerStep) {
  auto g = lower(tiedModel("optimizer = \"sgd\", optimizer.lr = 0.1, optimizer.momentum = 0.9, "
                           "train.accumulate = 3"),
                 "autodiff,optimizer");
  ASSERT_TRUE(g);
  auto backend = createCpuRefBackend();
  auto p = compile(*g, *backend, true);
  ASSERT_TRUE(p);
  const Value *w = g->lookup("w");
  std::vector<double> before = read(*p, w);
  const int microSteps = 7;
  for (int m = 0; m < microSteps; ++m) {
    bindBatch(*p, *g, m);
    p->run(m);
    // The weight changes only on micro-steps 2 and 5 (m % 3 == 2).
    if (m == 0 || m == 1) {
      EXPECT_EQ(read(*p, w), before) << m;
    }
    if (m == 2) {
      EXPECT_NE(read(*p, w), before);
    }
  }
  // Misses at micro-steps 0, 3 and 6 (after the updates at 2 and 5): one per
  // optimizer step; the other 2 * 7 - 3 casts hit.
  EXPECT_EQ(p->castCacheStats().misses, 3u);
  EXPECT_EQ(p->castCacheStats().hits, 11u);
  EXPECT_EQ(p->stateVersion(w), 2u);
  // The momentum buffer and the step count change with the weight; the
  // gradient accumulator every micro-step.
  EXPECT_EQ(p->stateVersion(g->lookup("w.momentum_buffer")), 2u);
  EXPECT_EQ(p->stateVersion(g->lookup("optimizer.step")), 2u);
  EXPECT_EQ(p->stateVersion(g->lookup("w.grad_accum")), 7u);
  EXPECT_EQ(read(*p, g->lookup("optimizer.step"))[0], 2.0);
}

TEST(CastCache, EvaluationCastsOnceUntilTheHostWritesTheWeight) {
  auto g = lower(tiedModel(""), "");
  ASSERT_TRUE(g);
  auto backend = createCpuRefBackend();
  auto cached = compile(*g, *backend, true);
  auto uncached = compile(*g, *backend, false);
  ASSERT_TRUE(cached && uncached);
  const Value *w = g->lookup("w"), *loss = g->lookup("loss");
  for (int step = 0; step < 4; ++step) {
    for (Program *p : {cached.get(), uncached.get()}) {
      bindBatch(*p, *g, step);
      p->run(0);
    }
    EXPECT_EQ(bytesOf(*cached, loss), bytesOf(*uncached, loss)) << step;
  }
  // No state updates: 1 miss in total, then 2 * 4 - 1 hits.
  EXPECT_EQ(cached->castCacheStats().misses, 1u);
  EXPECT_EQ(cached->castCacheStats().hits, 7u);
  EXPECT_EQ(cached->stateVersion(w), 0u);
  // Without the cache nothing is counted.
  EXPECT_EQ(uncached->castCacheStats().misses, 0u);
  EXPECT_EQ(uncached->castCacheStats().hits, 0u);

  // New weights from the host (as the trainer copies them into its
  // evaluation program) make the next cast miss, and the result follows.
  std::vector<double> newWeights = values(9, 3);
  write(*cached, w, newWeights);
  write(*uncached, w, newWeights);
  EXPECT_EQ(cached->stateVersion(w), 1u);
  std::string lossBefore = bytesOf(*cached, loss);
  for (Program *p : {cached.get(), uncached.get()})
    p->run(0);
  EXPECT_EQ(cached->castCacheStats().misses, 2u);
  EXPECT_EQ(cached->castCacheStats().hits, 8u);
  EXPECT_NE(bytesOf(*cached, loss), lossBefore);
  EXPECT_EQ(bytesOf(*cached, loss), bytesOf(*uncached, loss));
}

/// A hand-written update with grad_scale and skip operands. %v takes the
/// updated value of %w without being an operand of the update, so that
/// update is copied back even when the kernel reports "unchanged".
const char *kSkipModel = R"(graph @skip {
  input %x : f32[2,3]
  input %g : f32[3,3]
  input %lr : f32[]
  input %scale : f32[]
  input %skip : f32[]
  param %w : f32[3,3] init uniform(-0.5, 0.5)
  param %v : f32[3,3] init zeros
  %x16 = cast(%x) {to = bf16} : (f32[2,3]) -> bf16[2,3]
  %w16 = cast(%w) {cacheable = true, to = bf16} : (f32[3,3]) -> bf16[3,3]
  %y = linear(%x16, %w16) : (bf16[2,3], bf16[3,3]) -> bf16[2,3]
  %w.next = sgd_update(%w, %g, %lr, %scale, %skip) : (f32[3,3], f32[3,3], f32[], f32[], f32[]) -> f32[3,3] role(optimizer)
  update %w = %w.next
  update %v = %w.next
  output %y
}
)";

TEST(CastCache, SkippedUpdateKeepsTheVersionAndTheCachedCast) {
  auto g = lower(kSkipModel, "");
  ASSERT_TRUE(g);
  auto backend = createCpuRefBackend();
  auto p = compile(*g, *backend, true);
  ASSERT_TRUE(p);
  const Value *w = g->lookup("w"), *v = g->lookup("v");
  write(*p, g->lookup("x"), values(6, 4));
  write(*p, g->lookup("g"), values(9, 5));
  write(*p, g->lookup("lr"), {0.5});
  write(*p, g->lookup("scale"), {1.0});
  write(*p, g->lookup("skip"), {1.0});
  std::vector<double> w0 = read(*p, w);

  p->run(0);
  p->run(1);
  EXPECT_EQ(read(*p, w), w0);
  EXPECT_EQ(p->stateVersion(w), 0u);
  // %v is written from the update's result although the update skipped.
  EXPECT_EQ(read(*p, v), w0);
  EXPECT_EQ(p->stateVersion(v), 2u);
  EXPECT_EQ(p->castCacheStats().misses, 1u);
  EXPECT_EQ(p->castCacheStats().hits, 1u);

  // An applied update: w -= 0.5 * g, in f32; then the cast misses again and
  // sees the new weight.
  write(*p, g->lookup("skip"), {0.0});
  p->run(2);
  std::vector<double> grad = values(9, 5), w1 = read(*p, w);
  for (int i = 0; i < 9; ++i)
    EXPECT_EQ(w1[i], double(float(float(w0[i]) - 0.5f * float(grad[i])))) << i;
  EXPECT_EQ(p->stateVersion(w), 1u);
  EXPECT_EQ(p->castCacheStats().misses, 1u); // the cast ran before the update
  write(*p, g->lookup("skip"), {1.0});
  p->run(3);
  EXPECT_EQ(p->castCacheStats().misses, 2u);
  EXPECT_EQ(p->castCacheStats().hits, 2u);
  // The cached copy holds bf16(w1), rounded to nearest even by hand here.
  const uint16_t *w16 = static_cast<const uint16_t *>(std::as_const(*p).data(g->lookup("w16")));
  for (int i = 0; i < 9; ++i) {
    float f = static_cast<float>(w1[i]);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    uint32_t rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
    EXPECT_EQ(w16[i], rounded) << i;
  }
}

/// Runs `steps` training steps with the cache on and off and requires every
/// state tensor and the loss to agree bit for bit after each step.
void expectBitIdentical(const std::string &meta, int steps) {
  SCOPED_TRACE(meta);
  auto g = lower(tiedModel(meta), "autodiff,optimizer");
  ASSERT_TRUE(g);
  auto backend = createCpuRefBackend();
  auto on = compile(*g, *backend, true);
  auto off = compile(*g, *backend, false);
  ASSERT_TRUE(on && off);
  for (int step = 0; step < steps; ++step) {
    for (Program *p : {on.get(), off.get()}) {
      bindBatch(*p, *g, step);
      p->run(step);
    }
    EXPECT_EQ(bytesOf(*on, g->lookup("loss")), bytesOf(*off, g->lookup("loss"))) << step;
    for (const Value *s : g->state())
      EXPECT_EQ(bytesOf(*on, s), bytesOf(*off, s)) << s->name().str() << " at step " << step;
  }
  EXPECT_GT(on->castCacheStats().hits, 0u);
  // Training must have moved the weight, or the comparison proves little.
  EXPECT_NE(read(*on, g->lookup("w")), read(*compile(*g, *backend, true), g->lookup("w")));
}

TEST(CastCache, ResultsAreBitIdenticalWithTheCacheOnAndOff) {
  expectBitIdentical("optimizer = \"sgd\", optimizer.lr = 0.1", 4);
  expectBitIdentical("optimizer = \"adam\", optimizer.lr = 0.01, train.accumulate = 2, "
                     "train.clip_grad_norm = 0.5",
                     6);
}

TEST(CastCache, CachedCopiesArePersistentAndCountedInThePlan) {
  auto g = lower(tiedModel("optimizer = \"sgd\", optimizer.lr = 0.1"), "autodiff,optimizer");
  ASSERT_TRUE(g);
  auto backend = createCpuRefBackend();
  auto on = compile(*g, *backend, true);
  auto off = compile(*g, *backend, false);
  ASSERT_TRUE(on && off);
  const Value *w16 = g->lookup("w16"), *w16b = g->lookup("w16b");

  // On: both casts share one persistent buffer after w's.
  const MemoryPlan &planOn = on->plan();
  const PlannedBuffer *a = planOn.find(w16), *b = planOn.find(w16b);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->arena, ArenaKind::Persistent);
  EXPECT_EQ(a->cls, BufferClass::CachedCast);
  EXPECT_EQ(b->cls, BufferClass::CachedCast);
  EXPECT_EQ(a->offset, b->offset);
  EXPECT_EQ(a->offset, 64u); // w: 36 bytes, aligned to 64
  EXPECT_EQ(planOn.persistentBytes, 128u);
  EXPECT_EQ(planOn.bytesAtPeak[unsigned(BufferClass::CachedCast)], kCopyBytes);
  EXPECT_EQ(planOn.bytesAtPeak[unsigned(BufferClass::Parameter)], 36u);

  // Off: ordinary step-arena cast copies, and the persistent arena is w alone.
  const MemoryPlan &planOff = off->plan();
  EXPECT_EQ(planOff.find(w16)->arena, ArenaKind::Step);
  EXPECT_EQ(planOff.find(w16)->cls, BufferClass::CastCopy);
  EXPECT_EQ(planOff.persistentBytes, 64u);
  EXPECT_EQ(planOff.bytesAtPeak[unsigned(BufferClass::CachedCast)], 0u);

  // The plan's table shows the row in the persistent arena's section.
  std::string table;
  llvm::raw_string_ostream os(table);
  planOn.print(os);
  size_t row = os.str().find("cached cast copies");
  ASSERT_NE(row, std::string::npos) << os.str();
  EXPECT_LT(os.str().find("persistent arena"), row);
  EXPECT_GT(os.str().find("step arena"), row);
  std::istringstream fields(os.str().substr(row + strlen("cached cast copies")));
  uint64_t shown = 0;
  fields >> shown;
  EXPECT_EQ(shown, kCopyBytes);

  // Measured bytes agree with the plan either way.
  for (Program *p : {on.get(), off.get()}) {
    for (int step = 0; step < 3; ++step) {
      bindBatch(*p, *g, step);
      p->run(step);
    }
    MeasuredMemory m = p->measure();
    EXPECT_TRUE(m.guardsIntact);
    EXPECT_EQ(m.allocatedBytes, p->plan().peakBytes());
    EXPECT_LE(m.touchedStepBytes, p->plan().stepBytes);
  }
}

TEST(CastCache, KeysIncludeTheDtypeAndNeedTheAttribute) {
  // Two cacheable casts of w to different dtypes are two entries; a cast of
  // w without `cacheable` and a cacheable cast of an input are not cached.
  auto g = lower(R"(graph @keys {
  input %x : f32[3,3]
  param %w : f32[3,3] init uniform(-0.5, 0.5)
  %a = cast(%w) {cacheable = true, to = bf16} : (f32[3,3]) -> bf16[3,3]
  %b = cast(%w) {cacheable = true, to = f16} : (f32[3,3]) -> f16[3,3]
  %c = cast(%w) {to = f16} : (f32[3,3]) -> f16[3,3]
  %d = cast(%x) {cacheable = true, to = f16} : (f32[3,3]) -> f16[3,3]
  output %a, %b, %c, %d
}
)",
                 "");
  ASSERT_TRUE(g);
  auto backend = createCpuRefBackend();
  auto p = compile(*g, *backend, true);
  ASSERT_TRUE(p);
  const MemoryPlan &plan = p->plan();
  EXPECT_EQ(plan.find(g->lookup("a"))->cls, BufferClass::CachedCast);
  EXPECT_EQ(plan.find(g->lookup("b"))->cls, BufferClass::CachedCast);
  EXPECT_NE(plan.find(g->lookup("a"))->offset, plan.find(g->lookup("b"))->offset);
  EXPECT_EQ(plan.find(g->lookup("c"))->cls, BufferClass::CastCopy);
  EXPECT_EQ(plan.find(g->lookup("d"))->cls, BufferClass::CastCopy);
  EXPECT_EQ(plan.persistentBytes, 3 * 64u);
  write(*p, g->lookup("x"), values(9, 6));
  for (int step = 0; step < 3; ++step)
    p->run(step);
  EXPECT_EQ(p->castCacheStats().misses, 2u);
  EXPECT_EQ(p->castCacheStats().hits, 4u);
  EXPECT_EQ(p->castCacheStats().bytesSaved, 4 * kCopyBytes);
  // The cached f16 copy equals the uncached one, element for element.
  EXPECT_EQ(bytesOf(*p, g->lookup("b")), bytesOf(*p, g->lookup("c")));
}

} // namespace
