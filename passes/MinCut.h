//===- MinCut.h - Minimum s-t cut for the precision solve ------------------===//
#ifndef AMPC_PASSES_MINCUT_H
#define AMPC_PASSES_MINCUT_H

#include <climits>
#include <cstdint>
#include <vector>

namespace ampc {

/// A minimum s-t cut on int64 capacities, for assign-precision's labelling
/// solve (passes/AssignPrecision.cpp). The network is collected as an arc
/// list; `sinkSide` then finds the minimum cut whose sink side is smallest.
/// Node kSource and kSink exist from the start; arcs of capacity kInfinity or
/// more are never cut, and the caller keeps some cut finite.
///
/// A plain max-flow over the whole network is quadratic on the graphs
/// assign-precision sees most: on a chain of residual blocks each promote op is tied to
/// the previous one by an infinite arc, so every unit of flow would travel
/// back along the whole chain (and Dinic would need a phase per path
/// length). So the solve
///  1. merges into the sink every node that a path of infinite arcs leads
///     from to the sink, and into the source every node such a path leads
///     to from the source: every finite cut keeps them on that side, so the
///     set of minimum cuts is unchanged;
///  2. splits what remains into the components that only the terminals join:
///     a cut is then a sum of independent per-component cuts, and each
///     component is solved alone, with its own copy of the terminals, so a
///     phase in one never walks another;
///  3. runs Dinic's algorithm per component, with iterative searches (no
///     recursion, however deep the graph) and current-arc pointers.
/// The nodes that can reach the sink in the residual graph form the smallest
/// sink side of any minimum cut. That set is unique, so neither the merging
/// and splitting nor any visiting order changes the result.
class MinCut {
public:
  static constexpr int64_t kInfinity = INT64_MAX / 4;
  static constexpr unsigned kSource = 0, kSink = 1;

  unsigned addNode() { return numNodes_++; }
  void addArc(unsigned from, unsigned to, int64_t cap) {
    if (from != to)
      arcs_.push_back({from, to, cap});
  }

  /// Per node: whether it is on the sink side of the minimum cut with the
  /// smallest sink side. Consumes the arcs.
  std::vector<bool> sinkSide();

private:
  struct InputArc {
    unsigned from, to;
    int64_t cap;
  };

  std::vector<unsigned> mergeIntoTerminals() const;
  void buildNetwork(const std::vector<InputArc> &arcs, unsigned numLocal);
  void maxFlow(unsigned begin, unsigned end);
  bool buildLevels(unsigned begin, unsigned end);
  void augmentPhase(unsigned begin);
  void markReachingSink(unsigned begin, std::vector<bool> &reach);

  unsigned numNodes_ = 2;
  std::vector<InputArc> arcs_;

  // The split network as compressed rows: local node x's arcs are
  // [first_[x], first_[x + 1]); rev_[a] is the arc paired with a. A
  // component occupies local nodes [begin, end): its source copy at begin,
  // its sink copy at begin + 1.
  std::vector<unsigned> first_, to_, rev_;
  std::vector<int64_t> cap_;
  std::vector<int> level_;
  std::vector<unsigned> next_, queue_, path_;
};

} // namespace ampc

#endif
