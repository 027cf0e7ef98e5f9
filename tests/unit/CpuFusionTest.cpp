//===- CpuFusionTest.cpp - Elementwise chains in one pass on `cpu` --------===//
//
// The runtime runs chains of elementwise nodes (adjacent in the schedule, one
// shape, each intermediate read only by the next node) as one blocked kernel
// on the cpu backend (kernels/cpu/LoopFused.cpp). Its results must be the
// bits of the nodes run one by one and of the reference backend (whose NaNs
// may have other sign and payload bits in f16 chains), on one
// block and on many (several threads), with NaNs, infinities, subnormals and
// rounding ties in the inputs; guard bytes around the buffers must survive.
// Intermediates read elsewhere (a second use, a graph output) end a chain.
// Whole training steps of the example MLP and ConvNet give the same losses
// and state bit for bit with fusion on and off.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/Builder.h"
#include "kernels/common/Random.h"
#include "kernels/common/Storage.h"
#include "kernels/cpu/CpuKernels.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/Program.h"
#include "runtime/train/Trainer.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

using namespace ampc;

namespace {

using Bytes = std::vector<unsigned char>;

const OpInfo &op(const char *name) { return *OpRegistry::builtin().lookup(name); }

/// Random storage bits (every exponent, NaNs, infinities, subnormals, both
/// zeros) with chosen special values at the front.
Bytes randomBits(const TensorType &t, uint64_t seed) {
  Bytes b(t.sizeInBytes());
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<unsigned char>(kernels::uniform01Double(seed, 5, i) * 256);
  const double specials[] = {0.0, -0.0,  1.0,        -1.5,       INFINITY, -INFINITY,
                             NAN, 1e-40, 1.00390625, 1.01171875, 65520.0,  3.0e-8};
  for (size_t i = 0; i < std::size(specials) && int64_t(i) < t.numElements(); ++i)
    kernels::storeFromDouble(t.dtype(), b.data(), i, specials[i]);
  return b;
}

/// Mostly ordinary values in [-4, 4] (so chains of activations keep finite,
/// varied values), with the specials of randomBits at the front.
Bytes mixedValues(const TensorType &t, uint64_t seed) {
  Bytes b = randomBits(t, seed);
  for (int64_t i = 16; i < t.numElements(); ++i)
    if (i % 17 != 0) // every 17th keeps its random bits
      kernels::storeFromDouble(t.dtype(), b.data(), i,
                               -4.0 + 8.0 * kernels::uniform01Double(seed, 6, i));
  return b;
}

struct Compiled {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Program> program;
};

/// Compiles `g` on `device` ("cpu" or "cpu-ref"), fills its inputs, runs a
/// step and returns the bytes of every output.
std::vector<Bytes> runGraph(const Graph &g, bool fastCpu, bool fuse,
                            const std::vector<Bytes> &inputs, unsigned *chains = nullptr) {
  std::unique_ptr<Backend> backend = fastCpu ? createCpuBackend() : createCpuRefBackend();
  DiagnosticEngine diag;
  CompileOptions opts;
  opts.fuseElementwise = fuse;
  std::unique_ptr<Program> p = Program::compile(g, *backend, diag, opts);
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
  if (chains)
    *chains = p->fusedChains();
  return outs;
}

/// Fused and unfused runs agree bit for bit, and with the reference up to
/// NaN bits; returns the number of chains the fused run found.
unsigned expectSameBits(const Graph &g, const std::vector<Bytes> &inputs) {
  unsigned chains = 0, unfusedChains = 0;
  std::vector<Bytes> fused = runGraph(g, true, true, inputs, &chains);
  std::vector<Bytes> unfused = runGraph(g, true, false, inputs, &unfusedChains);
  std::vector<Bytes> reference = runGraph(g, false, true, inputs);
  EXPECT_EQ(unfusedChains, 0u);
  EXPECT_EQ(fused.size(), g.outputs().size());
  // Equal bits, except that a NaN may come out with another sign: without
  // AVX-512 the fused chains' baseline copy and the unfused loop pass on a
  // different operand's NaN in places (x86's own NaN is negative), as the
  // reference may below. Every other value keeps its bits.
  for (size_t o = 0; o < std::min(fused.size(), unfused.size()); ++o) {
    const Value *v = g.outputs()[o];
    size_t size = dtypeSize(v->dtype());
    for (int64_t i = 0; i < v->type().numElements(); ++i)
      if (std::memcmp(fused[o].data() + i * size, unfused[o].data() + i * size, size) != 0 &&
          !(std::isnan(kernels::loadAsDouble(v->dtype(), fused[o].data(), i)) &&
            std::isnan(kernels::loadAsDouble(v->dtype(), unfused[o].data(), i)))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": fused "
                      << kernels::loadAsDouble(v->dtype(), fused[o].data(), i) << ", unfused "
                      << kernels::loadAsDouble(v->dtype(), unfused[o].data(), i);
        break;
      }
  }
  // The reference's NaNs may differ from the loops' in sign and payload
  // (which operand's NaN an instruction passes on): equal bits or both NaN.
  EXPECT_EQ(reference.size(), fused.size());
  if (reference.size() != fused.size())
    return chains;
  for (size_t o = 0; o < fused.size(); ++o) {
    const Value *v = g.outputs()[o];
    int64_t mismatches = 0;
    for (int64_t i = 0; i < v->type().numElements(); ++i) {
      size_t size = dtypeSize(v->dtype());
      if (std::memcmp(fused[o].data() + i * size, reference[o].data() + i * size, size) == 0)
        continue;
      bool bothNaN = std::isnan(kernels::loadAsDouble(v->dtype(), fused[o].data(), i)) &&
                     std::isnan(kernels::loadAsDouble(v->dtype(), reference[o].data(), i));
      mismatches += !bothNaN;
    }
    EXPECT_EQ(mismatches, 0) << "fused cpu and cpu-ref results differ";
  }
  return chains;
}

// Sizes: one partial block, several blocks on one thread, and enough
// elements (over kElementwiseGrain) for several threads.
const int64_t kSizes[] = {1000, 12289, 200003};

TEST(CpuFusion, CastAddReluCastChainIsBitExact) {
  for (int64_t n : kSizes) {
    SCOPED_TRACE(n);
    Graph g("fusion");
    DiagnosticEngine diag;
    Value *x = g.addInput("x", TensorType(DType::F32, {n}));
    Value *b = g.addInput("b", TensorType(DType::BF16, {n}));
    Node *c1 = buildNode(g, op("cast"), {x}, {{"to", Attribute(DType::BF16)}}, {}, diag);
    ASSERT_TRUE(c1);
    Node *add = buildNode(g, op("add"), {c1->result(), b}, {}, {}, diag);
    Node *relu = buildNode(g, op("relu"), {add->result()}, {}, {}, diag);
    Node *c2 =
        buildNode(g, op("cast"), {relu->result()}, {{"to", Attribute(DType::F32)}}, {}, diag);
    ASSERT_TRUE(c2) << diag.diagnostics()[0].str();
    g.addOutput(c2->result());
    std::vector<Bytes> inputs = {randomBits(x->type(), 1), randomBits(b->type(), 2)};
    EXPECT_EQ(expectSameBits(g, inputs), 1u);
  }
}

TEST(CpuFusion, GeluGradMulChainIsBitExact) {
  for (const char *approximate : {"none", "tanh"})
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (int64_t n : kSizes) {
        SCOPED_TRACE(std::string(approximate) + " " + dtypeName(t).str() + " " + std::to_string(n));
        Graph g("fusion");
        DiagnosticEngine diag;
        TensorType type(t, {n / 7 + 1, 7});
        Value *dy = g.addInput("dy", type);
        Value *x = g.addInput("x", type);
        Value *w = g.addInput("w", type);
        // The chain value as the second operand (mul, gelu_grad's input).
        Node *gelu = buildNode(g, op("gelu"), {x}, {{"approximate", approximate}}, {}, diag);
        Node *mul = buildNode(g, op("mul"), {w, gelu->result()}, {}, {}, diag);
        Node *grad = buildNode(g, op("gelu_grad"), {dy, mul->result()},
                               {{"approximate", approximate}}, {}, diag);
        Node *scale = buildNode(g, op("scale"), {grad->result()}, {{"factor", 0.3}}, {}, diag);
        Node *tanh = buildNode(g, op("tanh"), {scale->result()}, {}, {}, diag);
        Node *tgrad = buildNode(g, op("tanh_grad"), {tanh->result(), dy}, {}, {}, diag);
        Node *sub = buildNode(g, op("sub"), {tgrad->result(), w}, {}, {}, diag);
        Node *div = buildNode(g, op("div"), {sub->result(), x}, {}, {}, diag);
        Node *sig = buildNode(g, op("sigmoid"), {div->result()}, {}, {}, diag);
        Node *sgrad = buildNode(g, op("sigmoid_grad"), {dy, sig->result()}, {}, {}, diag);
        Node *rgrad = buildNode(g, op("relu_grad"), {sgrad->result(), x}, {}, {}, diag);
        Node *silu = buildNode(g, op("silu"), {rgrad->result()}, {}, {}, diag);
        Node *sigrad = buildNode(g, op("silu_grad"), {dy, silu->result()}, {}, {}, diag);
        ASSERT_TRUE(sigrad) << diag.diagnostics()[0].str();
        g.addOutput(sigrad->result());
        std::vector<Bytes> inputs = {mixedValues(type, 3), mixedValues(type, 4),
                                     mixedValues(type, 5)};
        EXPECT_EQ(expectSameBits(g, inputs), 1u);
      }
}

TEST(CpuFusion, F32GeluOfBf16ValuesReadsTablesWithTheSameBits) {
  // O1's gelu: a linear layer's bf16 result cast up, gelu in f32, cast down;
  // the backward: dy cast up, gelu_grad(dy, x) with x the cast-up f32, cast
  // down. Where a block's x are all bf16 values and none is a NaN, the
  // fused stages read tables (kernels/cpu/HalfTables.h); with x of other
  // f32 values, or a NaN, they compute. Either way: the unfused loops'
  // bits. Every bf16 pattern comes by (its NaNs in the last blocks only, so
  // the blocks before them take the tables).
  for (const char *approximate : {"none", "tanh"})
    for (bool bf16Values : {true, false}) {
      SCOPED_TRACE(std::string(approximate) + (bf16Values ? " bf16 values" : " f32 values"));
      int64_t n = 65536 + 4096 + 77;
      Graph g("fusion");
      DiagnosticEngine diag;
      Value *xb = g.addInput("xb", TensorType(DType::BF16, {n}));
      Value *dyb = g.addInput("dyb", TensorType(DType::BF16, {n}));
      Value *x = g.addInput("x", TensorType(DType::F32, {n}));
      Node *up = buildNode(g, op("cast"), {xb}, {{"to", Attribute(DType::F32)}}, {}, diag);
      Node *gelu =
          buildNode(g, op("gelu"), {up->result()}, {{"approximate", approximate}}, {}, diag);
      Node *down =
          buildNode(g, op("cast"), {gelu->result()}, {{"to", Attribute(DType::BF16)}}, {}, diag);
      Node *dyUp = buildNode(g, op("cast"), {dyb}, {{"to", Attribute(DType::F32)}}, {}, diag);
      Node *grad = buildNode(g, op("gelu_grad"), {dyUp->result(), x},
                             {{"approximate", approximate}}, {}, diag);
      Node *gradDown =
          buildNode(g, op("cast"), {grad->result()}, {{"to", Attribute(DType::BF16)}}, {}, diag);
      ASSERT_TRUE(down && gradDown) << diag.diagnostics()[0].str();
      g.addOutput(down->result());
      g.addOutput(gradDown->result());
      Bytes patterns(xb->type().sizeInBytes()), xBytes(x->type().sizeInBytes());
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits = static_cast<uint16_t>(i * 40503 & 0xffff);
        std::memcpy(patterns.data() + 2 * i, &bits, 2);
        // Ascending from the positive NaNs' end: the NaNs (0x7f81-0x7fff,
        // 0xff81-0xffff) fall in two runs.
        uint32_t wide = uint32_t(static_cast<uint16_t>((i + 0x8000) & 0xffff)) << 16;
        std::memcpy(xBytes.data() + 4 * i, &wide, 4);
      }
      if (!bf16Values)
        xBytes = mixedValues(x->type(), 7);
      // dy without NaNs: with a signalling-NaN dy, the sanitizer build's
      // unfused loops passed on another NaN (sign) than the tables' product
      // did; which NaN comes out is the compiler's choice, and the NaN
      // tests elsewhere accept any NaN for it.
      Bytes dyBytes(dyb->type().sizeInBytes());
      for (int64_t i = 0; i < n; ++i)
        kernels::storeFromDouble(DType::BF16, dyBytes.data(), i,
                                 -4.0 + 8.0 * kernels::uniform01Double(6, 6, i));
      std::vector<Bytes> inputs = {patterns, dyBytes, xBytes};
      EXPECT_EQ(expectSameBits(g, inputs), 2u);
    }
}

TEST(CpuFusion, UnaryMathChainIsBitExact) {
  // clamp, pow (attributes: each stage keeps its own functor state), sqrt,
  // erf, exp and their gradients in one chain.
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (int64_t n : kSizes) {
      SCOPED_TRACE(dtypeName(t).str() + " " + std::to_string(n));
      Graph g("fusion");
      DiagnosticEngine diag;
      TensorType type(t, {n / 7 + 1, 7});
      Value *dy = g.addInput("dy", type);
      Value *x = g.addInput("x", type);
      Node *clamp = buildNode(g, op("clamp"), {x},
                              {{"min", Attribute(-0.5)}, {"max", Attribute(6.0)}}, {}, diag);
      Node *pow =
          buildNode(g, op("pow"), {clamp->result()}, {{"exponent", Attribute(1.7)}}, {}, diag);
      Node *sqrt = buildNode(g, op("sqrt"), {pow->result()}, {}, {}, diag);
      Node *erf = buildNode(g, op("erf"), {sqrt->result()}, {}, {}, diag);
      Node *exp = buildNode(g, op("exp"), {erf->result()}, {}, {}, diag);
      Node *egrad = buildNode(g, op("exp_grad"), {dy, exp->result()}, {}, {}, diag);
      Node *pgrad = buildNode(g, op("pow_grad"), {egrad->result(), x},
                              {{"exponent", Attribute(3.0)}}, {}, diag);
      Node *sgrad = buildNode(g, op("sqrt_grad"), {dy, pgrad->result()}, {}, {}, diag);
      Node *rgrad = buildNode(g, op("erf_grad"), {sgrad->result(), x}, {}, {}, diag);
      Node *cgrad = buildNode(g, op("clamp_grad"), {rgrad->result(), x},
                              {{"min", Attribute(-1.0)}, {"max", Attribute(1.0)}}, {}, diag);
      ASSERT_TRUE(cgrad) << diag.diagnostics()[0].str();
      g.addOutput(cgrad->result());
      std::vector<Bytes> inputs = {mixedValues(type, 6), mixedValues(type, 7)};
      EXPECT_EQ(expectSameBits(g, inputs), 1u);
    }
}

TEST(CpuFusion, OnnxActivationChainIsBitExact) {
  // hardsigmoid, leaky_relu, elu (attributes: each stage its own state),
  // hardswish, softplus, neg, abs, reciprocal, log, max, min, prelu with a
  // same-shape slope and the backward ops in one chain.
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (int64_t n : kSizes) {
      SCOPED_TRACE(dtypeName(t).str() + " " + std::to_string(n));
      Graph g("fusion");
      DiagnosticEngine diag;
      TensorType type(t, {n / 7 + 1, 7});
      Value *dy = g.addInput("dy", type);
      Value *x = g.addInput("x", type);
      auto unary = [&](const char *name, Value *in, AttrMap attrs = {}) {
        Node *node = buildNode(g, op(name), {in}, std::move(attrs), {}, diag);
        return node ? node->result() : nullptr;
      };
      auto binary = [&](const char *name, Value *a, Value *b, AttrMap attrs = {}) {
        Node *node = buildNode(g, op(name), {a, b}, std::move(attrs), {}, diag);
        return node ? node->result() : nullptr;
      };
      AttrMap sigmoid{{"alpha", Attribute(0.2)}, {"beta", Attribute(0.4)}};
      AttrMap leaky{{"negative_slope", Attribute(0.1)}}, elu{{"alpha", Attribute(0.7)}};
      Value *v = unary("hardsigmoid", x, sigmoid);
      v = unary("leaky_relu", v, leaky);
      v = unary("elu", v, elu);
      v = unary("hardswish", v);
      v = unary("softplus", v);
      v = unary("neg", v);
      v = unary("abs", v);
      v = unary("reciprocal", v);
      v = unary("log", v);
      v = binary("max", v, x);
      v = binary("min", v, dy);
      v = binary("prelu", v, x);
      v = binary("hardsigmoid_grad", v, x, sigmoid);
      v = binary("hardswish_grad", v, x);
      v = binary("leaky_relu_grad", v, x, leaky);
      v = binary("elu_grad", v, x, elu);
      v = binary("softplus_grad", v, x);
      v = binary("abs_grad", v, x);
      v = binary("log_grad", v, x);
      v = binary("reciprocal_grad", v, x);
      v = binary("greater_share", v, x);
      v = binary("prelu_derivative", v, x);
      v = binary("prelu_grad_slope", v, x);
      ASSERT_TRUE(v) << diag.diagnostics()[0].str();
      g.addOutput(v);
      std::vector<Bytes> inputs = {mixedValues(type, 6), mixedValues(type, 7)};
      EXPECT_EQ(expectSameBits(g, inputs), 1u);
    }
}

TEST(CpuFusion, TheFusedKernelKeepsGuardBytes) {
  // The kernel alone, on guarded buffers, against the nodes' own kernels.
  Graph g("fusion");
  DiagnosticEngine diag;
  int64_t n = 100001;
  TensorType f32(DType::F32, {n}), bf16(DType::BF16, {n});
  Value *x = g.addInput("x", f32);
  Value *y = g.addInput("y", bf16);
  Node *c1 = buildNode(g, op("cast"), {x}, {{"to", Attribute(DType::BF16)}}, {}, diag);
  Node *mul = buildNode(g, op("mul"), {c1->result(), y}, {}, {}, diag);
  Node *c2 = buildNode(g, op("cast"), {mul->result()}, {{"to", Attribute(DType::F32)}}, {}, diag);
  ASSERT_TRUE(c2);
  std::vector<const Node *> chain = {c1, mul, c2};
  std::unique_ptr<kernels::NodeKernel> fused = kernels::cpu::prepareFusedCpuKernel(chain);
  ASSERT_TRUE(fused);
  Bytes xs = randomBits(f32, 7), ys = randomBits(bf16, 8);
  ampc::testing::GuardedBuffer xb(xs.size()), yb(ys.size()), out(f32.sizeInBytes()),
      tmp1(bf16.sizeInBytes()), tmp2(bf16.sizeInBytes()), expected(f32.sizeInBytes());
  std::memcpy(xb.data(), xs.data(), xs.size());
  std::memcpy(yb.data(), ys.data(), ys.size());
  std::memset(out.data(), 0x7f, f32.sizeInBytes());
  auto run = [](kernels::NodeKernel &k, const Node *node, std::vector<kernels::TensorArg> ins,
                kernels::TensorArg result) {
    kernels::KernelArgs args;
    args.node = node;
    args.inputs = ins;
    args.outputs = llvm::ArrayRef<kernels::TensorArg>(result);
    k.run(args);
  };
  run(*fused, c2, {{xb.data(), &f32}, {yb.data(), &bf16}}, {out.data(), &f32});
  run(*kernels::cpu::prepareCpuKernel(*c1), c1, {{xb.data(), &f32}}, {tmp1.data(), &bf16});
  run(*kernels::cpu::prepareCpuKernel(*mul), mul, {{tmp1.data(), &bf16}, {yb.data(), &bf16}},
      {tmp2.data(), &bf16});
  run(*kernels::cpu::prepareCpuKernel(*c2), c2, {{tmp2.data(), &bf16}}, {expected.data(), &f32});
  EXPECT_EQ(std::memcmp(out.data(), expected.data(), f32.sizeInBytes()), 0);
  for (const auto *b : {&xb, &yb, &out})
    EXPECT_TRUE(b->guardsIntact());
  // Not a chain: the second node does not read the first's result.
  std::vector<const Node *> broken = {c1, c2};
  EXPECT_FALSE(kernels::cpu::prepareFusedCpuKernel(broken));
}

TEST(CpuFusion, AnIntermediateWithTwoUsesEndsTheChain) {
  Graph g("fusion");
  DiagnosticEngine diag;
  TensorType type(DType::F32, {5000});
  Value *x = g.addInput("x", type), *y = g.addInput("y", type);
  Node *add = buildNode(g, op("add"), {x, y}, {}, {}, diag);
  Node *relu = buildNode(g, op("relu"), {add->result()}, {}, {}, diag);
  Node *sig = buildNode(g, op("sigmoid"), {add->result()}, {}, {}, diag);
  ASSERT_TRUE(sig);
  g.addOutput(relu->result());
  g.addOutput(sig->result());
  EXPECT_EQ(expectSameBits(g, {mixedValues(type, 1), mixedValues(type, 2)}), 0u);
  // A value read twice by the next node (mul(a, a)) ends it too.
  Graph g2("fusion");
  Value *x2 = g2.addInput("x", type), *y2 = g2.addInput("y", type);
  Node *add2 = buildNode(g2, op("add"), {x2, y2}, {}, {}, diag);
  Node *square = buildNode(g2, op("mul"), {add2->result(), add2->result()}, {}, {}, diag);
  ASSERT_TRUE(square);
  g2.addOutput(square->result());
  EXPECT_EQ(expectSameBits(g2, {mixedValues(type, 1), mixedValues(type, 2)}), 0u);
}

TEST(CpuFusion, AGraphOutputEndsTheChain) {
  Graph g("fusion");
  DiagnosticEngine diag;
  TensorType type(DType::F32, {5000});
  Value *x = g.addInput("x", type), *y = g.addInput("y", type);
  Node *add = buildNode(g, op("add"), {x, y}, {}, {}, diag);
  Node *relu = buildNode(g, op("relu"), {add->result()}, {}, {}, diag);
  ASSERT_TRUE(relu);
  g.addOutput(add->result());
  g.addOutput(relu->result());
  EXPECT_EQ(expectSameBits(g, {mixedValues(type, 1), mixedValues(type, 2)}), 0u);
  // The same nodes with only relu an output: one chain.
  Graph g2("fusion");
  Value *x2 = g2.addInput("x", type), *y2 = g2.addInput("y", type);
  Node *add2 = buildNode(g2, op("add"), {x2, y2}, {}, {}, diag);
  Node *relu2 = buildNode(g2, op("relu"), {add2->result()}, {}, {}, diag);
  ASSERT_TRUE(relu2);
  g2.addOutput(relu2->result());
  EXPECT_EQ(expectSameBits(g2, {mixedValues(type, 1), mixedValues(type, 2)}), 1u);
}

TEST(CpuFusion, BroadcastingAndSameDTypeCastsAreNotFused) {
  Graph g("fusion");
  DiagnosticEngine diag;
  TensorType type(DType::F32, {64, 50}), row(DType::F32, {50});
  Value *x = g.addInput("x", type), *b = g.addInput("b", row);
  Node *add = buildNode(g, op("add"), {x, b}, {}, {}, diag); // a bias: broadcast
  Node *relu = buildNode(g, op("relu"), {add->result()}, {}, {}, diag);
  Node *copy =
      buildNode(g, op("cast"), {relu->result()}, {{"to", Attribute(DType::F32)}}, {}, diag);
  ASSERT_TRUE(copy);
  g.addOutput(copy->result());
  EXPECT_EQ(expectSameBits(g, {mixedValues(type, 1), mixedValues(row, 2)}), 0u);
}

//===----------------------------------------------------------------------===//
// Training steps
//===----------------------------------------------------------------------===//

struct TrainingRun {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Backend> backend = createCpuBackend();
  std::unique_ptr<Program> program;
  std::unique_ptr<DataSource> data;
  TrainResult result;

  std::string firstError() const {
    return diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str();
  }
  bool build(const std::string &model, int64_t batch, const char *level, bool fuse) {
    LoadOptions load;
    load.batchOverride = batch;
    graph = loadModelFile(std::string(AMPC_SOURCE_DIR) + "/examples/" + model, diag, load);
    if (!graph || !setPolicyOverride(graph->meta(), "opt_level", level, diag))
      return false;
    PassManager pm;
    if (!addStandardPipeline(pm, PipelineStage::Train, diag) || !pm.run(*graph, diag))
      return false;
    CompileOptions opts;
    opts.fuseElementwise = fuse;
    program = Program::compile(*graph, *backend, diag, opts);
    data = createDataSource(*graph, std::string(AMPC_SOURCE_DIR) + "/examples", diag);
    return program && data;
  }
  bool train(int64_t steps, std::string &err) {
    TrainOptions t;
    t.steps = steps;
    t.progress = ProgressStyle::None;
    t.logEvery = 0;
    Trainer trainer(*program, *data, batchOptionsFromMeta(*graph), std::move(t));
    std::string log;
    llvm::raw_string_ostream os(log);
    return trainer.run(os, result, err);
  }
  std::vector<std::string> state() const {
    std::vector<std::string> s;
    for (const Value *v : graph->state())
      s.emplace_back(static_cast<const char *>(std::as_const(*program).data(v)),
                     v->type().sizeInBytes());
    return s;
  }
};

class CpuFusionTraining
    : public ::testing::TestWithParam<std::tuple<const char *, int64_t, const char *>> {};

TEST_P(CpuFusionTraining, TrainsBitForBitLikeUnfused) {
  auto [model, batch, level] = GetParam();
  TrainingRun fused, unfused;
  ASSERT_TRUE(fused.build(model, batch, level, true)) << fused.firstError();
  ASSERT_TRUE(unfused.build(model, batch, level, false)) << unfused.firstError();
  EXPECT_EQ(unfused.program->fusedChains(), 0u);
  // The MLP has no chain (each relu's result is also read by the backward
  // matmul); the ConvNet under O1 has casts next to relu_grad.
  if (std::string(model) == "convnet-cpu.yaml" && std::string(level) == "O1") {
    EXPECT_GT(fused.program->fusedChains(), 0u);
  }
  std::string err;
  ASSERT_TRUE(fused.train(3, err)) << err;
  ASSERT_TRUE(unfused.train(3, err)) << err;
  EXPECT_EQ(fused.result.firstLoss, unfused.result.firstLoss);
  EXPECT_EQ(fused.result.finalLoss, unfused.result.finalLoss);
  std::vector<std::string> a = fused.state(), b = unfused.state();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i], b[i]) << fused.graph->state()[i]->name().str();
  EXPECT_TRUE(fused.program->measure().guardsIntact);
}

INSTANTIATE_TEST_SUITE_P(Examples, CpuFusionTraining,
                         ::testing::Combine(::testing::Values("mlp.yaml"),
                                            ::testing::Values(int64_t(16)),
                                            ::testing::Values("O0", "O1", "O2")));
INSTANTIATE_TEST_SUITE_P(ConvNet, CpuFusionTraining,
                         ::testing::Combine(::testing::Values("convnet-cpu.yaml"),
                                            ::testing::Values(int64_t(4)),
                                            ::testing::Values("O0", "O1", "O2")));

} // namespace
