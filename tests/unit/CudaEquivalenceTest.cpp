//===- CudaEquivalenceTest.cpp - The CUDA backend against cpu-ref ---------===//
//
// Per op (one-node programs, f32/f16/bf16) and per whole training step (the
// example models at O0-O3), the `cuda` backend must agree with the
// reference within a tolerance per dtype; CUDA-graph replay must agree with
// eager launches bit for bit. Without a CUDA device every test here is
// skipped, naming the reason (e.g. "no CUDA device (cudaGetDeviceCount:
// error 35, ...)"); in CI they are compiled, not run. docs/cuda.md says how
// to run them on a GPU machine.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"
#include "TrainingEquivalence.h"
#include "frontends/yaml/ModelLoader.h"
#include "ir/Builder.h"
#include "kernels/common/Random.h"
#include "kernels/common/Storage.h"
#include "passes/PrecisionPolicy.h"
#include "passes/StandardPipeline.h"
#include "runtime/train/Trainer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

using namespace ampc;
using namespace ampc::testing::training;

namespace {

std::unique_ptr<Backend> cudaBackend() {
  std::string err;
  std::unique_ptr<Backend> b = createBackend("cuda", err);
  EXPECT_TRUE(b) << err;
  return b;
}

double tolerance(DType t) {
  switch (t) {
  case DType::F64:
    return 1e-9;
  case DType::F32:
    return 2e-4;
  case DType::F16:
    return 4e-3;
  case DType::BF16:
    return 3e-2;
  case DType::I64:
  case DType::I32:
  case DType::Bool:
    return 0;
  }
  return 0;
}

// --- One op at a time ----------------------------------------------------------

/// An operand: its dtype (kHalfPlaceholder: the case's dtype), shape, and
/// for integer operands the exclusive upper bound of its values.
constexpr DType kCaseType = DType::Bool; // placeholder: replaced by the case's dtype
struct Operand {
  DType dtype;
  std::vector<int64_t> dims;
  int64_t classes = 0;
  bool positive = false; ///< values in [0.5, 1.5) (variances)
};

struct OpCase {
  std::string op;
  std::vector<Operand> operands;
  AttrMap attrs;
  double toleranceFactor = 1;
  /// The op runs on the host fallback (docs/cuda.md lists those); every
  /// other case must run on the device.
  bool onHost = false;
};

using Ints = std::vector<int64_t>;

std::vector<OpCase> opCases() {
  DType T = kCaseType, F = DType::F32, L = DType::I64;
  std::vector<OpCase> c;
  c.push_back({"linear", {{T, {6, 40}}, {T, {24, 40}}, {T, {24}}}, {}, 1});
  c.push_back({"matmul", {{T, {16, 32}}, {T, {32, 8}}}, {}, 1});
  c.push_back({"matmul",
               {{T, {32, 16}}, {T, {8, 32}}},
               {{"transpose_a", Attribute(true)}, {"transpose_b", Attribute(true)}},
               1});
  c.push_back({"batch_matmul", {{T, {3, 5, 8}}, {T, {3, 8, 4}}}, {}, 1});
  c.push_back({"batch_matmul", {{T, {2, 3, 5, 8}}, {T, {1, 3, 8, 4}}}, {}, 1});
  c.push_back({"conv2d",
               {{T, {2, 3, 9, 9}}, {T, {4, 3, 3, 3}}, {T, {4}}},
               {{"padding", Attribute(Ints{1, 1})}},
               5});
  c.push_back({"conv2d",
               {{T, {2, 4, 8, 8}}, {T, {6, 2, 2, 2}}},
               {{"stride", Attribute(Ints{2, 2})}, {"groups", Attribute(int64_t(2))}},
               5});
  c.push_back({"conv2d_grad_input",
               {{T, {2, 4, 9, 9}}, {T, {4, 3, 3, 3}}},
               {{"padding", Attribute(Ints{1, 1})}, {"input_shape", Attribute(Ints{2, 3, 9, 9})}},
               5});
  c.push_back({"conv2d_grad_weight",
               {{T, {2, 4, 9, 9}}, {T, {2, 3, 9, 9}}},
               {{"padding", Attribute(Ints{1, 1})}, {"weight_shape", Attribute(Ints{4, 3, 3, 3})}},
               5});
  c.push_back(
      {"batchnorm2d", {{T, {4, 3, 5, 5}}, {F, {3}}, {F, {3}}, {F, {3}}, {F, {3}, 0, true}}, {}, 5});
  c.push_back({"batchnorm2d_grad",
               {{T, {4, 3, 5, 5}}, {T, {4, 3, 5, 5}}, {F, {3}}, {F, {3}}, {F, {3}, 0, true}},
               {},
               5});
  // Our batchnorm kernels (BatchNorm.cu): half per-channel parameters (O3),
  // eval mode both ways.
  c.push_back(
      {"batchnorm2d", {{T, {4, 3, 5, 5}}, {T, {3}}, {T, {3}}, {T, {3}}, {T, {3}, 0, true}}, {}, 5});
  c.push_back({"batchnorm2d",
               {{T, {4, 3, 5, 5}}, {F, {3}}, {F, {3}}, {F, {3}}, {F, {3}, 0, true}},
               {{"training", Attribute(false)}},
               5});
  c.push_back({"batchnorm2d_grad",
               {{T, {4, 3, 5, 5}}, {T, {4, 3, 5, 5}}, {T, {3}}, {T, {3}}, {T, {3}, 0, true}},
               {},
               5});
  c.push_back({"batchnorm2d_grad",
               {{T, {4, 3, 5, 5}}, {T, {4, 3, 5, 5}}, {F, {3}}, {F, {3}}, {F, {3}, 0, true}},
               {{"training", Attribute(false)}},
               5});
  c.push_back({"layernorm", {{T, {6, 16}}, {T, {16}}, {T, {16}}}, {}, 1});
  c.push_back({"layernorm_grad", {{T, {6, 16}}, {T, {6, 16}}, {T, {16}}}, {}, 2});
  c.push_back({"relu", {{T, {7, 9}}}, {}, 1});
  c.push_back({"gelu", {{T, {7, 9}}}, {}, 1});
  c.push_back({"gelu", {{T, {7, 9}}}, {{"approximate", Attribute("tanh")}}, 1});
  c.push_back({"sigmoid", {{T, {7, 9}}}, {}, 1});
  c.push_back({"tanh", {{T, {7, 9}}}, {}, 1});
  c.push_back({"silu", {{T, {7, 9}}}, {}, 1});
  c.push_back({"clamp", {{T, {7, 9}}}, {{"min", Attribute(-0.5)}, {"max", Attribute(0.25)}}, 1});
  c.push_back({"sqrt", {{T, {7, 9}, 0, true}}, {}, 1});
  c.push_back({"erf", {{T, {7, 9}}}, {}, 1});
  c.push_back({"pow", {{T, {7, 9}}}, {{"exponent", Attribute(2.0)}}, 1});
  c.push_back({"pow", {{T, {7, 9}, 0, true}}, {{"exponent", Attribute(1.7)}}, 1});
  c.push_back({"exp", {{T, {7, 9}}}, {}, 1});
  c.push_back({"softmax", {{T, {4, 5, 6}}}, {{"dim", Attribute(int64_t(1))}}, 1});
  c.push_back({"log_softmax", {{T, {4, 11}}}, {}, 1});
  c.push_back(
      {"dropout", {{T, {8, 33}}}, {{"p", Attribute(0.25)}, {"seed", Attribute(int64_t(3))}}, 1});
  c.push_back({"add", {{T, {4, 5, 6}}, {T, {5, 1}}}, {}, 1});
  c.push_back({"sub", {{T, {4, 5}}, {T, {4, 5}}}, {}, 1});
  c.push_back({"mul", {{T, {4, 5}}, {T, {5}}}, {}, 1});
  c.push_back({"div", {{T, {4, 5}}, {T, {4, 5}, 0, true}}, {}, 1});
  c.push_back({"scale", {{T, {9}}}, {{"factor", Attribute(0.3)}}, 1});
  c.push_back({"maxpool2d",
               {{T, {2, 3, 7, 7}}},
               {{"kernel", Attribute(Ints{3, 3})},
                {"stride", Attribute(Ints{2, 2})},
                {"padding", Attribute(Ints{1, 1})}},
               1});
  c.push_back({"avgpool2d",
               {{T, {2, 3, 7, 7}}},
               {{"kernel", Attribute(Ints{3, 3})},
                {"stride", Attribute(Ints{2, 2})},
                {"padding", Attribute(Ints{1, 1})}},
               1});
  c.push_back({"maxpool2d_grad",
               {{T, {2, 3, 4, 4}}, {T, {2, 3, 7, 7}}},
               {{"kernel", Attribute(Ints{3, 3})},
                {"stride", Attribute(Ints{2, 2})},
                {"padding", Attribute(Ints{1, 1})}},
               1});
  c.push_back({"avgpool2d_grad",
               {{T, {2, 3, 4, 4}}},
               {{"kernel", Attribute(Ints{3, 3})},
                {"stride", Attribute(Ints{2, 2})},
                {"padding", Attribute(Ints{1, 1})},
                {"input_shape", Attribute(Ints{2, 3, 7, 7})}},
               1});
  c.push_back({"global_avgpool", {{T, {2, 3, 5, 5}}}, {}, 1});
  // Ceil mode and padding per side run on the device (the windows come
  // from PoolMath.h); dilated max pooling on the host.
  AttrMap ceilPerSide{{"kernel", Attribute(Ints{3, 2})},
                      {"stride", Attribute(Ints{2, 2})},
                      {"padding", Attribute(Ints{1, 0, 0, 1})},
                      {"ceil_mode", Attribute(true)}};
  c.push_back({"maxpool2d", {{T, {2, 3, 8, 7}}}, ceilPerSide, 1});
  c.push_back({"maxpool2d_grad", {{T, {2, 3, 4, 4}}, {T, {2, 3, 8, 7}}}, ceilPerSide, 1});
  AttrMap avgCeil = ceilPerSide;
  avgCeil["count_include_pad"] = Attribute(false);
  c.push_back({"avgpool2d", {{T, {2, 3, 8, 7}}}, avgCeil, 1});
  avgCeil["input_shape"] = Attribute(Ints{2, 3, 8, 7});
  c.push_back({"avgpool2d_grad", {{T, {2, 3, 4, 4}}}, avgCeil, 1});
  c.push_back({"maxpool2d",
               {{T, {2, 3, 9, 9}}},
               {{"kernel", Attribute(Ints{3, 3})}, {"dilation", Attribute(Ints{2, 2})}},
               1,
               true});
  c.push_back({"flatten", {{T, {2, 3, 4}}}, {}, 1});
  c.push_back({"transpose",
               {{T, {2, 3, 4}}},
               {{"dim0", Attribute(int64_t(0))}, {"dim1", Attribute(int64_t(2))}},
               1});
  c.push_back({"permute", {{T, {2, 3, 4, 5}}}, {{"dims", Attribute(Ints{0, 2, 1, 3})}}, 1});
  c.push_back({"cast", {{T, {5, 7}}}, {{"to", Attribute(DType::F32)}}, 1});
  c.push_back({"cast", {{F, {5, 7}}}, {{"to", Attribute(DType::F16)}}, 1});
  c.push_back({"cast", {{F, {5, 7}}}, {{"to", Attribute(DType::BF16)}}, 1});
  c.push_back({"mse_loss", {{T, {6, 7}}, {T, {6, 7}}}, {}, 1});
  c.push_back({"mse_loss", {{T, {300, 100}}, {T, {300, 100}}}, {}, 4}); // four parts
  c.push_back({"cross_entropy", {{T, {6, 10}}, {L, {6}, 10}}, {}, 1});
  c.push_back({"reduce_sum", {{T, {5, 6, 7}}}, {{"dims", Attribute(Ints{0, 2})}}, 1});
  c.push_back({"reduce_sum", {{T, {64, 80}}}, {{"dims", Attribute(Ints{0, 1})}}, 4});
  c.push_back({"reduce_mean", {{T, {5, 6, 7}}}, {{"dims", Attribute(Ints{0, 2})}}, 1});
  c.push_back({"reduce_mean", {{T, {64, 80}}}, {{"dims", Attribute(Ints{})}}, 4});
  // Each of reduce_sum's device plans (Reduce.cu): rows in two chunks (a
  // convolution's bias gradient, H and W merged), rows in three, columns.
  c.push_back({"reduce_sum", {{T, {4, 8, 48, 48}}}, {{"dims", Attribute(Ints{0, 2, 3})}}, 4});
  c.push_back({"reduce_mean", {{T, {3, 20000}}}, {{"dims", Attribute(Ints{1})}}, 4});
  c.push_back({"reduce_sum", {{T, {600, 1, 40}}}, {{"dims", Attribute(Ints{0})}}, 4});
  c.push_back({"relu_grad", {{T, {7, 9}}, {T, {7, 9}}}, {}, 1});
  c.push_back({"gelu_grad", {{T, {7, 9}}, {T, {7, 9}}}, {}, 1});
  c.push_back({"sigmoid_grad", {{T, {7, 9}}, {T, {7, 9}}}, {}, 1});
  c.push_back({"tanh_grad", {{T, {7, 9}}, {T, {7, 9}}}, {}, 1});
  c.push_back({"silu_grad", {{T, {7, 9}}, {T, {7, 9}}}, {}, 1});
  c.push_back({"clamp_grad",
               {{T, {7, 9}}, {T, {7, 9}}},
               {{"min", Attribute(-0.5)}, {"max", Attribute(0.25)}},
               1});
  c.push_back({"sqrt_grad", {{T, {7, 9}}, {T, {7, 9}, 0, true}}, {}, 1});
  c.push_back({"erf_grad", {{T, {7, 9}}, {T, {7, 9}}}, {}, 1});
  c.push_back(
      {"pow_grad", {{T, {7, 9}}, {T, {7, 9}, 0, true}}, {{"exponent", Attribute(-1.5)}}, 1});
  c.push_back({"exp_grad", {{T, {7, 9}}, {T, {7, 9}}}, {}, 1});
  c.push_back({"softmax_grad", {{T, {4, 11}}, {T, {4, 11}}}, {}, 1});
  c.push_back({"log_softmax_grad", {{T, {4, 11}}, {T, {4, 11}}}, {}, 1});
  c.push_back({"mse_loss_grad", {{T, {}}, {T, {6, 7}}, {T, {6, 7}}}, {}, 1});
  c.push_back({"cross_entropy_grad", {{T, {}}, {T, {6, 10}}, {L, {6}, 10}}, {}, 1});
  // Labels e % 10: rows 3 and 13 are ignored, the rest smoothed.
  AttrMap ignoreAndSmooth{{"ignore_index", Attribute(int64_t(3))},
                          {"label_smoothing", Attribute(0.1)}};
  c.push_back({"cross_entropy", {{T, {16, 10}}, {L, {16}, 10}}, ignoreAndSmooth, 1});
  c.push_back({"cross_entropy_grad", {{T, {}}, {T, {16, 10}}, {L, {16}, 10}}, ignoreAndSmooth, 1});
  // ONNX's other activations and unary math, max, min, prelu, and their
  // backward ops (kernels/cuda/Elementwise.cu from ir/Pointwise.def).
  AttrMap onnxSigmoid{{"alpha", Attribute(0.2)}, {"beta", Attribute(0.5)}};
  AttrMap leaky{{"negative_slope", Attribute(0.1)}}, elu{{"alpha", Attribute(0.7)}};
  for (const auto &[op, attrs] :
       std::vector<std::pair<std::string, AttrMap>>{{"hardsigmoid", {}},
                                                    {"hardsigmoid", onnxSigmoid},
                                                    {"hardswish", {}},
                                                    {"leaky_relu", leaky},
                                                    {"elu", elu},
                                                    {"softplus", {}},
                                                    {"abs", {}}}) {
    c.push_back({op, {{T, {7, 9}}}, attrs, 1});
    c.push_back({op + "_grad", {{T, {7, 9}}, {T, {7, 9}}}, attrs, 1});
  }
  c.push_back({"neg", {{T, {7, 9}}}, {}, 1});
  c.push_back({"floor", {{T, {7, 9}}}, {}, 1});
  c.push_back({"ceil", {{T, {7, 9}}}, {}, 1});
  c.push_back({"log", {{T, {7, 9}, 0, true}}, {}, 1});
  c.push_back({"log_grad", {{T, {7, 9}}, {T, {7, 9}, 0, true}}, {}, 1});
  c.push_back({"reciprocal", {{T, {7, 9}, 0, true}}, {}, 1});
  c.push_back({"reciprocal_grad", {{T, {7, 9}}, {T, {7, 9}}}, {}, 1});
  c.push_back({"prelu", {{T, {2, 3, 4, 5}}, {T, {3, 1, 1}}}, {}, 1});
  c.push_back({"prelu_derivative", {{T, {4, 5}}, {T, {5}}}, {}, 1});
  c.push_back({"prelu_grad_slope", {{T, {7, 9}}, {T, {7, 9}}}, {}, 1});
  c.push_back({"max", {{T, {4, 5, 6}}, {T, {5, 1}}}, {}, 1});
  c.push_back({"min", {{T, {4, 5}}, {T, {4, 5}}}, {}, 1});
  c.push_back({"greater_share", {{T, {4, 5}}, {T, {5}}}, {}, 1});
  // power with a tensor of exponents and its derivatives, on positive bases.
  for (const char *op : {"power", "power_grad_base", "power_grad_exponent"})
    c.push_back({op, {{T, {4, 5}, 0, true}, {T, {5}}}, {}, 1});
  // Remainders, by positive divisors.
  for (const char *op : {"mod", "fmod", "mod_grad_divisor", "fmod_grad_divisor"})
    c.push_back({op, {{T, {4, 5}}, {T, {5}, 0, true}}, {}, 1});
  // Padding and resizing (kernels/cuda/Resample.cu), their backward ops on
  // the host.
  c.push_back({"pad",
               {{T, {2, 3, 5, 6}}},
               {{"pads", Attribute(Ints{0, 1, 2, 0, 0, 0, 1, 3})}, {"mode", Attribute("reflect")}},
               1});
  c.push_back({"pad",
               {{T, {2, 3, 5, 6}}},
               {{"pads", Attribute(Ints{0, 0, -1, 2, 0, 0, 3, -2})}, {"value", Attribute(0.5)}},
               1});
  c.push_back({"pad",
               {{L, {4, 3}, 9}},
               {{"pads", Attribute(Ints{1, 0, 0, 2})}, {"mode", Attribute("edge")}},
               1});
  AttrMap bilinear{{"size", Attribute(Ints{9, 13})},
                   {"mode", Attribute("linear")},
                   {"coordinate_mode", Attribute("pytorch_half_pixel")}};
  c.push_back({"resize", {{T, {2, 3, 5, 6}}}, bilinear, 1});
  AttrMap nearest{{"size", Attribute(Ints{10, 12})},
                  {"scales", Attribute(std::vector<double>{2, 2})},
                  {"coordinate_mode", Attribute("asymmetric")},
                  {"nearest_mode", Attribute("floor")}};
  c.push_back({"resize", {{T, {2, 3, 5, 6}}}, nearest, 1});
  AttrMap bicubic{{"size", Attribute(Ints{9, 4})},
                  {"mode", Attribute("cubic")},
                  {"coordinate_mode", Attribute("pytorch_half_pixel")}};
  c.push_back({"resize", {{T, {2, 3, 5, 6}}}, bicubic, 1});
  AttrMap cubicExcluded{{"size", Attribute(Ints{3, 13})},
                        {"mode", Attribute("cubic")},
                        {"cubic_coeff_a", Attribute(-0.5)},
                        {"exclude_outside", Attribute(true)},
                        {"coordinate_mode", Attribute("align_corners")}};
  c.push_back({"resize", {{T, {2, 3, 5, 6}}}, cubicExcluded, 1});
  c.push_back({"pad_grad",
               {{T, {2, 3, 8, 9}}},
               {{"pads", Attribute(Ints{0, 0, 2, 0, 0, 0, 1, 3})}, {"mode", Attribute("reflect")}},
               1,
               true});
  bilinear["input_shape"] = Attribute(Ints{2, 3, 5, 6});
  c.push_back({"resize_grad", {{T, {2, 3, 9, 13}}}, bilinear, 1, true});
  bicubic["input_shape"] = Attribute(Ints{2, 3, 5, 6});
  c.push_back({"resize_grad", {{T, {2, 3, 9, 4}}}, bicubic, 1, true});
  // Ops the CUDA backend runs on the host fallback: the same answers.
  c.push_back({"embedding", {{L, {4, 3}, 9}, {T, {9, 5}}}, {}, 1, true});
  c.push_back({"concat", {{T, {2, 3}}, {T, {2, 4}}}, {{"axis", Attribute(int64_t(1))}}, 1, true});
  return c;
}

struct OpResult {
  std::vector<DType> types;
  std::vector<std::vector<double>> values;
  DeviceActivity activity;
};

bool runOp(Backend &backend, const OpCase &c, DType t, OpResult &out, std::string &err) {
  const OpInfo *op = OpRegistry::builtin().lookup(c.op);
  if (!op) {
    err = "unknown op " + c.op;
    return false;
  }
  Graph g("op_" + c.op);
  std::vector<Value *> operands;
  for (size_t i = 0; i < c.operands.size(); ++i) {
    const Operand &o = c.operands[i];
    operands.push_back(g.addInput("in" + std::to_string(i),
                                  TensorType(o.dtype == kCaseType ? t : o.dtype, o.dims)));
  }
  DiagnosticEngine diag;
  Node *node = buildNode(g, *op, operands, c.attrs, Location(), diag);
  if (!node) {
    err = diag.diagnostics().empty() ? "build failed" : diag.diagnostics()[0].str();
    return false;
  }
  for (unsigned r = 0; r < node->numResults(); ++r)
    g.addOutput(node->result(r));
  std::unique_ptr<Program> p = Program::compile(g, backend, diag);
  if (!p) {
    err = diag.diagnostics().empty() ? "compile failed" : diag.diagnostics()[0].str();
    return false;
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    const Operand &o = c.operands[i];
    void *data = p->data(operands[i]);
    for (int64_t e = 0; e < operands[i]->type().numElements(); ++e) {
      double u = kernels::uniform01Double(11, i, static_cast<uint64_t>(e));
      double v = o.classes ? static_cast<double>(e % o.classes) : o.positive ? 0.5 + u : 2 * u - 1;
      kernels::storeFromDouble(operands[i]->dtype(), data, e, v);
    }
  }
  p->run(0);
  out.activity = p->deviceActivity();
  const Program &cp = *p;
  for (unsigned r = 0; r < node->numResults(); ++r) {
    const Value *v = node->result(r);
    const void *data = cp.data(v);
    std::vector<double> values(v->type().numElements());
    for (size_t e = 0; e < values.size(); ++e)
      values[e] = kernels::loadAsDouble(v->dtype(), data, static_cast<int64_t>(e));
    out.types.push_back(v->dtype());
    out.values.push_back(std::move(values));
  }
  return true;
}

class CudaOpEquivalence : public ::testing::TestWithParam<DType> {};

TEST_P(CudaOpEquivalence, EveryOpMatchesTheReference) {
  AMPC_REQUIRE_CUDA_DEVICE();
  DType t = GetParam();
  std::unique_ptr<Backend> ref = createCpuRefBackend();
  std::unique_ptr<Backend> cuda = cudaBackend();
  ASSERT_TRUE(cuda);
  for (const OpCase &c : opCases()) {
    SCOPED_TRACE(c.op + " in " + dtypeName(t).str());
    OpResult want, got;
    std::string err;
    ASSERT_TRUE(runOp(*ref, c, t, want, err)) << err;
    ASSERT_TRUE(runOp(*cuda, c, t, got, err)) << err;
    // A device kernel, not the host fallback (which would give the
    // reference's answers and pass the comparison below by construction).
    if (!c.onHost)
      EXPECT_EQ(got.activity.hostFallbackNodes, 0u) << "ran on the host fallback";
    ASSERT_EQ(want.values.size(), got.values.size());
    for (size_t r = 0; r < want.values.size(); ++r) {
      double tol = tolerance(want.types[r]) * c.toleranceFactor;
      unsigned bad = 0;
      for (size_t e = 0; e < want.values[r].size(); ++e)
        if (!closeWithin(got.values[r][e], want.values[r][e], tol) && bad++ < 5)
          ADD_FAILURE() << "result " << r << " element " << e << ": cuda " << got.values[r][e]
                        << ", reference " << want.values[r][e] << " (tolerance " << tol << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, CudaOpEquivalence,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const ::testing::TestParamInfo<DType> &info) {
                           return dtypeName(info.param).str();
                         });

// --- Whole training steps -----------------------------------------------------

using StepCase = std::tuple<const char *, const char *, const char *>;
class CudaTrainingEquivalence : public ::testing::TestWithParam<StepCase> {};

TEST_P(CudaTrainingEquivalence, EachStepsUpdateTracksTheReference) {
  AMPC_REQUIRE_CUDA_DEVICE();
  auto [model, level, halfType] = GetParam();
  // The transformer's attention and embedding run on the host fallback.
  bool allOnDevice = std::string(model) != "transformer.yaml";
  std::unique_ptr<Backend> cuda = cudaBackend();
  ASSERT_TRUE(cuda);
  expectUpdatesTrack(*cuda, "cuda", model, level, halfType, /*accumulate=*/1, /*steps=*/4,
                     allOnDevice);
}

std::string stepCaseName(const ::testing::TestParamInfo<StepCase> &info) {
  std::string name = std::get<0>(info.param);
  name = name.substr(0, name.find('.'));
  for (char &ch : name)
    if (ch == '-')
      ch = '_';
  return name + "_" + std::get<1>(info.param) + "_" + std::get<2>(info.param);
}

INSTANTIATE_TEST_SUITE_P(
    Bf16, CudaTrainingEquivalence,
    ::testing::Combine(::testing::Values("mlp.yaml", "convnet-cpu.yaml", "transformer.yaml"),
                       ::testing::Values("O0", "O1", "O2", "O3"), ::testing::Values("bf16")),
    stepCaseName);
INSTANTIATE_TEST_SUITE_P(F16, CudaTrainingEquivalence,
                         ::testing::Combine(::testing::Values("mlp.yaml", "convnet-cpu.yaml"),
                                            ::testing::Values("O1", "O2", "O3"),
                                            ::testing::Values("f16")),
                         stepCaseName);

TEST(CudaTrainingTest, AccumulatedStepsTrackTheReference) {
  AMPC_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Backend> cuda = cudaBackend();
  ASSERT_TRUE(cuda);
  expectUpdatesTrack(*cuda, "cuda", "mlp.yaml", "O2", "bf16", /*accumulate=*/2, /*steps=*/3, true);
  expectUpdatesTrack(*cuda, "cuda", "convnet-cpu.yaml", "O1", "f16", /*accumulate=*/3, /*steps=*/2,
                     true);
}

// f16 with a loss scale of 2^24 (the largest the policy takes): the scaled
// gradients overflow, so steps are skipped (the weights keep their bits)
// and the scale halves, as on the reference.
void expectOverflowsSkipped(Backend &device) {
  std::unique_ptr<Backend> ref = createCpuRefBackend();
  std::vector<std::pair<std::string, std::string>> policy = {{"half_type", "f16"},
                                                             {"loss_scale.init", "16777216"}};
  // The MLP's MSE gradients stay under f16's range even at 2^24; the
  // ConvNet's cross-entropy ones do not.
  for (const char *model : {"convnet-cpu.yaml"}) {
    SCOPED_TRACE(model);
    Training want, got;
    ASSERT_TRUE(want.build(model, 4, "O2", *ref, policy)) << want.firstError();
    ASSERT_TRUE(got.build(model, 4, "O2", device, policy)) << got.firstError();
    std::vector<double> before = parameters(got);
    std::string err;
    ASSERT_TRUE(want.train(3, err)) << err;
    ASSERT_TRUE(got.train(3, err)) << err;
    EXPECT_GE(want.result.skippedSteps, 1) << "the reference's scaled gradients did not overflow";
    EXPECT_EQ(got.result.skippedSteps, want.result.skippedSteps);
    ASSERT_TRUE(got.result.finalLossScale && want.result.finalLossScale);
    EXPECT_EQ(*got.result.finalLossScale, *want.result.finalLossScale);
    EXPECT_LE(*want.result.finalLossScale, 8388608.0) << "the scale did not back off";
    if (want.result.skippedSteps == 3)
      EXPECT_EQ(parameters(got), before) << "a skipped step changed the weights";
    else
      EXPECT_LT(relativeError(parameters(got), parameters(want)), 1e-2);
    EXPECT_EQ(got.program->deviceActivity().hostFallbackNodes, 0u);
  }
}

TEST(CudaTrainingTest, OverflowingStepsAreSkippedAndTheScaleBacksOff) {
  AMPC_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Backend> cuda = cudaBackend();
  ASSERT_TRUE(cuda);
  expectOverflowsSkipped(*cuda);
}

// A tensor of more than 2^31 elements (4 GiB in bf16, twice: input and
// result): indices past 32 bits and grids past 65,535 blocks.
TEST(CudaLargeTensorTest, ElementsPast2To31AreComputed) {
  AMPC_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Backend> cuda = cudaBackend();
  ASSERT_TRUE(cuda);
  const int64_t n = (int64_t(1) << 31) + 4099;
  Graph g("large");
  Value *x = g.addInput("x", TensorType(DType::BF16, {n}));
  DiagnosticEngine diag;
  Node *node = buildNode(g, *OpRegistry::builtin().lookup("scale"), {x},
                         {{"factor", Attribute(-2.0)}}, Location(), diag);
  ASSERT_TRUE(node);
  g.addOutput(node->result());
  bool outOfMemory = false;
  std::unique_ptr<Program> p = Program::compile(g, *cuda, diag, {}, &outOfMemory);
  if (!p && outOfMemory)
    GTEST_SKIP() << "not enough device memory for two 4 GiB tensors";
  ASSERT_TRUE(p);
  // x[e] = e % 61 - 30, exact in bf16.
  uint16_t pattern[61];
  for (int v = 0; v < 61; ++v)
    kernels::storeFromDouble(DType::BF16, pattern, v, v - 30);
  auto *in = static_cast<uint16_t *>(p->dataToOverwrite(x));
  for (int64_t e = 0; e < n; ++e)
    in[e] = pattern[e % 61];
  p->run(0);
  const Program &cp = *p;
  const void *out = cp.data(node->result());
  unsigned bad = 0;
  for (int64_t e : {int64_t(0), int64_t(1), (int64_t(1) << 31) - 1, int64_t(1) << 31,
                    (int64_t(1) << 31) + 1, (int64_t(1) << 32) / 3, n - 2, n - 1}) {
    double want = -2.0 * static_cast<double>(e % 61 - 30);
    double got = kernels::loadAsDouble(DType::BF16, out, e);
    if (got != want && bad++ < 5)
      ADD_FAILURE() << "element " << e << ": " << got << ", expected " << want;
  }
  for (int64_t e = 7; e < n; e += 1048573) // a stride through the whole tensor
    if (kernels::loadAsDouble(DType::BF16, out, e) != -2.0 * static_cast<double>(e % 61 - 30) &&
        bad++ < 5)
      ADD_FAILURE() << "element " << e << " is wrong";
  EXPECT_EQ(p->deviceActivity().hostFallbackNodes, 0u);
}

// The harness itself, on any machine: the op cases and the training runs
// above go through the device paths (the fake device of CudaTestUtil.h)
// and give the reference's bits there.

TEST(CudaTestHarness, OpCasesBuildAndRunThroughTheDevicePaths) {
  std::unique_ptr<Backend> ref = createCpuRefBackend();
  ampc::testing::FakeDeviceBackend fake;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (const OpCase &c : opCases()) {
      SCOPED_TRACE(c.op + " in " + dtypeName(t).str());
      OpResult want, got;
      std::string err;
      ASSERT_TRUE(runOp(*ref, c, t, want, err)) << err;
      ASSERT_TRUE(runOp(fake, c, t, got, err)) << err;
      EXPECT_EQ(want.types, got.types);
      for (size_t r = 0; r < want.values.size(); ++r)
        for (size_t e = 0; e < want.values[r].size(); ++e)
          ASSERT_TRUE(closeWithin(got.values[r][e], want.values[r][e], 0))
              << "result " << r << "[" << e << "]";
    }
}

TEST(CudaTestHarness, TrainingRunsThroughTheDevicePaths) {
  for (const char *model : {"mlp.yaml", "convnet-cpu.yaml"}) {
    SCOPED_TRACE(model);
    std::unique_ptr<Backend> ref = createCpuRefBackend();
    ampc::testing::FakeDeviceBackend fake;
    Training want, got;
    ASSERT_TRUE(want.build(model, 4, "O2", *ref)) << want.firstError();
    ASSERT_TRUE(got.build(model, 4, "O2", fake)) << got.firstError();
    std::string err;
    ASSERT_TRUE(want.train(2, err)) << err;
    ASSERT_TRUE(got.train(2, err)) << err;
    EXPECT_EQ(want.result.finalLoss, got.result.finalLoss);
    for (const Value *v : want.graph->state())
      EXPECT_EQ(want.values(v), got.values(got.graph->lookup(v->name()))) << v->name().str();
  }
}

// The step-by-step comparisons above, against the fake device: zero
// difference, and the test's own bookkeeping (policy overrides, one step at
// a time, the skip count and scale) checked on every machine.
TEST(CudaTestHarness, UpdateComparisonsRunThroughTheDevicePaths) {
  ampc::testing::FakeDeviceBackend fake;
  expectUpdatesTrack(fake, "fake", "mlp.yaml", "O2", "f16", /*accumulate=*/2, /*steps=*/2, false);
  expectUpdatesTrack(fake, "fake", "convnet-cpu.yaml", "O3", "bf16", /*accumulate=*/1, /*steps=*/2,
                     false);
  expectOverflowsSkipped(fake);
}

// The same comparisons against a backend whose arithmetic really differs
// from the reference's (the fast CPU backend: oneDNN, other summation
// orders): the margins the tolerances leave, on every machine. On an H200
// the CUDA backend's figures were of the same size (docs/cuda.md).
TEST(CudaTestHarness, UpdateToleranceHoldsForAnotherBackendsArithmetic) {
  for (const char *level : {"O0", "O2", "O3"})
    for (const char *half : {"bf16", "f16"}) {
      SCOPED_TRACE(std::string(level) + " " + half);
      std::unique_ptr<Backend> cpu = createCpuBackend();
      expectUpdatesTrack(*cpu, "cpu", "convnet-cpu.yaml", level, half, /*accumulate=*/1,
                         /*steps=*/3, false);
    }
  // And the measure itself: no update at all is a whole update off.
  std::vector<double> want = {1e-3, -2e-3, 5e-4}, none(3, 0.0), weights = {1, 0.5, 2};
  EXPECT_DOUBLE_EQ(weightedRelativeError(none, want, weights), 1.0);
  EXPECT_DOUBLE_EQ(weightedRelativeError(want, want, weights), 0.0);
}

TEST(CudaGraphTest, ReplayingTheCapturedStepMatchesEagerLaunchesBitForBit) {
  AMPC_REQUIRE_CUDA_DEVICE();
  auto trainWith = [](const char *graphs, std::vector<std::vector<double>> &state) {
    setenv("AMPC_CUDA_GRAPHS", graphs, 1);
    std::unique_ptr<Backend> cuda = cudaBackend();
    unsetenv("AMPC_CUDA_GRAPHS");
    ASSERT_TRUE(cuda);
    Training run;
    ASSERT_TRUE(run.build("convnet-cpu.yaml", 4, "O2", *cuda)) << run.firstError();
    std::string err;
    ASSERT_TRUE(run.train(5, err)) << err;
    const DeviceActivity &activity = run.program->deviceActivity();
    EXPECT_EQ(activity.hostFallbackNodes, 0u)
        << "on the host: " << llvm::join(activity.hostFallbackOps, ", ");
    if (std::string(graphs) == "1") {
      EXPECT_EQ(activity.capturedSteps, 1u);
      EXPECT_EQ(activity.replayedSteps, 3u) << "the step was not replayed from a CUDA graph";
    } else {
      EXPECT_EQ(activity.eagerSteps, 5u);
    }
    for (const Value *v : run.graph->state())
      state.push_back(run.values(v));
  };
  std::vector<std::vector<double>> eager, replayed;
  trainWith("0", eager);
  trainWith("1", replayed);
  EXPECT_EQ(eager, replayed);
}

// The lazily built evaluation program compiles after a captured training
// step and may grow the cuDNN workspace: the captured graph must keep
// working (docs/cuda.md, "Memory").
TEST(CudaGraphTest, ACapturedStepSurvivesAnotherProgramGrowingTheWorkspace) {
  AMPC_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Backend> cuda = cudaBackend();
  ASSERT_TRUE(cuda);
  Training small, large;
  ASSERT_TRUE(small.build("convnet-cpu.yaml", 2, "O2", *cuda)) << small.firstError();
  std::string err;
  ASSERT_TRUE(small.train(3, err)) << err; // eager, captured, replayed
  ASSERT_GT(small.program->deviceActivity().replayedSteps, 0u);
  // A larger batch of the same model needs more workspace.
  ASSERT_TRUE(large.build("convnet-cpu.yaml", 64, "O2", *cuda)) << large.firstError();
  ASSERT_TRUE(large.train(1, err)) << err;
  std::vector<double> before = parameters(small);
  ASSERT_TRUE(small.train(2, err)) << err; // replays of the graph captured before
  EXPECT_GT(small.program->deviceActivity().replayedSteps, 2u);
  EXPECT_TRUE(std::isfinite(small.result.finalLoss));
  EXPECT_NE(parameters(small), before);
}

} // namespace
