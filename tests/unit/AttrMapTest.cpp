//===- AttrMapTest.cpp - The flat attribute map keeps std::map's behaviour ===//
#include "ir/AttrMap.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace ampc;

namespace {

std::vector<std::string> names(const AttrMap &m) {
  std::vector<std::string> out;
  for (const auto &[name, value] : m)
    out.push_back(name.str());
  return out;
}

TEST(AttrMapTest, IteratesInNameOrderWhateverTheInsertionOrder) {
  AttrMap m{{"stride", Attribute(2)}, {"bias", Attribute(true)}, {"amp.reason", "category"}};
  m["kernel"] = Attribute(3);
  m.emplace("a", Attribute(1.5));
  EXPECT_EQ(names(m), (std::vector<std::string>{"a", "amp.reason", "bias", "kernel", "stride"}));
  EXPECT_EQ(m.size(), 5u);
}

TEST(AttrMapTest, EmplaceKeepsAndInsertOrAssignReplaces) {
  AttrMap m;
  EXPECT_TRUE(m.emplace("to", Attribute(DType::BF16)).second);
  auto [it, inserted] = m.emplace("to", Attribute(DType::F16));
  EXPECT_FALSE(inserted);
  EXPECT_EQ(it->second.getDType(), DType::BF16);
  EXPECT_FALSE(m.insert_or_assign("to", Attribute(DType::F16)).second);
  EXPECT_EQ(m.at("to").getDType(), DType::F16);
  m["to"] = Attribute(DType::F32);
  EXPECT_EQ(m.at("to").getDType(), DType::F32);
  EXPECT_EQ(m.size(), 1u);
}

TEST(AttrMapTest, FindCountAndErase) {
  AttrMap m{{"x", Attribute(1)}, {"y", Attribute(2)}, {"z", Attribute(3)}};
  EXPECT_EQ(m.count("y"), 1u);
  EXPECT_EQ(m.find("w"), m.end());
  EXPECT_EQ(m.erase("y"), 1u);
  EXPECT_EQ(m.erase("y"), 0u);
  EXPECT_FALSE(m.contains("y"));
  m.erase(m.find("x"));
  EXPECT_EQ(names(m), (std::vector<std::string>{"z"}));
  m.clear();
  EXPECT_TRUE(m.empty());
}

TEST(AttrMapTest, NamesAreInternedSoMapsShareThem) {
  std::string key = "transpose_a";
  AttrMap a, b;
  a[key] = Attribute(true);
  key[0] = 'X'; // the map holds its own copy of the name
  b["transpose_a"] = Attribute(true);
  EXPECT_EQ(a.begin()->first, "transpose_a");
  EXPECT_EQ(a.begin()->first.data(), b.begin()->first.data());
  EXPECT_EQ(internAttrName("transpose_a").data(), a.begin()->first.data());
}

TEST(AttrMapTest, EqualityComparesNamesAndValues) {
  AttrMap a{{"dims", Attribute(std::vector<int64_t>{0, 2})}, {"keepdim", Attribute(false)}};
  AttrMap b{{"keepdim", Attribute(false)}, {"dims", Attribute(std::vector<int64_t>{0, 2})}};
  EXPECT_EQ(a, b);
  b["keepdim"] = Attribute(true);
  EXPECT_NE(a, b);
  AttrMap c = a; // copies share the interned names
  EXPECT_EQ(c, a);
}

} // namespace
