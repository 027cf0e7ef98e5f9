//===- AttrMap.h - Attributes by interned name, in one flat array -*- C++ -*-===//
//
// A node's attributes, sorted by name (so printing is deterministic), in one
// flat array. A node carries a handful of attributes and the training graph
// of a 200k-node model holds over a million nodes: a tree node per attribute
// and a heap string per name (std::map<std::string, Attribute>) were a large
// part of the graph's footprint and of its allocator traffic. Names are
// interned once per process, so an entry is a StringRef and the value, and
// the whole map is one allocation.
//
// The interface is the part of std::map's that the IR uses; lookups are a
// binary search over a few entries.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_ATTRMAP_H
#define AMPC_IR_ATTRMAP_H

#include "ir/Attribute.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <initializer_list>
#include <utility>

namespace ampc {

/// The process's one copy of `name`: valid until exit; thread-safe.
llvm::StringRef internAttrName(llvm::StringRef name);

class AttrMap {
public:
  using key_type = llvm::StringRef;
  using mapped_type = Attribute;
  using value_type = std::pair<llvm::StringRef, Attribute>;
  using iterator = value_type *;
  using const_iterator = const value_type *;

  AttrMap() = default;
  AttrMap(std::initializer_list<value_type> entries) {
    for (const value_type &e : entries)
      insert_or_assign(e.first, e.second);
  }

  iterator begin() { return entries_.begin(); }
  iterator end() { return entries_.end(); }
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }

  iterator find(llvm::StringRef name) {
    iterator it = lowerBound(name);
    return it != end() && it->first == name ? it : end();
  }
  const_iterator find(llvm::StringRef name) const {
    return const_cast<AttrMap *>(this)->find(name);
  }
  size_t count(llvm::StringRef name) const { return find(name) != end() ? 1 : 0; }
  bool contains(llvm::StringRef name) const { return find(name) != end(); }
  /// The attribute `name`; asserts that it is there.
  const Attribute &at(llvm::StringRef name) const;

  /// The attribute `name`, inserted as a default Attribute when absent.
  Attribute &operator[](llvm::StringRef name) { return emplace(name, Attribute()).first->second; }
  /// Inserts when `name` is absent; else leaves the present value.
  std::pair<iterator, bool> emplace(llvm::StringRef name, Attribute value);
  std::pair<iterator, bool> insert(value_type entry) {
    return emplace(entry.first, std::move(entry.second));
  }
  std::pair<iterator, bool> insert_or_assign(llvm::StringRef name, Attribute value);
  size_t erase(llvm::StringRef name);
  iterator erase(const_iterator it) { return entries_.erase(it); }

  friend bool operator==(const AttrMap &a, const AttrMap &b) { return a.entries_ == b.entries_; }
  friend bool operator!=(const AttrMap &a, const AttrMap &b) { return !(a == b); }

private:
  iterator lowerBound(llvm::StringRef name);

  llvm::SmallVector<value_type, 0> entries_;
};

} // namespace ampc

#endif
