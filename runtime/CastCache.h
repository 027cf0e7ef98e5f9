//===- CastCache.h - Casts of state tensors, kept until the tensor changes -===//
//
// A cast marked `cacheable` whose input is a state tensor (a weight cast to
// half, say) gives the same result until the tensor is written. The runtime
// keeps such results in the persistent arena, one buffer per (state tensor,
// dtype), and recomputes one only when the tensor's version has moved on
// since it was filled. A state tensor's version moves on when a state update
// writes it after a step (an update that left it unchanged - a
// mid-accumulation micro-step, a skipped step - does not count) and when the
// host asks for writable access to it.
//
// So a weight is cast once per optimizer step in training and once in total
// in evaluation and inference, however many casts of it a step has.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_CASTCACHE_H
#define AMPC_RUNTIME_CASTCACHE_H

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace ampc {

/// What the cache did over a Program's runs so far.
struct CastCacheStats {
  uint64_t hits = 0;   ///< cast nodes served from the cache
  uint64_t misses = 0; ///< cast nodes (cacheable ones) that ran
  /// Bytes of cast results not recomputed: the result size of every hit.
  uint64_t bytesSaved = 0;

  /// One line: "cast cache: H casts of weights reused (X bytes not
  /// recast), M made after a weight change".
  void print(llvm::raw_ostream &os) const;
};

/// Whether the runtime may serve `n` from the cast cache: a cast with
/// `cacheable = true` whose input is a state tensor.
bool isCacheableStateCast(const Node &n);

/// Versions of a graph's state tensors and the cache entries of its
/// cacheable casts. The Program owns one; the storage of each entry is the
/// cast result's buffer in the memory plan (shared by casts with one key).
class CastCache {
public:
  /// Versions for every state tensor of `g`; with `enabled`, an entry per
  /// (state tensor, dtype) among the cacheable casts in `schedule`.
  void init(const Graph &g, llvm::ArrayRef<const Node *> schedule, bool enabled);

  /// Before running the node at schedule position `pos`: true when its
  /// result is already in its buffer and current (a hit: skip the node);
  /// false when it must run (a miss for a cached cast, after which the entry
  /// counts as current; or not a cached cast at all).
  bool serve(unsigned pos);

  /// `state` was (or may have been) written: casts of it are stale.
  void bump(const Value *state);
  /// How many times `state` was written since compile; 0 for non-state values.
  uint64_t version(const Value *state) const;
  /// Where `state`'s version is counted (stable from init() on, for
  /// TensorArg::stableVersion); null for non-state values.
  const uint64_t *versionSlot(const Value *state) const;

  /// Whether the node at `pos` is served from the cache.
  bool isCached(unsigned pos) const { return pos < entryAt_.size() && entryAt_[pos] >= 0; }
  const CastCacheStats &stats() const { return stats_; }

private:
  struct Entry {
    unsigned stateIndex;
    uint64_t resultBytes;
    uint64_t filledAtVersion = 0;
    bool filled = false;
  };
  /// Per schedule position, the entry index or -1.
  std::vector<int> entryAt_;
  std::vector<Entry> entries_;
  llvm::DenseMap<const Value *, unsigned> stateIndex_;
  std::vector<uint64_t> versions_;
  CastCacheStats stats_;
};

} // namespace ampc

#endif
