//===- AssignPrecisionTest.cpp - Precision assignment and its report -------===//
//
// Meaning next to structure: the forward pass of a model rewritten at O1, O2
// and O3 (bf16 and f16) computes what the f32 model computes, within a
// tolerance per half type, on the reference backend. Plus the decisions the
// pass records, its rules' order, and the report built from them.
//
//===----------------------------------------------------------------------===//
#include "passes/AssignPrecision.h"

#include "frontends/yaml/ModelLoader.h"
#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "kernels/common/Random.h"
#include "kernels/common/Storage.h"
#include "passes/PassManager.h"
#include "passes/PrecisionPolicy.h"
#include "passes/PrecisionReport.h"
#include "runtime/Program.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace ampc;

namespace {

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const Diagnostic &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

// A residual MLP with a softmax between two linears and an integer label.
const char *kResidualMlp = R"(
model: resmlp
batch: 8
inputs:
  x: {shape: [B, 16]}
  label: {shape: [B], dtype: i64}
layers:
  - linear: {out_features: 32, name: fc1}
  - relu: {name: act1}
  - linear: {out_features: 32, name: fc2}
  - relu: {name: act2}
  - add: {inputs: [act1, act2], name: res}
  - softmax: {name: probs}
  - linear: {out_features: 5, name: logits}
loss: {cross_entropy: {input: logits, target: label}}
)";

// Conv + batchnorm (training mode: batch statistics, running-stat updates).
const char *kConvNet = R"(
model: convnet
batch: 4
inputs:
  image: {shape: [B, 2, 6, 6]}
  label: {shape: [B], dtype: i64}
layers:
  - conv2d: {out_channels: 8, kernel: 3, padding: 1, name: conv1}
  - batchnorm2d: {name: bn1}
  - relu: {}
  - conv2d: {out_channels: 8, kernel: 3, padding: 1, name: conv2}
  - batchnorm2d: {name: bn2}
  - relu: {}
  - maxpool2d: {kernel: 2}
  - flatten: {}
  - linear: {out_features: 4, name: logits}
loss: {cross_entropy: {input: logits, target: label}}
)";

/// Loads a model and also exports its logits, so both the loss and the
/// logits are compared.
std::unique_ptr<Graph> load(const char *text) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelString(text, "m.yaml", diag);
  EXPECT_TRUE(g) << diagText(diag);
  if (g)
    g->addOutput(g->lookup("logits"));
  return g;
}

PassResult assign(Graph &g, DiagnosticEngine &diag) {
  PassContext ctx{diag};
  return AssignPrecisionPass().run(g, ctx);
}

/// Runs one forward step on the reference backend with deterministic inputs
/// (floats uniform in [-1, 1), integer labels in [0, classes)); returns every
/// graph output as doubles.
std::vector<std::vector<double>> runForward(const Graph &g, int64_t classes) {
  DiagnosticEngine diag;
  std::unique_ptr<Backend> backend = createCpuRefBackend();
  CompileOptions opts;
  opts.initSeed = 7;
  std::unique_ptr<Program> program = Program::compile(g, *backend, diag, opts);
  EXPECT_TRUE(program) << diagText(diag);
  if (!program)
    return {};
  for (unsigned index = 0; index < g.inputs().size(); ++index) {
    const Value *in = g.inputs()[index];
    void *data = program->data(in);
    for (int64_t i = 0; i < in->type().numElements(); ++i) {
      double u = kernels::uniform01Double(99, index, i);
      double v = isIntegral(in->dtype()) ? std::floor(u * classes) : 2 * u - 1;
      kernels::storeFromDouble(in->dtype(), data, i, v);
    }
  }
  program->run(0);
  std::vector<std::vector<double>> outputs;
  for (const Value *out : g.outputs()) {
    std::vector<double> values;
    for (int64_t i = 0; i < out->type().numElements(); ++i)
      values.push_back(kernels::loadAsDouble(out->dtype(), program->data(out), i));
    outputs.push_back(std::move(values));
  }
  return outputs;
}

/// Largest |a - b| relative to the largest |a| of the output.
double relativeError(const std::vector<double> &ref, const std::vector<double> &got) {
  EXPECT_EQ(ref.size(), got.size());
  double scale = 0, err = 0;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    scale = std::max(scale, std::fabs(ref[i]));
    err = std::max(err, std::fabs(ref[i] - got[i]));
  }
  return err / std::max(scale, 1e-30);
}

struct Equivalence {
  const char *model;
  int64_t classes;
  const char *level;
  const char *halfType;
  double tolerance;
};

class ForwardEquivalence : public ::testing::TestWithParam<Equivalence> {};

// bf16 keeps 8 significant bits (relative rounding 2^-9), f16 11 (2^-12):
// a few layers of rounding stay within ~1e-2 and ~2e-3 of the f32 result.
TEST_P(ForwardEquivalence, RewrittenForwardMatchesF32) {
  const Equivalence &e = GetParam();
  std::unique_ptr<Graph> reference = load(e.model), mixed = load(e.model);
  ASSERT_TRUE(reference && mixed);
  mixed->meta()["amp.opt_level"] = Attribute(e.level);
  mixed->meta()["amp.half_type"] = Attribute(e.halfType);
  DiagnosticEngine diag;
  ASSERT_EQ(assign(*mixed, diag), PassResult::Changed) << diagText(diag);
  ASSERT_TRUE(verifyGraph(*mixed, diag)) << diagText(diag);

  // The rewrite really computes in half: some node produces the half type.
  DType half = *parseDType(e.halfType);
  bool anyHalf = false;
  for (const Node &n : mixed->nodes())
    anyHalf |= n.numResults() > 0 && n.result(0)->dtype() == half && n.kind() != OpKind::Cast;
  EXPECT_TRUE(anyHalf);

  std::vector<std::vector<double>> want = runForward(*reference, e.classes);
  std::vector<std::vector<double>> got = runForward(*mixed, e.classes);
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ(got.size(), 2u);
  // Outputs keep their f32 dtype.
  EXPECT_EQ(mixed->outputs()[0]->dtype(), DType::F32);
  EXPECT_EQ(mixed->outputs()[1]->dtype(), DType::F32);
  for (unsigned o = 0; o < 2; ++o) {
    double err = relativeError(want[o], got[o]);
    EXPECT_LE(err, e.tolerance) << "output " << o << " at " << e.level << " " << e.halfType;
    // Half rounding shows: the comparison is not vacuous.
    EXPECT_GT(err, 0.0) << "output " << o << " at " << e.level << " " << e.halfType;
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, ForwardEquivalence,
                         ::testing::Values(Equivalence{kResidualMlp, 5, "O1", "bf16", 1e-2},
                                           Equivalence{kResidualMlp, 5, "O1", "f16", 2e-3},
                                           Equivalence{kResidualMlp, 5, "O2", "bf16", 1e-2},
                                           Equivalence{kResidualMlp, 5, "O3", "f16", 2e-3},
                                           Equivalence{kConvNet, 4, "O1", "bf16", 1e-2},
                                           Equivalence{kConvNet, 4, "O1", "f16", 2e-3},
                                           Equivalence{kConvNet, 4, "O2", "bf16", 1e-2},
                                           Equivalence{kConvNet, 4, "O2", "f16", 2e-3},
                                           Equivalence{kConvNet, 4, "O3", "bf16", 1e-2}));

TEST(AssignPrecisionTest, O0LeavesTheGraphAlone) {
  std::unique_ptr<Graph> g = load(kResidualMlp);
  ASSERT_TRUE(g);
  std::string before = printGraphToString(*g);
  DiagnosticEngine diag;
  EXPECT_EQ(assign(*g, diag), PassResult::Unchanged);
  EXPECT_EQ(printGraphToString(*g), before);
  g->meta()["amp.opt_level"] = Attribute("O0");
  g->meta()["amp.half_ops"] = Attribute("softmax");
  before = printGraphToString(*g);
  EXPECT_EQ(assign(*g, diag), PassResult::Unchanged);
  EXPECT_EQ(printGraphToString(*g), before);
  EXPECT_FALSE(diag.hasErrors());
}

TEST(AssignPrecisionTest, DecisionsAreRecordedAndReadBack) {
  std::unique_ptr<Graph> g = load(kResidualMlp);
  ASSERT_TRUE(g);
  g->meta()["amp.opt_level"] = Attribute("O1");
  DiagnosticEngine diag;
  ASSERT_EQ(assign(*g, diag), PassResult::Changed) << diagText(diag);

  auto decision = [&](llvm::StringRef name) {
    std::optional<PrecisionDecision> d = precisionDecision(*g->lookup(name)->definingNode());
    EXPECT_TRUE(d) << name.str();
    return d ? *d : PrecisionDecision{DType::I64, PrecisionReason::Integer, "?"};
  };
  EXPECT_EQ(decision("fc1").dtype, DType::BF16);
  EXPECT_EQ(decision("fc1").reason, PrecisionReason::Category);
  EXPECT_EQ(decision("act1").reason, PrecisionReason::Neighbour);
  EXPECT_EQ(decision("act1").dtype, DType::BF16);
  EXPECT_EQ(decision("res").reason, PrecisionReason::Promote);
  EXPECT_EQ(decision("res").dtype, DType::BF16);
  EXPECT_EQ(decision("res").detail, "all inputs half");
  EXPECT_EQ(decision("probs").dtype, DType::F32);
  EXPECT_EQ(decision("probs").reasonString(), "category: fp32");
  EXPECT_EQ(decision("loss").reason, PrecisionReason::Policy);
  EXPECT_EQ(decision("loss").dtype, DType::F32);

  // The decisions survive printing and parsing.
  std::string text = printGraphToString(*g);
  std::unique_ptr<Graph> back = parseGraph(text, "printed.ir", diag);
  ASSERT_TRUE(back) << diagText(diag);
  EXPECT_EQ(printGraphToString(*back), text);
  std::optional<PrecisionDecision> d = precisionDecision(*back->lookup("act1")->definingNode());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reasonString(), "neighbour: as its input");

  // Labels are never cast, and casts are shared: one cast of each parameter.
  unsigned labelCasts = 0, fc1WeightCasts = 0;
  for (const Node &n : g->nodes())
    if (n.kind() == OpKind::Cast) {
      labelCasts += n.operand(0) == g->lookup("label");
      fc1WeightCasts += n.operand(0) == g->lookup("fc1.weight");
    }
  EXPECT_EQ(labelCasts, 0u);
  EXPECT_EQ(fc1WeightCasts, 1u);
}

TEST(AssignPrecisionTest, GradientNodesDoNotInheritDecisions) {
  // relu's and transpose's gradient rules pass the forward attributes on;
  // the annotations must stay behind.
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(R"(graph @g {
  meta {amp.opt_level = "O1"}
  input %x : f32[2,4]
  input %y : f32[4,2]
  param %w : f32[4,4] init ones
  %a = linear(%x, %w) : (f32[2,4], f32[4,4]) -> f32[2,4]
  %r = relu(%a) : (f32[2,4]) -> f32[2,4]
  %t = transpose(%r) {dim0 = 0, dim1 = 1} : (f32[2,4]) -> f32[4,2]
  %loss = mse_loss(%t, %y) : (f32[4,2], f32[4,2]) -> f32[] role(loss)
  output %loss
})",
                                        "g.ir", diag);
  ASSERT_TRUE(g) << diagText(diag);
  PassManager pm;
  pm.setVerifyEach(true);
  ASSERT_TRUE(pm.addByNames("assign-precision,autodiff", diag) && pm.run(*g, diag))
      << diagText(diag);
  unsigned backward = 0;
  for (const Node &n : g->nodes()) {
    if (n.role() != NodeRole::Backward)
      continue;
    ++backward;
    for (const auto &[name, value] : n.attrs())
      EXPECT_FALSE(isAnnotationAttr(name)) << n.opName().str() << " has " << name.str();
  }
  EXPECT_GE(backward, 3u);
  // The parameter's gradient comes back in its f32 storage dtype.
  EXPECT_EQ(g->lookup("w.grad")->dtype(), DType::F32);
}

TEST(AssignPrecisionTest, OverridesFollowTheirPrecedence) {
  // Node override beats the op-kind override, which beats the category.
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(R"(graph @g {
  meta {amp.opt_level = "O1", amp.fp32_ops = "linear", amp.half_ops = "softmax"}
  input %x : f32[2,4]
  param %w1 : f32[4,4] init ones
  param %w2 : f32[4,4] init ones
  %a = linear(%x, %w1) : (f32[2,4], f32[4,4]) -> f32[2,4] precision(half)
  %b = linear(%a, %w2) : (f32[2,4], f32[4,4]) -> f32[2,4]
  %c = softmax(%b) {dim = -1} : (f32[2,4]) -> f32[2,4]
  %d = sigmoid(%c) : (f32[2,4]) -> f32[2,4]
  output %d
})",
                                        "g.ir", diag);
  ASSERT_TRUE(g) << diagText(diag);
  ASSERT_EQ(assign(*g, diag), PassResult::Changed) << diagText(diag);
  ASSERT_TRUE(verifyGraph(*g, diag)) << diagText(diag);
  auto reason = [&](llvm::StringRef name) {
    return precisionDecision(*g->lookup(name)->definingNode())->reasonString();
  };
  EXPECT_EQ(reason("a"), "node-override: precision(half)");
  EXPECT_EQ(reason("b"), "op-override: amp.fp32_ops");
  EXPECT_EQ(reason("c"), "op-override: amp.half_ops");
  EXPECT_EQ(g->lookup("a")->dtype(), DType::BF16);
  EXPECT_EQ(g->lookup("b")->dtype(), DType::F32);
  EXPECT_EQ(g->lookup("c")->dtype(), DType::BF16);
  // The follow op at the end feeds the f32 output: half costs the same one
  // cast as f32, and the tie goes to half.
  EXPECT_EQ(g->lookup("d")->dtype(), DType::BF16);
  EXPECT_EQ(g->outputs()[0]->dtype(), DType::F32);
}

TEST(AssignPrecisionTest, FewerCastsBeatSmallerCasts) {
  // %r feeds two half matmuls and %s an fp32 softmax. Making relu fp32 costs
  // one cast of its output (shared by both matmuls); half costs a cast of
  // its input — the same count — so half wins the tie. Adding an fp32 user
  // of %r (exp-like softmax) makes half cost two casts (input and output):
  // relu turns fp32.
  const char *text = R"(graph @g {
  meta {amp.opt_level = "O1"}
  input %x : f32[4,4]
  input %w : f32[4,4]
  %s = softmax(%x) {dim = -1} : (f32[4,4]) -> f32[4,4]
  %r = relu(%s) : (f32[4,4]) -> f32[4,4]
  %m1 = matmul(%r, %w) : (f32[4,4], f32[4,4]) -> f32[4,4]
  %m2 = matmul(%w, %r) : (f32[4,4], f32[4,4]) -> f32[4,4]
  %sum = add(%m1, %m2) : (f32[4,4], f32[4,4]) -> f32[4,4]
  output %sum
})";
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(text, "g.ir", diag);
  ASSERT_TRUE(g) << diagText(diag);
  ASSERT_EQ(assign(*g, diag), PassResult::Changed) << diagText(diag);
  EXPECT_EQ(g->lookup("r")->dtype(), DType::BF16);

  std::string withF32User = text;
  withF32User.replace(withF32User.find("  output %sum"), 13,
                      "  %t = softmax(%r) {dim = -1} : (f32[4,4]) -> f32[4,4]\n  output %sum, %t");
  g = parseGraph(withF32User, "g.ir", diag);
  ASSERT_TRUE(g) << diagText(diag);
  ASSERT_EQ(assign(*g, diag), PassResult::Changed) << diagText(diag);
  EXPECT_EQ(g->lookup("r")->dtype(), DType::F32);
  unsigned casts = 0;
  for (const Node &n : g->nodes())
    casts += n.kind() == OpKind::Cast;
  // %r to bf16 (shared by both matmuls), %w to bf16, %sum back to f32.
  EXPECT_EQ(casts, 3u) << printGraphToString(*g);
}

TEST(AssignPrecisionTest, BannedOpsAreErrorsUnlessAllowed) {
  const char *text = R"(graph @g {
  meta {amp.opt_level = "O1"}
  input %x : f32[2,2] loc("m.yaml":3:3)
  input %y : f32[2,2] loc("m.yaml":4:3)
  %p = sigmoid(%x) : (f32[2,2]) -> f32[2,2] loc("m.yaml":6:5)
  %loss = binary_cross_entropy(%p, %y) : (f32[2,2], f32[2,2]) -> f32[] role(loss) loc("m.yaml":7:5)
  output %loss
})";
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(text, "g.ir", diag);
  ASSERT_TRUE(g);
  std::string before = printGraphToString(*g);
  EXPECT_EQ(assign(*g, diag), PassResult::Failed);
  EXPECT_EQ(diagText(diag), "m.yaml:7:5: error: op binary_cross_entropy is banned in half "
                            "precision; use --allow-banned or precision: fp32\n");
  EXPECT_EQ(printGraphToString(*g), before) << "a rejected graph is left as it was";

  diag.clear();
  g->meta()["amp.allow_banned"] = Attribute(true);
  ASSERT_EQ(assign(*g, diag), PassResult::Changed) << diagText(diag);
  EXPECT_EQ(precisionDecision(*g->lookup("loss")->definingNode())->reasonString(),
            "category: banned, allowed by amp.allow_banned");
}

TEST(AssignPrecisionTest, O2KeepsBatchnormParametersAndStatisticsF32) {
  std::unique_ptr<Graph> g = load(kConvNet);
  ASSERT_TRUE(g);
  g->meta()["amp.opt_level"] = Attribute("O2");
  DiagnosticEngine diag;
  ASSERT_EQ(assign(*g, diag), PassResult::Changed) << diagText(diag);
  EXPECT_EQ(g->lookup("conv1.weight")->dtype(), DType::BF16);
  EXPECT_EQ(g->lookup("logits.weight")->dtype(), DType::BF16);
  EXPECT_EQ(g->lookup("bn1.weight")->dtype(), DType::F32);
  EXPECT_EQ(g->lookup("bn1.bias")->dtype(), DType::F32);
  EXPECT_EQ(g->lookup("bn1.running_mean")->dtype(), DType::F32);

  g = load(kConvNet);
  g->meta()["amp.opt_level"] = Attribute("O3");
  ASSERT_EQ(assign(*g, diag), PassResult::Changed) << diagText(diag);
  EXPECT_EQ(g->lookup("bn1.weight")->dtype(), DType::BF16);
  EXPECT_EQ(g->lookup("bn1.running_var")->dtype(), DType::F32);
  ASSERT_TRUE(verifyGraph(*g, diag)) << diagText(diag);
}

//===----------------------------------------------------------------------===//
// The report (ampc --explain and the summary line)
//===----------------------------------------------------------------------===//

const char *kMlp = R"(
model: mlp
batch: 4
inputs:
  x: {shape: [B, 8]}
  target: {shape: [B, 4]}
layers:
  - linear: {out_features: 16, name: fc1}
  - relu: {name: act}
  - linear: {out_features: 4, name: out}
loss: {mse_loss: {input: out, target: target}}
)";

TEST(PrecisionReportTest, SummaryCountsOpsCastsAndBytes) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelString(kMlp, "mlp.yaml", diag);
  ASSERT_TRUE(g) << diagText(diag);
  PrecisionSummary fp32 = summarizePrecision(*g);
  EXPECT_EQ(fp32.ops, 4u);
  EXPECT_EQ(fp32.halfOps, 0u);
  EXPECT_EQ(fp32.casts, 0u);

  g->meta()["amp.opt_level"] = Attribute("O1");
  ASSERT_EQ(assign(*g, diag), PassResult::Changed) << diagText(diag);
  PrecisionSummary s = summarizePrecision(*g);
  // fc1, act and out in bf16; the loss in f32.
  EXPECT_EQ(s.ops, 4u);
  EXPECT_EQ(s.halfOps, 3u);
  // x (4x8), fc1.weight (16x8), fc1.bias (16), out.weight (4x16), out.bias
  // (4) to bf16: 64 + 256 + 32 + 128 + 8 bytes; out (4x4) to f32: 64 bytes.
  EXPECT_EQ(s.casts, 6u);
  EXPECT_EQ(s.castBytes, 552u);
  EXPECT_EQ(s.cacheableCasts, 4u);
  EXPECT_EQ(s.cacheableCastBytes, 424u);
  std::string line;
  llvm::raw_string_ostream os(line);
  printPrecisionSummary(s, os);
  EXPECT_EQ(os.str(), "3 of 4 ops in half, 6 casts (552 bytes per step); 4 casts of weights "
                      "(424 bytes) run once per weight change\n");
}

TEST(PrecisionReportTest, ExplainPrintsEveryNodeAndItsRule) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = loadModelString(kMlp, "mlp.yaml", diag);
  ASSERT_TRUE(g) << diagText(diag);
  std::string fp32Text;
  llvm::raw_string_ostream fp32(fp32Text);
  printExplain(*g, fp32);
  EXPECT_EQ(fp32.str(), "%fc1   linear    f32  policy: nothing runs in half\n"
                        "%act   relu      f32  policy: nothing runs in half\n"
                        "%out   linear    f32  policy: nothing runs in half\n"
                        "%loss  mse_loss  f32  policy: nothing runs in half\n");

  g->meta()["amp.opt_level"] = Attribute("O1");
  ASSERT_EQ(assign(*g, diag), PassResult::Changed) << diagText(diag);
  std::string text;
  llvm::raw_string_ostream os(text);
  printExplain(*g, os);
  EXPECT_EQ(os.str(), "%x.bf16           cast      bf16  cast: f32 to bf16\n"
                      "%fc1.weight.bf16  cast      bf16  cast: f32 to bf16, cacheable\n"
                      "%fc1.bias.bf16    cast      bf16  cast: f32 to bf16, cacheable\n"
                      "%fc1              linear    bf16  category: half\n"
                      "%act              relu      bf16  neighbour: as its input\n"
                      "%out.weight.bf16  cast      bf16  cast: f32 to bf16, cacheable\n"
                      "%out.bias.bf16    cast      bf16  cast: f32 to bf16, cacheable\n"
                      "%out              linear    bf16  category: half\n"
                      "%out.f32          cast      f32   cast: bf16 to f32\n"
                      "%loss             mse_loss  f32   policy: losses run in fp32\n");
}

} // namespace
