//===- YamlReader.cpp -------------------------------------------------------===//
#include "frontends/yaml/YamlReader.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstdlib>

namespace ampc::yamlfe {

namespace {
// yaml-cpp tags a plain (unquoted) scalar "?" and a quoted one "!".
bool isPlainScalar(const YAML::Node &n) { return n.IsScalar() && n.Tag() == "?"; }

bool hasMark(const YAML::Mark &m) { return m.line >= 0 && m.column >= 0; }
} // namespace

bool isValidName(llvm::StringRef name) {
  if (name.empty())
    return false;
  for (char c : name)
    if (!llvm::isAlnum(c) && c != '_' && c != '.' && c != '-')
      return false;
  return true;
}

Location Reader::loc(const YAML::Mark &m) const {
  if (!hasMark(m))
    return file_;
  return file_.at(uint32_t(m.line) + 1, uint32_t(m.column) + 1);
}

Location Reader::loc(const Bound &b) const {
  bool useFallback = !b.node.IsDefined() || b.node.IsNull() || !hasMark(b.node.Mark());
  if (useFallback && hasMark(b.fallback))
    return loc(b.fallback);
  return loc(b.node.Mark());
}

bool Reader::error(const Location &l, const llvm::Twine &msg) {
  diag_.error(l, msg);
  return false;
}
bool Reader::error(const Bound &b, const llvm::Twine &msg) { return error(loc(b), msg); }
bool Reader::error(const YAML::Node &n, const llvm::Twine &msg) { return error(loc(n), msg); }

std::string Reader::describe(const YAML::Node &n) {
  switch (n.Type()) {
  case YAML::NodeType::Scalar:
    return "'" + n.Scalar() + "'";
  case YAML::NodeType::Sequence:
    return "a list";
  case YAML::NodeType::Map:
    return "a map";
  case YAML::NodeType::Null:
  case YAML::NodeType::Undefined:
    return "nothing";
  }
  return "nothing";
}

std::string Reader::closest(llvm::StringRef name, llvm::ArrayRef<llvm::StringRef> candidates) {
  std::string best;
  unsigned bestDistance = 3;
  for (llvm::StringRef c : candidates) {
    unsigned d = name.edit_distance(c, /*AllowReplacements=*/true, /*MaxEditDistance=*/3);
    if (d < bestDistance) {
      bestDistance = d;
      best = c.str();
    }
  }
  return best;
}

bool Reader::resolve(const Bound &in, Bound &out) {
  out = in;
  if (!isPlainScalar(in.node) || !llvm::StringRef(in.node.Scalar()).startswith("$"))
    return true;
  llvm::StringRef param = llvm::StringRef(in.node.Scalar()).drop_front();
  if (!in.env)
    return error(in, "'" + in.node.Scalar() + "' refers to a block parameter outside a block");
  auto it = in.env->args.find(param);
  if (it == in.env->args.end())
    return error(in, "block '" + in.env->blockName + "' has no parameter '" + param + "'");
  out = it->second;
  return true;
}

bool Reader::readMap(const Bound &n, const llvm::Twine &what, MapEntries &out) {
  out.clear();
  Bound m;
  if (!resolve(n, m))
    return false;
  if (!m.node.IsDefined() || m.node.IsNull())
    return true;
  if (!m.node.IsMap())
    return error(m, what + " must be a map, got " + describe(m.node));
  llvm::StringSet<> seen;
  for (auto it = m.node.begin(); it != m.node.end(); ++it) {
    // Copies: the iterator hands out a temporary pair.
    YAML::Node key = it->first;
    YAML::Node value = it->second;
    if (!key.IsScalar())
      return error(key, "keys of " + what + " must be names, got " + describe(key));
    if (!seen.insert(key.Scalar()).second)
      return error(key, "duplicate key '" + key.Scalar() + "' in " + what);
    out.push_back({key.Scalar(), key, Bound{value, m.env, key.Mark()}});
  }
  return true;
}

bool Reader::checkKnownKeys(const MapEntries &entries, llvm::ArrayRef<llvm::StringRef> known,
                            llvm::StringRef noun, const llvm::Twine &suffix) {
  for (const MapEntry &e : entries) {
    if (llvm::is_contained(known, e.key))
      continue;
    std::string hint = closest(e.key, known);
    return error(e.keyNode, "unknown " + noun + " '" + e.key + "'" + suffix +
                                (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  }
  return true;
}

bool Reader::readOneKeyMap(const Bound &n, const llvm::Twine &what, MapEntry &out) {
  MapEntries entries;
  Bound m;
  if (!resolve(n, m))
    return false;
  if (!m.node.IsMap())
    return error(m, what + " must be a map with one key, got " + describe(m.node));
  if (!readMap(m, what, entries))
    return false;
  if (entries.size() != 1)
    return error(m, what + " must be a map with one key, got " + llvm::Twine(entries.size()) +
                        " keys");
  out = entries.front();
  return true;
}

bool Reader::scalarText(const Bound &n, const llvm::Twine &what, llvm::StringRef kind,
                        Bound &resolved) {
  if (!resolve(n, resolved))
    return false;
  if (!isPlainScalar(resolved.node))
    return error(resolved, what + " must be " + kind + ", got " +
                               (resolved.node.IsScalar() ? "the string " : "") +
                               describe(resolved.node));
  return true;
}

bool Reader::readInt(const Bound &n, const llvm::Twine &what, int64_t &out) {
  Bound v;
  if (!scalarText(n, what, "an integer", v))
    return false;
  llvm::StringRef text = v.node.Scalar();
  llvm::StringRef digits = text;
  digits.consume_front("-") || digits.consume_front("+");
  if (digits.empty() || !llvm::all_of(digits, llvm::isDigit))
    return error(v, what + " must be an integer, got " + describe(v.node));
  text.consume_front("+");
  if (text.getAsInteger(10, out))
    return error(v, what + " is out of range: " + v.node.Scalar());
  return true;
}

bool Reader::readFloat(const Bound &n, const llvm::Twine &what, double &out) {
  Bound v;
  if (!scalarText(n, what, "a number", v))
    return false;
  const std::string &text = v.node.Scalar();
  char *end = nullptr;
  out = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || llvm::isSpace(text[0]))
    return error(v, what + " must be a number, got " + describe(v.node));
  if (!std::isfinite(out))
    return error(v, what + " must be a finite number, got " + describe(v.node));
  return true;
}

bool Reader::readBool(const Bound &n, const llvm::Twine &what, bool &out) {
  Bound v;
  if (!scalarText(n, what, "true or false", v))
    return false;
  llvm::StringRef text = v.node.Scalar();
  if (text == "true" || text == "True" || text == "TRUE") {
    out = true;
    return true;
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    out = false;
    return true;
  }
  return error(v, what + " must be true or false, got " + describe(v.node));
}

bool Reader::readString(const Bound &n, const llvm::Twine &what, std::string &out) {
  Bound v;
  if (!resolve(n, v))
    return false;
  if (!v.node.IsScalar())
    return error(v, what + " must be a string, got " + describe(v.node));
  out = v.node.Scalar();
  return true;
}

bool Reader::readIntList(const Bound &n, const llvm::Twine &what, std::vector<int64_t> &out,
                         bool allowBatch) {
  out.clear();
  Bound list;
  if (!resolve(n, list))
    return false;
  if (!list.node.IsSequence())
    return error(list, what + " must be a list of integers, got " + describe(list.node));
  for (const YAML::Node &item : list.node) {
    Bound elem{item, list.env, list.fallback}, v;
    if (!resolve(elem, v))
      return false;
    if (allowBatch && batch_ && isPlainScalar(v.node) && v.node.Scalar() == "B") {
      out.push_back(*batch_);
      continue;
    }
    int64_t x = 0;
    if (!readInt(v, "elements of " + what, x))
      return false;
    out.push_back(x);
  }
  return true;
}

bool Reader::readFloatList(const Bound &n, const llvm::Twine &what, std::vector<double> &out) {
  out.clear();
  Bound list;
  if (!resolve(n, list))
    return false;
  if (!list.node.IsSequence())
    return error(list, what + " must be a list of numbers, got " + describe(list.node));
  for (const YAML::Node &item : list.node) {
    double x = 0;
    if (!readFloat(Bound{item, list.env, list.fallback}, "elements of " + what, x))
      return false;
    out.push_back(x);
  }
  return true;
}

bool Reader::readStringList(const Bound &n, const llvm::Twine &what, std::vector<Bound> &items) {
  items.clear();
  Bound list;
  if (!resolve(n, list))
    return false;
  if (list.node.IsScalar()) {
    items.push_back(list);
    return true;
  }
  if (!list.node.IsSequence())
    return error(list, what + " must be a name or a list of names, got " + describe(list.node));
  for (const YAML::Node &item : list.node) {
    Bound v;
    if (!resolve(Bound{item, list.env, list.fallback}, v))
      return false;
    if (!v.node.IsScalar())
      return error(v, "elements of " + what + " must be names, got " + describe(v.node));
    items.push_back(v);
  }
  return true;
}

bool Reader::isPairAttr(llvm::StringRef name) {
  return name == "kernel" || name == "stride" || name == "padding" || name == "dilation";
}

bool Reader::readAttribute(const Bound &n, llvm::StringRef name, AttrType type, Attribute &out) {
  std::string what = ("'" + name + "'").str();
  switch (type) {
  case AttrType::Int: {
    int64_t v = 0;
    if (!readInt(n, what, v))
      return false;
    out = Attribute(v);
    return true;
  }
  case AttrType::Float: {
    double v = 0;
    if (!readFloat(n, what, v))
      return false;
    out = Attribute(v);
    return true;
  }
  case AttrType::Bool: {
    bool v = false;
    if (!readBool(n, what, v))
      return false;
    out = Attribute(v);
    return true;
  }
  case AttrType::String: {
    std::string v;
    if (!readString(n, what, v))
      return false;
    out = Attribute(std::move(v));
    return true;
  }
  case AttrType::Ints: {
    Bound v;
    if (!resolve(n, v))
      return false;
    std::vector<int64_t> list;
    if (isPairAttr(name) && v.node.IsScalar()) {
      int64_t x = 0;
      if (!readInt(v, what, x))
        return false;
      list = {x, x};
    } else if (!v.node.IsSequence()) {
      return error(
          v, what + " must be " +
                 (isPairAttr(name) ? "an integer or a list of 2 integers" : "a list of integers") +
                 ", got " + describe(v.node));
    } else if (!readIntList(v, what, list, /*allowBatch=*/true)) {
      return false;
    }
    out = Attribute(std::move(list));
    return true;
  }
  case AttrType::Floats: {
    std::vector<double> v;
    if (!readFloatList(n, what, v))
      return false;
    out = Attribute(std::move(v));
    return true;
  }
  case AttrType::DType: {
    Bound v;
    std::string text;
    if (!resolve(n, v) || !readString(v, what, text))
      return false;
    std::optional<DType> t = parseDType(text);
    if (!t)
      return error(v, "unknown dtype '" + text +
                          "'; expected one of f32, f16, bf16, f64, i64, i32, bool");
    out = Attribute(*t);
    return true;
  }
  }
  return false;
}

} // namespace ampc::yamlfe
