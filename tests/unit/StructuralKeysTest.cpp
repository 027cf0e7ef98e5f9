//===- StructuralKeysTest.cpp - Which values of two levels pair up --------===//
//
// Slices of one tensor (a fused q/k/v projection split three ways) differ
// only in their attributes: each must have a key of its own, or `ampc
// compare` measures q against k. Nodes that compute the same thing twice
// pair one to one. What the levels differ in (casts, a fill's dtype, the
// precision pass's annotations) must not change a key.
//
//===----------------------------------------------------------------------===//
#include "passes/StructuralKeys.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

using namespace ampc;

std::unique_ptr<Graph> parse(const std::string &text) {
  DiagnosticEngine diag;
  std::unique_ptr<Graph> g = parseGraph(text, "test.ir", diag);
  EXPECT_TRUE(g) << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  if (g) {
    EXPECT_TRUE(verifyGraph(*g, diag))
        << (diag.diagnostics().empty() ? "" : diag.diagnostics()[0].str());
  }
  return g;
}

uint64_t keyOf(const Graph &g, const llvm::DenseMap<const Value *, uint64_t> &keys,
               const char *name) {
  const Value *v = g.lookup(name);
  EXPECT_TRUE(v) << name;
  return v ? keys.lookup(v) : 0;
}

/// One projection to 3x8 features, split into q, k and v along the last
/// axis; `dt` is the compute dtype, `castIn` casts the input first (as O1
/// and O2 do).
std::string qkv(const std::string &dt, bool castIn) {
  std::string x = castIn ? "%xh" : "%x";
  std::string s = R"(graph @qkv {
  input %x : f32[2,4]
  param %w : )" + dt +
                  R"([24,4] init uniform(-1, 1)
)";
  if (castIn)
    s += "  %xh = cast(%x) {to = " + dt + "} : (f32[2,4]) -> " + dt + "[2,4]\n";
  auto t = [&](const char *shape) { return dt + shape; };
  s += "  %p = matmul(" + x + ", %w) {transpose_b = true} : (" + t("[2,4]") + ", " + t("[24,4]") +
       ") -> " + t("[2,24]") + "\n";
  const char *names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i)
    s += "  %" + std::string(names[i]) +
         " = slice(%p) {axis = 1, start = " + std::to_string(8 * i) +
         ", end = " + std::to_string(8 * i + 8) + "} : (" + t("[2,24]") + ") -> " + t("[2,8]") +
         "\n";
  s += "  %r1 = relu(%q) : (" + t("[2,8]") + ") -> " + t("[2,8]") + "\n";
  s += "  %r2 = relu(%q) : (" + t("[2,8]") + ") -> " + t("[2,8]") + "\n";
  s += "  %z = fill() {shape = [2, 8], value = 0.0, dtype = " + dt + "} : () -> " + t("[2,8]") +
       "\n";
  s += "  output %k\n  output %v\n  output %r1\n  output %r2\n  output %z\n}\n";
  return s;
}

TEST(StructuralKeys, SlicesOfOneTensorHaveKeysOfTheirOwn) {
  auto g = parse(qkv("f32", false));
  ASSERT_TRUE(g);
  auto keys = computeStructuralKeys(*g);
  std::set<uint64_t> distinct;
  for (const char *name : {"q", "k", "v", "p"})
    distinct.insert(keyOf(*g, keys, name));
  EXPECT_EQ(distinct.size(), 4u) << "q, k and v are slices of p at other offsets";
}

TEST(StructuralKeys, NodesThatComputeTheSamePairOneToOne) {
  auto g = parse(qkv("f32", false));
  ASSERT_TRUE(g);
  auto keys = computeStructuralKeys(*g);
  EXPECT_NE(keyOf(*g, keys, "r1"), keyOf(*g, keys, "r2"));
}

TEST(StructuralKeys, CastsDtypesAndAnnotationsDoNotChangeAKey) {
  auto f32 = parse(qkv("f32", false));
  auto bf16 = parse(qkv("bf16", true));
  ASSERT_TRUE(f32 && bf16);
  // The precision pass's annotation on a node is not what it computes.
  for (Node &n : bf16->nodes())
    if (n.kind() == OpKind::Slice)
      n.setAttr("precision", Attribute(DType::BF16));
  auto a = computeStructuralKeys(*f32), b = computeStructuralKeys(*bf16);
  for (const char *name : {"p", "q", "k", "v", "r1", "r2", "z"})
    EXPECT_EQ(keyOf(*f32, a, name), keyOf(*bf16, b, name)) << name;
  // And each still pairs with its own counterpart only.
  EXPECT_NE(keyOf(*f32, a, "q"), keyOf(*bf16, b, "k"));
  EXPECT_NE(keyOf(*f32, a, "r1"), keyOf(*bf16, b, "r2"));
}

TEST(StructuralKeys, AnAttributeLeftAtItsDefaultKeysAsWrittenOut) {
  auto g = parse(R"(graph @m {
  input %x : f32[2,4]
  input %w : f32[4,4]
  %a = matmul(%x, %w) : (f32[2,4], f32[4,4]) -> f32[2,4]
  %b = matmul(%x, %w) {transpose_b = false} : (f32[2,4], f32[4,4]) -> f32[2,4]
  %c = matmul(%x, %w) {transpose_b = true} : (f32[2,4], f32[4,4]) -> f32[2,4]
  output %a
  output %b
  output %c
}
)");
  ASSERT_TRUE(g);
  auto keys = computeStructuralKeys(*g);
  // %b computes what %a does (its second such node); %c another thing.
  auto other = parse(R"(graph @m {
  input %x : f32[2,4]
  input %w : f32[4,4]
  %a = matmul(%x, %w) {transpose_b = false} : (f32[2,4], f32[4,4]) -> f32[2,4]
  output %a
}
)");
  ASSERT_TRUE(other);
  auto otherKeys = computeStructuralKeys(*other);
  EXPECT_EQ(keyOf(*g, keys, "a"), keyOf(*other, otherKeys, "a"));
  EXPECT_NE(keyOf(*g, keys, "c"), keyOf(*g, keys, "a"));
  EXPECT_NE(keyOf(*g, keys, "c"), keyOf(*g, keys, "b"));
}

TEST(StructuralKeys, OnlyAScalarFillOfOneIsTheLossSeed) {
  // A backward scalar fill of 0 (the gradient of where's constant -inf in
  // a causal mask) is another quantity than d(loss)/d(loss): paired with
  // the seed, O0 against O0 would report an error of 1.
  auto g = parse(R"(graph @seeds {
  %seed = fill() {shape = [], value = 1.0, dtype = f32} : () -> f32[] role(backward)
  %zero = fill() {shape = [], value = 0.0, dtype = f32} : () -> f32[] role(backward)
  output %seed
  output %zero
}
)");
  ASSERT_TRUE(g);
  auto keys = computeStructuralKeys(*g);
  EXPECT_NE(keyOf(*g, keys, "seed"), keyOf(*g, keys, "zero"));
}

} // namespace
