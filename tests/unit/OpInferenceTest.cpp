//===- OpInferenceTest.cpp - Every built-in op's row and shape inference ---===//
//
// Each case builds operand types from their textual spelling ("f32[2,3]"),
// runs the same checks as buildNode (operand count, attribute normalisation,
// inference) and compares the result types or the exact error text. Expected
// shapes are the ones PyTorch gives for the same call.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/StringRef.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

using namespace ampc;

namespace {

using Ints = std::vector<int64_t>;

/// "f32[2,3]" -> TensorType; "i64[]" is a scalar.
TensorType parseType(llvm::StringRef text) {
  auto [dtypeText, rest] = text.split('[');
  std::optional<DType> dtype = parseDType(dtypeText);
  EXPECT_TRUE(dtype && rest.endswith("]")) << "bad type in test: " << text.str();
  llvm::SmallVector<int64_t, 4> dims;
  llvm::StringRef body = rest.drop_back();
  while (!body.empty()) {
    auto [num, tail] = body.split(',');
    int64_t d = 0;
    EXPECT_FALSE(num.getAsInteger(10, d)) << "bad dim in test: " << text.str();
    dims.push_back(d);
    body = tail;
  }
  return TensorType(dtype.value_or(DType::F32), dims);
}

/// Runs the checks buildNode runs and returns the result types joined by
/// ", ", or "error: <message>".
std::string infer(llvm::StringRef opName, const std::vector<std::string> &operands,
                  AttrMap attrs = {}) {
  const OpInfo *op = OpRegistry::builtin().lookup(opName);
  if (!op)
    return "no op named " + opName.str();
  llvm::SmallVector<TensorType, 4> types;
  for (const std::string &s : operands)
    types.push_back(parseType(s));
  std::string err;
  if (!checkOperandCount(*op, types.size(), err) || !normalizeAttrs(*op, attrs, err))
    return "error: " + err;
  llvm::SmallVector<TensorType, 2> results;
  if (!inferResultTypes(*op, types, attrs, results, err))
    return "error: " + err;
  std::string joined;
  for (const TensorType &t : results)
    joined += (joined.empty() ? "" : ", ") + t.str();
  return joined;
}

struct ValidCase {
  std::string op;
  std::vector<std::string> operands;
  AttrMap attrs;
  std::string expected;
};

/// One valid call per built-in op; EveryBuiltinOpHasARuleAndACase checks the
/// table against the registry, so a new op without a case fails.
std::vector<ValidCase> validCases() {
  return {
      {"linear", {"f32[8,784]", "f32[128,784]", "f32[128]"}, {}, "f32[8,128]"},
      {"matmul", {"f32[2,3]", "f32[3,4]"}, {}, "f32[2,4]"},
      {"batch_matmul", {"f32[2,5,3]", "f32[1,3,4]"}, {}, "f32[2,5,4]"},
      {"conv2d",
       {"f32[8,1,28,28]", "f32[16,1,3,3]", "f32[16]"},
       {{"padding", Ints{1, 1}}},
       "f32[8,16,28,28]"},
      {"scaled_dot_product_attention",
       {"f16[2,4,10,16]", "f16[2,4,12,16]", "f16[2,4,12,8]"},
       {},
       "f16[2,4,10,8]"},
      {"batchnorm2d",
       {"f16[8,16,14,14]", "f32[16]", "f32[16]", "f32[16]", "f32[16]"},
       {},
       "f16[8,16,14,14], f32[16], f32[16]"},
      {"layernorm", {"f32[2,5,16]", "f32[16]", "f32[16]"}, {}, "f32[2,5,16]"},
      {"relu", {"f16[2,3]"}, {}, "f16[2,3]"},
      {"gelu", {"f32[4,8]"}, {}, "f32[4,8]"},
      {"sigmoid", {"bf16[4]"}, {}, "bf16[4]"},
      {"tanh", {"f64[]"}, {}, "f64[]"},
      {"silu", {"f16[2,3]"}, {}, "f16[2,3]"},
      {"softmax", {"f32[2,10]"}, {}, "f32[2,10]"},
      {"log_softmax", {"f32[2,10]"}, {{"dim", 1}}, "f32[2,10]"},
      {"dropout", {"f32[8,128]"}, {{"p", 0.1}}, "f32[8,128]"},
      {"clamp", {"f16[2,3]"}, {{"min", 0.0}, {"max", 6.0}}, "f16[2,3]"},
      {"sqrt", {"f32[5]"}, {}, "f32[5]"},
      {"erf", {"bf16[2,2]"}, {}, "bf16[2,2]"},
      {"pow", {"f32[3,4]"}, {{"exponent", 2.0}}, "f32[3,4]"},
      {"exp", {"f64[]"}, {}, "f64[]"},
      // ONNX's other activations and unary math, max and min.
      {"hardsigmoid", {"f32[2,3]"}, {}, "f32[2,3]"},
      {"hardswish", {"f16[4]"}, {}, "f16[4]"},
      {"leaky_relu", {"bf16[2,2]"}, {{"negative_slope", 0.2}}, "bf16[2,2]"},
      {"elu", {"f32[3]"}, {{"alpha", 0.5}}, "f32[3]"},
      {"softplus", {"f64[2]"}, {}, "f64[2]"},
      {"prelu", {"f32[2,3,4,4]", "f32[3,1,1]"}, {}, "f32[2,3,4,4]"},
      {"neg", {"f16[5]"}, {}, "f16[5]"},
      {"abs", {"f32[2,2]"}, {}, "f32[2,2]"},
      {"log", {"f32[3]"}, {}, "f32[3]"},
      {"reciprocal", {"bf16[3]"}, {}, "bf16[3]"},
      {"max", {"f32[4,1]", "f32[3]"}, {}, "f32[4,3]"},
      {"min", {"f16[2,3]", "f16[]"}, {}, "f16[2,3]"},
      {"hardsigmoid_grad", {"f32[4]", "f32[4]"}, {{"alpha", 0.2}}, "f32[4]"},
      {"hardswish_grad", {"f16[4]", "f16[4]"}, {}, "f16[4]"},
      {"leaky_relu_grad", {"f32[4]", "f32[4]"}, {}, "f32[4]"},
      {"elu_grad", {"f32[4]", "f32[4]"}, {{"alpha", 2.0}}, "f32[4]"},
      {"softplus_grad", {"f32[2,2]", "f32[2,2]"}, {}, "f32[2,2]"},
      {"abs_grad", {"bf16[4]", "bf16[4]"}, {}, "bf16[4]"},
      {"log_grad", {"f32[4]", "f32[4]"}, {}, "f32[4]"},
      {"reciprocal_grad", {"f32[4]", "f32[4]"}, {}, "f32[4]"},
      {"prelu_derivative", {"f32[2,3]", "f32[3]"}, {}, "f32[2,3]"},
      {"prelu_grad_slope", {"f32[2,3]", "f32[2,3]"}, {}, "f32[2,3]"},
      {"greater_share", {"f32[4,1]", "f32[3]"}, {}, "f32[4,3]"},
      {"power", {"f32[4,1]", "f32[3]"}, {}, "f32[4,3]"},
      {"power_grad_base", {"f32[2,3]", "f32[]"}, {}, "f32[2,3]"},
      {"power_grad_exponent", {"f64[2]", "f64[2]"}, {}, "f64[2]"},
      {"mod", {"f32[2,3]", "f32[3]"}, {}, "f32[2,3]"},
      {"floor", {"f32[2,3]"}, {}, "f32[2,3]"},
      {"ceil", {"bf16[4]"}, {}, "bf16[4]"},
      {"fmod", {"f64[3]", "f64[]"}, {}, "f64[3]"},
      {"mod_grad_divisor", {"f32[2]", "f32[2]"}, {}, "f32[2]"},
      {"fmod_grad_divisor", {"f32[2]", "f32[2]"}, {}, "f32[2]"},
      {"add", {"f32[4,1,3]", "f32[5,1]"}, {}, "f32[4,5,3]"},
      {"sub", {"f16[2,3]", "f16[]"}, {}, "f16[2,3]"},
      {"mul", {"f32[8,1]", "f32[1,6]"}, {}, "f32[8,6]"},
      {"div", {"bf16[3]", "bf16[3]"}, {}, "bf16[3]"},
      {"scale", {"f32[2,2]"}, {{"factor", 0.5}}, "f32[2,2]"},
      {"maxpool2d", {"f32[1,16,7,7]"}, {{"kernel", Ints{2, 2}}}, "f32[1,16,3,3]"},
      {"avgpool2d",
       {"f32[1,4,5,5]"},
       {{"kernel", Ints{3, 3}}, {"stride", Ints{1, 1}}, {"padding", Ints{1, 1}}},
       "f32[1,4,5,5]"},
      {"global_avgpool", {"f16[2,512,7,7]"}, {}, "f16[2,512,1,1]"},
      {"pad", {"f32[1,3,4,5]"}, {{"pads", Ints{0, 0, 1, 2, 0, 0, 3, 0}}}, "f32[1,3,8,7]"},
      {"resize", {"f16[2,3,4,5]"}, {{"size", Ints{8, 10}}}, "f16[2,3,8,10]"},
      {"flatten", {"f32[8,16,4,4]"}, {}, "f32[8,256]"},
      {"reshape", {"f32[2,3,4]"}, {{"shape", Ints{6, -1}}}, "f32[6,4]"},
      {"transpose", {"f32[2,3,4]"}, {{"dim0", 0}, {"dim1", -1}}, "f32[4,3,2]"},
      {"permute", {"f32[8,3,32,32]"}, {{"dims", Ints{0, 2, 3, 1}}}, "f32[8,32,32,3]"},
      {"concat", {"f32[2,3]", "f32[2,5]"}, {{"axis", 1}}, "f32[2,8]"},
      {"embedding", {"i64[4,7]", "f32[1000,64]"}, {}, "f32[4,7,64]"},
      {"cast", {"f32[2,3]"}, {{"to", DType::F16}}, "f16[2,3]"},
      {"reduce_sum", {"f32[4,5,6]"}, {{"dims", Ints{0, -1}}}, "f32[5]"},
      {"reduce_mean", {"f16[4,5,6]"}, {{"dims", Ints{-1}}, {"keepdim", true}}, "f16[4,5,1]"},
      {"fill", {}, {{"shape", Ints{2, 3}}, {"dtype", DType::BF16}}, "bf16[2,3]"},
      {"compare", {"i64[4,1]", "i64[]"}, {{"predicate", std::string("eq")}}, "bool[4,1]"},
      {"logical", {"bool[4,1]", "bool[1,5]"}, {{"op", std::string("or")}}, "bool[4,5]"},
      {"logical_not", {"bool[3]"}, {}, "bool[3]"},
      {"where", {"bool[1,1,4,4]", "f32[]", "f32[2,3,4,4]"}, {}, "f32[2,3,4,4]"},
      {"reduce_max", {"f32[2,8,20]"}, {{"dims", Ints{2}}}, "f32[2,8]"},
      {"reduce_min", {"bf16[2,8]"}, {{"keepdim", true}}, "bf16[1,1]"},
      {"argmax", {"f32[2,10]"}, {{"dim", 1}, {"keepdim", false}}, "i64[2]"},
      {"mse_loss", {"f32[8,10]", "f32[8,10]"}, {}, "f32[]"},
      {"cross_entropy", {"f32[8,10]", "i64[8]"}, {}, "f32[]"},
      {"binary_cross_entropy", {"f32[8,1]", "f32[8,1]"}, {}, "f32[]"},

      // Backward ops. Activations: (grad, saved input or output) -> the
      // input's type.
      {"relu_grad", {"f16[2,3]", "f16[2,3]"}, {}, "f16[2,3]"},
      {"gelu_grad", {"f32[4,8]", "f32[4,8]"}, {{"approximate", "tanh"}}, "f32[4,8]"},
      {"sigmoid_grad", {"bf16[4]", "bf16[4]"}, {}, "bf16[4]"},
      {"tanh_grad", {"f64[]", "f64[]"}, {}, "f64[]"},
      {"silu_grad", {"bf16[2,3]", "bf16[2,3]"}, {}, "bf16[2,3]"},
      {"clamp_grad", {"f32[4]", "f32[4]"}, {{"min", -1.0}, {"max", 1.0}}, "f32[4]"},
      {"sqrt_grad", {"f16[2,3]", "f16[2,3]"}, {}, "f16[2,3]"},
      {"erf_grad", {"f32[4]", "f32[4]"}, {}, "f32[4]"},
      {"pow_grad", {"f32[4]", "f32[4]"}, {{"exponent", 3.0}}, "f32[4]"},
      {"exp_grad", {"bf16[4]", "bf16[4]"}, {}, "bf16[4]"},
      {"softmax_grad", {"f32[2,10]", "f32[2,10]"}, {{"dim", 0}}, "f32[2,10]"},
      {"log_softmax_grad", {"f32[4,3,5]", "f32[4,3,5]"}, {{"dim", -2}}, "f32[4,3,5]"},
      // concat's and reduce_sum's backward: columns [2, 5) of 8; [3,1] repeated
      // along a new leading dim and its size-1 dim.
      {"slice", {"f32[2,8]"}, {{"axis", 1}, {"start", 2}, {"end", 5}}, "f32[2,3]"},
      {"broadcast_to", {"f32[3,1]"}, {{"shape", Ints{2, 3, 4}}}, "f32[2,3,4]"},
      // The table's gradient [num_embeddings, dim] from grad [..., dim].
      {"embedding_grad", {"f32[4,7,64]", "i64[4,7]"}, {{"num_embeddings", 1000}}, "f32[1000,64]"},
      // Losses: (scalar grad, input, target) -> the input's type.
      {"mse_loss_grad", {"f32[]", "f32[8,10]", "f32[8,10]"}, {}, "f32[8,10]"},
      {"cross_entropy_grad", {"f16[]", "f16[8,10]", "i32[8]"}, {}, "f16[8,10]"},
      {"binary_cross_entropy_grad_input", {"f32[]", "f32[8,1]", "f32[8,1]"}, {}, "f32[8,1]"},
      {"binary_cross_entropy_grad_target", {"f32[]", "f32[8]", "f32[8]"}, {}, "f32[8]"},
      // conv2d k3 s2 p1: 28 -> 14, so a [8,16,14,14] grad_output belongs to a
      // [8,1,28,28] input and a [16,1,3,3] weight.
      {"conv2d_grad_input",
       {"f32[8,16,14,14]", "f32[16,1,3,3]"},
       {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"input_shape", Ints{8, 1, 28, 28}}},
       "f32[8,1,28,28]"},
      {"conv2d_grad_weight",
       {"f32[8,16,14,14]", "f32[8,1,28,28]"},
       {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"weight_shape", Ints{16, 1, 3, 3}}},
       "f32[16,1,3,3]"},
      // (grad_output, query, key, value) -> the types of query, key, value.
      {"scaled_dot_product_attention_grad",
       {"f16[2,4,10,8]", "f16[2,4,10,16]", "f16[2,4,12,16]", "f16[2,4,12,8]"},
       {},
       "f16[2,4,10,16], f16[2,4,12,16], f16[2,4,12,8]"},
      // Pooling: k2 (stride 2) on 7 -> 3; k3 s1 p1 keeps 5; global pools to 1x1.
      {"maxpool2d_grad",
       {"f32[1,16,3,3]", "f32[1,16,7,7]"},
       {{"kernel", Ints{2, 2}}},
       "f32[1,16,7,7]"},
      {"avgpool2d_grad",
       {"f32[1,4,5,5]"},
       {{"kernel", Ints{3, 3}},
        {"stride", Ints{1, 1}},
        {"padding", Ints{1, 1}},
        {"input_shape", Ints{1, 4, 5, 5}}},
       "f32[1,4,5,5]"},
      {"global_avgpool_grad",
       {"f16[2,512,1,1]"},
       {{"input_shape", Ints{2, 512, 7, 7}}},
       "f16[2,512,7,7]"},
      // pad_grad: grad_output less the pads; resize_grad: input_shape.
      {"pad_grad",
       {"f32[1,3,8,7]"},
       {{"pads", Ints{0, 0, 1, 2, 0, 0, 3, 0}}, {"mode", "reflect"}},
       "f32[1,3,4,5]"},
      {"resize_grad",
       {"f32[2,3,8,10]"},
       {{"size", Ints{8, 10}}, {"mode", "linear"}, {"input_shape", Ints{2, 3, 4, 5}}},
       "f32[2,3,4,5]"},
      // Normalisation: grad_input in the input's type, grad_weight and
      // grad_bias in the weight's (f32 under a half input).
      {"batchnorm2d_grad",
       {"f16[8,16,14,14]", "f16[8,16,14,14]", "f32[16]", "f32[16]", "f32[16]"},
       {},
       "f16[8,16,14,14], f32[16], f32[16]"},
      {"reduce_select_grad",
       {"f32[2,8]", "f32[2,8,20]", "f32[2,8]"},
       {{"dims", Ints{-1}}},
       "f32[2,8,20]"},
      {"layernorm_grad",
       {"f32[2,5,16]", "f32[2,5,16]", "f32[5,16]"},
       {{"normalized_dims", 2}},
       "f32[2,5,16], f32[5,16], f32[5,16]"},

      // Optimizer ops (ir/ops/Optimizer.cpp): scalars are f32[]; an update
      // returns the new parameter, then one new tensor per state operand.
      {"learning_rate", {}, {{"lr", 0.1}}, "f32[]"},
      {"step_counter", {"f32[]"}, {}, "f32[]"},
      {"turn_skip", {}, {{"period", 2}, {"turns", Ints{1}}}, "f32[]"},
      {"accumulate_grad", {"f32[8,4]", "f16[8,4]"}, {{"accumulate", 4}}, "f32[8,4]"},
      {"global_norm", {"f16[8,4]", "f32[4]"}, {}, "f32[]"},
      {"clip_coefficient", {"f32[]"}, {{"max_norm", 1.0}}, "f32[]"},
      {"sgd_update", {"f32[8,4]", "f32[8,4]", "f32[]"}, {}, "f32[8,4]"},
      {"sgd_momentum_update",
       {"f32[8,4]", "f32[8,4]", "f32[8,4]", "f32[]", "f32[]"},
       {{"momentum", 0.9}},
       "f32[8,4], f32[8,4]"},
      {"adam_update",
       {"f16[8]", "f16[8]", "f32[8]", "f32[8]", "f32[]", "f32[]", "f32[]", "f32[]"},
       {},
       "f16[8], f32[8], f32[8]"},
      // lamb_update's grad_norm (the global norm) comes before lr.
      {"lamb_update",
       {"f16[8]", "f16[8]", "f32[8]", "f32[8]", "f32[]", "f32[]", "f32[]", "f32[]", "f32[]"},
       {},
       "f16[8], f32[8], f32[8]"},

      // ema_update: the average keeps its own (f32) type; skip is optional.
      {"ema_update", {"f32[8,4]", "bf16[8,4]", "f32[]", "f32[]"}, {{"decay", 0.9}}, "f32[8,4]"},

      // Loss scaling (ir/ops/LossScale.cpp): found_inf, the scale used and
      // its inverse; the gradients are only read.
      {"unscale_check", {"f32[]", "bf16[8,4]", "f32[4]"}, {}, "f32[], f32[], f32[]"},
      {"update_loss_scale", {"f32[]", "f32[]", "f32[]"}, {}, "f32[], f32[]"},

      // Collectives (ir/ops/Collective.cpp): each result is its operand's type.
      {"all_reduce", {"bf16[8,4]", "f32[4]"}, {{"ranks", 2}}, "bf16[8,4], f32[4]"},
  };
}

TEST(OpInference, EveryBuiltinOpHasARuleAndACase) {
  std::vector<ValidCase> cases = validCases();
  std::set<std::string> covered;
  for (const ValidCase &c : cases) {
    EXPECT_EQ(infer(c.op, c.operands, c.attrs), c.expected) << "op " << c.op;
    covered.insert(c.op);
  }
  unsigned builtins = 0;
  for (const OpInfo *op : OpRegistry::builtin().all()) {
    if (op->kind == OpKind::Custom)
      continue;
    ++builtins;
    EXPECT_NE(op->infer, nullptr) << op->name << " has no inference rule";
    EXPECT_TRUE(covered.count(op->name)) << op->name << " has no valid case";
  }
  EXPECT_EQ(covered.size(), builtins) << "a case names an op that is not built in";
}

TEST(OpInference, DefaultsAreFilledIn) {
  const OpInfo *bn = OpRegistry::builtin().lookup("batchnorm2d");
  ASSERT_NE(bn, nullptr);
  AttrMap attrs;
  std::string err;
  ASSERT_TRUE(normalizeAttrs(*bn, attrs, err)) << err;
  EXPECT_EQ(attrs.at("eps"), Attribute(1e-5));
  EXPECT_EQ(attrs.at("momentum"), Attribute(0.1));
  EXPECT_EQ(attrs.at("training"), Attribute(true));

  const OpInfo *pool = OpRegistry::builtin().lookup("avgpool2d");
  AttrMap poolAttrs{{"kernel", Ints{2, 2}}};
  ASSERT_TRUE(normalizeAttrs(*pool, poolAttrs, err)) << err;
  EXPECT_EQ(poolAttrs.at("stride"), Attribute(Ints{}));
  EXPECT_EQ(poolAttrs.at("padding"), Attribute(Ints{0, 0}));
  EXPECT_EQ(poolAttrs.at("count_include_pad"), Attribute(true));

  const OpInfo *gelu = OpRegistry::builtin().lookup("gelu");
  AttrMap geluAttrs;
  ASSERT_TRUE(normalizeAttrs(*gelu, geluAttrs, err)) << err;
  EXPECT_EQ(geluAttrs.at("approximate"), Attribute("none"));

  const OpInfo *ce = OpRegistry::builtin().lookup("cross_entropy");
  AttrMap ceAttrs;
  ASSERT_TRUE(normalizeAttrs(*ce, ceAttrs, err)) << err;
  EXPECT_EQ(ceAttrs.at("ignore_index"), Attribute(-100));
  EXPECT_EQ(ceAttrs.at("label_smoothing"), Attribute(0.0));
}

TEST(OpInference, OperandFlags) {
  const OpRegistry &reg = OpRegistry::builtin();
  const OpInfo &bn = reg.get(OpKind::BatchNorm2d);
  ASSERT_EQ(bn.operands.size(), 5u);
  EXPECT_FALSE(bn.operands[0].keepFp32);
  for (unsigned i = 1; i < 5; ++i)
    EXPECT_TRUE(bn.operands[i].keepFp32) << bn.operands[i].name;
  EXPECT_EQ(bn.operands[3].name, "running_mean");
  EXPECT_TRUE(reg.get(OpKind::Embedding).operands[0].integral);
  EXPECT_FALSE(reg.get(OpKind::Embedding).operands[1].integral);
  EXPECT_TRUE(reg.get(OpKind::CrossEntropy).operands[1].integral);
  EXPECT_TRUE(reg.get(OpKind::Concat).operands[0].variadic);
  EXPECT_EQ(reg.get(OpKind::Concat).maxOperands(), ~0u);
  EXPECT_EQ(reg.get(OpKind::Linear).minOperands(), 2u);
  EXPECT_EQ(reg.get(OpKind::Linear).maxOperands(), 3u);
}

TEST(OpInference, AttributeErrors) {
  EXPECT_EQ(infer("scale", {"f32[2]"}), "error: missing required attribute 'factor'");
  // An int for a float attribute is widened, as a user writes factor: 2.
  EXPECT_EQ(infer("scale", {"f32[2]"}, {{"factor", 2}}), "f32[2]");
  EXPECT_EQ(infer("relu", {"f32[2]"}, {{"alpha", 0.1}}), "error: unknown attribute 'alpha'");
  EXPECT_EQ(infer("softmax", {"f32[2]"}, {{"dim", 0.5}}),
            "error: attribute 'dim' must be int, got float");
  EXPECT_EQ(infer("maxpool2d", {"f32[1,1,4,4]"}), "error: missing required attribute 'kernel'");
  EXPECT_EQ(infer("cast", {"f32[2]"}), "error: missing required attribute 'to'");
  EXPECT_EQ(infer("relu", {"f32[2]", "f32[2]"}), "error: expected 1 operand, got 2");
  EXPECT_EQ(infer("batchnorm2d", {"f32[1,2,3,3]"}), "error: expected 5 operands, got 1");
  EXPECT_EQ(infer("linear", {"f32[2,3]"}), "error: expected 2 to 3 operands, got 1");
  EXPECT_EQ(infer("concat", {}).rfind("error: expected at least 1 operand", 0), 0u);
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

TEST(OpInference, Linear) {
  EXPECT_EQ(infer("linear", {"f16[2,5,16]", "f16[32,16]"}), "f16[2,5,32]");
  EXPECT_EQ(infer("linear", {"f32[3,4]", "f32[5,6]"}),
            "error: input has 4 features but weight f32[5,6] expects 6");
  EXPECT_EQ(infer("linear", {"f32[3,4]", "f32[5,4]", "f32[4]"}),
            "error: bias must be [5], got f32[4]");
  EXPECT_EQ(infer("linear", {"f16[3,4]", "f32[5,4]"}),
            "error: input and weight must have the same dtype, got f16[3,4] and f32[5,4]");
  EXPECT_EQ(infer("linear", {"i64[3,4]", "i64[5,4]"}),
            "error: input must be a floating type, got i64[3,4]");
}

TEST(OpInference, MatMul) {
  EXPECT_EQ(infer("matmul", {"f32[2,3]", "f32[4,3]"}, {{"transpose_b", true}}), "f32[2,4]");
  EXPECT_EQ(infer("matmul", {"f32[3,2]", "f32[3,4]"}, {{"transpose_a", true}}), "f32[2,4]");
  EXPECT_EQ(infer("matmul", {"f32[2,3]", "f32[4,3]"}),
            "error: inner dimensions differ: f32[2,3] and f32[4,3]");
  EXPECT_EQ(infer("matmul", {"f32[2,3,4]", "f32[4,3]"}),
            "error: a must have 2 dims, got f32[2,3,4]");
}

TEST(OpInference, BatchMatMul) {
  EXPECT_EQ(infer("batch_matmul", {"f32[2,1,5,3]", "f32[7,3,4]"}), "f32[2,7,5,4]");
  EXPECT_EQ(infer("batch_matmul", {"f32[2,5,3]", "f32[2,4,3]"}, {{"transpose_b", true}}),
            "f32[2,5,4]");
  EXPECT_EQ(infer("batch_matmul", {"f32[2,3]", "f32[3,4]"}),
            "error: operands must have at least 3 dims, got f32[2,3] and f32[3,4]");
  EXPECT_EQ(infer("batch_matmul", {"f32[2,5,3]", "f32[3,3,4]"}),
            "error: shapes [2] and [3] cannot be broadcast together");
}

TEST(OpInference, Conv2d) {
  // k3 s2 p1 on 28 -> 14; groups 4; dilation 2 with k3 on 10 -> 6.
  EXPECT_EQ(infer("conv2d", {"f32[8,1,28,28]", "f32[16,1,3,3]"},
                  {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}}),
            "f32[8,16,14,14]");
  EXPECT_EQ(infer("conv2d", {"f32[2,8,10,10]", "f32[8,2,3,3]"}, {{"groups", 4}}), "f32[2,8,8,8]");
  EXPECT_EQ(infer("conv2d", {"f32[1,3,10,10]", "f32[4,3,3,3]"}, {{"dilation", Ints{2, 2}}}),
            "f32[1,4,6,6]");
  EXPECT_EQ(infer("conv2d", {"f32[1,3,8,8]", "f32[4,2,3,3]"}),
            "error: weight f32[4,2,3,3] expects 2 input channels, input f32[1,3,8,8] has 3");
  // (4 - 5) / 2 truncates to 0 in C++; PyTorch rejects a kernel larger than the input.
  EXPECT_EQ(infer("conv2d", {"f32[1,1,4,4]", "f32[1,1,5,5]"}, {{"stride", Ints{2, 2}}}),
            "error: kernel 5x5 does not fit input f32[1,1,4,4] with this padding and dilation");
  EXPECT_EQ(infer("conv2d", {"f32[1,1,4,4]", "f32[1,1,5,5]"}, {{"padding", Ints{1, 1}}}),
            "f32[1,1,2,2]");
  EXPECT_EQ(infer("conv2d", {"f32[1,1,8,8]", "f32[1,1,3,3]"}, {{"stride", Ints{0, 1}}}),
            "error: stride and dilation must be >= 1 and padding >= 0");
}

TEST(OpInference, AllReduce) {
  EXPECT_EQ(infer("all_reduce", {"bf16[3]", "bf16[2,2]"}, {{"ranks", 4}, {"dtype", DType::BF16}}),
            "bf16[3], bf16[2,2]");
  EXPECT_EQ(infer("all_reduce", {"f32[3]"}, {{"ranks", 0}}), "error: ranks must be >= 1, got 0");
  EXPECT_EQ(infer("all_reduce", {"f32[3]"}, {{"ranks", 2}, {"dtype", DType::BF16}}),
            "error: a bf16 all-reduce takes bf16 operands only, operand 0 is f32");
  EXPECT_EQ(infer("all_reduce", {"f64[3]"}, {{"ranks", 2}}),
            "error: operand 0 is f64; all_reduce takes f32, f16, bf16");
  EXPECT_EQ(infer("all_reduce", {"f32[3]"}, {{"ranks", 2}, {"accumulate", 0}}),
            "error: accumulate must be >= 1, got 0");
}

TEST(OpInference, Attention) {
  EXPECT_EQ(infer("scaled_dot_product_attention", {"f32[4,8,16]", "f32[4,8,16]", "f32[4,8,16]"},
                  {{"causal", true}}),
            "f32[4,8,16]");
  EXPECT_EQ(infer("scaled_dot_product_attention", {"f32[4,8,16]", "f32[4,9,16]", "f32[4,9,16]"},
                  {{"causal", true}}),
            "error: causal attention needs equal query and key lengths");
  EXPECT_EQ(infer("scaled_dot_product_attention", {"f32[4,8,16]", "f32[4,9,8]", "f32[4,9,16]"}),
            "error: query and key head sizes differ: f32[4,8,16] and f32[4,9,8]");
  // Layout bshd: [..., seq, heads, dim]; the heads must agree.
  AttrMap bshd;
  bshd["layout"] = Attribute(std::string("bshd"));
  EXPECT_EQ(infer("scaled_dot_product_attention",
                  {"f32[2,8,3,16]", "f32[2,9,3,16]", "f32[2,9,3,5]"}, bshd),
            "f32[2,8,3,5]");
  EXPECT_EQ(infer("scaled_dot_product_attention_grad",
                  {"f32[2,8,3,5]", "f32[2,8,3,16]", "f32[2,9,3,16]", "f32[2,9,3,5]"}, bshd),
            "f32[2,8,3,16], f32[2,9,3,16], f32[2,9,3,5]");
  EXPECT_EQ(infer("scaled_dot_product_attention",
                  {"f32[2,8,3,16]", "f32[2,9,4,16]", "f32[2,9,4,5]"}, bshd),
            "error: query, key and value head counts differ: f32[2,8,3,16], f32[2,9,4,16], "
            "f32[2,9,4,5]");
  EXPECT_EQ(infer("scaled_dot_product_attention", {"f32[8,16]", "f32[8,16]", "f32[8,16]"}, bshd),
            "error: query, key and value must have the same rank (at least 3 for layout bshd), "
            "got f32[8,16], f32[8,16], f32[8,16]");
  AttrMap causalBshd = bshd;
  causalBshd["causal"] = Attribute(true);
  EXPECT_EQ(infer("scaled_dot_product_attention",
                  {"f32[2,8,3,16]", "f32[2,9,3,16]", "f32[2,9,3,16]"}, causalBshd),
            "error: causal attention needs equal query and key lengths");
  AttrMap bad;
  bad["layout"] = Attribute(std::string("bsdh"));
  EXPECT_EQ(
      infer("scaled_dot_product_attention", {"f32[4,8,16]", "f32[4,8,16]", "f32[4,8,16]"}, bad),
      "error: layout must be \"bhsd\" or \"bshd\", got \"bsdh\"");
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

TEST(OpInference, BatchNorm2d) {
  const std::string x = "f16[8,16,14,14]";
  EXPECT_EQ(
      infer("batchnorm2d", {x, "f32[16]", "f32[16]", "f32[16]", "f32[16]"}, {{"training", false}}),
      x);
  // Parameters in the input's own dtype (O3: everything half).
  EXPECT_EQ(infer("batchnorm2d", {x, "f16[16]", "f16[16]", "f16[16]", "f16[16]"}),
            x + ", f16[16], f16[16]");
  EXPECT_EQ(infer("batchnorm2d", {x, "f32[8]", "f32[16]", "f32[16]", "f32[16]"}),
            "error: weight must be [16] to match input f16[8,16,14,14], got f32[8]");
  EXPECT_EQ(infer("batchnorm2d", {x, "f32[16]", "f32[16]", "bf16[16]", "f32[16]"}),
            "error: running_mean must be f32 or the input's dtype, got bf16[16] for input "
            "f16[8,16,14,14]");
  EXPECT_EQ(infer("batchnorm2d", {"f32[8,16]", "f32[16]", "f32[16]", "f32[16]", "f32[16]"}),
            "error: input must have 4 dims, got f32[8,16]");
  EXPECT_EQ(
      infer("batchnorm2d", {x, "f32[16]", "f32[16]", "f32[16]", "f32[16]"}, {{"momentum", 1.5}}),
      "error: momentum must be in [0, 1], got 1.5");
}

TEST(OpInference, LayerNorm) {
  EXPECT_EQ(infer("layernorm", {"f16[2,5,16]", "f32[5,16]", "f32[5,16]"}, {{"normalized_dims", 2}}),
            "f16[2,5,16]");
  EXPECT_EQ(infer("layernorm", {"f16[2,5,16]", "f16[16]", "f16[16]"}), "f16[2,5,16]");
  EXPECT_EQ(infer("layernorm", {"f32[2,5,16]", "f32[8]", "f32[16]"}),
            "error: weight must be [16] to match input f32[2,5,16], got f32[8]");
  EXPECT_EQ(infer("layernorm", {"f32[2,5,16]", "f32[16]", "f32[5,16]"}),
            "error: bias must be [16] to match input f32[2,5,16], got f32[5,16]");
  EXPECT_EQ(infer("layernorm", {"f32[2,5,16]", "f32[16]", "f32[16]"}, {{"normalized_dims", 4}}),
            "error: normalized_dims 4 must be between 1 and the rank of input f32[2,5,16]");
  EXPECT_EQ(infer("layernorm", {"f16[2,16]", "bf16[16]", "f16[16]"}),
            "error: weight must be f32 or the input's dtype, got bf16[16] for input f16[2,16]");
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

TEST(OpInference, Activations) {
  for (const char *op : {"relu", "sigmoid", "tanh", "silu", "gelu", "dropout", "softmax"})
    EXPECT_EQ(infer(op, {"i64[2]"}), "error: input must be a floating type, got i64[2]") << op;
  EXPECT_EQ(infer("gelu", {"f32[3]"}, {{"approximate", "tanh"}}), "f32[3]");
  EXPECT_EQ(infer("gelu", {"f32[3]"}, {{"approximate", "erf"}}),
            "error: approximate must be \"none\" or \"tanh\", got \"erf\"");
  EXPECT_EQ(infer("softmax", {"f32[2,10]"}, {{"dim", -2}}), "f32[2,10]");
  EXPECT_EQ(infer("softmax", {"f32[2,10]"}, {{"dim", 2}}),
            "error: dim 2 is out of range for rank 2");
  EXPECT_EQ(infer("log_softmax", {"f32[2,10]"}, {{"dim", -3}}),
            "error: dim -3 is out of range for rank 2");
  EXPECT_EQ(infer("dropout", {"f16[4]"}, {{"p", 0.0}, {"training", false}}), "f16[4]");
  EXPECT_EQ(infer("dropout", {"f16[4]"}, {{"p", 1.0}}), "error: p must be in [0, 1), got 1.0");
  EXPECT_EQ(infer("dropout", {"f16[4]"}, {{"p", -0.25}}), "error: p must be in [0, 1), got -0.25");
}

TEST(OpInference, UnaryMath) {
  for (const char *op : {"sqrt", "erf", "exp"})
    EXPECT_EQ(infer(op, {"i32[2]"}), "error: input must be a floating type, got i32[2]") << op;
  EXPECT_EQ(infer("clamp", {"bool[2]"}, {{"min", 0.0}}),
            "error: input must be a floating type, got bool[2]");
  EXPECT_EQ(infer("pow", {"i64[2]"}, {{"exponent", 2.0}}),
            "error: input must be a floating type, got i64[2]");
  // clamp's bounds default to -inf and inf (torch.clamp's None): one suffices,
  // and min > max is allowed (every element becomes max, as in torch.clamp).
  EXPECT_EQ(infer("clamp", {"f32[3]"}, {{"max", 6.0}}), "f32[3]");
  EXPECT_EQ(infer("clamp", {"f32[3]"}), "f32[3]");
  EXPECT_EQ(infer("clamp", {"f32[3]"}, {{"min", 2.0}, {"max", 1.0}}), "f32[3]");
  EXPECT_EQ(infer("clamp", {"f32[3]"}, {{"min", std::nan("")}}), "error: min must not be NaN");
  EXPECT_EQ(infer("clamp_grad", {"f32[3]", "f32[3]"}, {{"max", std::nan("")}}),
            "error: max must not be NaN");
  // pow's exponent is required; an int is widened.
  EXPECT_EQ(infer("pow", {"f32[2]"}), "error: missing required attribute 'exponent'");
  EXPECT_EQ(infer("pow", {"f32[2]"}, {{"exponent", 3}}), "f32[2]");
  EXPECT_EQ(infer("pow_grad", {"f32[2]", "f32[3]"}, {{"exponent", 2.0}}),
            "error: grad and input must have the same shape, got f32[2] and f32[3]");
  EXPECT_EQ(infer("sqrt_grad", {"f32[2]", "f16[2]"}),
            "error: grad and output must have the same dtype, got f32[2] and f16[2]");

  const OpInfo *clamp = OpRegistry::builtin().lookup("clamp");
  ASSERT_NE(clamp, nullptr);
  AttrMap attrs;
  std::string err;
  ASSERT_TRUE(normalizeAttrs(*clamp, attrs, err)) << err;
  EXPECT_EQ(attrs.at("min"), Attribute(-std::numeric_limits<double>::infinity()));
  EXPECT_EQ(attrs.at("max"), Attribute(std::numeric_limits<double>::infinity()));
}

TEST(OpInference, OnnxActivationsAndMath) {
  for (const char *op : {"hardsigmoid", "hardswish", "leaky_relu", "elu", "softplus", "neg", "abs",
                         "log", "reciprocal"})
    EXPECT_EQ(infer(op, {"i64[2]"}), "error: input must be a floating type, got i64[2]") << op;
  // hardsigmoid's defaults are PyTorch's (1/6, 1/2); alpha must be positive
  // (the kernels divide by it), beta finite.
  const OpInfo *hardsigmoid = OpRegistry::builtin().lookup("hardsigmoid");
  ASSERT_NE(hardsigmoid, nullptr);
  AttrMap attrs;
  std::string err;
  ASSERT_TRUE(normalizeAttrs(*hardsigmoid, attrs, err)) << err;
  EXPECT_EQ(attrs.at("alpha"), Attribute(1.0 / 6));
  EXPECT_EQ(attrs.at("beta"), Attribute(0.5));
  EXPECT_EQ(infer("hardsigmoid", {"f32[2]"}, {{"alpha", 0.0}}),
            "error: alpha must be positive and finite, got 0.0");
  EXPECT_EQ(infer("hardsigmoid", {"f32[2]"}, {{"alpha", -0.2}}),
            "error: alpha must be positive and finite, got -0.2");
  EXPECT_EQ(infer("hardsigmoid_grad", {"f32[2]", "f32[2]"}, {{"beta", std::nan("")}}),
            "error: beta must be finite, got nan");
  EXPECT_EQ(infer("leaky_relu", {"f32[2]"}, {{"negative_slope", std::nan("")}}),
            "error: negative_slope must not be NaN");
  EXPECT_EQ(infer("elu_grad", {"f32[2]", "f32[2]"}, {{"alpha", std::nan("")}}),
            "error: alpha must not be NaN");
  EXPECT_EQ(infer("softplus_grad", {"f32[2]", "f32[3]"}),
            "error: grad and input must have the same shape, got f32[2] and f32[3]");
  EXPECT_EQ(infer("reciprocal_grad", {"f32[2]", "f16[2]"}),
            "error: grad and output must have the same dtype, got f32[2] and f16[2]");

  // prelu's slope broadcasts to the input at the right and never grows it.
  EXPECT_EQ(infer("prelu", {"f32[2,3]", "f32[3]"}), "f32[2,3]");
  EXPECT_EQ(infer("prelu", {"f32[2,3,4]", "f32[1]"}), "f32[2,3,4]");
  EXPECT_EQ(infer("prelu", {"f16[2,3,4,4]", "f16[]"}), "f16[2,3,4,4]");
  const char *channelsFirst =
      "error: slope f32[3] does not broadcast to the input f32[2,3,4,5] (dims align at the right: "
      "a per-channel slope of [N, C, H, W] is [C, 1, 1])";
  EXPECT_EQ(infer("prelu", {"f32[2,3,4,5]", "f32[3]"}), channelsFirst);
  EXPECT_EQ(
      infer("prelu", {"f32[3]", "f32[2,3]"}),
      "error: slope f32[2,3] does not broadcast to the input f32[3] (dims align at the right: "
      "a per-channel slope of [N, C, H, W] is [C, 1, 1])");
  EXPECT_EQ(infer("prelu", {"f32[2,3]", "f16[3]"}),
            "error: input and slope must have the same dtype, got f32[2,3] and f16[3]");
  EXPECT_EQ(infer("prelu", {"f32[2,3]", "i64[3]"}),
            "error: slope must be a floating type, got i64[3]");
  EXPECT_EQ(infer("prelu_derivative", {"f32[2,3,4,5]", "f32[3]"}), channelsFirst);
  EXPECT_EQ(infer("prelu_grad_slope", {"f32[2,3]", "f32[3]"}),
            "error: grad and input must have the same shape, got f32[2,3] and f32[3]");

  // max, min and greater_share broadcast both ways, as add.
  for (const char *op : {"max", "min", "greater_share"}) {
    EXPECT_EQ(infer(op, {"f32[2,1,4]", "f32[3,1]"}), "f32[2,3,4]") << op;
    EXPECT_EQ(infer(op, {"f16[2]", "f32[2]"}),
              "error: a and b must have the same dtype, got f16[2] and f32[2]")
        << op;
    EXPECT_EQ(infer(op, {"f32[2,3]", "f32[4]"}),
              "error: shapes [2,3] and [4] cannot be broadcast together")
        << op;
  }
}

TEST(OpInference, ReduceMean) {
  // The same dims and keepdim rules as reduce_sum.
  for (const char *op : {"reduce_sum", "reduce_mean"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(infer(op, {"f32[4,5,6]"}), "f32[]");
    EXPECT_EQ(infer(op, {"f32[4,5,6]"}, {{"keepdim", true}}), "f32[1,1,1]");
    EXPECT_EQ(infer(op, {"bf16[4,5,6]"}, {{"dims", Ints{2, 0}}}), "bf16[5]");
    EXPECT_EQ(infer(op, {"f32[4,5]"}, {{"dims", Ints{2}}}),
              "error: dim 2 is out of range for rank 2");
    EXPECT_EQ(infer(op, {"f32[4,5]"}, {{"dims", Ints{1, -1}}}), "error: dim -1 is listed twice");
    EXPECT_EQ(infer(op, {"i64[4]"}), "error: input must be a floating type, got i64[4]");
  }
}

TEST(OpInference, LogicAndExtrema) {
  EXPECT_EQ(infer("compare", {"f16[2,3]", "f32[3]"}),
            "error: a and b must have the same dtype, got f16[2,3] and f32[3]");
  EXPECT_EQ(infer("compare", {"f32[2,3]", "f32[4]"}),
            "error: shapes [2,3] and [4] cannot be broadcast together");
  EXPECT_EQ(infer("compare", {"f32[2]", "f32[2]"}, {{"predicate", std::string("lte")}}),
            "error: predicate must be one of eq, ne, lt, le, gt, ge, got \"lte\"");
  EXPECT_EQ(infer("logical", {"bool[2]", "i64[2]"}), "error: b must be bool, got i64[2]");
  EXPECT_EQ(infer("logical_not", {"f32[2]"}), "error: a must be bool, got f32[2]");
  EXPECT_EQ(infer("where", {"i64[2]", "f32[2]", "f32[2]"}),
            "error: condition must be bool, got i64[2]");
  EXPECT_EQ(infer("where", {"bool[2]", "f32[2]", "f16[2]"}),
            "error: x and y must have the same dtype, got f32[2] and f16[2]");
  EXPECT_EQ(infer("where", {"bool[3]", "f32[2,1]", "f32[2]"}),
            "error: shapes [3] and [2,2] cannot be broadcast together");
  EXPECT_EQ(infer("reduce_max", {"f32[4,5]"}, {{"dims", Ints{1, -1}}}),
            "error: dim -1 is listed twice");
  EXPECT_EQ(infer("reduce_min", {"i64[4]"}), "error: input must be a floating type, got i64[4]");
  EXPECT_EQ(infer("argmax", {"f32[4,0]"}, {{"dim", -1}}),
            "error: dim -1 of f32[4,0] is empty: it has no largest element");
  EXPECT_EQ(infer("argmax", {"f32[4,5]"}, {{"dim", 2}}), "error: dim 2 is out of range for rank 2");
  EXPECT_EQ(infer("reduce_select_grad", {"f32[4]", "f32[4,5]", "f32[5]"}, {{"dims", Ints{1}}}),
            "error: grad and result must have the same shape, got f32[4] and f32[5]");
  EXPECT_EQ(infer("reduce_select_grad", {"f32[5]", "f32[4,5]", "f32[5]"}, {{"dims", Ints{1}}}),
            "error: grad f32[5] is not the reduced shape of input f32[4,5]");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(OpInference, Elementwise) {
  for (const char *op : {"add", "sub", "mul", "div"}) {
    EXPECT_EQ(infer(op, {"f32[2,1,4]", "f32[3,1]"}), "f32[2,3,4]") << op;
    EXPECT_EQ(infer(op, {"f16[2,3]", "f32[2,3]"}),
              "error: a and b must have the same dtype, got f16[2,3] and f32[2,3]")
        << op;
  }
  EXPECT_EQ(infer("add", {"f32[2,3]", "f32[4]"}),
            "error: shapes [2,3] and [4] cannot be broadcast together");
  EXPECT_EQ(infer("mul", {"i64[2]", "i64[2]"}), "error: a must be a floating type, got i64[2]");
  EXPECT_EQ(infer("mul", {"f32[2]", "i64[2]"}), "error: b must be a floating type, got i64[2]");
  EXPECT_EQ(infer("scale", {"i32[2]"}, {{"factor", 0.5}}),
            "error: input must be a floating type, got i32[2]");
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

TEST(OpInference, Pooling) {
  // k2 s2 on 7 -> 3 (floor), k2 s1 on 7 -> 6, ResNet's stem pool k3 s2 p1 on 112 -> 56.
  EXPECT_EQ(infer("maxpool2d", {"f32[1,16,7,7]"}, {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}}),
            "f32[1,16,3,3]");
  EXPECT_EQ(infer("maxpool2d", {"f32[1,16,7,7]"}, {{"kernel", Ints{2, 2}}, {"stride", Ints{1, 1}}}),
            "f32[1,16,6,6]");
  EXPECT_EQ(infer("maxpool2d", {"f16[2,64,112,112]"},
                  {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}}),
            "f16[2,64,56,56]");
  EXPECT_EQ(
      infer("avgpool2d", {"f32[1,1,6,9]"}, {{"kernel", Ints{2, 3}}, {"count_include_pad", false}}),
      "f32[1,1,3,3]");
  // Padding up to one less than the window (ONNX allows it; PyTorch stops
  // at half): k3 s3 p2 on 8 -> 4.
  EXPECT_EQ(infer("maxpool2d", {"f32[1,1,8,8]"}, {{"kernel", Ints{3, 3}}, {"padding", Ints{2, 2}}}),
            "f32[1,1,4,4]");
  EXPECT_EQ(infer("maxpool2d", {"f32[1,1,8,8]"}, {{"kernel", Ints{3, 3}}, {"padding", Ints{3, 0}}}),
            "error: padding [3,0] must be >= 0 and smaller than the window (kernel [3,3], "
            "dilation [1,1])");
  EXPECT_EQ(
      infer("avgpool2d", {"f32[1,1,8,8]"}, {{"kernel", Ints{3, 3}}, {"padding", Ints{0, -1}}}),
      "error: padding [0,-1] must be >= 0 and smaller than the window (kernel [3,3])");
  EXPECT_EQ(infer("avgpool2d", {"f32[1,1,8,8]"}, {{"kernel", Ints{2}}}),
            "error: kernel must have 2 values, got 1");
  EXPECT_EQ(infer("avgpool2d", {"f32[1,1,8,8]"}, {{"kernel", Ints{2, 2}}, {"stride", Ints{1}}}),
            "error: stride must have 2 values, got 1");
  EXPECT_EQ(infer("maxpool2d", {"f32[1,1,8,8]"}, {{"kernel", Ints{0, 2}}}),
            "error: kernel, stride and dilation must be >= 1, got kernel [0,2], stride [0,2] and "
            "dilation [1,1]");
  EXPECT_EQ(infer("maxpool2d", {"f32[1,1,1,1]"}, {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}}),
            "error: kernel [2,2] does not fit input f32[1,1,1,1] with padding [0,0]");
  EXPECT_EQ(infer("maxpool2d", {"f32[16,7,7]"}, {{"kernel", Ints{2, 2}}}),
            "error: input must have 4 dims, got f32[16,7,7]");
  EXPECT_EQ(infer("global_avgpool", {"f32[2,8]"}), "error: input must have 4 dims, got f32[2,8]");
}

TEST(OpInference, PoolingCeilModePaddingPerSideAndDilation) {
  // GoogLeNet's MaxPool(3, 2, ceil_mode) on 112 -> 56 (floor: 55); on 7
  // with k2 s2 -> 4 (floor: 3).
  EXPECT_EQ(infer("maxpool2d", {"f32[1,64,112,112]"},
                  {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"ceil_mode", true}}),
            "f32[1,64,56,56]");
  EXPECT_EQ(infer("avgpool2d", {"f32[1,1,7,7]"}, {{"kernel", Ints{2, 2}}, {"ceil_mode", true}}),
            "f32[1,1,4,4]");
  // PyTorch's rule: ceil mode adds a last window only where it starts
  // inside the input or the start padding. k3 s2 p1 on 6: ceil(5 / 2) + 1
  // = 4 windows, the fourth starting at 3 * 2 - 1 = 5 (floor: 3). k3 s3 p1
  // on 5: ceil(4 / 3) + 1 = 3, but the third would start at 2 * 3 - 1 = 5,
  // in the end padding: 2.
  EXPECT_EQ(infer("maxpool2d", {"f32[1,1,6,6]"},
                  {{"kernel", Ints{3, 3}},
                   {"stride", Ints{2, 2}},
                   {"padding", Ints{1, 1}},
                   {"ceil_mode", true}}),
            "f32[1,1,4,4]");
  EXPECT_EQ(infer("maxpool2d", {"f32[1,1,5,5]"},
                  {{"kernel", Ints{3, 3}}, {"padding", Ints{1, 1}}, {"ceil_mode", true}}),
            "f32[1,1,2,2]");
  // Padding [top, left, bottom, right]: k2 s2 on 7 + 0 + 1 -> 4; on 6 + 1 + 0 -> 3.
  EXPECT_EQ(
      infer("avgpool2d", {"f32[1,2,7,6]"}, {{"kernel", Ints{2, 2}}, {"padding", Ints{0, 1, 1, 0}}}),
      "f32[1,2,4,3]");
  EXPECT_EQ(
      infer("avgpool2d", {"f32[1,2,7,6]"}, {{"kernel", Ints{2, 2}}, {"padding", Ints{0, 1, 1}}}),
      "error: padding must have 2 values ([ph, pw]) or 4 ([top, left, bottom, right]), got "
      "[0,1,1]");
  // Dilation 2 spans 5 for k3: on 9 -> 5 (stride 1).
  EXPECT_EQ(infer("maxpool2d", {"f32[1,1,9,9]"},
                  {{"kernel", Ints{3, 3}}, {"stride", Ints{1, 1}}, {"dilation", Ints{2, 2}}}),
            "f32[1,1,5,5]");
  EXPECT_EQ(infer("maxpool2d", {"f32[1,1,9,9]"}, {{"kernel", Ints{3, 3}}, {"dilation", Ints{2}}}),
            "error: dilation must have 2 values, got 1");
  EXPECT_EQ(
      infer("maxpool2d", {"f32[1,1,9,9]"}, {{"kernel", Ints{3, 3}}, {"dilation", Ints{0, 1}}}),
      "error: kernel, stride and dilation must be >= 1, got kernel [3,3], stride [3,3] and "
      "dilation [0,1]");
  // avgpool2d has no dilation (PyTorch's has none either).
  EXPECT_EQ(
      infer("avgpool2d", {"f32[1,1,9,9]"}, {{"kernel", Ints{3, 3}}, {"dilation", Ints{2, 2}}}),
      "error: unknown attribute 'dilation'");
  // The backward ops check grad_output against the same rule.
  EXPECT_EQ(infer("maxpool2d_grad", {"f32[1,1,4,4]", "f32[1,1,7,7]"},
                  {{"kernel", Ints{2, 2}}, {"ceil_mode", true}}),
            "f32[1,1,7,7]");
  EXPECT_EQ(infer("avgpool2d_grad", {"f32[1,1,3,3]"},
                  {{"kernel", Ints{2, 2}}, {"ceil_mode", true}, {"input_shape", Ints{1, 1, 7, 7}}}),
            "error: grad_output f32[1,1,3,3] does not match the pooled shape [1,1,4,4]");
}

TEST(OpInference, Pad) {
  // Any dtype; a negative pad crops (constant mode).
  EXPECT_EQ(infer("pad", {"i64[2,3]"}, {{"pads", Ints{1, 0, 0, 2}}}), "i64[3,5]");
  EXPECT_EQ(infer("pad", {"f32[2,6]"}, {{"pads", Ints{0, -2, 0, -1}}}), "f32[2,3]");
  EXPECT_EQ(
      infer("pad", {"f32[1,1,4,4]"}, {{"pads", Ints{0, 0, 3, 3, 0, 0, 3, 3}}, {"mode", "reflect"}}),
      "f32[1,1,10,10]");
  EXPECT_EQ(
      infer("pad", {"f32[1,1,1,4]"}, {{"pads", Ints{0, 0, 2, 0, 0, 0, 5, 0}}, {"mode", "edge"}}),
      "f32[1,1,8,4]");
  EXPECT_EQ(infer("pad", {"f32[2,3]"}, {{"pads", Ints{1, 1}}}),
            "error: pads must have 2 values per dim (4 for a rank-2 input), got [1,1]");
  EXPECT_EQ(infer("pad", {"f32[2,3]"}, {{"pads", Ints{0, 0, 0, 1}}, {"mode", "wrap"}}),
            "error: mode must be \"constant\", \"reflect\" or \"edge\", got \"wrap\"");
  EXPECT_EQ(infer("pad", {"f32[2,3]"}, {{"pads", Ints{0, -1, 0, 0}}, {"mode", "edge"}}),
            "error: negative pads [0,-1,0,0] (cropping) need mode \"constant\"");
  EXPECT_EQ(infer("pad", {"f32[2,3]"}, {{"pads", Ints{0, -4, 0, 0}}}),
            "error: pads [0,-4,0,0] crop more than dim 1 of [2,3] holds");
  EXPECT_EQ(infer("pad", {"f32[2,3]"}, {{"pads", Ints{0, 3, 0, 0}}, {"mode", "reflect"}}),
            "error: reflect pads [0,3,0,0] must be smaller than dim 1 of [2,3]");
  EXPECT_EQ(infer("pad", {"f32[0,3]"}, {{"pads", Ints{1, 0, 0, 0}}, {"mode", "edge"}}),
            "error: edge padding needs elements to repeat, dim 0 of [0,3] has none");
  EXPECT_EQ(infer("pad_grad", {"i64[3,5]"}, {{"pads", Ints{1, 0, 0, 2}}}),
            "error: grad_output must be a floating type, got i64[3,5]");
  EXPECT_EQ(infer("pad_grad", {"f32[3,5]"}, {{"pads", Ints{1, 0, 3, 2}}}),
            "error: grad_output f32[3,5] is smaller than its pads [1,0,3,2]");
}

TEST(OpInference, Resize) {
  AttrMap bilinear{{"size", Ints{7, 9}}, {"mode", "linear"}, {"coordinate_mode", "align_corners"}};
  EXPECT_EQ(infer("resize", {"f32[1,3,4,5]"}, bilinear), "f32[1,3,7,9]");
  EXPECT_EQ(infer("resize", {"bf16[1,3,4,5]"},
                  {{"size", Ints{2, 2}}, {"scales", std::vector<double>{0.5, 0.5}}}),
            "bf16[1,3,2,2]");
  EXPECT_EQ(infer("resize", {"i64[1,3,4,5]"}, bilinear),
            "error: input must be a floating type, got i64[1,3,4,5]");
  EXPECT_EQ(infer("resize", {"f32[3,4,5]"}, bilinear),
            "error: input must have 4 dims, got f32[3,4,5]");
  EXPECT_EQ(infer("resize", {"f32[1,3,4,5]"},
                  {{"size", Ints{7, 9}},
                   {"mode", "cubic"},
                   {"cubic_coeff_a", -0.5},
                   {"exclude_outside", true}}),
            "f32[1,3,7,9]");
  EXPECT_EQ(infer("resize", {"f32[1,3,4,5]"}, {{"size", Ints{7, 9}}, {"mode", "bicubic"}}),
            "error: mode must be \"nearest\", \"linear\" or \"cubic\", got \"bicubic\"");
  EXPECT_EQ(infer("resize", {"f32[1,3,4,5]"},
                  {{"size", Ints{7, 9}},
                   {"mode", "cubic"},
                   {"cubic_coeff_a", std::numeric_limits<double>::infinity()}}),
            "error: cubic_coeff_a must be finite");
  EXPECT_EQ(infer("resize", {"f32[1,3,4,5]"},
                  {{"size", Ints{7, 9}}, {"coordinate_mode", "tf_crop_and_resize"}}),
            "error: coordinate_mode must be \"half_pixel\", \"pytorch_half_pixel\", "
            "\"align_corners\" or \"asymmetric\", got \"tf_crop_and_resize\"");
  EXPECT_EQ(infer("resize", {"f32[1,3,4,5]"}, {{"size", Ints{7, 9}}, {"nearest_mode", "up"}}),
            "error: nearest_mode must be \"round_prefer_floor\", \"round_prefer_ceil\", \"floor\" "
            "or \"ceil\", got \"up\"");
  EXPECT_EQ(infer("resize", {"f32[1,3,4,5]"}, {{"size", Ints{7}}}),
            "error: size must have 2 values, got 1");
  EXPECT_EQ(infer("resize", {"f32[1,3,4,5]"}, {{"size", Ints{0, 3}}}),
            "error: size [0,3] must be >= 1");
  EXPECT_EQ(infer("resize", {"f32[1,3,4,5]"},
                  {{"size", Ints{8, 10}}, {"scales", std::vector<double>{2, -1}}}),
            "error: scales must be empty or 2 finite factors > 0");
  EXPECT_EQ(infer("resize_grad", {"f32[1,3,8,9]"},
                  {{"size", Ints{8, 10}}, {"input_shape", Ints{1, 3, 4, 5}}}),
            "error: grad_output f32[1,3,8,9] must be [1,3,8,10]");
  EXPECT_EQ(infer("resize_grad", {"f32[1,3,8,10]"},
                  {{"size", Ints{8, 10}}, {"input_shape", Ints{3, 4, 5}}}),
            "error: input_shape [3,4,5] must have 4 dims and spatial elements");
}

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

TEST(OpInference, Flatten) {
  EXPECT_EQ(infer("flatten", {"f32[8,16,4,4]"}, {{"start_dim", 0}}), "f32[2048]");
  EXPECT_EQ(infer("flatten", {"f32[8,16,4,4]"}, {{"end_dim", 2}}), "f32[8,64,4]");
  EXPECT_EQ(infer("flatten", {"i64[3,2]"}), "i64[3,2]");
  EXPECT_EQ(infer("flatten", {"f32[]"}, {{"start_dim", 0}}), "f32[1]");
  EXPECT_EQ(infer("flatten", {"f32[8,16,4,4]"}, {{"start_dim", 2}, {"end_dim", 1}}),
            "error: start_dim 2 comes after end_dim 1 for input f32[8,16,4,4]");
  EXPECT_EQ(infer("flatten", {"f32[8]"}), "error: start_dim 1 is out of range for rank 1");
}

TEST(OpInference, Reshape) {
  EXPECT_EQ(infer("reshape", {"f32[2,3,4]"}, {{"shape", Ints{4, 6}}}), "f32[4,6]");
  EXPECT_EQ(infer("reshape", {"f32[2,3,4]"}, {{"shape", Ints{-1}}}), "f32[24]");
  EXPECT_EQ(infer("reshape", {"f32[2,3,4]"}, {{"shape", Ints{-1, -1}}}),
            "error: shape [-1,-1] has more than one -1");
  EXPECT_EQ(infer("reshape", {"f32[2,3,4]"}, {{"shape", Ints{5, 5}}}),
            "error: cannot reshape input f32[2,3,4] (24 elements) to [5,5] (25 elements)");
  EXPECT_EQ(infer("reshape", {"f32[2,3,4]"}, {{"shape", Ints{5, -1}}}),
            "error: cannot reshape input f32[2,3,4] to [5,-1]");
  EXPECT_EQ(infer("reshape", {"f32[2,3,4]"}, {{"shape", Ints{-2, -12}}}),
            "error: shape [-2,-12] has a negative dim");
}

TEST(OpInference, TransposeAndPermute) {
  EXPECT_EQ(infer("transpose", {"f16[2,3,4]"}, {{"dim0", 1}, {"dim1", 2}}), "f16[2,4,3]");
  EXPECT_EQ(infer("transpose", {"f32[2,3,4]"}, {{"dim0", 0}, {"dim1", 3}}),
            "error: dim1 3 is out of range for rank 3");
  EXPECT_EQ(infer("transpose", {"f32[2,3]"}), "error: missing required attribute 'dim0'");
  EXPECT_EQ(infer("permute", {"f32[2,3,4]"}, {{"dims", Ints{-1, 0, 1}}}), "f32[4,2,3]");
  EXPECT_EQ(infer("permute", {"f32[8,3,32,32]"}, {{"dims", Ints{0, 0, 1, 2}}}),
            "error: dims [0,0,1,2] is not a permutation: dim 0 appears twice");
  EXPECT_EQ(infer("permute", {"f32[8,3,32,32]"}, {{"dims", Ints{0, 1}}}),
            "error: dims [0,1] must have one entry per dim of input f32[8,3,32,32]");
  EXPECT_EQ(infer("permute", {"f32[2,3]"}, {{"dims", Ints{0, 2}}}),
            "error: dim 2 is out of range for rank 2");
}

TEST(OpInference, Concat) {
  EXPECT_EQ(infer("concat", {"f32[2,3]", "f32[4,3]", "f32[1,3]"}), "f32[7,3]");
  EXPECT_EQ(infer("concat", {"f16[2,3]", "f16[2,5]"}, {{"axis", -1}}), "f16[2,8]");
  EXPECT_EQ(infer("concat", {"i64[2]"}), "i64[2]");
  EXPECT_EQ(infer("concat", {"f32[2,3]", "f16[2,3]"}),
            "error: inputs must have the same dtype, got f32[2,3] (input 0) and f16[2,3] "
            "(input 1)");
  EXPECT_EQ(infer("concat", {"f32[2,3]", "f32[2,3]", "f32[4,3]"}, {{"axis", 1}}),
            "error: inputs must have the same shape except on axis 1, got f32[2,3] (input 0) "
            "and f32[4,3] (input 2)");
  EXPECT_EQ(infer("concat", {"f32[2,3]", "f32[2,3,1]"}),
            "error: inputs must have the same shape except on axis 0, got f32[2,3] (input 0) "
            "and f32[2,3,1] (input 1)");
  EXPECT_EQ(infer("concat", {"f32[2,3]"}, {{"axis", 2}}),
            "error: axis 2 is out of range for rank 2");
}

TEST(OpInference, Embedding) {
  EXPECT_EQ(infer("embedding", {"i32[16]", "f16[50,8]"}, {{"padding_idx", 0}}), "f16[16,8]");
  EXPECT_EQ(infer("embedding", {"i64[]", "f32[50,8]"}), "f32[8]");
  EXPECT_EQ(infer("embedding", {"f32[16]", "f32[50,8]"}),
            "error: indices must be i64 or i32, got f32[16]");
  EXPECT_EQ(infer("embedding", {"i64[16]", "f32[50]"}),
            "error: weight must have 2 dims, got f32[50]");
  EXPECT_EQ(infer("embedding", {"i64[16]", "f32[50,8]"}, {{"padding_idx", 50}}),
            "error: padding_idx 50 must be -1 (none) or a row of weight f32[50,8]");
}

TEST(OpInference, Cast) {
  EXPECT_EQ(infer("cast", {"f16[2,3]"}, {{"to", DType::F32}, {"cacheable", true}}), "f32[2,3]");
  EXPECT_EQ(infer("cast", {"i64[4]"}, {{"to", DType::I32}}), "i32[4]");
  EXPECT_EQ(infer("cast", {"f32[]"}, {{"to", DType::BF16}}), "bf16[]");
  EXPECT_EQ(infer("cast", {"f32[2]"}, {{"to", "f16"}}),
            "error: attribute 'to' must be dtype, got string");
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST(OpInference, Losses) {
  EXPECT_EQ(infer("mse_loss", {"f16[4]", "f16[4]"}), "f16[]");
  EXPECT_EQ(infer("mse_loss", {"f32[8,10]", "f32[8,1]"}),
            "error: input and target must have the same shape, got f32[8,10] and f32[8,1]");
  EXPECT_EQ(infer("mse_loss", {"f32[8]", "f16[8]"}),
            "error: input and target must have the same dtype, got f32[8] and f16[8]");
  EXPECT_EQ(infer("binary_cross_entropy", {"f32[8]", "f32[8,1]"}),
            "error: input and target must have the same shape, got f32[8] and f32[8,1]");
  EXPECT_EQ(infer("binary_cross_entropy", {"i64[8]", "i64[8]"}),
            "error: input must be a floating type, got i64[8]");

  EXPECT_EQ(infer("cross_entropy", {"f16[8,10]", "i32[8]"},
                  {{"ignore_index", 0}, {"label_smoothing", 0.1}}),
            "f16[]");
  EXPECT_EQ(infer("cross_entropy", {"f32[8,10]", "f32[8]"}),
            "error: target must be i64 or i32, got f32[8]");
  EXPECT_EQ(infer("cross_entropy", {"f32[8,10]", "i64[4]"}),
            "error: target i64[4] must have one label per row of input f32[8,10]");
  EXPECT_EQ(infer("cross_entropy", {"f32[8]", "i64[8]"}),
            "error: input must have 2 dims, got f32[8]");
  EXPECT_EQ(infer("cross_entropy", {"f32[8,10]", "i64[8]"}, {{"label_smoothing", 1.5}}),
            "error: label_smoothing must be in [0, 1], got 1.5");
}

//===----------------------------------------------------------------------===//
// Backward ops: autodiff builds them, but a hand-written graph (textual IR)
// can get them wrong, so they check their operands like any other op.
//===----------------------------------------------------------------------===//

TEST(OpInference, BackwardOps) {
  EXPECT_EQ(infer("relu_grad", {"f32[2,3]", "f32[3,2]"}),
            "error: grad and input must have the same shape, got f32[2,3] and f32[3,2]");
  EXPECT_EQ(infer("sigmoid_grad", {"f16[4]", "f32[4]"}),
            "error: grad and output must have the same dtype, got f16[4] and f32[4]");
  EXPECT_EQ(infer("silu_grad", {"f32[4]", "f32[2,2]"}),
            "error: grad and input must have the same shape, got f32[4] and f32[2,2]");
  EXPECT_EQ(infer("gelu_grad", {"f32[4]", "f32[4]"}, {{"approximate", "erf"}}),
            "error: approximate must be \"none\" or \"tanh\", got \"erf\"");
  EXPECT_EQ(infer("softmax_grad", {"f32[2,3]", "f32[2,3]"}, {{"dim", 2}}),
            "error: dim 2 is out of range for rank 2");
  EXPECT_EQ(infer("slice", {"f32[2,8]"}, {{"axis", 1}, {"start", 5}, {"end", 9}}),
            "error: slice [5, 9) is not within dim 1 of input f32[2,8]");
  EXPECT_EQ(infer("slice", {"f32[2,8]"}, {{"axis", 0}, {"start", 2}, {"end", 1}}),
            "error: slice [2, 1) is not within dim 0 of input f32[2,8]");
  EXPECT_EQ(infer("slice", {"f32[2,8]"}, {{"axis", 0}, {"start", 2}, {"end", 2}}), "f32[0,8]");
  EXPECT_EQ(infer("broadcast_to", {"f32[3,2]"}, {{"shape", Ints{3, 4}}}),
            "error: cannot broadcast input f32[3,2] to [3,4]");
  EXPECT_EQ(infer("broadcast_to", {"f32[2,3]"}, {{"shape", Ints{3}}}),
            "error: cannot broadcast input f32[2,3] to [3]");
  EXPECT_EQ(infer("embedding_grad", {"f32[4,8]", "i64[5]"}, {{"num_embeddings", 10}}),
            "error: grad f32[4,8] must have the shape of indices i64[5] plus one dim");
  EXPECT_EQ(infer("embedding_grad", {"f32[4,8]", "i64[4]"}, {{"num_embeddings", 0}}),
            "error: num_embeddings must be positive, got 0");
  EXPECT_EQ(infer("embedding_grad", {"f32[4,8]", "i64[4]"},
                  {{"num_embeddings", 10}, {"padding_idx", 10}}),
            "error: padding_idx 10 must be -1 (none) or below num_embeddings 10");
  EXPECT_EQ(infer("mse_loss_grad", {"f32[2]", "f32[2]", "f32[2]"}),
            "error: grad must have 0 dims, got f32[2]");
  EXPECT_EQ(infer("cross_entropy_grad", {"f32[]", "f32[8,10]", "i64[4]"}),
            "error: target i64[4] must have one label per row of input f32[8,10]");
  EXPECT_EQ(infer("maxpool2d_grad", {"f32[1,16,4,4]", "f32[1,16,7,7]"}, {{"kernel", Ints{2, 2}}}),
            "error: grad_output f32[1,16,4,4] does not match the pooled shape [1,16,3,3]");
  EXPECT_EQ(infer("avgpool2d_grad", {"f32[1,4,2,2]"},
                  {{"kernel", Ints{2, 2}}, {"input_shape", Ints{4, 4}}}),
            "error: input shape must have 4 dims, got [4,4]");
  EXPECT_EQ(infer("global_avgpool_grad", {"f32[2,3]"}, {{"input_shape", Ints{2, 3, 4, 4}}}),
            "error: grad_output f32[2,3] must be [2,3,1,1]");
  EXPECT_EQ(
      infer("batchnorm2d_grad", {"f32[2,3,4,4]", "f32[2,3,4,4]", "f32[4]", "f32[3]", "f32[3]"}),
      "error: weight must be [3] to match input f32[2,3,4,4], got f32[4]");
  EXPECT_EQ(infer("layernorm_grad", {"f32[2,5]", "f32[2,5]", "f32[2,5]"}),
            "error: weight must be [5] to match input f32[2,5], got f32[2,5]");
  EXPECT_EQ(
      infer("scaled_dot_product_attention_grad", {"f32[3,4]", "f32[3,4]", "f32[5,4]", "f32[5,2]"}),
      "error: grad_output f32[3,4] does not match the attention output f32[3,2]");
}

} // namespace
