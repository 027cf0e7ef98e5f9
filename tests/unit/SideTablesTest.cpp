// The graph's value-name table, and the id-indexed side tables passes keep
// (ir/IdMap.h).
#include "ir/Builder.h"
#include "ir/Graph.h"
#include "ir/IdMap.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

using namespace ampc;

namespace {

/// The one op these tests build: any op with one result would do.
const OpInfo &relu() { return OpRegistry::builtin().get(OpKind::Relu); }

TEST(GraphNames, AgreesWithAMapThroughGrowthRenamesAndErases) {
  // Enough names to grow the table many times over, renames that leave
  // tombstones behind and reuse freed names (numeric ones too, which fresh
  // names must then avoid), and erased nodes: after every step the graph's
  // lookups agree with a plain map kept alongside.
  Graph g;
  DiagnosticEngine diag;
  std::map<std::string, Value *> model;
  Value *x = g.addInput("x", TensorType(DType::F32, {2}));
  model["x"] = x;
  std::vector<Node *> nodes;
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    unsigned choice = rng() % 10;
    if (choice < 6 || nodes.empty()) {
      // A named result or a fresh numeric one.
      std::string name = rng() % 2 ? "v" + std::to_string(step) + ".fc.weight" : "";
      Node *n = buildNode(g, relu(), {x}, {}, {}, diag, {name});
      ASSERT_NE(n, nullptr);
      if (!name.empty())
        EXPECT_EQ(n->result()->name(), name);
      EXPECT_EQ(model.count(n->result()->name().str()), 0u) << "a fresh name clashed";
      model[n->result()->name().str()] = n->result();
      nodes.push_back(n);
    } else if (choice < 9) {
      // Rename to a name that was freed before, or to a new one.
      Node *n = nodes[rng() % nodes.size()];
      std::string old = n->result()->name().str();
      std::string fresh =
          rng() % 2 ? "r" + std::to_string(rng() % 3000) : std::to_string(rng() % 30000);
      if (!g.isNameFree(fresh)) {
        EXPECT_TRUE(model.count(fresh));
        continue;
      }
      EXPECT_FALSE(model.count(fresh));
      g.renameValue(n->result(), fresh);
      model.erase(old);
      model[fresh] = n->result();
      EXPECT_EQ(n->result()->name(), fresh);
      EXPECT_TRUE(g.isNameFree(old));
    } else {
      size_t i = rng() % nodes.size();
      model.erase(nodes[i]->result()->name().str());
      g.eraseNode(nodes[i]);
      nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  for (const auto &[name, v] : model)
    EXPECT_EQ(g.lookup(name), v) << name;
  // Names nobody holds, including freed ones, find nothing.
  for (int i = 0; i < 30000; ++i)
    for (std::string name : {"r" + std::to_string(i), std::to_string(i)}) {
      EXPECT_EQ(g.lookup(name) != nullptr, model.count(name) == 1) << name;
      EXPECT_EQ(g.isNameFree(name), model.count(name) == 0) << name;
    }
  EXPECT_EQ(g.lookup(""), nullptr);
}

TEST(GraphNames, SwappedNamesFindTheirNewHolders) {
  Graph g;
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {2}));
  Node *a = buildNode(g, relu(), {x}, {}, {}, diag, {"w.next"});
  Node *b = buildNode(g, relu(), {x}, {}, {}, diag, {"w.master.next"});
  ASSERT_TRUE(a && b);
  g.swapNames(a->result(), b->result());
  EXPECT_EQ(a->result()->name(), "w.master.next");
  EXPECT_EQ(b->result()->name(), "w.next");
  EXPECT_EQ(g.lookup("w.next"), b->result());
  EXPECT_EQ(g.lookup("w.master.next"), a->result());
  g.eraseNode(a); // the name a holds now goes with it
  EXPECT_TRUE(g.isNameFree("w.master.next"));
  EXPECT_EQ(g.lookup("w.next"), b->result());
}

TEST(GraphNames, FreshNumbersSkipNumericNamesGivenExplicitly) {
  // Fresh names live in an array by number, explicit ones in the hash
  // table; a numeric name given explicitly (the textual IR's %1) must keep
  // the fresh ones off it, and a freed fresh number is free for anyone.
  Graph g;
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {2}));
  Node *one = buildNode(g, relu(), {x}, {}, {}, diag, {"1"});
  Node *f0 = buildNode(g, relu(), {x}, {}, {}, diag);
  Node *f2 = buildNode(g, relu(), {x}, {}, {}, diag);
  ASSERT_TRUE(one && f0 && f2);
  EXPECT_EQ(f0->result()->name(), "0");
  EXPECT_EQ(f2->result()->name(), "2");
  EXPECT_EQ(g.lookup("1"), one->result());
  EXPECT_EQ(g.lookup("0"), f0->result());
  EXPECT_EQ(g.lookup("2"), f2->result());
  // Not the canonical spelling of a number: a different name.
  EXPECT_EQ(g.lookup("02"), nullptr);
  EXPECT_TRUE(g.isNameFree("02"));
  EXPECT_EQ(g.uniqueName("2"), "2_1");

  // A freed fresh number can be claimed by an explicit name and renamed to.
  llvm::StringRef f2Name = f2->result()->name();
  g.eraseNode(f2);
  EXPECT_EQ(f2Name, "2") << "a name read before an erase stays readable";
  EXPECT_TRUE(g.isNameFree("2"));
  g.renameValue(f0->result(), "2");
  EXPECT_EQ(g.lookup("2"), f0->result());
  EXPECT_TRUE(g.isNameFree("0"));
  EXPECT_EQ(g.lookup("0"), nullptr);
  // ... and a fresh name never takes it back.
  Node *f3 = buildNode(g, relu(), {x}, {}, {}, diag);
  ASSERT_NE(f3, nullptr);
  EXPECT_EQ(f3->result()->name(), "3");
  EXPECT_EQ(g.freshName(), "4");
}

TEST(GraphNames, SwapsBetweenFreshAndExplicitNames) {
  Graph g;
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {2}));
  Node *fresh = buildNode(g, relu(), {x}, {}, {}, diag);
  Node *named = buildNode(g, relu(), {x}, {}, {}, diag, {"w.next"});
  ASSERT_TRUE(fresh && named);
  ASSERT_EQ(fresh->result()->name(), "0");
  g.swapNames(fresh->result(), named->result());
  EXPECT_EQ(fresh->result()->name(), "w.next");
  EXPECT_EQ(named->result()->name(), "0");
  EXPECT_EQ(g.lookup("0"), named->result());
  EXPECT_EQ(g.lookup("w.next"), fresh->result());
  g.renameValue(named->result(), "w.old");
  EXPECT_TRUE(g.isNameFree("0"));
  EXPECT_EQ(g.lookup("w.old"), named->result());
  g.eraseNode(fresh);
  EXPECT_TRUE(g.isNameFree("w.next"));
  EXPECT_EQ(g.lookup("w.old"), named->result());
}

TEST(IdMap, MissingKeysReadAsDefaultAndTheTableGrowsForNewIds) {
  Graph g;
  DiagnosticEngine diag;
  Value *x = g.addInput("x", TensorType(DType::F32, {2}));
  IdMap<Value, Value *> map(g.idBound());
  IdSet<Value> set(g.idBound());
  EXPECT_EQ(map.lookup(x), nullptr);
  EXPECT_FALSE(set.contains(x));
  map[x] = x;
  EXPECT_TRUE(set.insert(x));
  EXPECT_FALSE(set.insert(x));
  // Values made after the tables were sized: past the end, then inserted.
  std::vector<Value *> later;
  for (int i = 0; i < 100; ++i) {
    Node *n = buildNode(g, relu(), {x}, {}, {}, diag);
    ASSERT_NE(n, nullptr);
    later.push_back(n->result());
  }
  EXPECT_EQ(map.lookup(later.back()), nullptr);
  EXPECT_FALSE(set.contains(later.back()));
  for (size_t i = 0; i < later.size(); i += 2) {
    map[later[i]] = x;
    set.insert(later[i]);
  }
  for (size_t i = 0; i < later.size(); ++i) {
    EXPECT_EQ(map.lookup(later[i]), i % 2 ? nullptr : x) << i;
    EXPECT_EQ(set.count(later[i]), i % 2 ? 0u : 1u) << i;
  }
  EXPECT_EQ(map.lookup(x), x);
  EXPECT_TRUE(set.contains(x));
}

} // namespace
