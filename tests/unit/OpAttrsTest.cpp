//===- OpAttrsTest.cpp - The registry's attributes are OpAttrs.def's -------===//
//
// Each built-in op's attributes are declared once, in ir/OpAttrs.def, with
// their C++ types; the registry row takes its specs from the table and the
// typed views (attrs::BatchNorm2d(node).eps()) read through it. These tests
// fail if the two drift apart (someone adds an .attr(...) to a row in
// ir/ops/, or edits a default in one place only), if a view's default
// differs from the registry's, or if a kernel or pass goes back to reading
// attributes by name.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "ir/Builder.h"
#include "ir/OpRegistry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

using namespace ampc;

namespace {

std::string describe(const AttrSpec &s) {
  return s.name + ":" + attrTypeName(s.type).str() + "=" +
         (s.defaultValue ? s.defaultValue->str() : std::string("<required>"));
}

TEST(OpAttrsTest, RegistryAttributesAreTheTypedDeclaration) {
  for (const OpInfo *op : OpRegistry::builtin().all()) {
    if (op->kind == OpKind::Custom)
      continue;
    std::vector<AttrSpec> declared = attrs::declaredSpecs(op->kind);
    ASSERT_EQ(op->attrs.size(), declared.size()) << op->name;
    for (size_t i = 0; i < declared.size(); ++i) {
      const AttrSpec &r = op->attrs[i], &d = declared[i];
      EXPECT_EQ(r.name, d.name) << op->name;
      EXPECT_EQ(r.type, d.type) << op->name << "." << r.name;
      EXPECT_EQ(r.defaultValue.has_value(), d.defaultValue.has_value())
          << op->name << "." << r.name;
      if (r.defaultValue && d.defaultValue)
        EXPECT_EQ(*r.defaultValue, *d.defaultValue) << describe(r) << " vs " << describe(d);
      // A default has the declared type (a Float default is a double, not an int).
      if (d.defaultValue)
        EXPECT_EQ(d.defaultValue->type(), d.type) << op->name << "." << d.name;
    }
  }
}

// The views fall back to the registry's defaults: an empty attribute map
// reads as the defaults the registry fills in.
TEST(OpAttrsTest, ViewsReadTheRegistryDefaults) {
  AttrMap none;
  attrs::BatchNorm2d bn(none);
  EXPECT_EQ(bn.eps(), 1e-5);
  EXPECT_EQ(bn.momentum(), 0.1);
  EXPECT_TRUE(bn.training());
  EXPECT_EQ(attrs::AdamUpdate(none).eps(), 1e-8);
  EXPECT_EQ(attrs::Gelu(none).approximate(), GeluApproximate::None);
  EXPECT_EQ(attrs::GeluGrad(none).approximate(), GeluApproximate::None);
  EXPECT_EQ(attrs::Conv2d(none).stride(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(attrs::MaxPool2d(none).padding(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(attrs::Fill(none).dtype(), DType::F32);
  EXPECT_EQ(attrs::LearningRate(none).schedule(), LrScheduleKind::Constant);
  EXPECT_EQ(attrs::Clamp(none).min(), -attrs::kInfinity);

  // Every defaulted attribute of every op: the view's raw attribute (what
  // its accessor converts) equals the registry's default, checked through
  // a map holding exactly the registry's defaults.
  for (const OpInfo *op : OpRegistry::builtin().all())
    for (const AttrSpec &s : op->attrs)
      if (s.defaultValue) {
        AttrMap m;
        m[s.name] = *s.defaultValue;
        EXPECT_EQ(attrs::detail::lookup(m, s.name, nullptr), *s.defaultValue);
      }
}

TEST(OpAttrsTest, ViewsReadSetValuesAndEnums) {
  AttrMap m{{"eps", Attribute(1e-3)}, {"momentum", Attribute(int64_t(1))}, {"training", false}};
  attrs::BatchNorm2d bn(m);
  EXPECT_EQ(bn.eps(), 1e-3);
  EXPECT_EQ(bn.momentum(), 1.0); // an Int written for a Float reads widened
  EXPECT_FALSE(bn.training());
  AttrMap g{{"approximate", Attribute("tanh")}};
  EXPECT_EQ(attrs::Gelu(g).approximate(), GeluApproximate::Tanh);
  EXPECT_EQ(attrs::parseEnum<GeluApproximate>("erf"), std::nullopt);
  EXPECT_EQ(attrs::enumSpelling(LrScheduleKind::Cosine), "cosine");
}

// Kernels and passes read attributes through the typed views: no
// `attr("name")` string reads and no string comparison of an enum attribute.
TEST(OpAttrsTest, KernelsAndPassesDoNotReadAttributesByName) {
  const std::regex byName(R"re(attr\("[a-z_0-9]+"\)|== *"(tanh|step|cosine)")re");
  std::filesystem::path root(AMPC_SOURCE_DIR);
  std::vector<std::string> offenders;
  for (const char *dir : {"kernels", "passes"}) {
    ASSERT_TRUE(std::filesystem::is_directory(root / dir)) << (root / dir);
    for (const auto &e : std::filesystem::recursive_directory_iterator(root / dir)) {
      std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh")
        continue;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n)
        if (std::regex_search(line, byName))
          offenders.push_back(e.path().string() + ":" + std::to_string(n) + ": " + line);
    }
  }
  std::ostringstream os;
  for (const std::string &o : offenders)
    os << o << "\n";
  EXPECT_TRUE(offenders.empty()) << os.str();
}

} // namespace
