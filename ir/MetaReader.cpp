//===- MetaReader.cpp -------------------------------------------------------===//
#include "ir/MetaReader.h"

namespace ampc {

double MetaReader::number(llvm::StringRef key, std::optional<double> def) {
  const Attribute *a = find(key, def.has_value());
  if (!a)
    return def.value_or(0);
  if (!a->is(AttrType::Int) && !a->is(AttrType::Float))
    return mistyped(key, "a number"), 0;
  return a->getNumber();
}

int64_t MetaReader::integer(llvm::StringRef key, int64_t def) {
  const Attribute *a = find(key, true);
  if (!a)
    return def;
  if (!a->is(AttrType::Int))
    return mistyped(key, "an integer"), 0;
  return a->getInt();
}

bool MetaReader::boolean(llvm::StringRef key, bool def) {
  const Attribute *a = find(key, true);
  if (!a)
    return def;
  if (!a->is(AttrType::Bool))
    return mistyped(key, "a bool"), false;
  return a->getBool();
}

std::string MetaReader::string(llvm::StringRef key, llvm::StringRef def) {
  const Attribute *a = find(key, true);
  if (!a)
    return def.str();
  if (!a->is(AttrType::String))
    return mistyped(key, "a string"), "";
  return a->getString();
}

std::vector<double> MetaReader::numbers(llvm::StringRef key, std::vector<double> def) {
  const Attribute *a = find(key, true);
  if (!a)
    return def;
  if (a->is(AttrType::Floats))
    return a->getFloats();
  if (a->is(AttrType::Ints))
    return std::vector<double>(a->getInts().begin(), a->getInts().end());
  return mistyped(key, "a list of numbers"), def;
}

bool MetaReader::error(const llvm::Twine &msg) {
  diag_.error(Location(), llvm::Twine(prefix_) + msg);
  failed_ = true;
  return false;
}

const Attribute *MetaReader::find(llvm::StringRef key, bool optional) {
  auto it = meta_.find(key);
  if (it != meta_.end())
    return &it->second;
  if (!optional)
    error("the graph's meta has no '" + key + "'");
  return nullptr;
}

void MetaReader::mistyped(llvm::StringRef key, llvm::StringRef what) {
  error("meta '" + key + "' must be " + what + ", got " + meta_.find(key)->second.str());
}

const Attribute *findMeta(const Graph &g, llvm::StringRef key, AttrType t) {
  auto it = g.meta().find(key);
  return it != g.meta().end() && it->second.is(t) ? &it->second : nullptr;
}

std::string metaString(const Graph &g, llvm::StringRef key, llvm::StringRef dflt) {
  const Attribute *a = findMeta(g, key, AttrType::String);
  return a ? a->getString() : dflt.str();
}

int64_t metaInt(const Graph &g, llvm::StringRef key, int64_t dflt) {
  const Attribute *a = findMeta(g, key, AttrType::Int);
  return a ? a->getInt() : dflt;
}

bool metaBool(const Graph &g, llvm::StringRef key, bool dflt) {
  const Attribute *a = findMeta(g, key, AttrType::Bool);
  return a ? a->getBool() : dflt;
}

} // namespace ampc
