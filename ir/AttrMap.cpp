//===- AttrMap.cpp ----------------------------------------------------------===//
#include "ir/AttrMap.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Allocator.h"

#include <algorithm>
#include <cassert>
#include <mutex>

namespace ampc {

llvm::StringRef internAttrName(llvm::StringRef name) {
  // Never destroyed: names handed out stay valid during static destruction.
  static auto *names = new llvm::StringSet<llvm::BumpPtrAllocator>();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(name).first->getKey();
}

AttrMap::iterator AttrMap::lowerBound(llvm::StringRef name) {
  return std::lower_bound(entries_.begin(), entries_.end(), name,
                          [](const value_type &e, llvm::StringRef n) { return e.first < n; });
}

const Attribute &AttrMap::at(llvm::StringRef name) const {
  const_iterator it = find(name);
  assert(it != end() && "no such attribute");
  return it->second;
}

std::pair<AttrMap::iterator, bool> AttrMap::emplace(llvm::StringRef name, Attribute value) {
  iterator it = lowerBound(name);
  if (it != end() && it->first == name)
    return {it, false};
  it = entries_.insert(it, value_type(internAttrName(name), std::move(value)));
  return {it, true};
}

std::pair<AttrMap::iterator, bool> AttrMap::insert_or_assign(llvm::StringRef name,
                                                             Attribute value) {
  auto [it, inserted] = emplace(name, Attribute());
  it->second = std::move(value);
  return {it, inserted};
}

size_t AttrMap::erase(llvm::StringRef name) {
  iterator it = find(name);
  if (it == end())
    return 0;
  entries_.erase(it);
  return 1;
}

} // namespace ampc
