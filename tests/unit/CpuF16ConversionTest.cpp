//===- CpuF16ConversionTest.cpp - The cpu loops' hardware f16 conversion --===//
//
// The cpu backend's loops convert f16 with vcvtph2ps / vcvtps2ph (AVX-512F,
// or F16C without the loops' AVX-512; LoopSupport.h). These tests check that
// the conversion gives the reference backend's bits (halfBitsToFloat /
// floatToHalfBits) for every f16 bit pattern, for f32 inputs covering every
// exponent, the subnormal and overflow boundaries, rounding ties, infinities,
// zeros and NaNs with payloads (quiet and signalling), and for lengths that
// leave vector tails -- with the AVX-512 copies (where the CPU has them) and
// without. Buffers carry guard bytes.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/LoopKernels.h"

#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::GuardedBuffer;

using Bytes = std::vector<unsigned char>;

/// A one-node graph of `op` over inputs of the given types.
struct OneNode {
  Graph graph{"f16_conversion_test"};
  Node *node = nullptr;
  std::string error;

  OneNode(const std::string &opName, const std::vector<TensorType> &types, AttrMap attrs) {
    const OpInfo *op = OpRegistry::builtin().lookup(opName);
    std::vector<Value *> values;
    for (size_t i = 0; i < types.size(); ++i)
      values.push_back(graph.addInput("in" + std::to_string(i), types[i]));
    DiagnosticEngine diag;
    node = op ? buildNode(graph, *op, values, std::move(attrs), Location(), diag) : nullptr;
    if (!node)
      error = diag.diagnostics().empty() ? "build failed" : diag.diagnostics()[0].str();
  }
};

/// Runs `kernel` on guarded copies of the inputs; returns the result's bytes
/// and whether every guard survived.
std::pair<Bytes, bool> runKernel(kernels::NodeKernel &kernel, const Node &node,
                                 const std::vector<Bytes> &inputs) {
  std::vector<GuardedBuffer> buffers;
  buffers.reserve(inputs.size() + 1);
  std::vector<kernels::TensorArg> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    buffers.emplace_back(inputs[i].size());
    std::memcpy(buffers.back().data(), inputs[i].data(), inputs[i].size());
    ins.push_back({buffers.back().data(), &node.operand(i)->type()});
  }
  const TensorType &t = node.result()->type();
  buffers.emplace_back(t.sizeInBytes());
  std::memset(buffers.back().data(), 0x7f, t.sizeInBytes());
  outs.push_back({buffers.back().data(), &t});
  bool stateUnchanged = false;
  kernels::KernelArgs args;
  args.node = &node;
  args.inputs = ins;
  args.outputs = outs;
  args.stateUnchanged = &stateUnchanged;
  kernel.run(args);
  bool guardsIntact = true;
  for (const GuardedBuffer &b : buffers)
    guardsIntact &= b.guardsIntact();
  const unsigned char *p = static_cast<const unsigned char *>(outs[0].data);
  return {Bytes(p, p + t.sizeInBytes()), guardsIntact};
}

template <class T> Bytes bytesOf(const std::vector<T> &values) {
  Bytes b(values.size() * sizeof(T));
  std::memcpy(b.data(), values.data(), b.size());
  return b;
}

template <class T> T elementOf(const Bytes &b, int64_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}

/// Whether `bits` (an element of dtype t, in the low bytes) is a NaN.
bool isNaNBits(DType t, uint32_t bits) {
  if (t == DType::F32)
    return (bits & 0x7fffffffu) > 0x7f800000u;
  if (t == DType::F16)
    return (bits & 0x7fffu) > 0x7c00u;
  return (bits & 0x7fffu) > 0x7f80u; // bf16
}

/// The cpu backend's kernel for `op` must be a loop kernel and give the
/// reference kernel's bits, with and without the loops' AVX-512 copies --
/// except, with `anyNaN`, that a NaN result may be another NaN.
void expectSameBitsAsReference(const std::string &op, const std::vector<TensorType> &types,
                               const std::vector<Bytes> &inputs, AttrMap attrs = {},
                               bool anyNaN = false) {
  OneNode one(op, types, std::move(attrs));
  ASSERT_TRUE(one.node) << one.error;
  SCOPED_TRACE(op + " to " + one.node->result()->type().str());
  std::unique_ptr<kernels::NodeKernel> fast = kernels::cpu::prepareCpuKernel(*one.node);
  ASSERT_TRUE(fast && kernels::cpu::isLoopKernel(*fast)) << "no loop kernel";
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  auto [expected, refGuards] = runKernel(ref, *one.node, inputs);
  ASSERT_TRUE(refGuards);
  const TensorType &t = one.node->result()->type();
  size_t size = dtypeSize(t.dtype());
  for (bool wide : {true, false}) {
    SCOPED_TRACE(wide ? "wide vectors" : "baseline vectors");
    kernels::cpu::setLoopWideVectorsAllowed(wide);
    auto [got, guards] = runKernel(*fast, *one.node, inputs);
    kernels::cpu::setLoopWideVectorsAllowed(true);
    EXPECT_TRUE(guards) << "a kernel wrote outside its buffers";
    int reported = 0;
    for (int64_t i = 0; i < t.numElements() && reported < 8; ++i) {
      if (std::memcmp(got.data() + i * size, expected.data() + i * size, size) == 0)
        continue;
      uint32_t g = 0, e = 0;
      std::memcpy(&g, got.data() + i * size, size);
      std::memcpy(&e, expected.data() + i * size, size);
      if (anyNaN && isNaNBits(t.dtype(), g) && isNaNBits(t.dtype(), e))
        continue;
      ++reported;
      ADD_FAILURE() << "element " << i << ": 0x" << std::hex << g << " vs reference 0x" << e;
    }
  }
}

AttrMap castTo(DType t) {
  AttrMap attrs;
  attrs["to"] = Attribute(t);
  return attrs;
}

/// f32 bit patterns: for every exponent and sign, mantissas at the rounding
/// boundaries of f16 (ties, either side of them, odd and even kept bits),
/// plus values around f16's subnormal range, its largest value and the
/// overflow threshold, infinities, zeros and NaNs with assorted payloads.
std::vector<uint32_t> interestingFloatBits() {
  std::vector<uint32_t> bits;
  const uint32_t mantissas[] = {0x000000, 0x000001, 0x000fff, 0x001000, 0x001001, 0x001fff,
                                0x002000, 0x003000, 0x002fff, 0x003001, 0x7fe000, 0x7fefff,
                                0x7ff000, 0x7ff001, 0x7fffff, 0x400000, 0x400001, 0x3ff000,
                                0x555555, 0x2aaaaa, 0x0ff000, 0x100000};
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t exponent = 0; exponent < 256; ++exponent)
      for (uint32_t m : mantissas)
        bits.push_back(sign | exponent << 23 | m);
  // Around 2^-25 (ties to zero), 2^-24 (smallest subnormal), 2^-14
  // (smallest normal), 65504 (largest f16), 65520 (rounds to infinity):
  // every mantissa step near each, both signs.
  for (uint32_t center : {0x33000000u, 0x33800000u, 0x38800000u, 0x477fe000u, 0x477ff000u})
    for (uint32_t sign : {0u, 0x80000000u})
      for (int d = -300; d <= 300; ++d)
        bits.push_back(sign | static_cast<uint32_t>(static_cast<int64_t>(center) + d));
  // f16 subnormals and their ties: every f32 value k * 2^-25 for small k is a
  // tie or an exact subnormal.
  for (uint32_t k = 1; k < 4096; ++k)
    for (uint32_t sign : {0u, 0x80000000u})
      bits.push_back(sign | floatBits(static_cast<float>(k) * 0x1p-25f));
  // 1 + 2^-11 (a tie to even, down), 1 + 3 * 2^-11 (a tie, up).
  bits.push_back(floatBits(1.0f + 0x1p-11f));
  bits.push_back(floatBits(1.0f + 3 * 0x1p-11f));
  // NaNs: quiet and signalling, payload in the kept bits, in the dropped
  // bits only, everywhere.
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t payload : {0x400000u, 0x000001u, 0x001fffu, 0x002000u, 0x3fe000u, 0x3fffffu,
                             0x7fffffu, 0x400001u, 0x55aa55u, 0x200000u, 0x000100u})
      bits.push_back(sign | 0x7f800000u | payload);
  // Pseudo-random patterns: every class in proportion.
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bits.push_back(static_cast<uint32_t>(state >> 32));
  }
  return bits;
}

TEST(CpuF16ConversionTest, EveryHalfWidensToTheReferenceBits) {
  // All 65536 patterns, then again at an odd length so the patterns meet the
  // vector lanes at other offsets and the last vector is partial.
  for (int64_t n : {int64_t(65536), int64_t(65536 + 65536 + 13)}) {
    std::vector<uint16_t> halves(n);
    for (int64_t i = 0; i < n; ++i)
      halves[i] = static_cast<uint16_t>((i * 40503) & 0xffff); // odd: a permutation
    for (int64_t i = 0; i < 65536 && n == 65536; ++i)
      halves[i] = static_cast<uint16_t>(i);
    expectSameBitsAsReference("cast", {TensorType(DType::F16, {n})}, {bytesOf(halves)},
                              castTo(DType::F32));
  }
}

TEST(CpuF16ConversionTest, HalvesWidenToHalfBitsToFloat) {
  // The same, against the scalar function itself (signalling NaNs stay
  // signalling: the hardware quiets them, the loop must undo that).
  std::vector<uint16_t> halves(65536);
  for (int i = 0; i < 65536; ++i)
    halves[i] = static_cast<uint16_t>(i);
  OneNode one("cast", {TensorType(DType::F16, {65536})}, castTo(DType::F32));
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> fast = kernels::cpu::prepareCpuKernel(*one.node);
  ASSERT_TRUE(fast && kernels::cpu::isLoopKernel(*fast));
  for (bool wide : {true, false}) {
    kernels::cpu::setLoopWideVectorsAllowed(wide);
    auto [got, guards] = runKernel(*fast, *one.node, {bytesOf(halves)});
    kernels::cpu::setLoopWideVectorsAllowed(true);
    EXPECT_TRUE(guards);
    for (int i = 0; i < 65536; ++i)
      ASSERT_EQ(elementOf<uint32_t>(got, i), floatBits(halfBitsToFloat(static_cast<uint16_t>(i))))
          << "half 0x" << std::hex << i << (wide ? " (wide)" : " (baseline)");
  }
}

TEST(CpuF16ConversionTest, FloatsNarrowToTheReferenceBits) {
  std::vector<uint32_t> bits = interestingFloatBits();
  int64_t n = static_cast<int64_t>(bits.size());
  expectSameBitsAsReference("cast", {TensorType(DType::F32, {n})}, {bytesOf(bits)},
                            castTo(DType::F16));
  // Against the scalar function too.
  OneNode one("cast", {TensorType(DType::F32, {n})}, castTo(DType::F16));
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> fast = kernels::cpu::prepareCpuKernel(*one.node);
  ASSERT_TRUE(fast && kernels::cpu::isLoopKernel(*fast));
  for (bool wide : {true, false}) {
    kernels::cpu::setLoopWideVectorsAllowed(wide);
    auto [got, guards] = runKernel(*fast, *one.node, {bytesOf(bits)});
    kernels::cpu::setLoopWideVectorsAllowed(true);
    EXPECT_TRUE(guards);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(elementOf<uint16_t>(got, i), floatToHalfBits(bitsToFloat(bits[i])))
          << "f32 0x" << std::hex << bits[i] << (wide ? " (wide)" : " (baseline)");
  }
}

TEST(CpuF16ConversionTest, TailsAreConvertedAndGuardsKept) {
  // Lengths around the 8- and 16-lane vectors and the loops' 256-element
  // blocks; every element a different kind of value.
  std::vector<uint32_t> pool = interestingFloatBits();
  for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 47, 255, 256, 257, 511, 513, 1000}) {
    std::vector<uint32_t> bits(pool.begin() + 3 * n, pool.begin() + 4 * n);
    std::vector<uint16_t> halves(n);
    for (int64_t i = 0; i < n; ++i)
      halves[i] = static_cast<uint16_t>((i * 977 + n * 131) & 0xffff);
    SCOPED_TRACE("n = " + std::to_string(n));
    TensorType f32(DType::F32, {n}), f16(DType::F16, {n}), bf16(DType::BF16, {n});
    expectSameBitsAsReference("cast", {f32}, {bytesOf(bits)}, castTo(DType::F16));
    expectSameBitsAsReference("cast", {f16}, {bytesOf(halves)}, castTo(DType::F32));
    // Through the loops' blocks: f16 <-> bf16, and f16 elementwise ops
    // (NaN results: see HalfElementwiseOpsOnEveryPattern).
    expectSameBitsAsReference("cast", {f16}, {bytesOf(halves)}, castTo(DType::BF16));
    expectSameBitsAsReference("cast", {bf16}, {bytesOf(halves)}, castTo(DType::F16));
    expectSameBitsAsReference("relu", {f16}, {bytesOf(halves)}, {}, /*anyNaN=*/true);
    std::vector<uint16_t> other(halves.rbegin(), halves.rend());
    expectSameBitsAsReference("add", {f16, f16}, {bytesOf(halves), bytesOf(other)}, {},
                              /*anyNaN=*/true);
    expectSameBitsAsReference("mul", {f16, TensorType(DType::F16, {})},
                              {bytesOf(halves), bytesOf(std::vector<uint16_t>{0x3e00})}, {},
                              /*anyNaN=*/true);
  }
}

TEST(CpuF16ConversionTest, BroadcastBlocksOfHalves) {
  // A bias row longer than one 256-element block, and a per-channel value
  // over planes that are not a multiple of the vector width (NaN results:
  // see HalfElementwiseOpsOnEveryPattern).
  std::vector<uint16_t> x(7 * 300), row(300), big(3 * 5 * 19 * 23), channel(5);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<uint16_t>((i * 7919) & 0xffff);
  for (size_t i = 0; i < row.size(); ++i)
    row[i] = static_cast<uint16_t>((i * 104729 + 5) & 0xffff);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<uint16_t>((i * 3001 + 11) & 0xffff);
  for (size_t i = 0; i < channel.size(); ++i)
    channel[i] = static_cast<uint16_t>(0x3c00 + 0x123 * i);
  expectSameBitsAsReference("add",
                            {TensorType(DType::F16, {7, 300}), TensorType(DType::F16, {300})},
                            {bytesOf(x), bytesOf(row)}, {}, /*anyNaN=*/true);
  expectSameBitsAsReference("sub",
                            {TensorType(DType::F16, {300}), TensorType(DType::F16, {7, 300})},
                            {bytesOf(row), bytesOf(x)}, {}, /*anyNaN=*/true);
  expectSameBitsAsReference(
      "mul", {TensorType(DType::F16, {3, 5, 19, 23}), TensorType(DType::F16, {5, 1, 1})},
      {bytesOf(big), bytesOf(channel)}, {}, /*anyNaN=*/true);
}

TEST(CpuF16ConversionTest, DoubleToHalfIsNoLoop) {
  // f64 -> f16 rounds through f32 (two roundings): 1 + 2^-11 + 2^-40 becomes
  // the f32 tie 1 + 2^-11, then 1.0 (even), where one rounding would give
  // 1 + 2^-10. The loops' f32 -> f16 conversion must not take it: the cpu
  // backend leaves it to the reference kernel.
  std::vector<double> values = {1.0 + 0x1p-11 + 0x1p-40, -(1.0 + 0x1p-11 + 0x1p-40)};
  OneNode one("cast", {TensorType(DType::F64, {2})}, castTo(DType::F16));
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> k = kernels::cpu::prepareCpuKernel(*one.node);
  EXPECT_TRUE(!k || !kernels::cpu::isLoopKernel(*k));
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  auto [expected, guards] = runKernel(ref, *one.node, {bytesOf(values)});
  EXPECT_TRUE(guards);
  EXPECT_EQ(elementOf<uint16_t>(expected, 0), 0x3c00);
  EXPECT_EQ(elementOf<uint16_t>(expected, 1), 0xbc00);
  if (k) {
    auto [got, kGuards] = runKernel(*k, *one.node, {bytesOf(values)});
    EXPECT_TRUE(kGuards);
    EXPECT_EQ(got, expected);
  }
}

} // namespace

TEST(CpuF16ConversionTest, HalfElementwiseOpsOnEveryPattern) {
  // The f16 loops run their element functions on converted blocks: every
  // op, on operands that hold every f16 pattern (NaNs, infinities,
  // subnormals) against each other. Every result has the reference's bits
  // except that a NaN may be another NaN: where two NaNs meet (a NaN operand
  // and a NaN of the other operand or made by inf - inf, 0 * inf, ...), x86
  // returns the first source operand's, and which one that is depends on
  // the order the compiler gives the operands, in the reference's scalar
  // code as in the loops' vector code (the f32 loops differ from the
  // reference there too).
  int64_t n = 65536 + 77;
  std::vector<uint16_t> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<uint16_t>(i & 0xffff);
    b[i] = static_cast<uint16_t>((i * 40503 + 12345) & 0xffff);
  }
  TensorType t(DType::F16, {n});
  for (const char *op : {"relu", "sigmoid", "tanh", "silu", "sqrt", "erf", "exp"})
    expectSameBitsAsReference(op, {t}, {bytesOf(a)}, {}, /*anyNaN=*/true);
  // clamp's bounds and pow's exponent are rounded to f32 (0.1 is not exact);
  // pow 2 and 0.5 take ATen's shortcuts (x * x, sqrt), 1.7 the general pow.
  AttrMap clamp;
  clamp["min"] = Attribute(-0.1);
  clamp["max"] = Attribute(6.0);
  expectSameBitsAsReference("clamp", {t}, {bytesOf(a)}, clamp, /*anyNaN=*/true);
  expectSameBitsAsReference("clamp_grad", {t, t}, {bytesOf(a), bytesOf(b)}, clamp,
                            /*anyNaN=*/true);
  for (double exponent : {2.0, 0.5, 1.7, -1.0}) {
    AttrMap pow;
    pow["exponent"] = Attribute(exponent);
    expectSameBitsAsReference("pow", {t}, {bytesOf(a)}, pow, /*anyNaN=*/true);
    expectSameBitsAsReference("pow_grad", {t, t}, {bytesOf(a), bytesOf(b)}, pow, /*anyNaN=*/true);
  }
  for (const char *approximate : {"none", "tanh"}) {
    AttrMap attrs;
    attrs["approximate"] = Attribute(std::string(approximate));
    expectSameBitsAsReference("gelu", {t}, {bytesOf(a)}, attrs, /*anyNaN=*/true);
    expectSameBitsAsReference("gelu_grad", {t, t}, {bytesOf(a), bytesOf(b)}, attrs,
                              /*anyNaN=*/true);
  }
  AttrMap scale;
  scale["factor"] = Attribute(0.3);
  expectSameBitsAsReference("scale", {t}, {bytesOf(a)}, scale, /*anyNaN=*/true);
  // ONNX's other activations and unary math (with and without attributes),
  // max, min and prelu with their backward ops.
  AttrMap onnxSigmoid{{"alpha", Attribute(0.2)}, {"beta", Attribute(0.5)}};
  AttrMap leaky{{"negative_slope", Attribute(0.1)}}, elu{{"alpha", Attribute(0.7)}};
  const std::pair<const char *, AttrMap> activations[] = {
      {"hardsigmoid", {}}, {"hardsigmoid", onnxSigmoid},
      {"hardswish", {}},   {"leaky_relu", leaky},
      {"elu", elu},        {"softplus", {}},
      {"abs", {}},         {"log", {}},
      {"reciprocal", {}}};
  for (const auto &[op, attrs] : activations) {
    std::string grad = std::string(op) + "_grad";
    expectSameBitsAsReference(op, {t}, {bytesOf(a)}, attrs, /*anyNaN=*/true);
    expectSameBitsAsReference(grad, {t, t}, {bytesOf(a), bytesOf(b)}, attrs, /*anyNaN=*/true);
    expectSameBitsAsReference(grad, {t, t}, {bytesOf(b), bytesOf(a)}, attrs, /*anyNaN=*/true);
  }
  expectSameBitsAsReference("neg", {t}, {bytesOf(a)}, {}, /*anyNaN=*/true);
  for (const char *op :
       {"max", "min", "greater_share", "prelu", "prelu_derivative", "prelu_grad_slope"}) {
    expectSameBitsAsReference(op, {t, t}, {bytesOf(a), bytesOf(b)}, {}, /*anyNaN=*/true);
    expectSameBitsAsReference(op, {t, t}, {bytesOf(b), bytesOf(a)}, {}, /*anyNaN=*/true);
  }
  for (const char *op : {"add", "sub", "mul", "div", "relu_grad", "sigmoid_grad", "tanh_grad",
                         "silu_grad", "sqrt_grad", "erf_grad", "exp_grad"}) {
    expectSameBitsAsReference(op, {t, t}, {bytesOf(a), bytesOf(b)}, {}, /*anyNaN=*/true);
    expectSameBitsAsReference(op, {t, t}, {bytesOf(b), bytesOf(a)}, {}, /*anyNaN=*/true);
  }
}
