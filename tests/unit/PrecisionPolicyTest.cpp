//===- PrecisionPolicyTest.cpp - O0-O3 presets, overrides, the amp: section -===//
//
// The presets carry Apex's values; every amp.* key overrides its property;
// wrong types and values are errors naming the key; the command-line helper
// writes checked keys; the printed policy is one property a line; the model
// file's `amp:` section becomes the same keys.
//
//===----------------------------------------------------------------------===//
#include "passes/PrecisionPolicy.h"

#include "frontends/yaml/ModelLoader.h"

#include <gtest/gtest.h>

using namespace ampc;

namespace {

std::string diagText(const DiagnosticEngine &diag) {
  std::string s;
  for (const Diagnostic &d : diag.diagnostics())
    s += d.str() + "\n";
  return s;
}

PrecisionPolicy resolveOk(const AttrMap &meta) {
  DiagnosticEngine diag;
  std::optional<PrecisionPolicy> p = resolvePolicy(meta, diag);
  EXPECT_TRUE(p) << diagText(diag);
  EXPECT_FALSE(diag.hasErrors()) << diagText(diag);
  return p ? *p : PrecisionPolicy();
}

/// The errors resolvePolicy reports for meta (none expected to resolve).
std::string resolveErrors(const AttrMap &meta) {
  DiagnosticEngine diag;
  EXPECT_FALSE(resolvePolicy(meta, diag));
  return diagText(diag);
}

std::string printed(const PrecisionPolicy &p) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printPolicy(p, os);
  return os.str();
}

TEST(PrecisionPolicyTest, PresetsHaveApexValues) {
  PrecisionPolicy o0 = PrecisionPolicy::preset(OptLevel::O0);
  EXPECT_EQ(o0.castModelType, CastModelType::None);
  EXPECT_FALSE(o0.perOpCasting);
  EXPECT_FALSE(o0.masterWeights);
  EXPECT_FALSE(o0.dynamicLossScale);
  EXPECT_EQ(o0.staticLossScale, 1.0);
  EXPECT_FALSE(o0.mixed());
  EXPECT_FALSE(o0.scalesLoss());

  PrecisionPolicy o1 = PrecisionPolicy::preset(OptLevel::O1);
  EXPECT_EQ(o1.castModelType, CastModelType::None);
  EXPECT_TRUE(o1.perOpCasting);
  EXPECT_FALSE(o1.masterWeights);
  EXPECT_TRUE(o1.dynamicLossScale);
  EXPECT_TRUE(o1.mixed());

  PrecisionPolicy o2 = PrecisionPolicy::preset(OptLevel::O2);
  EXPECT_EQ(o2.castModelType, CastModelType::Half);
  EXPECT_FALSE(o2.perOpCasting);
  EXPECT_TRUE(o2.keepBatchnormFp32);
  EXPECT_TRUE(o2.masterWeights);
  EXPECT_TRUE(o2.dynamicLossScale);

  PrecisionPolicy o3 = PrecisionPolicy::preset(OptLevel::O3);
  EXPECT_EQ(o3.castModelType, CastModelType::Half);
  EXPECT_FALSE(o3.perOpCasting);
  EXPECT_FALSE(o3.keepBatchnormFp32);
  EXPECT_FALSE(o3.masterWeights);
  EXPECT_FALSE(o3.dynamicLossScale);
  EXPECT_EQ(o3.staticLossScale, 1.0);

  // Dynamic scaling defaults: 2^16, x2 after 2000 finite steps, x0.5 on
  // overflow, within [1, 2^24]; bf16 is the CPU's half type.
  EXPECT_EQ(o1.dynamic.init, 65536.0);
  EXPECT_EQ(o1.dynamic.growthFactor, 2.0);
  EXPECT_EQ(o1.dynamic.backoffFactor, 0.5);
  EXPECT_EQ(o1.dynamic.growthInterval, 2000);
  EXPECT_EQ(o1.dynamic.minScale, 1.0);
  EXPECT_EQ(o1.dynamic.maxScale, 16777216.0);
  EXPECT_EQ(o1.halfType, DType::BF16);
}

TEST(PrecisionPolicyTest, NoOptLevelMeansO0) {
  PrecisionPolicy p = resolveOk({{"model", Attribute("m")}});
  EXPECT_EQ(p.optLevel, OptLevel::O0);
  EXPECT_FALSE(p.mixed());
  EXPECT_TRUE(p.overridden.empty());
}

TEST(PrecisionPolicyTest, KeysOverrideThePreset) {
  AttrMap meta = {{"amp.opt_level", Attribute("O2")},
                  {"amp.keep_batchnorm_fp32", Attribute(false)},
                  {"amp.half_type", Attribute("f16")},
                  {"amp.loss_scale", Attribute("static")},
                  {"amp.loss_scale.value", Attribute(int64_t(128))},
                  {"amp.fp32_ops", Attribute("softmax, gelu")},
                  {"amp.half_ops", Attribute("add")},
                  {"amp.allow_banned", Attribute(true)},
                  {"amp.master_weights.note", Attribute("not a property: ignored")}};
  PrecisionPolicy p = resolveOk(meta);
  EXPECT_EQ(p.optLevel, OptLevel::O2);
  EXPECT_EQ(p.castModelType, CastModelType::Half); // from the preset
  EXPECT_TRUE(p.masterWeights);                    // from the preset
  EXPECT_FALSE(p.keepBatchnormFp32);
  EXPECT_EQ(p.halfType, DType::F16);
  EXPECT_FALSE(p.dynamicLossScale);
  EXPECT_EQ(p.staticLossScale, 128.0); // an int reads as a number
  EXPECT_EQ(p.fp32Ops, (std::vector<std::string>{"softmax", "gelu"}));
  EXPECT_EQ(p.halfOps, (std::vector<std::string>{"add"}));
  EXPECT_TRUE(p.allowBanned);
  EXPECT_EQ(p.opOverride("gelu"), PrecisionCategory::Fp32);
  EXPECT_EQ(p.opOverride("add"), PrecisionCategory::Half);
  EXPECT_EQ(p.opOverride("relu"), std::nullopt);
  EXPECT_EQ(p.overridden,
            (std::set<std::string>{"amp.allow_banned", "amp.fp32_ops", "amp.half_ops",
                                   "amp.half_type", "amp.keep_batchnorm_fp32", "amp.loss_scale",
                                   "amp.loss_scale.value", "amp.opt_level"}));
}

TEST(PrecisionPolicyTest, DynamicSettingsOverride) {
  AttrMap meta = {{"amp.opt_level", Attribute("O1")},
                  {"amp.loss_scale.init", Attribute(1024.0)},
                  {"amp.loss_scale.growth_interval", Attribute(int64_t(100))},
                  {"amp.loss_scale.backoff_factor", Attribute(0.25)},
                  {"amp.loss_scale.max", Attribute(4096.0)}};
  PrecisionPolicy p = resolveOk(meta);
  EXPECT_TRUE(p.dynamicLossScale);
  EXPECT_EQ(p.dynamic.init, 1024.0);
  EXPECT_EQ(p.dynamic.growthInterval, 100);
  EXPECT_EQ(p.dynamic.backoffFactor, 0.25);
  EXPECT_EQ(p.dynamic.maxScale, 4096.0);
  EXPECT_EQ(p.dynamic.growthFactor, 2.0);
}

TEST(PrecisionPolicyTest, WrongTypesAndValuesNameTheKey) {
  std::string errors = resolveErrors({{"amp.opt_level", Attribute("O5")},
                                      {"amp.master_weights", Attribute(int64_t(1))},
                                      {"amp.cast_model_type", Attribute("f16")},
                                      {"amp.loss_scale", Attribute("auto")},
                                      {"amp.loss_scale.growth_interval", Attribute(10.5)},
                                      {"amp.loss_scale.growth_factor", Attribute(0.5)},
                                      {"amp.half_ops", Attribute("linear,conv3d")}});
  EXPECT_NE(errors.find("error: amp.opt_level must be one of O0, O1, O2, O3, got \"O5\""),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("error: amp.master_weights must be a bool, got int 1"), std::string::npos)
      << errors;
  EXPECT_NE(errors.find("error: amp.cast_model_type must be none or half, got \"f16\""),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("error: amp.loss_scale must be \"dynamic\" or \"static\", got \"auto\""),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("error: amp.loss_scale.growth_interval must be an int, got float 10.5"),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("error: amp.loss_scale.growth_factor must be at least 1, got 0.5"),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("error: amp.half_ops names an unknown op 'conv3d'"), std::string::npos)
      << errors;
}

TEST(PrecisionPolicyTest, ContradictionsThatMeanNothingAreErrors) {
  EXPECT_NE(resolveErrors({{"amp.fp32_ops", Attribute("softmax")},
                           {"amp.half_ops", Attribute("relu,softmax")}})
                .find("error: op 'softmax' is in both amp.fp32_ops and amp.half_ops"),
            std::string::npos);
  EXPECT_NE(resolveErrors({{"amp.opt_level", Attribute("O1")},
                           {"amp.loss_scale.init", Attribute(8.0)},
                           {"amp.loss_scale.min", Attribute(16.0)}})
                .find("error: amp.loss_scale.init (8.0) must be within [16.0, 16777216.0]"),
            std::string::npos);
  EXPECT_NE(resolveErrors({{"amp.opt_level", Attribute("O2")},
                           {"amp.loss_scale.min", Attribute(16.0)},
                           {"amp.loss_scale.max", Attribute(8.0)}})
                .find("error: amp.loss_scale.min (16.0) must not exceed amp.loss_scale.max (8.0)"),
            std::string::npos);
  // The same settings under a static scale are not used: not checked.
  resolveOk({{"amp.opt_level", Attribute("O3")},
             {"amp.loss_scale.min", Attribute(16.0)},
             {"amp.loss_scale.max", Attribute(8.0)}});
}

TEST(PrecisionPolicyTest, PropertiesWithoutEffectAreSwitchedOffAndWarned) {
  // master_weights and keep_batchnorm_fp32 mean nothing with fp32 parameters.
  PrecisionPolicy p = resolveOk({{"amp.opt_level", Attribute("O1")},
                                 {"amp.master_weights", Attribute(true)},
                                 {"amp.keep_batchnorm_fp32", Attribute(true)}});
  EXPECT_FALSE(p.masterWeights);
  EXPECT_FALSE(p.keepBatchnormFp32);
  DiagnosticEngine diag;
  warnPolicy(p, diag);
  std::string text = diagText(diag);
  EXPECT_FALSE(diag.hasErrors());
  EXPECT_NE(text.find("warning: amp.master_weights has no effect: parameters stay fp32"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("warning: amp.keep_batchnorm_fp32 has no effect"), std::string::npos) << text;

  // Loss scaling with bf16, f16 on the CPU and the presets themselves: no warning.
  for (const char *level : {"O0", "O1", "O2", "O3"}) {
    DiagnosticEngine quiet;
    warnPolicy(resolveOk({{"amp.opt_level", Attribute(level)},
                          {"amp.half_type", Attribute(level[1] == '2' ? "f16" : "bf16")}}),
               quiet);
    EXPECT_EQ(diagText(quiet), level[1] == '0' ? "warning: amp.half_type has no effect: nothing "
                                                 "runs in half (per_op_casting false and "
                                                 "cast_model_type none)\n"
                                               : "")
        << level;
  }

  DiagnosticEngine staticDiag;
  warnPolicy(resolveOk({{"amp.opt_level", Attribute("O3")},
                        {"amp.loss_scale.growth_interval", Attribute(int64_t(10))}}),
             staticDiag);
  EXPECT_EQ(diagText(staticDiag),
            "warning: amp.loss_scale.growth_interval has no effect with a static loss scale\n");

  DiagnosticEngine both;
  warnPolicy(
      resolveOk({{"amp.opt_level", Attribute("O2")}, {"amp.per_op_casting", Attribute(true)}}),
      both);
  EXPECT_NE(diagText(both).find("warning: amp.per_op_casting with cast_model_type half"),
            std::string::npos);
}

TEST(PrecisionPolicyTest, PrintsOnePropertyALine) {
  EXPECT_EQ(printed(resolveOk({{"amp.opt_level", Attribute("O1")}})),
            "opt_level: O1\n"
            "half_type: bf16\n"
            "cast_model_type: none\n"
            "per_op_casting: true\n"
            "keep_batchnorm_fp32: false\n"
            "master_weights: false\n"
            "loss_scale: dynamic\n"
            "loss_scale.init: 65536.0\n"
            "loss_scale.growth_factor: 2.0\n"
            "loss_scale.backoff_factor: 0.5\n"
            "loss_scale.growth_interval: 2000\n"
            "loss_scale.min: 1.0\n"
            "loss_scale.max: 16777216.0\n"
            "fp32_ops: (none)\n"
            "half_ops: (none)\n"
            "allow_banned: false\n");
  AttrMap meta = {{"amp.opt_level", Attribute("O2")}};
  DiagnosticEngine diag;
  ASSERT_TRUE(setPolicyOverride(meta, "loss_scale", "512", diag)) << diagText(diag);
  ASSERT_TRUE(setPolicyOverride(meta, "fp32_ops", "softmax,layernorm", diag)) << diagText(diag);
  std::string text = printed(resolveOk(meta));
  EXPECT_NE(text.find("cast_model_type: half\n"), std::string::npos) << text;
  EXPECT_NE(text.find("keep_batchnorm_fp32: true\n"), std::string::npos) << text;
  EXPECT_NE(text.find("master_weights: true\n"), std::string::npos) << text;
  EXPECT_NE(text.find("loss_scale: 512.0  (override)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("loss_scale.init"), std::string::npos) << text;
  EXPECT_NE(text.find("fp32_ops: softmax,layernorm  (override)\n"), std::string::npos) << text;
}

TEST(PrecisionPolicyTest, CommandLineOverridesAreCheckedAndTyped) {
  AttrMap meta;
  DiagnosticEngine diag;
  EXPECT_TRUE(setPolicyOverride(meta, "opt_level", "o2", diag));
  EXPECT_TRUE(setPolicyOverride(meta, "amp.keep_batchnorm_fp32", "false", diag));
  EXPECT_TRUE(setPolicyOverride(meta, "master_weights", "True", diag));
  EXPECT_TRUE(setPolicyOverride(meta, "half_type", "fp16", diag));
  EXPECT_TRUE(setPolicyOverride(meta, "cast_model_type", "half", diag));
  EXPECT_TRUE(setPolicyOverride(meta, "loss_scale", "dynamic", diag));
  EXPECT_TRUE(setPolicyOverride(meta, "loss_scale.growth_interval", "500", diag));
  EXPECT_TRUE(setPolicyOverride(meta, "loss_scale.init", "1024", diag));
  EXPECT_TRUE(setPolicyOverride(meta, "half_ops", " relu , add ", diag));
  EXPECT_FALSE(diag.hasErrors()) << diagText(diag);
  EXPECT_EQ(meta["amp.opt_level"], Attribute("O2"));
  EXPECT_EQ(meta["amp.keep_batchnorm_fp32"], Attribute(false));
  EXPECT_EQ(meta["amp.master_weights"], Attribute(true));
  EXPECT_EQ(meta["amp.half_type"], Attribute("f16"));
  EXPECT_EQ(meta["amp.loss_scale"], Attribute("dynamic"));
  EXPECT_EQ(meta["amp.loss_scale.growth_interval"], Attribute(int64_t(500)));
  EXPECT_EQ(meta["amp.loss_scale.init"], Attribute(1024.0));
  EXPECT_EQ(meta["amp.half_ops"], Attribute("relu,add"));
  PrecisionPolicy p = resolveOk(meta);
  EXPECT_EQ(p.halfType, DType::F16);
  EXPECT_EQ(p.dynamic.growthInterval, 500);

  // A number for loss_scale is a static scale.
  EXPECT_TRUE(setPolicyOverride(meta, "loss_scale", "128", diag));
  EXPECT_EQ(meta["amp.loss_scale"], Attribute("static"));
  EXPECT_EQ(meta["amp.loss_scale.value"], Attribute(128.0));
  EXPECT_FALSE(resolveOk(meta).dynamicLossScale);
  EXPECT_EQ(resolveOk(meta).staticLossScale, 128.0);
}

TEST(PrecisionPolicyTest, NumLossesIsAnIntShownOnlyWhenSet) {
  EXPECT_EQ(resolveOk({}).numLosses, 1);
  EXPECT_EQ(printed(resolveOk({})).find("num_losses"), std::string::npos);
  PrecisionPolicy two =
      resolveOk({{"amp.opt_level", Attribute("O1")}, {"amp.num_losses", Attribute(int64_t(2))}});
  EXPECT_EQ(two.numLosses, 2);
  EXPECT_NE(printed(two).find("num_losses: 2  (override)\n"), std::string::npos) << printed(two);
  EXPECT_EQ(resolveErrors({{"amp.num_losses", Attribute(int64_t(0))}}),
            "error: amp.num_losses must be at least 1, got 0\n");
  EXPECT_EQ(resolveErrors({{"amp.num_losses", Attribute(1.5)}}),
            "error: amp.num_losses must be an int, got float 1.5\n");
}

TEST(PrecisionPolicyTest, BadCommandLineValuesAreErrors) {
  auto error = [](llvm::StringRef property, llvm::StringRef value) {
    AttrMap meta;
    DiagnosticEngine diag;
    EXPECT_FALSE(setPolicyOverride(meta, property, value, diag)) << property.str();
    EXPECT_TRUE(meta.count("amp." + property.str()) == 0) << "a rejected value was kept";
    return diagText(diag);
  };
  EXPECT_EQ(error("loss_scale", "0"),
            "error: amp.loss_scale must be \"dynamic\" or a positive number (a static scale), "
            "got \"0\"\n");
  EXPECT_EQ(error("loss_scale", "big"),
            "error: amp.loss_scale must be \"dynamic\" or a positive number (a static scale), "
            "got \"big\"\n");
  EXPECT_EQ(error("master_weights", "maybe"),
            "error: amp.master_weights must be true or false, got \"maybe\"\n");
  EXPECT_EQ(error("opt_level", "O4"), "error: amp.opt_level must be one of O0, O1, O2, O3, got "
                                      "\"O4\"\n");
  EXPECT_EQ(error("half_type", "f8"), "error: amp.half_type must be bf16 or f16, got \"f8\"\n");
  EXPECT_EQ(error("fp32_ops", "softmax,sofmax"),
            "error: amp.fp32_ops names an unknown op 'sofmax'\n");
  EXPECT_EQ(error("loss_scale.growth_interval", "0"),
            "error: amp.loss_scale.growth_interval must be at least 1, got 0\n");
  EXPECT_EQ(error("loss_scale.backoff_factor", "1.5"),
            "error: amp.loss_scale.backoff_factor must be between 0 and 1 (exclusive), got 1.5\n");
  std::string unknown = error("keep_bn_fp32", "true");
  EXPECT_EQ(unknown.rfind("error: unknown precision property 'keep_bn_fp32' (known properties: "
                          "opt_level, half_type,",
                          0),
            0u)
      << unknown;
}

//===----------------------------------------------------------------------===//
// The model file's amp: section
//===----------------------------------------------------------------------===//

std::string modelWithAmp(llvm::StringRef amp) {
  return (R"(model: m
batch: 2
inputs: {x: {shape: [B, 3]}, y: {shape: [B, 2]}}
layers:
  - linear: {out_features: 2, name: out}
  - softmax: {name: probs, precision: fp32}
loss: {mse_loss: {input: probs, target: y}}
amp:
)" + amp)
      .str();
}

TEST(PrecisionPolicyTest, ModelFileAmpSectionBecomesMetaKeys) {
  DiagnosticEngine diag;
  auto g = loadModelString(modelWithAmp(R"(  opt_level: O2
  half_type: f16
  keep_batchnorm_fp32: false
  master_weights: true
  loss_scale: {init: 1024, growth_interval: 10}
  fp32_ops: [softmax, layernorm]
  half_ops: add
  allow_banned: true
)"),
                           "m.yaml", diag);
  ASSERT_TRUE(g) << diagText(diag);
  const AttrMap &meta = g->meta();
  EXPECT_EQ(meta.at("amp.opt_level"), Attribute("O2"));
  EXPECT_EQ(meta.at("amp.half_type"), Attribute("f16"));
  EXPECT_EQ(meta.at("amp.keep_batchnorm_fp32"), Attribute(false));
  EXPECT_EQ(meta.at("amp.master_weights"), Attribute(true));
  EXPECT_EQ(meta.at("amp.loss_scale"), Attribute("dynamic"));
  EXPECT_EQ(meta.at("amp.loss_scale.init"), Attribute(1024.0));
  EXPECT_EQ(meta.at("amp.loss_scale.growth_interval"), Attribute(int64_t(10)));
  EXPECT_EQ(meta.count("amp.loss_scale.max"), 0u) << "unset settings stay the preset's";
  EXPECT_EQ(meta.at("amp.fp32_ops"), Attribute("softmax,layernorm"));
  EXPECT_EQ(meta.at("amp.half_ops"), Attribute("add"));
  EXPECT_EQ(meta.at("amp.allow_banned"), Attribute(true));
  PrecisionPolicy p = resolveOk(meta);
  EXPECT_EQ(p.dynamic.init, 1024.0);
  EXPECT_EQ(p.halfType, DType::F16);
  // A layer's precision: key is the node's own override.
  const Node *probs = g->lookup("probs")->definingNode();
  EXPECT_EQ(probs->precisionOverride(), PrecisionOverride::Fp32);

  auto staticScale = loadModelString(modelWithAmp("  loss_scale: 128\n"), "m.yaml", diag);
  ASSERT_TRUE(staticScale) << diagText(diag);
  EXPECT_EQ(staticScale->meta().at("amp.loss_scale"), Attribute("static"));
  EXPECT_EQ(staticScale->meta().at("amp.loss_scale.value"), Attribute(128.0));
}

TEST(PrecisionPolicyTest, ModelFileAmpErrorsPointAtTheKey) {
  auto firstError = [](llvm::StringRef amp) {
    DiagnosticEngine diag;
    EXPECT_FALSE(loadModelString(modelWithAmp(amp), "m.yaml", diag)) << amp.str();
    return diag.diagnostics().empty() ? std::string("<none>") : diag.diagnostics()[0].str();
  };
  EXPECT_EQ(firstError("  opt_level: O7\n"),
            "m.yaml:9:14: error: 'opt_level' must be one of O0, O1, O2, O3, got 'O7'");
  EXPECT_EQ(firstError("  keep_batchnorm: true\n"),
            "m.yaml:9:3: error: unknown key 'keep_batchnorm' in 'amp'");
  EXPECT_EQ(firstError("  fp32_ops: [softmax, sofmax]\n"),
            "m.yaml:9:23: error: unknown op 'sofmax' in 'fp32_ops'; did you mean 'softmax'?");
  EXPECT_EQ(firstError("  loss_scale: -4\n"),
            "m.yaml:9:15: error: 'loss_scale' must be dynamic, a positive number (a static "
            "scale) or a map of dynamic settings, got '-4'");
  EXPECT_EQ(firstError("  loss_scale: {backoff_factor: 2}\n"),
            "m.yaml:9:32: error: 'backoff_factor' must be > 0.0 and < 1.0, got '2'");
  EXPECT_EQ(firstError("  loss_scale: {init: 8, min: 16}\n"),
            "m.yaml:9:15: error: 'init' (8.0) must be within [16.0, 16777216.0] in 'loss_scale'");
  EXPECT_EQ(firstError("  master_weights: yes\n"),
            "m.yaml:9:19: error: 'master_weights' must be true or false, got 'yes'");
  EXPECT_EQ(firstError("  fp32_ops: softmax\n  half_ops: [softmax]\n"),
            "m.yaml:10:13: error: op 'softmax' is in both 'fp32_ops' and 'half_ops'");
}

} // namespace
