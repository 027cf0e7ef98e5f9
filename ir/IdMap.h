//===- IdMap.h - Side tables indexed by value and node ids -------*- C++ -*-===//
//
// A pass that annotates most of a graph's values or nodes (a gradient per
// value, a plan per node) keeps the annotations in a vector indexed by the
// key's id rather than in a hash table keyed by its address. Ids count up
// in creation order (Graph::idBound), and passes walk nodes in list order,
// which is nearly creation order: the vector is read and written almost in
// sequence, where a hash table is read at random. On a graph of a million
// nodes every hash-table probe misses the caches; the vector's do not (the
// pipeline's autodiff on a 200k-node model spent an eighth of its time in its
// two DenseMaps).
//
// Values and nodes share one id counter, so a table keyed by values has
// holes where the nodes' ids are. Use these tables where the keys are a
// large part of the graph; a handful of keys belongs in a DenseMap.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_IDMAP_H
#define AMPC_IR_IDMAP_H

#include "llvm/ADT/BitVector.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ampc {

/// Key -> T, where Key has `uint64_t id()` (Value, Node). T is small and
/// cheap to value-initialise: a missing key reads as T().
template <typename Key, typename T> class IdMap {
public:
  IdMap() = default;
  /// Room for every key whose id is below `bound` (Graph::idBound()).
  explicit IdMap(uint64_t bound) { slots_.resize(bound); }

  T lookup(const Key *k) const {
    uint64_t i = k->id();
    return i < slots_.size() ? slots_[i] : T();
  }
  T &operator[](const Key *k) {
    uint64_t i = k->id();
    if (i >= slots_.size())
      slots_.resize(grownSize(i));
    return slots_[i];
  }

private:
  // Keys made during the pass are new ids past the end: grow by half, as
  // the vector itself would, not one slot per key.
  size_t grownSize(uint64_t id) const { return std::max<size_t>(id + 1, slots_.size() * 3 / 2); }

  std::vector<T> slots_;
};

/// A set of Values or Nodes, one bit per id.
template <typename Key> class IdSet {
public:
  IdSet() = default;
  explicit IdSet(uint64_t bound) : bits_(bound) {}

  bool contains(const Key *k) const {
    uint64_t i = k->id();
    return i < bits_.size() && bits_.test(i);
  }
  size_t count(const Key *k) const { return contains(k) ? 1 : 0; }
  /// True when `k` was not in the set.
  bool insert(const Key *k) {
    uint64_t i = k->id();
    if (i >= bits_.size())
      bits_.resize(std::max<size_t>(i + 1, bits_.size() * 3 / 2));
    if (bits_.test(i))
      return false;
    bits_.set(i);
    return true;
  }
  template <typename Range> void insertAll(const Range &keys) {
    for (const Key *k : keys)
      insert(k);
  }

private:
  llvm::BitVector bits_;
};

} // namespace ampc

#endif // AMPC_IR_IDMAP_H
