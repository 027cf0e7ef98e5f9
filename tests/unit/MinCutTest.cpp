//===- MinCutTest.cpp - The minimum s-t cut behind assign-precision -------===//
//
// Small networks whose minimum cut is known by hand, then random ones checked
// against brute force: the returned sink side must be a minimum cut, and the
// smallest one (the intersection of the sink sides of all minimum cuts).
//
//===----------------------------------------------------------------------===//
#include "passes/MinCut.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace ampc {
namespace {

constexpr unsigned S = MinCut::kSource, T = MinCut::kSink;
constexpr int64_t Inf = MinCut::kInfinity;

struct Arc {
  unsigned from, to;
  int64_t cap;
};

/// Builds the network with `numNodes` nodes besides the terminals and solves it.
std::vector<bool> solve(unsigned numNodes, const std::vector<Arc> &arcs) {
  MinCut cut;
  for (unsigned i = 0; i < numNodes; ++i)
    cut.addNode();
  for (const Arc &a : arcs)
    cut.addArc(a.from, a.to, a.cap);
  return cut.sinkSide();
}

/// The capacity of the arcs from the source side to the sink side, saturating
/// at Inf (several infinite arcs must not overflow).
int64_t cutValue(const std::vector<Arc> &arcs, const std::vector<bool> &sink) {
  int64_t total = 0;
  for (const Arc &a : arcs)
    if (!sink[a.from] && sink[a.to])
      total = std::min(Inf, total + std::min(Inf, a.cap));
  return total;
}

TEST(MinCutTest, TextbookNetwork) {
  // The flow network of Cormen et al., figure 26.1: maximum flow 23, the
  // minimum cut separates {v3, t} from the rest.
  enum : unsigned { V1 = 2, V2, V3, V4 };
  std::vector<Arc> arcs = {{S, V1, 16}, {S, V2, 13}, {V1, V3, 12}, {V2, V1, 4}, {V2, V4, 14},
                           {V3, V2, 9}, {V3, T, 20}, {V4, V3, 7},  {V4, T, 4}};
  std::vector<bool> sink = solve(4, arcs);
  EXPECT_EQ(sink, (std::vector<bool>{false, true, false, false, true, false}));
  EXPECT_EQ(cutValue(arcs, sink), 23);
}

TEST(MinCutTest, TiesTakeTheSmallestSinkSide) {
  // s -1-> a -1-> t: cutting either arc costs 1; a stays with the source.
  std::vector<Arc> arcs = {{S, 2, 1}, {2, T, 1}};
  EXPECT_EQ(solve(1, arcs), (std::vector<bool>{false, true, false}));
}

TEST(MinCutTest, InfiniteArcsAreNeverCut) {
  // a -inf-> b and c -inf-> t. Cutting s->a costs 5, as does cutting b->t
  // and a->c (3 + 2); the latter has the smaller sink side {c, t}.
  enum : unsigned { A = 2, B, C };
  std::vector<Arc> arcs = {{S, A, 5}, {A, B, Inf}, {B, T, 3}, {A, C, 2}, {C, T, Inf}};
  std::vector<bool> sink = solve(3, arcs);
  EXPECT_EQ(sink, (std::vector<bool>{false, true, false, false, true}));
  EXPECT_EQ(cutValue(arcs, sink), 5);
}

TEST(MinCutTest, IndependentComponentsAndIsolatedNodes) {
  // Two components joined only through the terminals, and a node with no
  // arcs (it cannot reach the sink: source side).
  enum : unsigned { A = 2, B, C, D, Lone };
  std::vector<Arc> arcs = {{S, A, 2}, {A, B, 7}, {B, T, 9},  // cut s->a: 2
                           {S, C, 8}, {C, D, 3}, {D, T, 6}}; // cut c->d: 3
  std::vector<bool> sink = solve(5, arcs);
  EXPECT_EQ(sink, (std::vector<bool>{false, true, true, true, false, true, false}));
  EXPECT_EQ(cutValue(arcs, sink), 5);
}

TEST(MinCutTest, MatchesBruteForceOnRandomNetworks) {
  std::mt19937 rng(16);
  for (int trial = 0; trial < 300; ++trial) {
    unsigned n = 1 + rng() % 7; // nodes besides the terminals
    unsigned total = n + 2;
    std::vector<Arc> arcs;
    unsigned numArcs = rng() % (3 * total);
    for (unsigned i = 0; i < numArcs; ++i) {
      unsigned from = rng() % total, to = rng() % total;
      // Infinite arcs only into non-source nodes from non-source nodes, so
      // putting every node on the sink side is always a finite cut.
      bool infinite = from != S && to != S && rng() % 5 == 0;
      arcs.push_back({from, to, infinite ? Inf : int64_t(rng() % 6)});
    }
    std::vector<bool> got = solve(n, arcs);
    ASSERT_EQ(got.size(), total);
    ASSERT_FALSE(got[S]);
    ASSERT_TRUE(got[T]);

    // Every labelling of the non-terminals: the minimum value, and the
    // intersection of the sink sides that reach it.
    int64_t best = Inf + 1;
    std::vector<bool> smallest(total, true);
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      std::vector<bool> sink(total, false);
      sink[T] = true;
      for (unsigned i = 0; i < n; ++i)
        sink[i + 2] = (mask >> i) & 1;
      int64_t v = cutValue(arcs, sink);
      if (v < best) {
        best = v;
        smallest = sink;
      } else if (v == best) {
        for (unsigned x = 0; x < total; ++x)
          smallest[x] = smallest[x] && sink[x];
      }
    }
    ASSERT_LT(best, Inf) << "trial " << trial;
    EXPECT_EQ(cutValue(arcs, got), best) << "trial " << trial;
    EXPECT_EQ(got, smallest) << "trial " << trial;
  }
}

} // namespace
} // namespace ampc
