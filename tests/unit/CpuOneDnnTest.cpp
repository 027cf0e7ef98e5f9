//===- CpuOneDnnTest.cpp - oneDNN kernels of the cpu backend vs cpu-ref ---===//
//
// Every op the oneDNN dispatcher takes (linear, matmul, batch_matmul,
// conv2d and its two gradients), in f32 and bf16, on odd shapes, transposes,
// broadcasting, groups, strides, padding and dilation: the cpu backend's
// prepared kernel must be a oneDNN primitive (so a case cannot pass by
// falling back to the reference) and must agree with the reference kernel
// up to summation order. Buffers carry guard bytes that must survive.
//
// Tolerance per element: both kernels sum the same products in f32, in
// different orders, so they differ by at most a few f32 roundings of the
// running sum, bounded by 1e-5 * M where M = sum |products| (the op run in
// f64 on the inputs' absolute values). bf16 results are rounded once from
// those f32 sums, which may then land on neighbouring bf16 values: 2 bf16
// ulps of the result on top.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include "frontends/yaml/ModelLoader.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Families.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopKernels.h"
#include "kernels/cpu/OneDnn.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using ampc::testing::GuardedBuffer;
using ampc::testing::randomValues;

using Shape = std::vector<int64_t>;

int64_t elements(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// One node built in its own graph, with operand values.
struct OneNode {
  Graph graph{"onednn_test"};
  Node *node = nullptr;
  std::string error;

  OneNode(const std::string &opName, const std::vector<TensorType> &types, AttrMap attrs) {
    const OpInfo *op = OpRegistry::builtin().lookup(opName);
    if (!op) {
      error = "unknown op " + opName;
      return;
    }
    std::vector<Value *> operands;
    for (size_t i = 0; i < types.size(); ++i)
      operands.push_back(graph.addInput("in" + std::to_string(i), types[i]));
    DiagnosticEngine diag;
    node = buildNode(graph, *op, operands, std::move(attrs), Location(), diag);
    if (!node)
      error = diag.diagnostics().empty() ? "build failed" : diag.diagnostics()[0].str();
  }
};

/// Runs `kernel` on `node` with the given operand values (stored in the
/// node's dtypes); the result as doubles, empty when a guard was hit.
std::vector<double> runOn(kernels::NodeKernel &kernel, const Node &node,
                          const std::vector<std::vector<double>> &values) {
  std::vector<GuardedBuffer> buffers;
  buffers.reserve(node.numOperands() + 1);
  std::vector<kernels::TensorArg> ins, outs;
  for (unsigned i = 0; i < node.numOperands(); ++i) {
    const TensorType &t = node.operand(i)->type();
    buffers.emplace_back(t.sizeInBytes());
    for (int64_t e = 0; e < t.numElements(); ++e)
      kernels::storeFromDouble(t.dtype(), buffers.back().data(), e, values[i][e]);
    ins.push_back({buffers.back().data(), &t});
  }
  const TensorType &yType = node.result()->type();
  buffers.emplace_back(yType.sizeInBytes());
  std::memset(buffers.back().data(), 0x7f, yType.sizeInBytes());
  outs.push_back({buffers.back().data(), &yType});
  kernels::KernelArgs args;
  args.node = &node;
  args.inputs = ins;
  args.outputs = outs;
  kernel.run(args);
  for (const GuardedBuffer &b : buffers)
    if (!b.guardsIntact())
      return {};
  std::vector<double> y(yType.numElements());
  for (size_t e = 0; e < y.size(); ++e)
    y[e] = kernels::loadAsDouble(yType.dtype(), outs[0].data, e);
  return y;
}

/// The reference kernel of `opName` on f64 operands of these shapes.
std::vector<double> referenceF64(const std::string &opName, const std::vector<Shape> &shapes,
                                 const AttrMap &attrs,
                                 const std::vector<std::vector<double>> &values) {
  std::vector<TensorType> types;
  for (const Shape &s : shapes)
    types.push_back(TensorType(DType::F64, s));
  OneNode one(opName, types, attrs);
  EXPECT_TRUE(one.node) << one.error;
  if (!one.node)
    return {};
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  return runOn(ref, *one.node, values);
}

/// 2^(e - 7) for the bf16 binade of |v|: one unit in the last place.
double bf16Ulp(double v) {
  if (v == 0)
    return std::ldexp(1.0, -133);
  return std::ldexp(1.0, std::ilogb(v) - 7);
}

/// Makes the kernel under test for a node.
using KernelMaker = std::unique_ptr<kernels::NodeKernel> (*)(const Node &);

/// Runs `opName` on operands of `shapes` in `dtype` through the cpu
/// backend's kernel (which must be oneDNN's), or through `make`'s, and the
/// reference kernel, and compares element by element.
void expectMatchesReference(const std::string &opName, const std::vector<Shape> &shapes,
                            const AttrMap &attrs, DType dtype, uint64_t seed = 1,
                            KernelMaker make = nullptr) {
  SCOPED_TRACE(opName + " in " + dtypeName(dtype).str());
  std::vector<TensorType> types;
  std::vector<std::vector<double>> values, magnitudes;
  for (size_t i = 0; i < shapes.size(); ++i) {
    types.push_back(TensorType(dtype, shapes[i]));
    values.push_back(ampc::testing::roundedTo(dtype, randomValues(elements(shapes[i]), seed + i)));
    magnitudes.push_back(values.back());
    for (double &m : magnitudes.back())
      m = std::abs(m);
  }
  OneNode one(opName, types, attrs);
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> fast =
      make ? make(*one.node) : kernels::cpu::prepareCpuKernel(*one.node);
  ASSERT_TRUE(fast && (make || kernels::cpu::isOneDnnKernel(*fast)))
      << "the cpu backend fell back to another kernel";
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));

  std::vector<double> actual = runOn(*fast, *one.node, values);
  std::vector<double> expected = runOn(ref, *one.node, values);
  std::vector<double> magnitude = referenceF64(opName, shapes, attrs, magnitudes);
  ASSERT_FALSE(actual.empty()) << "the oneDNN kernel wrote outside its buffers";
  ASSERT_EQ(actual.size(), expected.size());
  ASSERT_EQ(magnitude.size(), expected.size());
  for (size_t e = 0; e < actual.size(); ++e) {
    double tol = 1e-5 * magnitude[e] + 1e-30;
    double largest = std::max(std::abs(actual[e]), std::abs(expected[e]));
    if (dtype == DType::BF16)
      tol += 2 * bf16Ulp(largest);
    if (dtype == DType::F16) // f16's unit in the last place: 2^(e - 10) (the loops take f16)
      tol += 2 * std::ldexp(1.0, std::ilogb(std::max(largest, 0x1p-14)) - 10);
    ASSERT_NEAR(actual[e], expected[e], tol)
        << "element " << e << " (sum of |products| " << magnitude[e] << ", kernel "
        << kernels::cpu::oneDnnImplementation(*fast) << ")";
  }
}

constexpr DType kOneDnnDTypes[] = {DType::F32, DType::BF16};

AttrMap transposes(bool a, bool b) {
  return {{"transpose_a", Attribute(a)}, {"transpose_b", Attribute(b)}};
}

TEST(CpuOneDnn, Linear) {
  for (DType t : kOneDnnDTypes) {
    expectMatchesReference("linear", {{1, 1}, {1, 1}}, {}, t);
    expectMatchesReference("linear", {{13}, {3, 13}}, {}, t);
    expectMatchesReference("linear", {{7, 13}, {5, 13}, {5}}, {}, t);
    expectMatchesReference("linear", {{2, 3, 17}, {31, 17}, {31}}, {}, t);
    expectMatchesReference("linear", {{67, 129}, {48, 129}, {48}}, {}, t);
  }
}

TEST(CpuOneDnn, MatMulEveryTranspose) {
  for (DType t : kOneDnnDTypes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE("transpose_a " + std::to_string(ta) + " transpose_b " + std::to_string(tb));
        const int64_t m = 7, k = 19, n = 5;
        Shape a = ta ? Shape{k, m} : Shape{m, k}, b = tb ? Shape{n, k} : Shape{k, n};
        expectMatchesReference("matmul", {a, b}, transposes(ta, tb), t);
        expectMatchesReference("matmul", {{1, 1}, {1, 1}}, transposes(ta, tb), t);
        Shape a2 = ta ? Shape{70, 33} : Shape{33, 70}, b2 = tb ? Shape{17, 70} : Shape{70, 17};
        expectMatchesReference("matmul", {a2, b2}, transposes(ta, tb), t);
      }
}

TEST(CpuOneDnn, BatchMatMul) {
  for (DType t : kOneDnnDTypes) {
    expectMatchesReference("batch_matmul", {{3, 5, 7}, {3, 7, 4}}, {}, t);
    expectMatchesReference("batch_matmul", {{3, 7, 5}, {3, 4, 7}}, transposes(true, true), t);
    expectMatchesReference("batch_matmul", {{2, 3, 5, 7}, {2, 3, 4, 7}}, transposes(false, true),
                           t);
    // Broadcast batch dims: a size-1 dim, a missing leading dim.
    expectMatchesReference("batch_matmul", {{4, 5, 7}, {1, 7, 3}}, {}, t);
    expectMatchesReference("batch_matmul", {{2, 3, 5, 7}, {3, 7, 4}}, {}, t);
    expectMatchesReference("batch_matmul", {{2, 1, 7, 5}, {1, 3, 7, 4}}, transposes(true, false),
                           t);
  }
}

AttrMap convAttrs(Shape stride, Shape padding, Shape dilation, int64_t groups) {
  return {{"stride", Attribute(stride)},
          {"padding", Attribute(padding)},
          {"dilation", Attribute(dilation)},
          {"groups", Attribute(groups)}};
}

struct ConvCase {
  Shape x, w;
  AttrMap attrs;
};

/// Geometries covering what conv2d has: bias or none, 1x1 and rectangular
/// kernels, strides that leave trailing input unread, asymmetric padding,
/// dilation, groups and depthwise.
std::vector<ConvCase> convCases() {
  return {
      {{1, 1, 5, 5}, {1, 1, 3, 3}, convAttrs({1, 1}, {0, 0}, {1, 1}, 1)},
      {{2, 3, 9, 11}, {4, 3, 3, 3}, convAttrs({1, 1}, {1, 1}, {1, 1}, 1)},
      {{2, 3, 9, 11}, {5, 3, 2, 2}, convAttrs({2, 2}, {0, 0}, {1, 1}, 1)},
      {{1, 2, 10, 7}, {3, 2, 3, 2}, convAttrs({2, 3}, {1, 0}, {1, 1}, 1)},
      {{2, 3, 12, 12}, {4, 3, 3, 3}, convAttrs({1, 1}, {2, 2}, {2, 2}, 1)},
      {{2, 4, 8, 8}, {6, 2, 3, 3}, convAttrs({1, 1}, {1, 1}, {1, 1}, 2)},
      {{1, 6, 7, 7}, {6, 1, 3, 3}, convAttrs({2, 2}, {1, 1}, {1, 1}, 6)},
      {{3, 16, 6, 6}, {17, 16, 1, 1}, convAttrs({1, 1}, {0, 0}, {1, 1}, 1)},
      {{2, 19, 7, 7}, {32, 19, 3, 3}, convAttrs({1, 1}, {1, 1}, {1, 1}, 1)},
  };
}

/// conv2d's output shape for a case (as the op infers it).
Shape convOutput(const ConvCase &c) {
  OneNode one("conv2d", {TensorType(DType::F32, c.x), TensorType(DType::F32, c.w)}, c.attrs);
  EXPECT_TRUE(one.node) << one.error;
  llvm::ArrayRef<int64_t> y = one.node->result()->type().dims();
  return Shape(y.begin(), y.end());
}

TEST(CpuOneDnn, Conv2d) {
  for (DType t : kOneDnnDTypes)
    for (const ConvCase &c : convCases()) {
      expectMatchesReference("conv2d", {c.x, c.w}, c.attrs, t);
      expectMatchesReference("conv2d", {c.x, c.w, {c.w[0]}}, c.attrs, t);
    }
}

TEST(CpuOneDnn, Conv2dGradInput) {
  for (DType t : kOneDnnDTypes)
    for (const ConvCase &c : convCases()) {
      AttrMap attrs = c.attrs;
      attrs["input_shape"] = Attribute(c.x);
      expectMatchesReference("conv2d_grad_input", {convOutput(c), c.w}, attrs, t);
    }
}

TEST(CpuOneDnn, Conv2dGradWeight) {
  for (DType t : kOneDnnDTypes)
    for (const ConvCase &c : convCases()) {
      AttrMap attrs = c.attrs;
      attrs["weight_shape"] = Attribute(c.w);
      expectMatchesReference("conv2d_grad_weight", {convOutput(c), c.x}, attrs, t);
    }
}

// A stride of 4096 on a 16x16 input crashed inside oneDNN's bf16 kernels
// (fuzzed models). With one output along a dim the stride moves nothing, so
// oneDNN gets stride 1 there; its result (and its gradients') still matches
// the reference's with the stride as written.
TEST(CpuOneDnn, HugeStrideWithOneOutputRunsAsStrideOne) {
  AttrMap attrs = convAttrs({4096, 4096}, {0, 0}, {1, 1}, 1);
  Shape x{1, 16, 16, 16}, w{8, 16, 3, 3};
  for (DType t : kOneDnnDTypes) {
    expectMatchesReference("conv2d", {x, w}, attrs, t);
    AttrMap grad = attrs;
    grad["input_shape"] = Attribute(x);
    expectMatchesReference("conv2d_grad_input", {{1, 8, 1, 1}, w}, grad, t);
    grad = attrs;
    grad["weight_shape"] = Attribute(w);
    expectMatchesReference("conv2d_grad_weight", {{1, 8, 1, 1}, x}, grad, t);
  }
}

// Several outputs with windows far apart (stride 400 past a 3-wide kernel)
// is geometry no model uses and oneDNN was seen to mishandle: the node runs
// the reference kernel.
TEST(CpuOneDnn, HugeStrideWithSeveralOutputsRunsTheReference) {
  for (DType t : kOneDnnDTypes) {
    OneNode one("conv2d", {TensorType(t, {1, 2, 1000, 5}), TensorType(t, {3, 2, 3, 3})},
                convAttrs({400, 1}, {0, 0}, {1, 1}, 1));
    ASSERT_TRUE(one.node) << one.error;
    EXPECT_EQ(one.node->result()->type().dim(2), 3);
    EXPECT_FALSE(kernels::cpu::prepareOneDnnKernel(*one.node)) << dtypeName(t).str();
  }
  // Patch embeddings (stride = kernel) and 1x1 downsampling keep oneDNN.
  for (DType t : kOneDnnDTypes) {
    expectMatchesReference("conv2d", {{1, 3, 64, 64}, {4, 3, 32, 32}},
                           convAttrs({32, 32}, {0, 0}, {1, 1}, 1), t);
    expectMatchesReference("conv2d", {{1, 4, 9, 9}, {4, 4, 1, 1}},
                           convAttrs({2, 2}, {0, 0}, {1, 1}, 1), t);
  }
}

// Creating oneDNN's bf16 backward-weights primitive for large images did not
// finish (800x800 on a Xeon with AMX); past 256x256 outputs the bf16 weight
// gradient runs in the f32 primitive, converting around it, and still
// matches the reference's bf16 result.
TEST(CpuOneDnn, LargeBf16WeightGradientRunsInF32) {
  ConvCase c{{1, 2, 260, 260}, {3, 2, 3, 3}, convAttrs({1, 1}, {0, 0}, {1, 1}, 1)};
  AttrMap attrs = c.attrs;
  attrs["weight_shape"] = Attribute(c.w);
  Shape dy = convOutput(c);
  ASSERT_GT(dy[2] * dy[3], 256 * 256);
  expectMatchesReference("conv2d_grad_weight", {dy, c.x}, attrs, DType::BF16);
  OneNode one("conv2d_grad_weight", {TensorType(DType::BF16, dy), TensorType(DType::BF16, c.x)},
              attrs);
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> k = kernels::cpu::prepareCpuKernel(*one.node);
  ASSERT_TRUE(k && kernels::cpu::isOneDnnKernel(*k));
  EXPECT_EQ(kernels::cpu::oneDnnImplementation(*k).find("bf16"), std::string::npos)
      << kernels::cpu::oneDnnImplementation(*k);
}

// bf16 GEMMs and convolutions run bf16 primitives only where bf16 is the
// faster arithmetic (bf16GemmMode: AMX, AMD's AVX512-BF16), and f32 ones on
// widened operands elsewhere, AVX2 machines included; the tests above hold
// the results to the same tolerance either way.
TEST(CpuOneDnn, Bf16GemmsFollowTheCpusFasterArithmetic) {
  // oneDNN names its bf16 implementations "..._bf16" or, on AMX, "..._amx".
  auto namesBf16 = [](const std::string &implementation) {
    return implementation.find("bf16") != std::string::npos ||
           implementation.find("amx") != std::string::npos;
  };
  // A linear of 2 * 512 * 256 * 384 FLOPs over 0.43 M elements (236 per
  // element) widens wherever widening is the rule; one of 35 per element,
  // or an attention-sized batched product, does not.
  OneNode linear("linear",
                 {TensorType(DType::BF16, {512, 384}), TensorType(DType::BF16, {256, 384})}, {});
  OneNode smallLinear("linear",
                      {TensorType(DType::BF16, {64, 96}), TensorType(DType::BF16, {32, 96})}, {});
  OneNode heads(
      "batch_matmul",
      {TensorType(DType::BF16, {4, 12, 50, 64}), TensorType(DType::BF16, {4, 12, 64, 50})}, {});
  ConvCase c{{2, 16, 12, 12}, {16, 16, 3, 3}, convAttrs({1, 1}, {1, 1}, {1, 1}, 1)};
  OneNode conv("conv2d", {TensorType(DType::BF16, c.x), TensorType(DType::BF16, c.w)}, c.attrs);
  for (OneNode *one : {&linear, &smallLinear, &heads, &conv}) {
    ASSERT_TRUE(one->node) << one->error;
    bool native = kernels::cpu::oneDnnHasBf16() && !kernels::cpu::bf16GemmRunsWidened(*one->node);
    if (one != &smallLinear && one != &heads)
      EXPECT_EQ(kernels::cpu::bf16GemmRunsWidened(*one->node), kernels::cpu::bf16GemmsRunWidened());
    else
      EXPECT_EQ(kernels::cpu::bf16GemmRunsWidened(*one->node),
                kernels::cpu::bf16GemmMode() == kernels::cpu::Bf16GemmMode::WidenedAll);
    std::unique_ptr<kernels::NodeKernel> k = kernels::cpu::prepareCpuKernel(*one->node);
    ASSERT_TRUE(k && kernels::cpu::isOneDnnKernel(*k));
    std::string implementation = kernels::cpu::oneDnnImplementation(*k);
    EXPECT_EQ(namesBf16(implementation), native)
        << one->node->opName().str() << ": " << implementation;
  }
}

// A depthwise convolution's weight gradient that oneDNN gives to its gemm
// fallback (5x5 kernels over small images: 0.6 GFLOP/s in EfficientNet-B0)
// runs the loop kernel (kernels/cpu/LoopDepthwiseConv.cpp), held to the
// same tolerance as oneDNN's; other convolutions are not the loop's.
TEST(CpuOneDnn, DepthwiseWeightGradientsOfItsGemmFallbackRunTheLoop) {
  struct Case {
    Shape x;
    int64_t k, stride, padding, dilation;
  };
  auto outSize = [](const Case &c, int64_t in) {
    return (in + 2 * c.padding - c.dilation * (c.k - 1) - 1) / c.stride + 1;
  };
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (const Case &c : {
             Case{{16, 32, 4, 4}, 5, 1, 2, 1}, // EfficientNet-B0's last stages
             Case{{2, 8, 9, 7}, 5, 2, 2, 1},   // strided, odd sizes
             Case{{3, 6, 10, 10}, 3, 1, 1, 2}, // dilated
             Case{{4, 300, 8, 8}, 5, 1, 2, 1}, // split over the threads
             Case{{2, 5, 6, 6}, 7, 3, 3, 1},   // stride past the kernel's middle
         }) {
      int64_t channels = c.x[1];
      Shape w{channels, 1, c.k, c.k};
      Shape dy{c.x[0], channels, outSize(c, c.x[2]), outSize(c, c.x[3])};
      AttrMap attrs = convAttrs({c.stride, c.stride}, {c.padding, c.padding},
                                {c.dilation, c.dilation}, channels);
      attrs["weight_shape"] = Attribute(w);
      expectMatchesReference("conv2d_grad_weight", {dy, c.x}, attrs, t, 1,
                             &kernels::cpu::prepareLoopConv2dGradWeight);
      // What the backend runs: oneDNN's own depthwise kernel or the loop.
      if (t != DType::F16) {
        OneNode one("conv2d_grad_weight", {TensorType(t, dy), TensorType(t, c.x)}, attrs);
        ASSERT_TRUE(one.node) << one.error;
        std::unique_ptr<kernels::NodeKernel> k = kernels::cpu::prepareCpuKernel(*one.node);
        ASSERT_TRUE(k);
        if (kernels::cpu::isOneDnnKernel(*k))
          EXPECT_EQ(kernels::cpu::oneDnnImplementation(*k).find("gemm"), std::string::npos)
              << kernels::cpu::oneDnnImplementation(*k);
        else
          EXPECT_TRUE(kernels::cpu::isLoopKernel(*k));
      }
    }
  // Dense and grouped (two channels a group) convolutions are not the loop's.
  for (int64_t groups : {1, 2}) {
    AttrMap attrs = convAttrs({1, 1}, {1, 1}, {1, 1}, groups);
    attrs["weight_shape"] = Attribute(Shape{4, 4 / groups, 3, 3});
    OneNode one("conv2d_grad_weight",
                {TensorType(DType::F32, {2, 4, 6, 6}), TensorType(DType::F32, {2, 4, 6, 6})},
                attrs);
    ASSERT_TRUE(one.node) << one.error;
    EXPECT_FALSE(kernels::cpu::prepareLoopConv2dGradWeight(*one.node)) << groups;
  }
}

TEST(CpuOneDnn, LeavesOtherDTypesToTheReference) {
  // f16 runs by conversion in the reference kernels; f64 has no primitives.
  for (DType t : {DType::F16, DType::F64}) {
    OneNode one("linear", {TensorType(t, {4, 8}), TensorType(t, {3, 8})}, {});
    ASSERT_TRUE(one.node) << one.error;
    EXPECT_FALSE(kernels::cpu::prepareOneDnnKernel(*one.node)) << dtypeName(t).str();
  }
}

// The training graphs of the seed models, small: after the standard
// pipeline (autodiff turns linear's backward into matmuls with transposes
// and conv2d's into its two gradient ops), every dense node of every level
// must get a oneDNN kernel.
const char *kMlp = R"(
model: onednn_mlp
batch: 6
inputs:
  x: {shape: [B, 12]}
  target: {shape: [B, 5]}
layers:
  - linear: {out_features: 16, name: fc1}
  - relu: {}
  - linear: {out_features: 5, name: out}
loss: {mse_loss: {input: out, target: target}}
optimizer: {sgd: {lr: 0.05, momentum: 0.9}}
)";

const char *kConvNet = R"(
model: onednn_convnet
batch: 2
inputs:
  image: {shape: [B, 1, 8, 8]}
  label: {shape: [B], dtype: i64}
layers:
  - conv2d: {out_channels: 4, kernel: 3, stride: 1, padding: 1}
  - batchnorm2d: {}
  - relu: {}
  - conv2d: {out_channels: 8, kernel: 2, stride: 2, padding: 0}
  - relu: {}
  - flatten: {}
  - linear: {out_features: 5, name: fc}
loss: {cross_entropy: {input: fc, target: label}}
optimizer: {adam: {lr: 0.005}}
)";

bool isDense(OpKind k) {
  return k == OpKind::Linear || k == OpKind::MatMul || k == OpKind::BatchMatMul ||
         k == OpKind::Conv2d || k == OpKind::Conv2dGradInput || k == OpKind::Conv2dGradWeight;
}

TEST(CpuOneDnn, EveryDenseNodeOfTheTrainingGraphs) {
  for (const char *model : {kMlp, kConvNet})
    for (const char *level : {"O0", "O2"}) {
      SCOPED_TRACE(level);
      DiagnosticEngine diag;
      std::unique_ptr<Graph> graph = loadModelString(model, "m.yaml", diag);
      ASSERT_TRUE(graph);
      ASSERT_TRUE(setPolicyOverride(graph->meta(), "opt_level", level, diag));
      PassManager pm;
      ASSERT_TRUE(addStandardPipeline(pm, PipelineStage::Train, diag));
      ASSERT_TRUE(pm.run(*graph, diag));
      unsigned dense = 0, transposedMatMuls = 0, convGrads = 0;
      for (const Node &node : graph->nodes()) {
        const Node *n = &node;
        if (!isDense(n->kind()))
          continue;
        ++dense;
        if (n->kind() == OpKind::MatMul &&
            (n->attr("transpose_a").getBool() || n->attr("transpose_b").getBool()))
          ++transposedMatMuls;
        if (n->kind() == OpKind::Conv2dGradInput || n->kind() == OpKind::Conv2dGradWeight)
          ++convGrads;
        std::unique_ptr<kernels::NodeKernel> k = kernels::cpu::prepareCpuKernel(*n);
        EXPECT_TRUE(k && kernels::cpu::isOneDnnKernel(*k))
            << n->opName().str() << " " << n->result()->type().str();
      }
      // The backward is there: linear's weight gradients are transposed
      // matmuls, and the convnet has conv gradients.
      EXPECT_GE(dense, 4u);
      EXPECT_GE(transposedMatMuls, 1u);
      if (model == kConvNet) {
        EXPECT_GE(convGrads, 3u);
      }
    }
}

} // namespace
