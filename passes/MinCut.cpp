//===- MinCut.cpp -----------------------------------------------------------===//
#include "passes/MinCut.h"

#include <algorithm>

namespace ampc {

/// Per node: kSource or kSink when a path of infinite arcs ties it to that
/// terminal, else the node itself.
std::vector<unsigned> MinCut::mergeIntoTerminals() const {
  unsigned n = numNodes_;
  std::vector<unsigned> rep(n);
  for (unsigned x = 0; x < n; ++x)
    rep[x] = x;
  // The infinite arcs, forwards and backwards, as compressed rows.
  std::vector<unsigned> outFirst(n + 1, 0), inFirst(n + 1, 0);
  for (const InputArc &a : arcs_)
    if (a.cap >= kInfinity) {
      ++outFirst[a.from + 1];
      ++inFirst[a.to + 1];
    }
  for (unsigned x = 0; x < n; ++x) {
    outFirst[x + 1] += outFirst[x];
    inFirst[x + 1] += inFirst[x];
  }
  std::vector<unsigned> outTo(outFirst[n]), inFrom(inFirst[n]);
  std::vector<unsigned> outPos(outFirst.begin(), outFirst.end() - 1);
  std::vector<unsigned> inPos(inFirst.begin(), inFirst.end() - 1);
  for (const InputArc &a : arcs_)
    if (a.cap >= kInfinity) {
      outTo[outPos[a.from]++] = a.to;
      inFrom[inPos[a.to]++] = a.from;
    }
  std::vector<unsigned> stack;
  auto flood = [&](unsigned terminal, const std::vector<unsigned> &first,
                   const std::vector<unsigned> &next) {
    stack.assign(1, terminal);
    while (!stack.empty()) {
      unsigned x = stack.back();
      stack.pop_back();
      for (unsigned i = first[x]; i < first[x + 1]; ++i) {
        unsigned y = next[i];
        if (y <= kSink || rep[y] != y)
          continue;
        rep[y] = terminal;
        stack.push_back(y);
      }
    }
  };
  // Backwards from the sink first. The source cannot reach any of these
  // along infinite arcs (that would make every cut infinite; in
  // assign-precision, labelling every variable fp32 is always a finite cut),
  // so the order is moot.
  flood(kSink, inFirst, inFrom);
  flood(kSource, outFirst, outTo);
  return rep;
}

std::vector<bool> MinCut::sinkSide() {
  unsigned n = numNodes_;
  std::vector<unsigned> rep = mergeIntoTerminals();

  // The arcs that still matter: none out of the sink or into the source (no
  // cut counts them) and none between the terminals (every cut does).
  std::vector<InputArc> arcs;
  arcs.reserve(arcs_.size());
  for (const InputArc &a : arcs_) {
    unsigned from = rep[a.from], to = rep[a.to];
    if (from == to || from == kSink || to == kSource || (from <= kSink && to <= kSink))
      continue;
    arcs.push_back({from, to, a.cap});
  }
  arcs_ = {};

  // Components of the remaining nodes: union-find by size, path halving.
  std::vector<unsigned> parent(n), size(n, 1);
  for (unsigned x = 0; x < n; ++x)
    parent[x] = x;
  auto find = [&](unsigned x) {
    while (parent[x] != x)
      x = parent[x] = parent[parent[x]];
    return x;
  };
  for (const InputArc &a : arcs) {
    if (a.from <= kSink || a.to <= kSink)
      continue;
    unsigned x = find(a.from), y = find(a.to);
    if (x == y)
      continue;
    if (size[x] < size[y])
      std::swap(x, y);
    parent[y] = x;
    size[x] += size[y];
  }

  // Local numbering: each component a contiguous range [source copy, sink
  // copy, its nodes...].
  constexpr unsigned kNone = ~0u;
  std::vector<unsigned> compOfRoot(n, kNone), compOf(n, kNone), compSize;
  for (unsigned x = kSink + 1; x < n; ++x) {
    if (rep[x] != x)
      continue;
    unsigned r = find(x);
    if (compOfRoot[r] == kNone) {
      compOfRoot[r] = compSize.size();
      compSize.push_back(0);
    }
    compOf[x] = compOfRoot[r];
    ++compSize[compOf[x]];
  }
  std::vector<unsigned> compBegin(compSize.size() + 1, 0);
  for (size_t c = 0; c < compSize.size(); ++c)
    compBegin[c + 1] = compBegin[c] + 2 + compSize[c];
  std::vector<unsigned> local(n, kNone), fill(compBegin.begin(), compBegin.end() - 1);
  for (unsigned x = kSink + 1; x < n; ++x)
    if (compOf[x] != kNone)
      local[x] = fill[compOf[x]]++ + 2;
  for (InputArc &a : arcs) {
    unsigned c = compOf[a.from <= kSink ? a.to : a.from];
    auto localOf = [&](unsigned x) {
      return x == kSource ? compBegin[c] : x == kSink ? compBegin[c] + 1 : local[x];
    };
    a.from = localOf(a.from);
    a.to = localOf(a.to);
  }
  buildNetwork(arcs, compBegin.back());
  arcs = {};

  std::vector<bool> reach(compBegin.back(), false);
  for (size_t c = 0; c < compSize.size(); ++c) {
    maxFlow(compBegin[c], compBegin[c + 1]);
    markReachingSink(compBegin[c], reach);
  }
  std::vector<bool> sink(n, false);
  sink[kSink] = true;
  for (unsigned x = kSink + 1; x < n; ++x)
    sink[x] = rep[x] == kSink || (rep[x] == x && reach[local[x]]);
  return sink;
}

void MinCut::buildNetwork(const std::vector<InputArc> &arcs, unsigned numLocal) {
  first_.assign(numLocal + 1, 0);
  for (const InputArc &a : arcs) {
    ++first_[a.from + 1];
    ++first_[a.to + 1];
  }
  for (unsigned x = 0; x < numLocal; ++x)
    first_[x + 1] += first_[x];
  size_t total = first_[numLocal];
  to_.resize(total);
  rev_.resize(total);
  cap_.resize(total);
  std::vector<unsigned> pos(first_.begin(), first_.end() - 1);
  for (const InputArc &a : arcs) {
    unsigned fwd = pos[a.from]++, bwd = pos[a.to]++;
    to_[fwd] = a.to;
    cap_[fwd] = a.cap;
    rev_[fwd] = bwd;
    to_[bwd] = a.from;
    cap_[bwd] = 0;
    rev_[bwd] = fwd;
  }
  level_.assign(numLocal, -1);
  next_.assign(numLocal, 0);
}

void MinCut::maxFlow(unsigned begin, unsigned end) {
  while (buildLevels(begin, end)) {
    for (unsigned x = begin; x < end; ++x)
      next_[x] = first_[x];
    augmentPhase(begin);
  }
}

/// Breadth-first levels from the component's source over arcs with room
/// left; false when its sink is out of reach (the flow is maximal).
bool MinCut::buildLevels(unsigned begin, unsigned end) {
  for (unsigned x = begin; x < end; ++x)
    level_[x] = -1;
  unsigned source = begin, sink = begin + 1;
  queue_.assign(1, source);
  level_[source] = 0;
  for (size_t head = 0; head < queue_.size(); ++head) {
    unsigned x = queue_[head];
    if (x == sink)
      break; // nothing beyond the sink's level lies on a shortest path
    for (unsigned a = first_[x]; a < first_[x + 1]; ++a)
      if (cap_[a] > 0 && level_[to_[a]] < 0) {
        level_[to_[a]] = level_[x] + 1;
        queue_.push_back(to_[a]);
      }
  }
  return level_[sink] >= 0;
}

/// One blocking flow along the levels: depth-first with an explicit path,
/// each node's current arc only ever moving forward.
void MinCut::augmentPhase(unsigned begin) {
  unsigned source = begin, sink = begin + 1;
  path_.clear();
  unsigned x = source;
  while (true) {
    if (x == sink) {
      int64_t pushed = kInfinity;
      for (unsigned a : path_)
        pushed = std::min(pushed, cap_[a]);
      for (unsigned a : path_) {
        cap_[a] -= pushed;
        cap_[rev_[a]] += pushed;
      }
      // Resume from the tail of the first arc the push saturated.
      size_t keep = 0;
      while (keep < path_.size() && cap_[path_[keep]] > 0)
        ++keep;
      path_.resize(keep);
      x = keep == 0 ? source : to_[path_.back()];
      continue;
    }
    unsigned &a = next_[x];
    while (a < first_[x + 1] && (cap_[a] <= 0 || level_[to_[a]] != level_[x] + 1))
      ++a;
    if (a < first_[x + 1]) {
      path_.push_back(a);
      x = to_[a];
      continue;
    }
    // A dead end: retreat and move the predecessor past the arc to here.
    if (path_.empty())
      return;
    level_[x] = -1;
    unsigned back = path_.back();
    path_.pop_back();
    x = to_[rev_[back]];
    ++next_[x];
  }
}

/// After the max flow: marks the component's nodes that can still reach its
/// sink in the residual graph.
void MinCut::markReachingSink(unsigned begin, std::vector<bool> &reach) {
  unsigned sink = begin + 1;
  std::vector<unsigned> &stack = queue_;
  stack.assign(1, sink);
  reach[sink] = true;
  while (!stack.empty()) {
    unsigned x = stack.back();
    stack.pop_back();
    for (unsigned a = first_[x]; a < first_[x + 1]; ++a) {
      // a: x -> y; its partner y -> x has residual capacity cap_[rev_[a]].
      unsigned y = to_[a];
      if (reach[y] || cap_[rev_[a]] <= 0)
        continue;
      reach[y] = true;
      stack.push_back(y);
    }
  }
}

} // namespace ampc
