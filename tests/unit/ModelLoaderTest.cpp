//===- ModelLoaderTest.cpp - Model files to graphs --------------------------===//
#include "frontends/yaml/ModelLoader.h"

#include "ir/support/NpyFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

using namespace ampc;

namespace {

std::unique_ptr<Graph> load(llvm::StringRef text, DiagnosticEngine &diag,
                            const LoadOptions &opts = {}, llvm::StringRef baseDir = ".") {
  return loadModelString(text, "m.yaml", diag, opts, baseDir);
}

/// Loads a model that must load; fails the test with the diagnostics if not.
std::unique_ptr<Graph> loadOk(llvm::StringRef text, const LoadOptions &opts = {},
                              llvm::StringRef baseDir = ".") {
  DiagnosticEngine diag;
  auto g = load(text, diag, opts, baseDir);
  std::string printed;
  llvm::raw_string_ostream os(printed);
  diag.print(os);
  EXPECT_TRUE(g) << os.str();
  EXPECT_FALSE(diag.hasErrors()) << os.str();
  return g;
}

/// The first diagnostic of a model that must fail to load.
std::string firstError(llvm::StringRef text, const LoadOptions &opts = {},
                       llvm::StringRef baseDir = ".") {
  DiagnosticEngine diag;
  auto g = load(text, diag, opts, baseDir);
  EXPECT_FALSE(g) << "the model loaded";
  if (diag.diagnostics().empty())
    return "<no diagnostic>";
  return diag.diagnostics().front().str();
}

#define EXPECT_ERROR(text, position, message)                                                      \
  do {                                                                                             \
    std::string err = firstError(text);                                                            \
    EXPECT_EQ(err.rfind("m.yaml:" position ": error: ", 0), 0u) << err;                            \
    EXPECT_NE(err.find(message), std::string::npos) << err;                                        \
  } while (0)

const Node *nodeNamed(const Graph &g, llvm::StringRef resultName) {
  const Value *v = g.lookup(resultName);
  return v ? v->definingNode() : nullptr;
}

std::vector<std::string> stateNames(const Graph &g) {
  std::vector<std::string> out;
  for (const Value *v : g.state())
    out.push_back(v->name().str());
  return out;
}

std::vector<int64_t> dims(const Value *v) {
  return std::vector<int64_t>(v->type().dims().begin(), v->type().dims().end());
}

const char *kMlp = R"(model: mlp
batch: 8
inputs:
  x: {shape: [B, 16]}
  y: {shape: [B, 4]}
blocks:
  dense:
    params: [width]
    layers:
      - linear: {out_features: $width}
      - relu: {}
layers:
  - dense: {width: 32, name: h1}
  - dense: {width: 32}
  - linear: {out_features: 4, name: out}
loss: {mse_loss: {input: out, target: y}}
optimizer: {sgd: {lr: 0.01, momentum: 0.9}}
train: {steps: 5}
)";

TEST(ModelLoaderTest, LoadsMlpWithBlocks) {
  auto g = loadOk(kMlp);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->name(), "mlp");
  ASSERT_EQ(g->inputs().size(), 2u);
  EXPECT_EQ(g->inputs()[0]->type().str(), "f32[8,16]");
  EXPECT_EQ(g->inputs()[0]->loc().str(), "m.yaml:4:3");

  EXPECT_EQ(stateNames(*g), (std::vector<std::string>{
                                "h1.linear_0.weight", "h1.linear_0.bias", "dense_1.linear_0.weight",
                                "dense_1.linear_0.bias", "out.weight", "out.bias"}));
  EXPECT_EQ(dims(g->lookup("h1.linear_0.weight")), (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(dims(g->lookup("dense_1.linear_0.weight")), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(dims(g->lookup("out.bias")), (std::vector<int64_t>{4}));

  std::vector<std::string> nodeResults;
  for (const Node &n : g->nodes())
    nodeResults.push_back(n.result()->name().str());
  EXPECT_EQ(nodeResults, (std::vector<std::string>{"h1.linear_0", "h1.relu_0", "dense_1.linear_0",
                                                   "dense_1.relu_0", "out", "loss"}));
  // The second block instance reads the first one's output.
  EXPECT_EQ(nodeNamed(*g, "dense_1.linear_0")->operand(0)->name(), "h1.relu_0");
  // Nodes inside a block point at the block's layer; the loss at its key.
  EXPECT_EQ(nodeNamed(*g, "h1.linear_0")->loc().str(), "m.yaml:10:9");
  EXPECT_EQ(nodeNamed(*g, "out")->loc().str(), "m.yaml:15:5");
  const Node *loss = nodeNamed(*g, "loss");
  EXPECT_EQ(loss->role(), NodeRole::Loss);
  EXPECT_EQ(loss->opName(), "mse_loss");
  EXPECT_EQ(loss->loc().str(), "m.yaml:16:8");
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0]->name(), "loss");
  EXPECT_EQ(nodeNamed(*g, "out")->role(), NodeRole::Forward);
}

TEST(ModelLoaderTest, InitialisesLikePyTorch) {
  auto g = loadOk(kMlp);
  ASSERT_TRUE(g);
  const InitSpec &w = g->lookup("h1.linear_0.weight")->init();
  EXPECT_EQ(w.kind, InitSpec::Kind::Uniform);
  EXPECT_DOUBLE_EQ(w.a, -0.25); // 1/sqrt(16)
  EXPECT_DOUBLE_EQ(w.b, 0.25);
  const InitSpec &b = g->lookup("dense_1.linear_0.bias")->init();
  EXPECT_EQ(b.kind, InitSpec::Kind::Uniform);
  EXPECT_DOUBLE_EQ(b.b, 1.0 / std::sqrt(32.0));
  for (const Value *v : g->state()) {
    EXPECT_EQ(v->stateKind(), StateKind::Parameter);
    EXPECT_TRUE(v->trainable());
  }
}

TEST(ModelLoaderTest, FillsMeta) {
  auto g = loadOk(kMlp);
  ASSERT_TRUE(g);
  const AttrMap &m = g->meta();
  EXPECT_EQ(m.at("model").getString(), "mlp");
  EXPECT_EQ(m.at("batch").getInt(), 8);
  EXPECT_EQ(m.at("loss").getString(), "mse_loss");
  EXPECT_EQ(m.at("optimizer").getString(), "sgd");
  EXPECT_DOUBLE_EQ(m.at("optimizer.lr").getFloat(), 0.01);
  EXPECT_DOUBLE_EQ(m.at("optimizer.momentum").getFloat(), 0.9);
  EXPECT_DOUBLE_EQ(m.at("optimizer.dampening").getFloat(), 0.0);
  EXPECT_FALSE(m.at("optimizer.nesterov").getBool());
  EXPECT_DOUBLE_EQ(m.at("optimizer.weight_decay").getFloat(), 0.0);
  EXPECT_EQ(m.at("train.steps").getInt(), 5);
  EXPECT_FALSE(m.count("train.epochs"));
  EXPECT_EQ(m.at("train.accumulate").getInt(), 1);
  EXPECT_EQ(m.at("train.eval_every").getInt(), 0);
  EXPECT_EQ(m.at("train.log_every").getInt(), 10);
  EXPECT_EQ(m.at("train.seed").getInt(), 0);
  EXPECT_TRUE(m.at("train.shuffle").getBool());
  EXPECT_TRUE(m.at("train.drop_last").getBool());
  EXPECT_EQ(m.at("train.data").getString(), "synthetic");
  EXPECT_EQ(m.at("train.data.size").getInt(), 1024);
  EXPECT_EQ(m.at("init.seed").getInt(), 0);
  EXPECT_FALSE(m.count("init.from"));
}

TEST(ModelLoaderTest, FillsOptimizerAndDataDefaults) {
  auto g = loadOk(R"(model: m
batch: 2
inputs: {x: {shape: [B, 3]}, y: {shape: [B], dtype: i64}}
init: {seed: 42}
layers: [{linear: {out_features: 5}}]
loss: {cross_entropy: {input: linear_0, target: y, label_smoothing: 0.1}}
optimizer: {adamw: {betas: [0.8, 0.99]}}
train: {epochs: 3, accumulate: 4, shuffle: false, data: {idx: {images: d/img.idx, labels: d/lab.idx}}}
)");
  ASSERT_TRUE(g);
  const AttrMap &m = g->meta();
  EXPECT_EQ(m.at("init.seed").getInt(), 42);
  EXPECT_EQ(m.at("loss").getString(), "cross_entropy");
  EXPECT_DOUBLE_EQ(nodeNamed(*g, "loss")->attr("label_smoothing").getFloat(), 0.1);
  EXPECT_EQ(m.at("optimizer").getString(), "adamw");
  EXPECT_DOUBLE_EQ(m.at("optimizer.lr").getFloat(), 1e-3);
  EXPECT_EQ(m.at("optimizer.betas").getFloats(), (std::vector<double>{0.8, 0.99}));
  EXPECT_DOUBLE_EQ(m.at("optimizer.eps").getFloat(), 1e-8);
  EXPECT_DOUBLE_EQ(m.at("optimizer.weight_decay").getFloat(), 0.01);
  EXPECT_EQ(m.at("train.epochs").getInt(), 3);
  EXPECT_FALSE(m.count("train.steps"));
  EXPECT_EQ(m.at("train.accumulate").getInt(), 4);
  EXPECT_FALSE(m.at("train.shuffle").getBool());
  EXPECT_EQ(m.at("train.data").getString(), "idx");
  EXPECT_EQ(m.at("train.data.images").getString(), "d/img.idx");
  EXPECT_EQ(m.at("train.data.labels").getString(), "d/lab.idx");

  g = loadOk(R"(model: m
batch: 2
inputs: {x: {shape: [B, 3]}}
layers: [{relu: null}]
optimizer: {adam: {}}
train: {data: {csv: {path: t.csv}}}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->meta().at("optimizer.betas").getFloats(), (std::vector<double>{0.9, 0.999}));
  EXPECT_DOUBLE_EQ(g->meta().at("optimizer.weight_decay").getFloat(), 0.0);
  EXPECT_EQ(g->meta().at("train.data.path").getString(), "t.csv");
  EXPECT_EQ(g->meta().at("train.data.label_column").getInt(), -1);
  EXPECT_FALSE(g->meta().at("train.data.header").getBool());

  g = loadOk(R"(model: m
batch: 2
inputs: {x: {shape: [B, 3]}, y: {shape: [B, 3]}}
layers: [{relu: {}}]
train: {steps: 1, data: {npy: {x: x.npy, y: y.npy}}}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->meta().at("train.data.x").getString(), "x.npy");
  EXPECT_EQ(g->meta().at("train.data.y").getString(), "y.npy");
}

TEST(ModelLoaderTest, SiluIsALayer) {
  auto g = loadOk(R"(model: s
batch: 2
inputs:
  x: {shape: [B, 4]}
layers:
  - linear: {out_features: 3}
  - silu: {}
)");
  ASSERT_TRUE(g);
  const Node *silu = nodeNamed(*g, "silu_0");
  ASSERT_TRUE(silu);
  EXPECT_EQ(silu->kind(), OpKind::Silu);
  EXPECT_EQ(silu->operand(0)->name(), "linear_0");
}

TEST(ModelLoaderTest, UnaryMathOpsAreLayers) {
  // Every registry op without parameters is a layer; its arguments are its
  // attributes (ints widened to floats; a bound left out is infinite).
  auto g = loadOk(R"(model: u
batch: 2
inputs:
  x: {shape: [B, 4]}
layers:
  - linear: {out_features: 3}
  - clamp: {min: 0, max: 6}
  - pow: {exponent: 2}
  - sqrt: {}
  - erf: {}
  - exp: {}
  - clamp: {max: 0.5}
  - reduce_mean: {dims: [-1]}
)");
  ASSERT_TRUE(g);
  const Node *relu6 = nodeNamed(*g, "clamp_0");
  ASSERT_TRUE(relu6);
  EXPECT_EQ(relu6->kind(), OpKind::Clamp);
  EXPECT_EQ(relu6->attr("min").getNumber(), 0.0);
  EXPECT_EQ(relu6->attr("max").getNumber(), 6.0);
  EXPECT_EQ(relu6->operand(0)->name(), "linear_0");
  const Node *pow = nodeNamed(*g, "pow_0");
  ASSERT_TRUE(pow);
  EXPECT_EQ(pow->attr("exponent").getNumber(), 2.0);
  EXPECT_EQ(pow->operand(0)->name(), "clamp_0");
  for (const char *name : {"sqrt_0", "erf_0", "exp_0"})
    EXPECT_TRUE(nodeNamed(*g, name)) << name;
  const Node *upper = nodeNamed(*g, "clamp_1");
  ASSERT_TRUE(upper);
  EXPECT_EQ(upper->attr("min").getNumber(), -std::numeric_limits<double>::infinity());
  const Node *mean = nodeNamed(*g, "reduce_mean_0");
  ASSERT_TRUE(mean);
  EXPECT_EQ(mean->kind(), OpKind::ReduceMean);
  EXPECT_EQ(mean->result()->type().str(), "f32[2]");
}

TEST(ModelLoaderTest, OnnxActivationsAreLayersAndPReluOwnsItsSlope) {
  // The new param-free ops are layers with their attributes as arguments;
  // prelu creates its slope `weight` (0.25, nn.PReLU's init), one per
  // channel shaped [C, 1, 1] for an [N, C, H, W] input, or a single one.
  auto g = loadOk(R"(model: a
batch: 2
inputs:
  x: {shape: [B, 3, 4, 4]}
layers:
  - hardswish: {}
  - hardsigmoid: {alpha: 0.2}
  - leaky_relu: {negative_slope: 0.1}
  - elu: {alpha: 2}
  - softplus: {}
  - prelu: {num_parameters: 3}
  - prelu: {init: 0.5}
  - neg: {}
  - abs: {}
  - log: {}
  - reciprocal: {}
  - {max: {inputs: [reciprocal_0, x]}}
  - {min: {inputs: [max_0, x]}}
)");
  ASSERT_TRUE(g);
  const Node *hardsigmoid = nodeNamed(*g, "hardsigmoid_0");
  ASSERT_TRUE(hardsigmoid);
  EXPECT_EQ(hardsigmoid->attr("alpha").getNumber(), 0.2);
  EXPECT_EQ(hardsigmoid->attr("beta").getNumber(), 0.5);
  EXPECT_EQ(nodeNamed(*g, "elu_0")->attr("alpha").getNumber(), 2.0);
  const Node *perChannel = nodeNamed(*g, "prelu_0");
  ASSERT_TRUE(perChannel);
  EXPECT_EQ(perChannel->operand(0)->name(), "softplus_0");
  EXPECT_EQ(perChannel->operand(1)->name(), "prelu_0.weight");
  EXPECT_EQ(perChannel->operand(1)->type(), TensorType(DType::F32, {3, 1, 1}));
  EXPECT_EQ(perChannel->operand(1)->init(), (InitSpec{InitSpec::Kind::Constant, 0.25, 0, "", ""}));
  const Node *single = nodeNamed(*g, "prelu_1");
  ASSERT_TRUE(single);
  EXPECT_EQ(single->operand(1)->type(), TensorType(DType::F32, {1}));
  EXPECT_EQ(single->operand(1)->init().a, 0.5);
  for (const char *name : {"hardswish_0", "leaky_relu_0", "neg_0", "abs_0", "log_0", "min_0"})
    EXPECT_TRUE(nodeNamed(*g, name)) << name;

  // num_parameters must be 1 or the channels.
  EXPECT_ERROR(R"(model: a
batch: 2
inputs:
  x: {shape: [B, 3, 4, 4]}
layers:
  - prelu: {num_parameters: 4}
)",
               "6:5",
               "prelu: num_parameters 4 must be 1 or the input's channels (dim 1), input "
               "f32[2,3,4,4]");
}

TEST(ModelLoaderTest, DefaultsNamesInputsAndOutput) {
  auto g = loadOk(R"(model: d
batch: 3
inputs:
  a: {shape: [B, 4]}
  b: {shape: [B, 4]}
layers:
  - relu: {}
  - sigmoid: {}
  - relu: {}
  - linear: {out_features: 2}
)");
  ASSERT_TRUE(g);
  // The first layer reads the first declared input.
  EXPECT_EQ(nodeNamed(*g, "relu_0")->operand(0)->name(), "a");
  EXPECT_EQ(nodeNamed(*g, "sigmoid_0")->operand(0)->name(), "relu_0");
  EXPECT_EQ(nodeNamed(*g, "relu_1")->operand(0)->name(), "sigmoid_0");
  EXPECT_TRUE(g->lookup("linear_0.weight"));
  // Without a loss the last layer is the output; no optimizer or train meta.
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0]->name(), "linear_0");
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[3,2]");
  EXPECT_FALSE(g->meta().count("optimizer"));
  EXPECT_FALSE(g->meta().count("loss"));
  EXPECT_FALSE(g->meta().count("train.data"));
  for (const Node &n : g->nodes())
    EXPECT_EQ(n.precisionOverride(), PrecisionOverride::None);
}

TEST(ModelLoaderTest, ResidualBlockReadsBlockIn) {
  auto g = loadOk(R"(model: res
batch: 2
inputs:
  image: {shape: [B, 4, 8, 8]}
blocks:
  res:
    params: [c, k]
    layers:
      - conv2d: {out_channels: $c, kernel: [$k, $k], padding: 1, name: conv}
      - relu: {}
      - add: {inputs: [block_in, relu_0]}
layers:
  - res: {c: 4, k: 3, name: r1}
  - res: {c: 4, k: 3}
  - global_avgpool: {}
)");
  ASSERT_TRUE(g);
  const Node *add = nodeNamed(*g, "r1.add_0");
  ASSERT_TRUE(add);
  EXPECT_EQ(add->operand(0)->name(), "image");
  EXPECT_EQ(add->operand(1)->name(), "r1.relu_0");
  const Node *add2 = nodeNamed(*g, "res_1.add_0");
  ASSERT_TRUE(add2);
  EXPECT_EQ(add2->operand(0)->name(), "r1.add_0");
  const Value *w = g->lookup("r1.conv.weight");
  ASSERT_TRUE(w);
  EXPECT_EQ(dims(w), (std::vector<int64_t>{4, 4, 3, 3}));
  EXPECT_DOUBLE_EQ(w->init().b, 1.0 / 6.0); // fan_in 4*3*3 = 36
  EXPECT_EQ(nodeNamed(*g, "r1.conv")->attr("padding").getInts(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[2,4,1,1]");
}

TEST(ModelLoaderTest, BlockInstancesGetTheirOwnArguments) {
  // Regression: resolving `$c` once must not rewrite the block for later instances.
  auto g = loadOk(R"(model: widths
batch: 2
inputs: {x: {shape: [B, 3]}}
blocks:
  fc:
    params: [c]
    layers: [{linear: {out_features: $c}}]
layers:
  - fc: {c: 5}
  - fc: {c: 7}
  - fc: {c: 2}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(dims(g->lookup("fc_0.linear_0.weight")), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(dims(g->lookup("fc_1.linear_0.weight")), (std::vector<int64_t>{7, 5}));
  EXPECT_EQ(dims(g->lookup("fc_2.linear_0.weight")), (std::vector<int64_t>{2, 7}));
}

TEST(ModelLoaderTest, NestedBlocksPassParametersThrough) {
  auto g = loadOk(R"(model: nest
batch: 2
inputs: {x: {shape: [B, 3]}}
blocks:
  inner:
    params: [n]
    layers: [{linear: {out_features: $n}}]
  outer:
    params: [m]
    layers: [{inner: {n: $m, name: i}}, {tanh: {}}]
layers:
  - outer: {m: 7, name: o}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(dims(g->lookup("o.i.linear_0.weight")), (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(g->outputs()[0]->name(), "o.tanh_0");
}

TEST(ModelLoaderTest, BatchNormHasBuffersAndUpdates) {
  auto g = loadOk(R"(model: bn
batch: 4
inputs: {image: {shape: [B, 1, 6, 6]}}
layers:
  - conv2d: {out_channels: 8, kernel: 3, bias: false}
  - batchnorm2d: {name: bn, momentum: 0.2}
  - relu: {}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(stateNames(*g), (std::vector<std::string>{"conv2d_0.weight", "bn.weight", "bn.bias",
                                                      "bn.running_mean", "bn.running_var"}));
  EXPECT_EQ(g->lookup("bn.weight")->init().kind, InitSpec::Kind::Ones);
  EXPECT_EQ(g->lookup("bn.bias")->init().kind, InitSpec::Kind::Zeros);
  const Value *mean = g->lookup("bn.running_mean"), *var = g->lookup("bn.running_var");
  EXPECT_EQ(mean->stateKind(), StateKind::Buffer);
  EXPECT_EQ(mean->init().kind, InitSpec::Kind::Zeros);
  EXPECT_EQ(var->stateKind(), StateKind::Buffer);
  EXPECT_EQ(var->init().kind, InitSpec::Kind::Ones);
  EXPECT_EQ(g->lookup("bn.weight")->stateKind(), StateKind::Parameter);

  const Node *bn = nodeNamed(*g, "bn");
  ASSERT_TRUE(bn);
  ASSERT_EQ(bn->numResults(), 3u);
  EXPECT_EQ(bn->result(1)->name(), "bn.running_mean.next");
  EXPECT_EQ(bn->result(2)->name(), "bn.running_var.next");
  EXPECT_TRUE(bn->attr("training").getBool());
  EXPECT_DOUBLE_EQ(bn->attr("momentum").getFloat(), 0.2);
  EXPECT_DOUBLE_EQ(bn->attr("eps").getFloat(), 1e-5);
  EXPECT_EQ(bn->operand(3), mean);
  EXPECT_EQ(bn->operand(4), var);
  ASSERT_EQ(g->stateUpdates().size(), 2u);
  EXPECT_EQ(g->stateUpdates()[0].state, mean);
  EXPECT_EQ(g->stateUpdates()[0].newValue, bn->result(1));
  EXPECT_EQ(g->stateUpdates()[1].state, var);
  EXPECT_EQ(g->stateUpdates()[1].newValue, bn->result(2));
  // conv2d without bias has two operands; the relu reads result 0.
  EXPECT_EQ(nodeNamed(*g, "conv2d_0")->numOperands(), 2u);
  EXPECT_EQ(nodeNamed(*g, "relu_0")->operand(0), bn->result(0));
}

TEST(ModelLoaderTest, FreezesLayersAndBlocks) {
  auto g = loadOk(R"(model: frozen
batch: 2
inputs: {x: {shape: [B, 4]}}
blocks:
  mlp:
    params: []
    layers: [{linear: {out_features: 4}}, {linear: {out_features: 4, trainable: true}}]
layers:
  - mlp: {trainable: false, name: backbone}
  - linear: {out_features: 4, trainable: false, name: f}
  - linear: {out_features: 2, name: head}
)");
  ASSERT_TRUE(g);
  EXPECT_FALSE(g->lookup("backbone.linear_0.weight")->trainable());
  // A frozen block freezes everything in it.
  EXPECT_FALSE(g->lookup("backbone.linear_1.weight")->trainable());
  EXPECT_FALSE(g->lookup("f.weight")->trainable());
  EXPECT_FALSE(g->lookup("f.bias")->trainable());
  EXPECT_TRUE(g->lookup("head.weight")->trainable());
  EXPECT_TRUE(g->lookup("head.bias")->trainable());
}

TEST(ModelLoaderTest, AppliesPrecisionOverrides) {
  auto g = loadOk(R"(model: p
batch: 2
inputs: {x: {shape: [B, 4]}}
blocks:
  pair:
    layers: [{linear: {out_features: 4}}, {softmax: {precision: fp32}}]
layers:
  - linear: {out_features: 4, precision: fp32, name: a}
  - pair: {precision: half, name: p}
  - relu: {}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(nodeNamed(*g, "a")->precisionOverride(), PrecisionOverride::Fp32);
  EXPECT_EQ(nodeNamed(*g, "p.linear_0")->precisionOverride(), PrecisionOverride::Half);
  EXPECT_EQ(nodeNamed(*g, "p.softmax_0")->precisionOverride(), PrecisionOverride::Fp32);
  EXPECT_EQ(nodeNamed(*g, "relu_0")->precisionOverride(), PrecisionOverride::None);
}

TEST(ModelLoaderTest, ReadsGenericOpAttributes) {
  auto g = loadOk(R"(model: ops
batch: 2
inputs:
  img: {shape: [B, 3, 8, 8]}
  tok: {shape: [B, 5], dtype: i64}
layers:
  - maxpool2d: {kernel: 2}
  - reshape: {shape: [B, -1]}
  - dropout: {p: 0.25, seed: 3}
  - gelu: {approximate: tanh}
  - cast: {to: f16, name: h}
  - embedding: {num_embeddings: 10, embedding_dim: 6, input: tok, name: emb}
  - layernorm: {eps: 1.0e-6}
  - transpose: {dim0: 1, dim1: 2}
  - softmax: {dim: 1}
  - scale: {factor: 2}
  - fill: {shape: [B, 3], value: 0.5, name: filled}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(nodeNamed(*g, "maxpool2d_0")->attr("kernel").getInts(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(nodeNamed(*g, "reshape_0")->attr("shape").getInts(), (std::vector<int64_t>{2, -1}));
  EXPECT_EQ(g->lookup("reshape_0")->type().str(), "f32[2,48]");
  EXPECT_DOUBLE_EQ(nodeNamed(*g, "dropout_0")->attr("p").getFloat(), 0.25);
  EXPECT_EQ(nodeNamed(*g, "gelu_0")->attr("approximate").getString(), "tanh");
  EXPECT_EQ(g->lookup("h")->type().str(), "f16[2,48]");
  const Value *emb = g->lookup("emb.weight");
  EXPECT_EQ(dims(emb), (std::vector<int64_t>{10, 6}));
  EXPECT_EQ(emb->init().kind, InitSpec::Kind::Normal);
  EXPECT_DOUBLE_EQ(emb->init().b, 1.0);
  EXPECT_EQ(nodeNamed(*g, "emb")->operand(0)->name(), "tok");
  EXPECT_EQ(dims(g->lookup("layernorm_0.weight")), (std::vector<int64_t>{6}));
  EXPECT_DOUBLE_EQ(nodeNamed(*g, "layernorm_0")->attr("eps").getFloat(), 1e-6);
  EXPECT_EQ(g->lookup("transpose_0")->type().str(), "f32[2,6,5]");
  // An int where a float is expected is widened.
  EXPECT_DOUBLE_EQ(nodeNamed(*g, "scale_0")->attr("factor").getFloat(), 2.0);
  // An op without operands reads no previous layer.
  EXPECT_EQ(nodeNamed(*g, "filled")->numOperands(), 0u);
  EXPECT_EQ(g->lookup("filled")->type().str(), "f32[2,3]");
}

TEST(ModelLoaderTest, BatchOverrideRebindsB) {
  LoadOptions opts;
  opts.batchOverride = 5;
  auto g = loadOk(kMlp, opts);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->inputs()[0]->type().str(), "f32[5,16]");
  EXPECT_EQ(g->meta().at("batch").getInt(), 5);
}

TEST(ModelLoaderTest, LoadModelFileReportsUnopenableFile) {
  DiagnosticEngine diag;
  EXPECT_FALSE(loadModelFile("/nonexistent/dir/model.yaml", diag));
  ASSERT_EQ(diag.diagnostics().size(), 1u);
  EXPECT_EQ(diag.diagnostics()[0].str().rfind(
                "error: cannot open model file '/nonexistent/dir/model.yaml': ", 0),
            0u)
      << diag.diagnostics()[0].str();
}

//===----------------------------------------------------------------------===//
// init.from: parameters from .npy files
//===----------------------------------------------------------------------===//

class ModelLoaderInitFromTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ampc-loader-test", dir_));
    llvm::SmallString<128> w(dir_);
    llvm::sys::path::append(w, "w");
    ASSERT_FALSE(llvm::sys::fs::create_directory(w));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir_); }

  std::string weightPath(llvm::StringRef name) const {
    llvm::SmallString<128> p(dir_);
    llvm::sys::path::append(p, "w", name);
    return std::string(p);
  }
  void write(llvm::StringRef name, DType dtype, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<char> zeros(n * dtypeSize(dtype), 0);
    std::string err;
    ASSERT_TRUE(writeNpy(weightPath(name), dtype, shape, zeros.data(), err)) << err;
  }

  static constexpr const char *kModel = R"(model: t
batch: 2
inputs: {x: {shape: [B, 4]}}
init:
  seed: 7
  from: w
layers:
  - linear: {out_features: 3, name: fc}
)";
  llvm::SmallString<128> dir_;
};

TEST_F(ModelLoaderInitFromTest, PointsParametersAtFiles) {
  write("fc.weight.npy", DType::F32, {3, 4});
  write("fc.bias.npy", DType::F32, {3});
  auto g = loadOk(kModel, {}, dir_);
  ASSERT_TRUE(g);
  const InitSpec &w = g->lookup("fc.weight")->init();
  EXPECT_EQ(w.kind, InitSpec::Kind::File);
  EXPECT_EQ(w.path, weightPath("fc.weight.npy"));
  EXPECT_EQ(g->lookup("fc.bias")->init().path, weightPath("fc.bias.npy"));
  EXPECT_EQ(g->meta().at("init.seed").getInt(), 7);
  EXPECT_EQ(g->meta().at("init.from").getString(), "w");
}

TEST_F(ModelLoaderInitFromTest, ReportsMissingFileAtFrom) {
  write("fc.weight.npy", DType::F32, {3, 4});
  std::string err = firstError(kModel, {}, dir_);
  EXPECT_EQ(err.rfind("m.yaml:6:9: error: missing file '" + weightPath("fc.bias.npy") +
                          "' for parameter 'fc.bias'",
                      0),
            0u)
      << err;
}

TEST_F(ModelLoaderInitFromTest, ReportsWrongShape) {
  write("fc.weight.npy", DType::F32, {4, 3});
  write("fc.bias.npy", DType::F32, {3});
  std::string err = firstError(kModel, {}, dir_);
  EXPECT_EQ(err.rfind("m.yaml:6:9: error: '" + weightPath("fc.weight.npy") +
                          "' has shape [4,3], parameter 'fc.weight' needs [3,4]",
                      0),
            0u)
      << err;
}

TEST_F(ModelLoaderInitFromTest, ReportsWrongDType) {
  write("fc.weight.npy", DType::F64, {3, 4});
  write("fc.bias.npy", DType::F32, {3});
  std::string err = firstError(kModel, {}, dir_);
  EXPECT_NE(err.find("holds f64 data, parameter 'fc.weight' needs f32"), std::string::npos) << err;
}

TEST_F(ModelLoaderInitFromTest, ReportsMalformedFile) {
  write("fc.weight.npy", DType::F32, {3, 4});
  std::ofstream(weightPath("fc.bias.npy"), std::ios::binary) << "not numpy at all";
  std::string err = firstError(kModel, {}, dir_);
  EXPECT_EQ(
      err.rfind("m.yaml:6:9: error: " + weightPath("fc.bias.npy") + ": not a .npy file (bad magic)",
                0),
      0u)
      << err;
}

TEST_F(ModelLoaderInitFromTest, ReportsMissingFolder) {
  std::string err = firstError(kModel, {}, "/nonexistent-ampc-dir");
  EXPECT_NE(err.find("init.from folder"), std::string::npos) << err;
}

//===----------------------------------------------------------------------===//
// Errors: each at the offending node's line:col
//===----------------------------------------------------------------------===//

TEST(ModelLoaderErrorTest, MalformedYaml) {
  EXPECT_ERROR("model: m\nbatch: [1, 2\ninputs: {}\n", "3:7", "invalid YAML: ");
}

TEST(ModelLoaderErrorTest, NotAMap) {
  EXPECT_ERROR("# a comment\n- a\n- b\n", "2:1", "a model file must be a map");
  EXPECT_ERROR("", "1:1", "a model file must be a map");
}

TEST(ModelLoaderErrorTest, UnknownTopLevelKey) {
  EXPECT_ERROR("model: m\nbatch: 1\nlayer: []\n", "3:1",
               "unknown key 'layer'; did you mean 'layers'?");
}

TEST(ModelLoaderErrorTest, MissingRequiredKey) {
  EXPECT_ERROR("model: m\ninputs: {x: {shape: [2]}}\nlayers: [{relu: {}}]\n", "1:1",
               "missing required key 'batch'");
  EXPECT_ERROR("model: m\nbatch: 2\ninputs: {x: {shape: [2]}}\n", "1:1",
               "missing required key 'layers'");
}

TEST(ModelLoaderErrorTest, DuplicateKey) {
  EXPECT_ERROR("model: m\nbatch: 2\nbatch: 3\n", "3:1", "duplicate key 'batch'");
}

const char *kHead = "model: m\nbatch: 2\ninputs:\n  x: {shape: [B, 4]}\nlayers:\n";

std::string withHead(llvm::StringRef layers) { return kHead + layers.str(); }

TEST(ModelLoaderErrorTest, UnknownLayerKind) {
  EXPECT_ERROR(withHead("  - conv3d: {}\n"), "6:5",
               "unknown op or block 'conv3d'; did you mean 'conv2d'?");
}

TEST(ModelLoaderErrorTest, MisspeltArgument) {
  EXPECT_ERROR(withHead("  - linear: {out_feature: 3}\n"), "6:14",
               "unknown argument 'out_feature' for linear; did you mean 'out_features'?");
  EXPECT_ERROR(withHead("  - relu: {zzz: 3}\n"), "6:12", "unknown argument 'zzz' for relu");
  // batchnorm2d sets 'training' itself.
  EXPECT_ERROR(withHead("  - batchnorm2d: {training: false}\n"), "6:19",
               "unknown argument 'training' for batchnorm2d");
}

TEST(ModelLoaderErrorTest, WrongTypes) {
  EXPECT_ERROR(withHead("  - linear: {out_features: abc}\n"), "6:28",
               "'out_features' must be an integer, got 'abc'");
  EXPECT_ERROR(withHead("  - linear: {out_features: \"3\"}\n"), "6:28",
               "'out_features' must be an integer, got the string '3'");
  EXPECT_ERROR(withHead("  - linear: {out_features: 3, bias: maybe}\n"), "6:37",
               "'bias' must be true or false, got 'maybe'");
  EXPECT_ERROR(withHead("  - scale: {factor: [1]}\n"), "6:21", "'factor' must be a number");
  EXPECT_ERROR(withHead("  - linear: {out_features: 0}\n"), "6:5",
               "linear: 'out_features' must be positive, got 0");
}

TEST(ModelLoaderErrorTest, MissingArgument) {
  EXPECT_ERROR(withHead("  - linear: {}\n"), "6:5", "missing argument 'out_features' for linear");
  EXPECT_ERROR(withHead("  - scale: {}\n"), "6:5", "scale: missing required attribute 'factor'");
}

TEST(ModelLoaderErrorTest, DuplicateNames) {
  EXPECT_ERROR(withHead("  - relu: {name: a}\n  - relu: {name: a}\n"), "7:18",
               "duplicate name 'a'");
  EXPECT_ERROR(withHead("  - relu: {name: x}\n"), "6:18", "duplicate name 'x'");
  EXPECT_ERROR(withHead("  - relu: {name: relu_1}\n  - relu: {}\n"), "7:5",
               "duplicate name 'relu_1'");
}

TEST(ModelLoaderErrorTest, InvalidName) {
  EXPECT_ERROR(withHead("  - relu: {name: 'a b'}\n"), "6:18", "invalid name 'a b'");
  EXPECT_ERROR("model: 'x y'\nbatch: 1\n", "1:8", "invalid model name 'x y'");
}

TEST(ModelLoaderErrorTest, UnknownReference) {
  EXPECT_ERROR(withHead("  - relu: {name: r}\n  - add: {inputs: [x, rr]}\n"), "7:23",
               "unknown name 'rr' (not a graph input or an earlier layer); did you mean 'r'?");
  // A later layer is not visible yet.
  EXPECT_ERROR(withHead("  - relu: {input: later}\n  - relu: {name: later}\n"), "6:19",
               "unknown name 'later'");
}

TEST(ModelLoaderErrorTest, ShapeMismatchAtLayer) {
  EXPECT_ERROR(withHead("  - linear: {out_features: 8, name: a}\n"
                        "  - add: {inputs: [x, a]}\n"),
               "7:5", "add: ");
  EXPECT_ERROR(withHead("  - conv2d: {out_channels: 2, kernel: 3}\n"), "6:5",
               "conv2d: input must be [N, C, H, W], got f32[2,4]");
}

TEST(ModelLoaderErrorTest, BadBatch) {
  EXPECT_ERROR("model: m\nbatch: 0\n", "2:8", "'batch' must be a positive integer, got 0");
  EXPECT_ERROR("model: m\nbatch: -3\n", "2:8", "'batch' must be a positive integer, got -3");
  EXPECT_ERROR("model: m\nbatch: 1.5\n", "2:8", "'batch' must be an integer, got '1.5'");
}

TEST(ModelLoaderErrorTest, BadDims) {
  EXPECT_ERROR("model: m\nbatch: 2\ninputs:\n  x: {shape: [B, 0]}\n", "4:18",
               "dimension 1 of input 'x' must be positive, got 0");
  EXPECT_ERROR("model: m\nbatch: 2\ninputs:\n  x: {shape: [B, -4]}\n", "4:18",
               "dimension 1 of input 'x' must be positive, got -4");
  EXPECT_ERROR("model: m\nbatch: 2\ninputs:\n  x: {shape: [C, 4]}\n", "4:15",
               "elements of 'shape' must be an integer, got 'C'");
}

TEST(ModelLoaderErrorTest, ElementCountLimits) {
  EXPECT_ERROR("model: m\nbatch: 2\ninputs:\n  x: {shape: [B, 4294967296, 4294967296]}\n", "4:14",
               "input 'x' f32[2,4294967296,4294967296] has an element count that "
               "overflows int64");
  EXPECT_ERROR("model: m\nbatch: 2\ninputs:\n  x: {shape: [B, 4294967296]}\n", "4:14",
               "has 8589934592 elements, more than the limit of 4294967296");
  LoadOptions small;
  small.maxElements = 100;
  std::string err = firstError(withHead("  - linear: {out_features: 1000}\n"), small);
  EXPECT_EQ(err.rfind("m.yaml:6:5: error: parameter 'linear_0.weight' f32[1000,4] has 4000 "
                      "elements, more than the limit of 100",
                      0),
            0u)
      << err;
}

TEST(ModelLoaderErrorTest, UnknownDType) {
  EXPECT_ERROR("model: m\nbatch: 2\ninputs:\n  x: {shape: [B], dtype: f8}\n", "4:26",
               "unknown dtype 'f8'; expected one of f32, f16, bf16, f64, i64, i32, bool");
}

TEST(ModelLoaderErrorTest, BlockParameters) {
  const char *blocks = "model: m\nbatch: 2\ninputs: {x: {shape: [B, 4]}}\nblocks:\n"
                       "  b:\n    params: [n]\n    layers: [{linear: {out_features: $n}}]\n"
                       "layers:\n";
  EXPECT_ERROR(std::string(blocks) + "  - b: {}\n", "9:5", "missing argument 'n' for block 'b'");
  EXPECT_ERROR(std::string(blocks) + "  - b: {n: 2, q: 3}\n", "9:15",
               "unknown argument 'q' for block 'b'");
  EXPECT_ERROR("model: m\nbatch: 2\ninputs: {x: {shape: [B, 4]}}\nblocks:\n"
               "  b:\n    params: [n]\n    layers: [{linear: {out_features: $q}}]\n",
               "7:38", "block 'b' has no parameter 'q'");
  EXPECT_ERROR(withHead("  - linear: {out_features: $n}\n"), "6:28",
               "'$n' refers to a block parameter outside a block");
  // An argument of the wrong type is reported where the instance gives it.
  EXPECT_ERROR(std::string(blocks) + "  - b: {n: many}\n", "9:12",
               "'out_features' must be an integer, got 'many'");
}

TEST(ModelLoaderErrorTest, BlockRecursion) {
  std::string text = "model: m\nbatch: 2\ninputs: {x: {shape: [B, 4]}}\nblocks:\n"
                     "  a:\n    layers: [{b: {}}]\n"
                     "  b:\n    layers: [{relu: {}}, {a: {}}]\n"
                     "layers:\n  - a: {}\n";
  DiagnosticEngine diag;
  EXPECT_FALSE(load(text, diag));
  ASSERT_GE(diag.diagnostics().size(), 3u);
  EXPECT_EQ(diag.diagnostics()[0].str(),
            "m.yaml:8:27: error: block 'a' instantiates itself: a -> b -> a");
  // Notes lead back to the instances, innermost first.
  EXPECT_EQ(diag.diagnostics()[1].str(),
            "m.yaml:6:15: note: in block 'b' instantiated here as 'a_0.b_0'");
  EXPECT_EQ(diag.diagnostics()[2].str(),
            "m.yaml:10:5: note: in block 'a' instantiated here as 'a_0'");
}

TEST(ModelLoaderErrorTest, BadPrecision) {
  EXPECT_ERROR(withHead("  - relu: {precision: f16}\n"), "6:23",
               "precision must be fp32 or half, got 'f16'");
}

TEST(ModelLoaderErrorTest, EmbeddingNeedsIntegerInput) {
  EXPECT_ERROR(withHead("  - embedding: {num_embeddings: 4, embedding_dim: 2}\n"), "6:5",
               "embedding: input 'x' must be an integer graph input");
}

TEST(ModelLoaderErrorTest, LossErrors) {
  EXPECT_ERROR(withHead("  - relu: {}\nloss: {l1_loss: {input: relu_0, target: x}}\n"), "7:8",
               "unknown loss 'l1_loss'");
  EXPECT_ERROR(withHead("  - relu: {}\nloss: {mse_loss: {input: relu_0, target: y}}\n"), "7:42",
               "unknown name 'y'");
  EXPECT_ERROR(withHead("  - relu: {}\nloss: {mse_loss: {input: relu_0}}\n"), "7:8",
               "missing argument 'target' for mse_loss");
}

TEST(ModelLoaderErrorTest, OptimizerAndTrainErrors) {
  std::string head = withHead("  - relu: {}\n");
  EXPECT_ERROR(head + "optimizer: {sgd: {momentum: 0.9}}\n", "7:13", "missing 'lr' for sgd");
  EXPECT_ERROR(head + "optimizer: {rmsprop: {}}\n", "7:13", "unknown optimizer 'rmsprop'");
  EXPECT_ERROR(head + "optimizer: {adam: {lr: -1}}\n", "7:24", "'lr' must be > 0.0, got '-1'");
  EXPECT_ERROR(head + "optimizer: {adam: {betas: [0.9]}}\n", "7:27",
               "'betas' must be a list of 2 numbers");
  EXPECT_ERROR(head + "optimizer: {sgd: {lr: 0.1, nesterov: true}}\n", "7:38",
               "nesterov momentum needs momentum > 0 and dampening 0");
  EXPECT_ERROR(head + "train: {steps: 3, epochs: 2}\n", "7:19",
               "give 'steps' or 'epochs', not both");
  EXPECT_ERROR(head + "train: {steps: 0}\n", "7:16", "'steps' must be > 0, got '0'");
  EXPECT_ERROR(head + "train: {step: 3}\n", "7:9",
               "unknown key 'step' in 'train'; did you "
               "mean 'steps'?");
  EXPECT_ERROR(head + "train: {data: {npy: {z: z.npy}}}\n", "7:22", "'z' is not a graph input");
  EXPECT_ERROR(head + "train: {data: {hdf5: {}}}\n", "7:16", "unknown data source 'hdf5'");
}

TEST(ModelLoaderErrorTest, LayersMustBeAList) {
  EXPECT_ERROR("model: m\nbatch: 2\ninputs: {x: {shape: [B]}}\nlayers: {relu: {}}\n", "4:9",
               "'layers' must be a non-empty list, got a map");
  EXPECT_ERROR(withHead("  - relu\n"), "6:5", "a layer must be a map with one key, got 'relu'");
}

} // namespace
