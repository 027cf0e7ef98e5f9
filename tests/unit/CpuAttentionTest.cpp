//===- CpuAttentionTest.cpp - The cpu attention loops vs cpu-ref ----------===//
//
// scaled_dot_product_attention and its backward on the cpu backend
// (kernels/cpu/LoopAttention.cpp) against the reference kernels, in f32,
// bf16 and f16, causal and not: the kernel must be a loop kernel and give
// the reference's bits (it keeps the order of every sum), with the AVX-512
// and the baseline vector copies and on 1, 3 and all threads, leaving the
// guard bytes around its buffers alone. Shapes cover query and key lengths
// that differ, head sizes off the vector width, no batch dims and one or
// two, several query blocks with a remainder, long key rows (short blocks),
// a single query, and many slices split over the threads. Then the same
// through compiled programs, and the nodes of training graphs at O0-O2.
//
// bf16 attention on a CPU with AVX512_BF16 runs dot-product loops instead
// (kernels/cpu/LoopAttentionBf16.cpp), which round the probabilities to
// bf16 and so do not keep the reference's bits: the bit-exact tests turn
// them off (ExactLoops), and the Bf16Dot tests hold them to f64 attention
// within bf16's rounding, no worse than a few times the exact loops' error.
//
//===----------------------------------------------------------------------===//
#include "CpuLoopTestUtil.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/Builder.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Families.h"
#include "kernels/cpu/LoopKernels.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace ampc;
using namespace ampc::testing;

using Dims = std::vector<int64_t>;

const DType kDTypes[] = {DType::F32, DType::BF16, DType::F16};

/// q[batch..., queries, head], k[batch..., keys, head], v[batch..., keys, value].
struct Shape {
  Dims batch;
  int64_t queries, keys, head, value;
};

const Shape kShapes[] = {
    {{2, 3}, 37, 37, 20, 12}, // two batch dims, head sizes off the vector width
    {{5}, 13, 29, 7, 33},     // more keys than queries, one batch dim
    {{}, 29, 13, 16, 16},     // fewer keys than queries, no batch dims
    {{2}, 150, 150, 24, 40},  // three query blocks, the last one short
    {{1}, 40, 1000, 16, 8},   // long key rows: short query blocks
    {{3, 2}, 1, 1, 5, 3},     // one query, one key
    {{4, 4}, 64, 64, 32, 32}, // the example transformer's heads, split over threads
    {{96}, 9, 9, 4, 4},       // many small slices
};

Dims with(const Dims &batch, int64_t rows, int64_t cols) {
  Dims dims = batch;
  dims.push_back(rows);
  dims.push_back(cols);
  return dims;
}

std::string describe(const Shape &s, DType t, bool causal) {
  std::string b;
  for (int64_t d : s.batch)
    b += std::to_string(d) + "x";
  return dtypeName(t).str() + " " + b + std::to_string(s.queries) + "q " + std::to_string(s.keys) +
         "k head " + std::to_string(s.head) + " value " + std::to_string(s.value) +
         (causal ? " causal" : "");
}

AttrMap attentionAttrs(bool causal, double scale = 0) {
  AttrMap attrs;
  attrs["causal"] = Attribute(causal);
  if (scale != 0)
    attrs["scale"] = Attribute(scale);
  return attrs;
}

/// query, key and value (and, for the backward, grad_output first).
std::vector<Operand> operands(const Shape &s, DType t, bool backward, uint64_t seed) {
  std::vector<Operand> ops;
  if (backward)
    ops.push_back(uniform(TensorType(t, with(s.batch, s.queries, s.value)), seed + 3));
  ops.push_back(uniform(TensorType(t, with(s.batch, s.queries, s.head)), seed));
  ops.push_back(uniform(TensorType(t, with(s.batch, s.keys, s.head)), seed + 1));
  ops.push_back(uniform(TensorType(t, with(s.batch, s.keys, s.value)), seed + 2));
  return ops;
}

/// While alive, bf16 attention runs the exact loops.
struct ExactLoops {
  ExactLoops() { kernels::cpu::setAttentionDotProductsAllowed(false); }
  ~ExactLoops() { kernels::cpu::setAttentionDotProductsAllowed(true); }
};

TEST(CpuAttention, ForwardIsBitExact) {
  ExactLoops exact;
  for (DType t : kDTypes)
    for (const Shape &s : kShapes)
      for (bool causal : {false, true}) {
        if (causal && s.queries != s.keys)
          continue;
        SCOPED_TRACE(describe(s, t, causal));
        expectBitIdentical("scaled_dot_product_attention", operands(s, t, false, 11),
                           attentionAttrs(causal));
      }
}

TEST(CpuAttention, BackwardIsBitExact) {
  ExactLoops exact;
  for (DType t : kDTypes)
    for (const Shape &s : kShapes)
      for (bool causal : {false, true}) {
        if (causal && s.queries != s.keys)
          continue;
        SCOPED_TRACE(describe(s, t, causal));
        expectBitIdentical("scaled_dot_product_attention_grad", operands(s, t, true, 21),
                           attentionAttrs(causal));
      }
}

TEST(CpuAttention, ExplicitScaleAndLargeScores) {
  // A scale that makes the scores large (the softmax's maximum matters)
  // and one that makes them tiny.
  ExactLoops exact;
  Shape s{{2}, 23, 23, 9, 17};
  for (DType t : kDTypes)
    for (double scale : {4.0, 1e-3})
      for (bool causal : {false, true}) {
        SCOPED_TRACE(describe(s, t, causal) + " scale " + std::to_string(scale));
        expectBitIdentical("scaled_dot_product_attention", operands(s, t, false, 31),
                           attentionAttrs(causal, scale));
        expectBitIdentical("scaled_dot_product_attention_grad", operands(s, t, true, 41),
                           attentionAttrs(causal, scale));
      }
}

TEST(CpuAttention, F64AndEmptyShapesRunTheReference) {
  auto declined = [](const std::string &op, const std::vector<Operand> &ops) {
    SCOPED_TRACE(describe(op, ops));
    OneLoopNode one(op, ops, attentionAttrs(false));
    ASSERT_TRUE(one.node) << one.error;
    EXPECT_FALSE(kernels::cpu::prepareLoopKernel(*one.node));
  };
  Shape s{{2}, 5, 6, 4, 3};
  declined("scaled_dot_product_attention", operands(s, DType::F64, false, 1));
  declined("scaled_dot_product_attention_grad", operands(s, DType::F64, true, 1));
  Shape noKeys{{2}, 5, 0, 4, 3};
  declined("scaled_dot_product_attention", operands(noKeys, DType::F32, false, 1));
  Shape noBatch{{0}, 5, 6, 4, 3};
  declined("scaled_dot_product_attention_grad", operands(noBatch, DType::F32, true, 1));
}

TEST(CpuAttention, CausalMaskNeverReadsMaskedKeys) {
  // The one deliberate difference from the reference: a masked key's value
  // row (and, backward, a masked position's gradient) is never read, where
  // the reference multiplies it by a zero probability -- so an infinity
  // there gives the reference NaNs and the loops finite results.
  Shape s{{1}, 8, 8, 4, 4};
  float inf = std::numeric_limits<float>::infinity();
  auto runFast = [](const std::string &op, const std::vector<Operand> &ops) {
    OneLoopNode one(op, ops, attentionAttrs(true));
    EXPECT_TRUE(one.node) << one.error;
    std::unique_ptr<kernels::NodeKernel> fast = loopKernelFor(*one.node);
    EXPECT_TRUE(fast);
    LoopResults got = runLoopKernel(*fast, *one.node, ops, 0);
    EXPECT_TRUE(got.guardsIntact);
    return got.outputs;
  };
  auto finiteFrom = [](const Bytes &out, int64_t from, int64_t to) {
    const float *x = reinterpret_cast<const float *>(out.data());
    for (int64_t i = from; i < to; ++i)
      if (!std::isfinite(x[i]))
        return false;
    return true;
  };
  // Forward: v[7][0] is infinite; rows 0-6 do not see key 7, row 7 does.
  std::vector<Operand> ops = operands(s, DType::F32, false, 51);
  std::memcpy(ops[2].bytes.data() + 7 * 4 * sizeof(float), &inf, sizeof(float));
  std::vector<Bytes> y = runFast("scaled_dot_product_attention", ops);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(finiteFrom(y[0], 0, 7 * 4));
  EXPECT_FALSE(finiteFrom(y[0], 7 * 4, 8 * 4));
  // Backward: dO[0][0] is infinite; only query row 0 sees key 0 alone, so
  // dk and dv of keys 1-7 stay finite.
  ops = operands(s, DType::F32, true, 52);
  std::memcpy(ops[0].bytes.data(), &inf, sizeof(float));
  std::vector<Bytes> grads = runFast("scaled_dot_product_attention_grad", ops);
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_TRUE(finiteFrom(grads[1], 4, 8 * 4));
  EXPECT_TRUE(finiteFrom(grads[2], 4, 8 * 4));
  EXPECT_FALSE(finiteFrom(grads[2], 0, 4));
}

//===----------------------------------------------------------------------===//
// bf16 through the dot products
//===----------------------------------------------------------------------===//

/// An operand's values as f64 (exactly: bf16 widens without rounding).
Operand asF64(const Operand &o) {
  TensorType t(DType::F64, o.type.dims());
  Bytes b(t.sizeInBytes());
  for (int64_t i = 0; i < t.numElements(); ++i)
    kernels::storeFromDouble(DType::F64, b.data(), i,
                             kernels::loadAsDouble(o.type.dtype(), o.bytes.data(), i));
  return {t, b};
}

/// Each output's elements as doubles.
std::vector<std::vector<double>> outputValues(const Node &node, const LoopResults &r) {
  std::vector<std::vector<double>> values;
  for (unsigned i = 0; i < node.numResults(); ++i) {
    const TensorType &t = node.result(i)->type();
    std::vector<double> v(t.numElements());
    for (int64_t e = 0; e < t.numElements(); ++e)
      v[e] = kernels::loadAsDouble(t.dtype(), r.outputs[i].data(), e);
    values.push_back(std::move(v));
  }
  return values;
}

/// The bf16 node of `op` run by the dot products and by the exact loops,
/// each against f64 attention of the same (bf16) values: every element of
/// the dot products within 2^-6 of the output's largest magnitude, their
/// root-mean-square error at most 3x the exact loops', the same bits on 1,
/// 3 and all threads. Returns whether some bits differ from the exact
/// loops' (so the dot products did run).
bool expectDotWithinBf16Rounding(const std::string &op, const std::vector<Operand> &bf16Ops,
                                 const AttrMap &attrs) {
  OneLoopNode one(op, bf16Ops, attrs);
  EXPECT_TRUE(one.node) << one.error;
  if (!one.node)
    return false;
  std::vector<Operand> f64Ops;
  for (const Operand &o : bf16Ops)
    f64Ops.push_back(asF64(o));
  OneLoopNode wide(op, f64Ops, attrs);
  EXPECT_TRUE(wide.node) << wide.error;
  if (!wide.node)
    return false;
  kernels::FunctionKernel ref(kernels::referenceKernel(wide.node->kind()));
  std::vector<std::vector<double>> truth =
      outputValues(*wide.node, runLoopKernel(ref, *wide.node, f64Ops, 0));
  std::unique_ptr<kernels::NodeKernel> fast = loopKernelFor(*one.node);
  if (!fast)
    return false;
  LoopResults dotRun = runLoopKernel(*fast, *one.node, bf16Ops, 0);
  EXPECT_TRUE(dotRun.guardsIntact) << "a kernel wrote outside its buffers";
  LoopResults exactRun;
  {
    ExactLoops exact;
    exactRun = runLoopKernel(*fast, *one.node, bf16Ops, 0);
  }
  int threads = omp_get_max_threads();
  for (int t : {1, 3}) {
    omp_set_num_threads(t);
    LoopResults again = runLoopKernel(*fast, *one.node, bf16Ops, 0);
    omp_set_num_threads(threads);
    EXPECT_TRUE(again.outputs == dotRun.outputs) << "other bits on " << t << " threads";
  }
  std::vector<std::vector<double>> dot = outputValues(*one.node, dotRun);
  std::vector<std::vector<double>> exact = outputValues(*one.node, exactRun);
  bool anyDifferent = false;
  for (size_t i = 0; i < truth.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    double largest = 0, dotSquares = 0, exactSquares = 0;
    for (double x : truth[i])
      largest = std::max(largest, std::fabs(x));
    int reported = 0;
    for (size_t e = 0; e < truth[i].size(); ++e) {
      double dotError = dot[i][e] - truth[i][e], exactError = exact[i][e] - truth[i][e];
      dotSquares += dotError * dotError;
      exactSquares += exactError * exactError;
      anyDifferent |= dot[i][e] != exact[i][e];
      if (std::fabs(dotError) > 0x1p-6 * largest && reported++ < 5)
        ADD_FAILURE() << "element " << e << ": " << dot[i][e] << " vs f64 " << truth[i][e]
                      << " (largest " << largest << ")";
    }
    double n = double(std::max<size_t>(truth[i].size(), 1));
    double dotRms = std::sqrt(dotSquares / n), exactRms = std::sqrt(exactSquares / n);
    EXPECT_LE(dotRms, 3 * exactRms + 1e-6 * largest)
        << "dot products' rms error " << dotRms << ", exact loops' " << exactRms;
    if (std::getenv("AMPC_TEST_PRINT_ERRORS"))
      std::printf("%s result %zu: rms error %.3g (exact loops %.3g), largest %.3g\n", op.c_str(), i,
                  dotRms, exactRms, largest);
  }
  return anyDifferent;
}

TEST(CpuAttention, Bf16DotProductsStayWithinBf16Rounding) {
  if (!kernels::cpu::cpuHasBf16DotProducts())
    GTEST_SKIP() << "this CPU has no AVX512_BF16: bf16 attention runs the exact loops "
                    "(checked bit for bit above)";
  for (const Shape &s : kShapes) {
    SCOPED_TRACE(describe(s, DType::BF16, false));
    bool forwardDiffers = expectDotWithinBf16Rounding(
        "scaled_dot_product_attention", operands(s, DType::BF16, false, 71), attentionAttrs(false));
    bool backwardDiffers =
        expectDotWithinBf16Rounding("scaled_dot_product_attention_grad",
                                    operands(s, DType::BF16, true, 81), attentionAttrs(false));
    if (s.keys > 1) { // one key: probability 1, exact in bf16 too
      EXPECT_TRUE(forwardDiffers) << "the dot products did not run";
      EXPECT_TRUE(backwardDiffers) << "the dot products did not run";
    }
  }
  Shape s{{2}, 23, 23, 9, 17};
  for (double scale : {4.0, 1e-3}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    expectDotWithinBf16Rounding("scaled_dot_product_attention", operands(s, DType::BF16, false, 91),
                                attentionAttrs(false, scale));
    expectDotWithinBf16Rounding("scaled_dot_product_attention_grad",
                                operands(s, DType::BF16, true, 92), attentionAttrs(false, scale));
  }
}

TEST(CpuAttention, Bf16DotProductsLeaveCausalAndBaselineToTheExactLoops) {
  // Causal attention, and any node while the wide loops are off, keep the
  // reference's bits even with the dot products allowed.
  Shape s{{2, 3}, 37, 37, 20, 12};
  expectBitIdentical("scaled_dot_product_attention", operands(s, DType::BF16, false, 101),
                     attentionAttrs(true));
  expectBitIdentical("scaled_dot_product_attention_grad", operands(s, DType::BF16, true, 102),
                     attentionAttrs(true));
  kernels::cpu::setLoopWideVectorsAllowed(false);
  OneLoopNode one("scaled_dot_product_attention", operands(s, DType::BF16, false, 103),
                  attentionAttrs(false));
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> fast = loopKernelFor(*one.node);
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  std::vector<Operand> ops = operands(s, DType::BF16, false, 103);
  LoopResults got = runLoopKernel(*fast, *one.node, ops, 0);
  kernels::cpu::setLoopWideVectorsAllowed(true);
  LoopResults expected = runLoopKernel(ref, *one.node, ops, 0);
  EXPECT_TRUE(got.outputs == expected.outputs);
}

//===----------------------------------------------------------------------===//
// Layout bshd: [..., seq, heads, dim], read in place
//===----------------------------------------------------------------------===//

/// q[batch, queries, heads, head], k[batch, keys, heads, head], v[batch,
/// keys, heads, value].
struct HeadsShape {
  int64_t batch, queries, keys, heads, head, value;
};

const HeadsShape kHeadsShapes[] = {
    {2, 37, 37, 3, 20, 12},   // head sizes off the vector width
    {1, 13, 29, 5, 7, 33},    // more keys than queries, odd head size
    {2, 150, 150, 2, 24, 40}, // several query blocks
    {2, 64, 64, 12, 64, 64},  // BERT's heads
};

AttrMap bshdAttrs(bool causal) {
  AttrMap attrs = attentionAttrs(causal);
  attrs["layout"] = Attribute(std::string("bshd"));
  return attrs;
}

/// The operands in layout bshd (grad_output first for the backward).
std::vector<Operand> bshdOperands(const HeadsShape &s, DType t, bool backward, uint64_t seed) {
  std::vector<Operand> ops;
  if (backward)
    ops.push_back(uniform(TensorType(t, {s.batch, s.queries, s.heads, s.value}), seed + 3));
  ops.push_back(uniform(TensorType(t, {s.batch, s.queries, s.heads, s.head}), seed));
  ops.push_back(uniform(TensorType(t, {s.batch, s.keys, s.heads, s.head}), seed + 1));
  ops.push_back(uniform(TensorType(t, {s.batch, s.keys, s.heads, s.value}), seed + 2));
  return ops;
}

/// o permuted by [0, 2, 1, 3] (its dims 1 and 2 swapped).
Operand swapMiddle(const Operand &o) {
  const TensorType &t = o.type;
  int64_t a = t.dim(0), b = t.dim(1), c = t.dim(2), w = t.dim(3);
  size_t size = dtypeSize(t.dtype());
  Operand out{TensorType(t.dtype(), {a, c, b, w}), Bytes(o.bytes.size())};
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k)
        std::memcpy(out.bytes.data() + (((i * c + k) * b + j) * w) * size,
                    o.bytes.data() + (((i * b + j) * c + k) * w) * size, w * size);
  return out;
}

/// The reference kernel's results of `op` over `ops`.
std::vector<Bytes> referenceResults(const std::string &op, const std::vector<Operand> &ops,
                                    const AttrMap &attrs) {
  OneLoopNode one(op, ops, attrs);
  EXPECT_TRUE(one.node) << one.error;
  if (!one.node)
    return {};
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  return runLoopKernel(ref, *one.node, ops, 0).outputs;
}

TEST(CpuAttention, ReferenceInLayoutBshdIsThePermutedBhsd) {
  // The reference in layout bshd gives the bits of bhsd over permuted
  // operands, permuted back: the layout moves no arithmetic.
  for (DType t : {DType::F32, DType::BF16})
    for (const HeadsShape &s : kHeadsShapes)
      for (bool backward : {false, true}) {
        bool causal = s.queries == s.keys && !backward;
        SCOPED_TRACE(dtypeName(t).str() + " heads " + std::to_string(s.heads) +
                     (backward ? " backward" : " forward"));
        std::string op =
            backward ? "scaled_dot_product_attention_grad" : "scaled_dot_product_attention";
        std::vector<Operand> ops = bshdOperands(s, t, backward, 111);
        std::vector<Operand> swapped;
        for (const Operand &o : ops)
          swapped.push_back(swapMiddle(o));
        std::vector<Bytes> inPlace = referenceResults(op, ops, bshdAttrs(causal));
        std::vector<Bytes> permuted = referenceResults(op, swapped, attentionAttrs(causal));
        ASSERT_EQ(inPlace.size(), permuted.size());
        for (size_t r = 0; r < inPlace.size(); ++r) {
          const Operand &like = ops[backward ? r + 1 : 0];
          TensorType bhsd =
              swapMiddle(
                  Operand{TensorType(t, {like.type.dim(0), like.type.dim(1), like.type.dim(2),
                                         backward ? like.type.dim(3) : s.value}),
                          Bytes(inPlace[r].size())})
                  .type;
          EXPECT_TRUE(swapMiddle(Operand{bhsd, permuted[r]}).bytes == inPlace[r]) << "result " << r;
        }
      }
}

TEST(CpuAttention, LayoutBshdIsBitExact) {
  ExactLoops exact;
  for (DType t : kDTypes)
    for (const HeadsShape &s : kHeadsShapes)
      for (bool causal : {false, true}) {
        if (causal && s.queries != s.keys)
          continue;
        SCOPED_TRACE(dtypeName(t).str() + " heads " + std::to_string(s.heads) +
                     (causal ? " causal" : ""));
        expectBitIdentical("scaled_dot_product_attention", bshdOperands(s, t, false, 121),
                           bshdAttrs(causal));
        expectBitIdentical("scaled_dot_product_attention_grad", bshdOperands(s, t, true, 131),
                           bshdAttrs(causal));
      }
}

TEST(CpuAttention, Bf16DotProductsInLayoutBshd) {
  if (!kernels::cpu::cpuHasBf16DotProducts())
    GTEST_SKIP() << "this CPU has no AVX512_BF16: bf16 attention runs the exact loops";
  for (const HeadsShape &s : kHeadsShapes) {
    SCOPED_TRACE("heads " + std::to_string(s.heads));
    EXPECT_TRUE(expectDotWithinBf16Rounding("scaled_dot_product_attention",
                                            bshdOperands(s, DType::BF16, false, 141),
                                            bshdAttrs(false)));
    EXPECT_TRUE(expectDotWithinBf16Rounding("scaled_dot_product_attention_grad",
                                            bshdOperands(s, DType::BF16, true, 151),
                                            bshdAttrs(false)));
  }
}

//===----------------------------------------------------------------------===//
// Through compiled programs
//===----------------------------------------------------------------------===//

using Bytes = std::vector<unsigned char>;

/// Runs the graph's step on the cpu or the reference backend; the bytes of
/// every output.
std::vector<Bytes> runGraph(const Graph &g, bool fastCpu, const std::vector<Bytes> &inputs) {
  std::unique_ptr<Backend> backend = fastCpu ? createCpuBackend() : createCpuRefBackend();
  DiagnosticEngine diag;
  std::unique_ptr<Program> p = Program::compile(g, *backend, diag, CompileOptions());
  EXPECT_TRUE(p) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  if (!p)
    return {};
  for (size_t i = 0; i < g.inputs().size(); ++i)
    std::memcpy(p->data(g.inputs()[i]), inputs[i].data(), inputs[i].size());
  p->run(0);
  std::vector<Bytes> outs;
  for (const Value *v : g.outputs()) {
    const auto *data = static_cast<const unsigned char *>(std::as_const(*p).data(v));
    outs.emplace_back(data, data + v->type().sizeInBytes());
  }
  EXPECT_TRUE(p->measure().guardsIntact);
  return outs;
}

TEST(CpuAttention, ProgramsGiveTheReferencesBits) {
  // Attention feeding its own backward (dO = the output), as in a training
  // step: every result's bits on cpu and cpu-ref.
  ExactLoops exact;
  for (DType t : kDTypes)
    for (bool causal : {false, true}) {
      Shape s{{3, 2}, 45, 45, 24, 24};
      SCOPED_TRACE(describe(s, t, causal));
      Graph g("attention");
      DiagnosticEngine diag;
      std::vector<Operand> ops = operands(s, t, false, 61);
      Value *q = g.addInput("q", ops[0].type), *k = g.addInput("k", ops[1].type),
            *v = g.addInput("v", ops[2].type);
      const OpRegistry &r = OpRegistry::builtin();
      Node *fwd = buildNode(g, *r.lookup("scaled_dot_product_attention"), {q, k, v},
                            attentionAttrs(causal), Location(), diag);
      ASSERT_TRUE(fwd);
      Node *bwd = buildNode(g, *r.lookup("scaled_dot_product_attention_grad"),
                            {fwd->result(), q, k, v}, attentionAttrs(causal), Location(), diag);
      ASSERT_TRUE(bwd) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
      g.addOutput(fwd->result());
      for (unsigned i = 0; i < 3; ++i)
        g.addOutput(bwd->result(i));
      std::vector<Bytes> inputs = {ops[0].bytes, ops[1].bytes, ops[2].bytes};
      std::vector<Bytes> fast = runGraph(g, true, inputs), ref = runGraph(g, false, inputs);
      ASSERT_EQ(fast.size(), 4u);
      EXPECT_TRUE(fast == ref) << "cpu and cpu-ref results differ";
    }
}

const char *kEncoder = R"(
model: attention_block
batch: 3
inputs:
  tokens: {shape: [B, 10], dtype: i64}
  label: {shape: [B], dtype: i64}
layers:
  - embedding: {num_embeddings: 30, embedding_dim: 24, input: tokens, name: emb}
  - linear: {out_features: 24, input: emb, name: q}
  - reshape: {shape: [B, 10, 2, 12], name: qh}
  - permute: {dims: [0, 2, 1, 3], name: qt}
  - linear: {out_features: 24, input: emb, name: k}
  - reshape: {shape: [B, 10, 2, 12], name: kh}
  - permute: {dims: [0, 2, 1, 3], name: kt}
  - linear: {out_features: 24, input: emb, name: v}
  - reshape: {shape: [B, 10, 2, 12], name: vh}
  - permute: {dims: [0, 2, 1, 3], name: vt}
  - scaled_dot_product_attention: {inputs: [qt, kt, vt], causal: true, name: attn}
  - permute: {dims: [0, 2, 1, 3], name: merged_t}
  - reshape: {shape: [B, 240], name: merged}
  - linear: {out_features: 4, name: logits}
loss: {cross_entropy: {input: logits, target: label}}
optimizer: {adam: {lr: 0.001}}
)";

TEST(CpuAttention, TrainingGraphsGetTheLoopKernels) {
  for (const char *level : {"O0", "O1", "O2"}) {
    SCOPED_TRACE(level);
    DiagnosticEngine diag;
    std::unique_ptr<Graph> graph = loadModelString(kEncoder, "m.yaml", diag);
    ASSERT_TRUE(graph) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
    ASSERT_TRUE(setPolicyOverride(graph->meta(), "opt_level", level, diag));
    PassManager pm;
    ASSERT_TRUE(addStandardPipeline(pm, PipelineStage::Train, diag));
    ASSERT_TRUE(pm.run(*graph, diag));
    unsigned seen = 0;
    for (const Node &node : graph->nodes()) {
      if (node.kind() != OpKind::ScaledDotProductAttention &&
          node.kind() != OpKind::ScaledDotProductAttentionGrad)
        continue;
      ++seen;
      std::unique_ptr<kernels::NodeKernel> k = kernels::cpu::prepareCpuKernel(node);
      ASSERT_TRUE(k);
      EXPECT_TRUE(kernels::cpu::isLoopKernel(*k))
          << node.opName().str() << " " << node.operand(0)->type().str();
    }
    EXPECT_EQ(seen, 2u);
  }
}

} // namespace
