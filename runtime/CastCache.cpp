//===- CastCache.cpp --------------------------------------------------------===//
#include "runtime/CastCache.h"

#include <map>
#include <utility>

namespace ampc {

void CastCacheStats::print(llvm::raw_ostream &os) const {
  // In words a user reads without knowing what a cache "hit" is: the casts
  // of weights that did not have to run again, and those that did.
  os << "cast cache: " << hits << (hits == 1 ? " cast" : " casts") << " of weights reused ("
     << bytesSaved << " bytes not recast), " << misses << " made after a weight change\n";
}

bool isCacheableStateCast(const Node &n) {
  if (n.kind() != OpKind::Cast || !n.operand(0)->isState())
    return false;
  const Attribute *cacheable = n.findAttr("cacheable");
  return cacheable && cacheable->is(AttrType::Bool) && cacheable->getBool();
}

void CastCache::init(const Graph &g, llvm::ArrayRef<const Node *> schedule, bool enabled) {
  *this = CastCache();
  for (const Value *v : g.state()) {
    stateIndex_[v] = versions_.size();
    versions_.push_back(0);
  }
  entryAt_.assign(schedule.size(), -1);
  if (!enabled)
    return;
  // One entry per key, so that a second cast of a weight to the same dtype
  // in one step (say, one in the backward pass) is a hit.
  std::map<std::pair<unsigned, DType>, int> entryOfKey;
  for (unsigned pos = 0; pos < schedule.size(); ++pos) {
    const Node &n = *schedule[pos];
    if (!isCacheableStateCast(n))
      continue;
    unsigned stateIndex = stateIndex_.lookup(n.operand(0));
    auto [it, inserted] =
        entryOfKey.try_emplace({stateIndex, n.result()->dtype()}, int(entries_.size()));
    if (inserted)
      entries_.push_back({stateIndex, static_cast<uint64_t>(n.result()->type().sizeInBytes())});
    entryAt_[pos] = it->second;
  }
}

bool CastCache::serve(unsigned pos) {
  if (!isCached(pos))
    return false;
  Entry &e = entries_[entryAt_[pos]];
  uint64_t current = versions_[e.stateIndex];
  if (e.filled && e.filledAtVersion == current) {
    ++stats_.hits;
    stats_.bytesSaved += e.resultBytes;
    return true;
  }
  ++stats_.misses;
  e.filled = true;
  e.filledAtVersion = current;
  return false;
}

void CastCache::bump(const Value *state) {
  auto it = stateIndex_.find(state);
  if (it != stateIndex_.end())
    ++versions_[it->second];
}

uint64_t CastCache::version(const Value *state) const {
  auto it = stateIndex_.find(state);
  return it == stateIndex_.end() ? 0 : versions_[it->second];
}

const uint64_t *CastCache::versionSlot(const Value *state) const {
  auto it = stateIndex_.find(state);
  return it == stateIndex_.end() ? nullptr : &versions_[it->second];
}

} // namespace ampc
