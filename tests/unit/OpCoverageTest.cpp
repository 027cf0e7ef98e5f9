//===- OpCoverageTest.cpp - Every registry op has its pieces ---------------===//
//
// What docs/adding-an-op.md asks of a new op, checked over the whole
// registry so that a forgotten piece fails here: a reference kernel, the
// gradient rule the pointwise table promises, and test cases (an inference
// case in OpInferenceTest.cpp and a kernel test that runs it). Whether a
// forward op has a gradient rule at all is AutodiffTest's
// EveryForwardOpHasAGradientRule.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRegistry.h"
#include "kernels/reference/ReferenceKernels.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace ampc;

namespace {

std::vector<const OpInfo *> builtinOps() {
  std::vector<const OpInfo *> ops;
  for (const OpInfo *op : OpRegistry::builtin().all())
    if (op->kind != OpKind::Custom)
      ops.push_back(op);
  return ops;
}

/// Every tests/unit/*Test.cpp, by file name.
std::map<std::string, std::string> unitTestSources() {
  std::map<std::string, std::string> sources;
  std::filesystem::path dir = std::filesystem::path(AMPC_SOURCE_DIR) / "tests" / "unit";
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || !name.ends_with("Test.cpp"))
      continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    sources[name] = text.str();
  }
  return sources;
}

bool quotes(const std::string &source, const std::string &opName) {
  return source.find('"' + opName + '"') != std::string::npos;
}

} // namespace

TEST(OpCoverage, EveryOpHasAReferenceKernel) {
  // Collectives run through the runtime's communicator instead
  // (runtime/dist/CollectiveKernel.cpp; DataParallelTest).
  for (const OpInfo *op : builtinOps())
    EXPECT_EQ(kernels::referenceKernel(op->kind) == nullptr, op->collective)
        << op->name << (op->collective ? " is a collective with" : " has no")
        << " reference kernel";
}

TEST(OpCoverage, PointwiseActivationsHaveTheirGeneratedGradients){
// Each activation row of ir/Pointwise.def: the forward op has a rule, the
// backward op is an elementwise op of (grad, saved) with none of its own.
#define AMPC_POINTWISE_GRAD(Op, GradOp, Fn, Saved)                                                 \
  {                                                                                                \
    const OpInfo &forward = OpRegistry::builtin().get(OpKind::Op);                                 \
    const OpInfo &backward = OpRegistry::builtin().get(OpKind::GradOp);                            \
    EXPECT_TRUE(forward.gradient) << forward.name;                                                 \
    EXPECT_TRUE(forward.elementwise) << forward.name;                                              \
    EXPECT_FALSE(backward.gradient) << backward.name;                                              \
    EXPECT_TRUE(backward.elementwise) << backward.name;                                            \
    EXPECT_EQ(backward.operands.size(), 2u) << backward.name;                                      \
    EXPECT_EQ(backward.attrs.size(), forward.attrs.size()) << backward.name;                       \
  }
#include "ir/Pointwise.def"
}

TEST(OpCoverage, EveryOpHasTestCases) {
  // An inference case, and a test besides the registry-wide lists (this file,
  // OpInferenceTest's, AutodiffTest's) that runs the op.
  std::map<std::string, std::string> sources = unitTestSources();
  ASSERT_TRUE(sources.count("OpInferenceTest.cpp")) << "tests/unit not found from " AMPC_SOURCE_DIR;
  for (const OpInfo *op : builtinOps()) {
    EXPECT_TRUE(quotes(sources["OpInferenceTest.cpp"], op->name))
        << op->name << " has no case in OpInferenceTest.cpp";
    bool run = false;
    for (const auto &[file, text] : sources)
      if (file != "OpCoverageTest.cpp" && file != "OpInferenceTest.cpp" &&
          file != "AutodiffTest.cpp" && quotes(text, op->name))
        run = true;
    EXPECT_TRUE(run) << op->name << " is not run by any unit test";
  }
}
