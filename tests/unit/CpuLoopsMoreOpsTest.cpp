//===- CpuLoopsMoreOpsTest.cpp - softmax, losses, pooling, shape ops vs cpu-ref -===//
//
// The loop kernels of kernels/cpu/LoopSoftmax.cpp, LoopPooling.cpp,
// LoopShape.cpp and LoopDropoutNorm.cpp against the reference kernels, per
// dtype each op takes, on odd shapes (vector tails, column blocks with a
// remainder, one row, sizes split over the threads): the kernel the cpu
// backend prepares must be a loop kernel (so a case cannot pass by falling
// back) and its results must be the reference's bits -- these loops keep
// the reference's order of every sum -- with the AVX-512 and the baseline
// vector copies and on 1, 3 and all threads. global_norm, whose double sum
// is split into pieces, is compared within a tolerance instead. Inputs
// include NaN, infinities, ties (max pooling), ignored and out-of-range
// labels and indices. Buffers carry guard bytes.
//
//===----------------------------------------------------------------------===//
#include "CpuLoopTestUtil.h"

#include "frontends/yaml/ModelLoader.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Families.h"
#include "kernels/cpu/LoopKernels.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using namespace ampc::testing;

using Dims = std::vector<int64_t>;

/// Values from {0, 1, 2, 3} (many ties), a NaN and infinities at the front.
Operand fewValues(const TensorType &t, uint64_t seed, bool specials) {
  std::vector<double> v = ampc::testing::randomValues(t.numElements(), seed, 0, 4);
  for (double &x : v)
    x = std::floor(x);
  if (specials && v.size() > 40) {
    v[3] = std::numeric_limits<double>::quiet_NaN();
    v[17] = std::numeric_limits<double>::infinity();
    v[31] = -std::numeric_limits<double>::infinity();
  }
  return {t, fromDoubles(t, v)};
}

Operand values(const TensorType &t, const std::vector<double> &v) { return {t, fromDoubles(t, v)}; }

constexpr uint64_t kRunSeed = 0x5eed;

void expectDeclined(const std::string &op, const std::vector<Operand> &operands,
                    AttrMap attrs = {}) {
  SCOPED_TRACE(describe(op, operands));
  OneLoopNode one(op, operands, std::move(attrs));
  ASSERT_TRUE(one.node) << one.error;
  EXPECT_FALSE(kernels::cpu::prepareLoopKernel(*one.node));
}

TensorType of(DType t, Dims dims) { return TensorType(t, dims); }

const DType kDTypes[] = {DType::F32, DType::BF16, DType::F16};
/// Data movement takes every dtype.
const DType kAllDTypes[] = {DType::F32, DType::BF16, DType::F16, DType::F64,
                            DType::I64, DType::I32,  DType::Bool};

AttrMap dimAttr(int64_t dim) {
  AttrMap attrs;
  attrs["dim"] = Attribute(dim);
  return attrs;
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax and their gradients
//===----------------------------------------------------------------------===//

struct AxisCase {
  Dims dims;
  int64_t dim;
};

const AxisCase kAxisCases[] = {
    {{7, 37}, -1},      // rows with a vector tail
    {{1, 1}, 1},        // one element
    {{300, 1031}, 1},   // split over the threads
    {{5000}, 0},        // one long row
    {{4, 5, 7, 3}, 1},  // a middle dim: columns of 21
    {{2, 3, 70}, 0},    // the first dim: 210 columns, blocks with a remainder
    {{64, 70, 130}, 1}, // columns, split over the threads
};

TEST(CpuLoopsMoreOpsTest, SoftmaxAndLogSoftmaxAreBitExact) {
  for (const char *op : {"softmax", "log_softmax"})
    for (DType t : kDTypes)
      for (const AxisCase &c : kAxisCases)
        expectBitIdentical(op, {uniform(of(t, c.dims), 1, -8, 8)}, dimAttr(c.dim));
  // NaN and infinities: a NaN row, inf - inf.
  for (const char *op : {"softmax", "log_softmax"})
    for (DType t : kDTypes) {
      expectBitIdentical(op, {fewValues(of(t, {3, 50}), 2, true)}, dimAttr(1));
      expectBitIdentical(op, {fewValues(of(t, {50, 3}), 3, true)}, dimAttr(0));
    }
}

TEST(CpuLoopsMoreOpsTest, SoftmaxGradientsAreBitExact) {
  for (DType t : kDTypes)
    for (const AxisCase &c : kAxisCases) {
      TensorType type = of(t, c.dims);
      expectBitIdentical("softmax_grad", {uniform(type, 1), uniform(type, 2, 0, 1)},
                         dimAttr(c.dim));
      expectBitIdentical("log_softmax_grad", {uniform(type, 3), uniform(type, 4, -6, 0)},
                         dimAttr(c.dim));
    }
}

AttrMap poolAttrs(Dims kernel, Dims stride, Dims padding);

TEST(CpuLoopsMoreOpsTest, F64StaysWithTheReference) {
  expectDeclined("softmax", {uniform(of(DType::F64, {3, 5}), 1)}, dimAttr(1));
  expectDeclined("maxpool2d", {uniform(of(DType::F64, {1, 1, 4, 4}), 1)},
                 poolAttrs({2, 2}, {}, {0, 0}));
  // The loops read windows of adjacent taps: a dilated window is left to
  // the reference.
  AttrMap dilated = poolAttrs({2, 2}, {}, {0, 0});
  dilated["dilation"] = Attribute(Dims{2, 1});
  expectDeclined("maxpool2d", {uniform(of(DType::F32, {1, 1, 4, 4}), 1)}, dilated);
  expectDeclined("cross_entropy",
                 {uniform(of(DType::F64, {3, 5}), 1), values(of(DType::I64, {3}), {0, 1, 2})}, {});
}

//===----------------------------------------------------------------------===//
// cross_entropy, cross_entropy_grad
//===----------------------------------------------------------------------===//

AttrMap crossEntropyAttrs(int64_t ignoreIndex, double smoothing) {
  AttrMap attrs;
  attrs["ignore_index"] = Attribute(ignoreIndex);
  attrs["label_smoothing"] = Attribute(smoothing);
  return attrs;
}

/// n labels in [0, classes), every fifth one `ignore` when given.
std::vector<double> labelsFor(int64_t n, int64_t classes, uint64_t seed,
                              std::optional<int64_t> ignore) {
  std::vector<double> v = ampc::testing::randomValues(n, seed, 0, double(classes));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::floor(v[i]);
    if (ignore && i % 5 == 2)
      v[i] = double(*ignore);
  }
  return v;
}

TEST(CpuLoopsMoreOpsTest, CrossEntropyAndItsGradientAreBitExact) {
  struct Shape {
    int64_t rows, classes;
  };
  const Shape shapes[] = {{1, 1}, {7, 10}, {33, 1000}, {300, 37}};
  for (DType t : kDTypes)
    for (DType labelType : {DType::I64, DType::I32})
      for (const Shape &s : shapes)
        for (double smoothing : {0.0, 0.1})
          for (int64_t ignore : {int64_t(-100), int64_t(3)}) {
            TensorType logits = of(t, {s.rows, s.classes});
            Operand labels = values(of(labelType, {s.rows}),
                                    labelsFor(s.rows, s.classes, s.rows + s.classes, ignore));
            AttrMap attrs = crossEntropyAttrs(ignore, smoothing);
            Operand x = uniform(logits, 5, -6, 6);
            expectBitIdentical("cross_entropy", {x, labels}, attrs);
            expectBitIdentical("cross_entropy_grad", {values(of(t, {}), {0.75}), x, labels}, attrs);
          }
}

TEST(CpuLoopsMoreOpsTest, CrossEntropyBadAndIgnoredLabels) {
  for (DType t : kDTypes) {
    TensorType logits = of(t, {6, 5});
    Operand x = uniform(logits, 1, -3, 3);
    // A label out of range: NaN loss and NaN gradients.
    for (double bad : {5.0, -1.0}) {
      Operand labels = values(of(DType::I64, {6}), {0, 1, bad, 3, -100, 4});
      expectBitIdentical("cross_entropy", {x, labels}, crossEntropyAttrs(-100, 0.0));
      expectBitIdentical("cross_entropy_grad", {values(of(t, {}), {1.0}), x, labels},
                         crossEntropyAttrs(-100, 0.2));
    }
    // Every row ignored: 0/0.
    Operand ignored = values(of(DType::I32, {6}), {-100});
    expectBitIdentical("cross_entropy", {x, ignored}, crossEntropyAttrs(-100, 0.1));
    expectBitIdentical("cross_entropy_grad", {values(of(t, {}), {1.0}), x, ignored},
                       crossEntropyAttrs(-100, 0.1));
    // NaN and infinite logits.
    Operand special = fewValues(of(t, {9, 7}), 4, true);
    Operand labels = values(of(DType::I64, {9}), labelsFor(9, 7, 5, std::nullopt));
    expectBitIdentical("cross_entropy", {special, labels}, crossEntropyAttrs(-100, 0.1));
    expectBitIdentical("cross_entropy_grad", {values(of(t, {}), {1.0}), special, labels},
                       crossEntropyAttrs(-100, 0.0));
  }
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

AttrMap poolAttrs(Dims kernel, Dims stride, Dims padding) {
  AttrMap attrs;
  attrs["kernel"] = Attribute(kernel);
  attrs["stride"] = Attribute(stride);
  attrs["padding"] = Attribute(padding);
  return attrs;
}

struct PoolCase {
  Dims input;
  AttrMap attrs;
};

AttrMap withCeilMode(AttrMap attrs) {
  attrs["ceil_mode"] = Attribute(true);
  return attrs;
}

std::vector<PoolCase> poolCases() {
  return {
      {{2, 3, 9, 11}, poolAttrs({3, 3}, {2, 2}, {1, 1})},   // overlapping, padded
      {{2, 3, 8, 10}, poolAttrs({2, 2}, {}, {0, 0})},       // the default stride
      {{1, 2, 7, 9}, poolAttrs({3, 2}, {1, 2}, {1, 0})},    // rectangular
      {{3, 2, 5, 5}, poolAttrs({5, 5}, {1, 1}, {2, 2})},    // every window padded
      {{8, 16, 33, 31}, poolAttrs({3, 3}, {2, 2}, {1, 1})}, // split over the threads
      // Ceil mode (GoogLeNet's k3 s2), clipped last windows; padding per
      // side ([top, left, bottom, right]), with ceil mode too.
      {{2, 3, 10, 12}, withCeilMode(poolAttrs({3, 3}, {2, 2}, {0, 0}))},
      {{1, 2, 9, 8}, withCeilMode(poolAttrs({3, 3}, {2, 2}, {1, 1}))},
      {{2, 2, 8, 9}, poolAttrs({3, 2}, {2, 2}, {0, 1, 2, 0})},
      {{1, 3, 7, 11}, withCeilMode(poolAttrs({2, 3}, {2, 2}, {1, 0, 0, 2}))},
  };
}

/// The pooling result's dims for `c`, as the op row infers them.
Dims pooledDims(const PoolCase &c) {
  Graph g("pooled");
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, c.input));
  AttrMap window = c.attrs;
  window.erase("count_include_pad"); // avgpool2d's alone
  Node *n = buildNode(g, *OpRegistry::builtin().lookup("maxpool2d"), {x}, window, Location(), diag);
  EXPECT_NE(n, nullptr);
  llvm::ArrayRef<int64_t> dims = n ? n->result()->type().dims() : llvm::ArrayRef<int64_t>();
  return Dims(dims.begin(), dims.end());
}

TEST(CpuLoopsMoreOpsTest, MaxPoolAndItsGradientAreBitExactWithTies) {
  for (DType t : kDTypes)
    for (const PoolCase &c : poolCases()) {
      // Values from {0..3}: most windows hold ties, which the forward and
      // the backward must break like the reference (the first maximum).
      for (bool specials : {false, true}) {
        Operand x = fewValues(of(t, c.input), 7, specials);
        expectBitIdentical("maxpool2d", {x}, c.attrs);
        expectBitIdentical("maxpool2d_grad", {uniform(of(t, pooledDims(c)), 8), x}, c.attrs);
      }
      expectBitIdentical("maxpool2d", {uniform(of(t, c.input), 9)}, c.attrs);
    }
}

TEST(CpuLoopsMoreOpsTest, AvgPoolAndItsGradientAreBitExact) {
  for (DType t : kDTypes)
    for (PoolCase c : poolCases())
      for (bool includePad : {true, false}) {
        c.attrs["count_include_pad"] = Attribute(includePad);
        expectBitIdentical("avgpool2d", {uniform(of(t, c.input), 1)}, c.attrs);
        AttrMap grad = c.attrs;
        grad["input_shape"] = Attribute(c.input);
        expectBitIdentical("avgpool2d_grad", {uniform(of(t, pooledDims(c)), 2)}, grad);
      }
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

TEST(CpuLoopsMoreOpsTest, DropoutDrawsTheReferencesMask) {
  for (DType t : kDTypes)
    for (double p : {0.0, 0.1, 0.5})
      for (bool training : {true, false})
        for (int64_t n : {37, 70001}) {
          AttrMap attrs;
          attrs["p"] = Attribute(p);
          attrs["seed"] = Attribute(int64_t(42));
          attrs["training"] = Attribute(training);
          Operand x = uniform(of(t, {n}), 3);
          expectBitIdentical("dropout", {x}, attrs, /*step=*/0);
          expectBitIdentical("dropout", {x}, attrs, /*step=*/5, kRunSeed);
        }
}

//===----------------------------------------------------------------------===//
// Shape ops and embedding
//===----------------------------------------------------------------------===//

/// Distinct values in any dtype (small integers survive every dtype).
Operand anyValues(DType t, Dims dims, uint64_t seed) {
  TensorType type = of(t, dims);
  std::vector<double> v = ampc::testing::randomValues(type.numElements(), seed, -100, 100);
  for (double &x : v)
    x = t == DType::Bool ? double(x > 0) : std::floor(x);
  return values(type, v);
}

TEST(CpuLoopsMoreOpsTest, ReshapeFlattenTransposePermuteAreBitExact) {
  for (DType t : kAllDTypes) {
    AttrMap reshape;
    reshape["shape"] = Attribute(Dims{6, -1});
    expectBitIdentical("reshape", {anyValues(t, {2, 3, 41}, 1)}, reshape);
    AttrMap flatten;
    flatten["start_dim"] = Attribute(int64_t(1));
    expectBitIdentical("flatten", {anyValues(t, {5, 3, 7, 9}, 2)}, flatten);
    struct Swap {
      Dims dims;
      int64_t dim0, dim1;
    };
    for (const Swap &s : {Swap{{37, 53}, 0, 1}, Swap{{3, 1, 65, 17}, 1, -1},
                          Swap{{4, 300, 257}, 1, 2}, Swap{{2, 3, 4}, 0, 0}}) {
      AttrMap attrs;
      attrs["dim0"] = Attribute(s.dim0);
      attrs["dim1"] = Attribute(s.dim1);
      expectBitIdentical("transpose", {anyValues(t, s.dims, 3)}, attrs);
    }
    struct Perm {
      Dims dims, perm;
    };
    for (const Perm &p : {Perm{{32, 64, 4, 32}, {0, 2, 1, 3}}, // attention heads
                          Perm{{5, 17, 33}, {0, 2, 1}}, Perm{{5, 17, 33}, {2, 0, 1}},
                          // transposes under one outer dim, and under two
                          // that do not merge
                          Perm{{3, 70, 45}, {0, 2, 1}}, Perm{{2, 3, 40, 37}, {1, 0, 3, 2}},
                          Perm{{2, 1, 3, 1, 5}, {4, 3, 2, 1, 0}}, Perm{{7}, {0}}}) {
      AttrMap attrs;
      attrs["dims"] = Attribute(p.perm);
      expectBitIdentical("permute", {anyValues(t, p.dims, 4)}, attrs);
    }
  }
}

TEST(CpuLoopsMoreOpsTest, BroadcastSliceConcatAreBitExact) {
  for (DType t : kAllDTypes) {
    struct Broadcast {
      Dims in, out;
    };
    for (const Broadcast &b :
         {Broadcast{{53}, {37, 53}}, Broadcast{{37, 1}, {37, 53}}, Broadcast{{}, {4, 5}},
          Broadcast{{5, 1, 1}, {4, 5, 7, 3}}, Broadcast{{1, 3, 1}, {2, 3, 300}},
          Broadcast{{3, 4}, {3, 4}}, Broadcast{{1, 257}, {300, 257}}}) {
      AttrMap attrs;
      attrs["shape"] = Attribute(b.out);
      expectBitIdentical("broadcast_to", {anyValues(t, b.in, 5)}, attrs);
    }
    struct Slice {
      Dims in;
      int64_t axis, start, end;
    };
    for (const Slice &s : {Slice{{9, 37}, 1, 3, 20}, Slice{{9, 37}, 0, 0, 9},
                           Slice{{4, 6, 5}, -2, 5, 6}, Slice{{300, 517}, 1, 1, 516}}) {
      AttrMap attrs;
      attrs["axis"] = Attribute(s.axis);
      attrs["start"] = Attribute(s.start);
      attrs["end"] = Attribute(s.end);
      expectBitIdentical("slice", {anyValues(t, s.in, 6)}, attrs);
    }
    for (int64_t axis : {0, 1, -1}) {
      AttrMap attrs;
      attrs["axis"] = Attribute(axis);
      Dims a = {3, 4, 5}, b = {3, 4, 5}, c = {3, 4, 5};
      unsigned d = axis < 0 ? 2 : unsigned(axis);
      b[d] = 2;
      c[d] = 7;
      expectBitIdentical("concat", {anyValues(t, a, 7), anyValues(t, b, 8), anyValues(t, c, 9)},
                         attrs);
    }
    AttrMap big;
    big["axis"] = Attribute(int64_t(1));
    expectBitIdentical("concat", {anyValues(t, {300, 200}, 1), anyValues(t, {300, 157}, 2)}, big);
  }
}

TEST(CpuLoopsMoreOpsTest, WhereIsBitExactUnderBroadcasting) {
  // A condition of alternating runs, so both operands are read everywhere.
  auto mask = [](Dims dims) {
    std::vector<double> v =
        ampc::testing::randomValues(TensorType(DType::F32, dims).numElements(), 11, 0, 2);
    for (double &x : v)
      x = std::floor(x);
    return values(of(DType::Bool, dims), v);
  };
  struct Case {
    Dims condition, x, y;
  };
  for (DType t : kAllDTypes)
    for (const Case &c : {
             Case{{1, 1, 8, 8}, {}, {2, 3, 8, 8}},           // masked_fill's causal mask
             Case{{2, 3, 8, 8}, {2, 3, 8, 8}, {2, 3, 8, 8}}, // no broadcast
             Case{{37, 1}, {37, 53}, {1, 53}},               // a column and a row
             Case{{}, {5, 1, 1}, {4, 5, 7, 3}},              // a scalar condition
             Case{{1, 1, 128, 128}, {}, {4, 6, 128, 128}},   // split over the threads
             Case{{1, 1, 331, 1}, {}, {7, 5, 331, 113}},     // a split inside a run
         })
      expectBitIdentical("where", {mask(c.condition), anyValues(t, c.x, 3), anyValues(t, c.y, 4)});
  // A broadcast that is not one run of kept dims stays with the reference.
  expectDeclined("where", {mask({5, 1, 7}), anyValues(DType::F32, {5, 3, 7}, 1),
                           anyValues(DType::F32, {5, 3, 7}, 2)});
}

TEST(CpuLoopsMoreOpsTest, EmbeddingAndItsGradientAreBitExact) {
  for (DType t : kDTypes)
    for (DType indexType : {DType::I64, DType::I32})
      for (int64_t rowLength : {1, 37, 128}) {
        int64_t rows = 50;
        // Repeated indices, the padding row, two from the end and two
        // outside the table.
        std::vector<double> idx = ampc::testing::randomValues(2 * 65, 3, 0, double(rows));
        for (double &i : idx)
          i = std::floor(i);
        idx[5] = -1;
        idx[9] = double(rows);
        idx[11] = 7;
        idx[13] = -double(rows);
        idx[15] = -double(rows) - 1;
        Operand indices = values(of(indexType, {2, 65}), idx);
        Operand table = uniform(of(t, {rows, rowLength}), 4);
        AttrMap attrs;
        attrs["padding_idx"] = Attribute(int64_t(7));
        expectBitIdentical("embedding", {indices, table}, attrs);
        AttrMap grad;
        grad["num_embeddings"] = Attribute(rows);
        for (int64_t padding : {int64_t(-1), int64_t(7)}) {
          grad["padding_idx"] = Attribute(padding);
          expectBitIdentical("embedding_grad", {uniform(of(t, {2, 65, rowLength}), 5), indices},
                             grad);
        }
      }
  // Large enough to split the columns over the threads.
  Operand indices =
      values(of(DType::I64, {32, 64}), ampc::testing::randomValues(32 * 64, 6, 0, 1000));
  for (DType t : kDTypes) {
    AttrMap grad;
    grad["num_embeddings"] = Attribute(int64_t(1000));
    expectBitIdentical("embedding_grad", {uniform(of(t, {32, 64, 128}), 7), indices}, grad);
  }
}

TEST(CpuLoopsMoreOpsTest, FillIsBitExact) {
  for (DType t : kAllDTypes)
    for (Dims shape : {Dims{}, Dims{37}, Dims{300, 1031}}) {
      AttrMap attrs;
      attrs["value"] = Attribute(-1.25);
      attrs["shape"] = Attribute(shape);
      attrs["dtype"] = Attribute(t);
      expectBitIdentical("fill", {}, attrs);
    }
}

//===----------------------------------------------------------------------===//
// global_norm
//===----------------------------------------------------------------------===//

TEST(CpuLoopsMoreOpsTest, GlobalNormMatchesTheReference) {
  std::vector<Operand> grads = {uniform(of(DType::BF16, {300, 257}), 1),
                                uniform(of(DType::F32, {7}), 2), uniform(of(DType::F16, {5, 3}), 3),
                                uniform(of(DType::F32, {200001}), 4, -1e-3, 1e-3)};
  OneLoopNode one("global_norm", grads, {});
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> fast = loopKernelFor(*one.node);
  ASSERT_TRUE(fast);
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  LoopResults expected = runLoopKernel(ref, *one.node, grads, 0, 0);
  float reference = kernels::load<DType::F32>(expected.outputs[0].data(), 0);
  int threads = omp_get_max_threads();
  std::vector<Bytes> seen;
  for (int t : {threads, 1, 3}) {
    omp_set_num_threads(t);
    LoopResults got = runLoopKernel(*fast, *one.node, grads, 0, 0);
    omp_set_num_threads(threads);
    EXPECT_TRUE(got.guardsIntact);
    float value = kernels::load<DType::F32>(got.outputs[0].data(), 0);
    // Both sum in double: they differ by far less than one f32 rounding.
    EXPECT_NEAR(value, reference, 1e-6 * reference);
    seen.push_back(got.outputs[0]);
  }
  EXPECT_EQ(seen[0], seen[1]) << "global_norm depends on the threads";
  EXPECT_EQ(seen[0], seen[2]) << "global_norm depends on the threads";
}

//===----------------------------------------------------------------------===//
// Training graphs
//===----------------------------------------------------------------------===//

// A convnet with pooling, dropout and cross-entropy and a small
// transformer-like model with embeddings, reshape and permute: after the
// standard pipeline at each level, every node of these ops must get a loop
// kernel (the dtypes real graphs give them).
const char *kPoolNet = R"(
model: more_loops_poolnet
batch: 3
inputs:
  image: {shape: [B, 2, 12, 12]}
  label: {shape: [B], dtype: i64}
layers:
  - conv2d: {out_channels: 4, kernel: 3, padding: 1}
  - relu: {}
  - maxpool2d: {kernel: 2}
  - avgpool2d: {kernel: 3, stride: 2, padding: 1}
  - flatten: {}
  - dropout: {p: 0.25}
  - linear: {out_features: 5, name: logits}
loss: {cross_entropy: {input: logits, target: label}}
optimizer: {adam: {lr: 0.005}}
)";

const char *kTokens = R"(
model: more_loops_tokens
batch: 2
inputs:
  tokens: {shape: [B, 6], dtype: i64}
  label: {shape: [B], dtype: i64}
layers:
  - embedding: {num_embeddings: 20, embedding_dim: 8, input: tokens, name: emb}
  - reshape: {shape: [B, 6, 2, 4], name: heads}
  - permute: {dims: [0, 2, 1, 3], name: heads_t}
  - softmax: {dim: -1, name: probs}
  - permute: {dims: [0, 2, 1, 3], name: back}
  - reshape: {shape: [B, 48], name: merged}
  - linear: {out_features: 3, name: logits}
loss: {cross_entropy: {input: logits, target: label}}
optimizer: {sgd: {lr: 0.05}}
)";

TEST(CpuLoopsMoreOpsTest, EveryClaimedNodeOfTheTrainingGraphsGetsALoopKernel) {
  const std::set<OpKind> claimed = {
      OpKind::MaxPool2d,        OpKind::MaxPool2dGrad, OpKind::AvgPool2d,     OpKind::AvgPool2dGrad,
      OpKind::Flatten,          OpKind::Reshape,       OpKind::Dropout,       OpKind::CrossEntropy,
      OpKind::CrossEntropyGrad, OpKind::Embedding,     OpKind::EmbeddingGrad, OpKind::Permute,
      OpKind::Softmax,          OpKind::SoftmaxGrad};
  std::set<OpKind> seen;
  for (const char *model : {kPoolNet, kTokens})
    for (const char *level : {"O0", "O1", "O2"}) {
      SCOPED_TRACE(level);
      DiagnosticEngine diag;
      std::unique_ptr<Graph> graph = loadModelString(model, "m.yaml", diag);
      ASSERT_TRUE(graph) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
      ASSERT_TRUE(setPolicyOverride(graph->meta(), "opt_level", level, diag));
      PassManager pm;
      ASSERT_TRUE(addStandardPipeline(pm, PipelineStage::Train, diag));
      ASSERT_TRUE(pm.run(*graph, diag));
      for (const Node &node : graph->nodes()) {
        if (!claimed.count(node.kind()))
          continue;
        seen.insert(node.kind());
        std::unique_ptr<kernels::NodeKernel> k = kernels::cpu::prepareCpuKernel(node);
        ASSERT_TRUE(k);
        std::string operands;
        for (const Value *v : node.operands())
          operands += " " + v->type().str();
        EXPECT_TRUE(kernels::cpu::isLoopKernel(*k)) << node.opName().str() << operands;
      }
    }
  EXPECT_EQ(seen, claimed);
}

} // namespace
