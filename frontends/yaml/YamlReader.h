//===- YamlReader.h - Typed, diagnosed access to a YAML tree ----*- C++ -*-===//
//
// Internal to the YAML frontend. yaml-cpp hands out untyped string scalars and
// throws on misuse; the Reader turns every read into "the value, or an error at
// the node's file:line:col", resolves block parameters (`$name`), and never
// lets yaml-cpp mutate the tree (no non-const operator[]).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_YAML_YAMLREADER_H
#define AMPC_FRONTENDS_YAML_YAMLREADER_H

#include "ir/Attribute.h"
#include "ir/Diagnostics.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

namespace ampc::yamlfe {

struct Env;

/// A YAML node together with the block-parameter bindings in force where it
/// was written, so `$k` inside a list resolves in the right block instance.
///
/// Beware: assigning one YAML::Node to another that already refers to a node
/// makes them share content, i.e. it rewrites the tree. Every struct here that
/// holds a node therefore assigns with Node::reset (rebinding), never with
/// Node::operator=.
struct Bound {
  Bound() = default;
  Bound(YAML::Node node, const Env *env = nullptr, YAML::Mark fallback = YAML::Mark::null_mark())
      : node(std::move(node)), env(env), fallback(fallback) {}
  Bound(const Bound &) = default;
  Bound &operator=(const Bound &other) {
    node.reset(other.node);
    env = other.env;
    fallback = other.fallback;
    return *this;
  }

  YAML::Node node;
  const Env *env = nullptr;
  /// Where to report problems when the node itself has no useful position
  /// (an implicit null after `key:` points at the next line): the key's mark.
  YAML::Mark fallback = YAML::Mark::null_mark();
};

/// The arguments of one block instance, already resolved in the caller's
/// environment (so they never contain `$name` at their top level).
struct Env {
  std::string blockName;
  llvm::StringMap<Bound> args;
};

/// One `key: value` entry of a YAML map, in file order.
struct MapEntry {
  MapEntry() = default;
  MapEntry(std::string key, YAML::Node keyNode, Bound value)
      : key(std::move(key)), keyNode(std::move(keyNode)), value(std::move(value)) {}
  MapEntry(const MapEntry &) = default;
  MapEntry &operator=(const MapEntry &other) {
    key = other.key;
    keyNode.reset(other.keyNode); // rebind, see Bound
    value = other.value;
    return *this;
  }

  std::string key;
  YAML::Node keyNode;
  Bound value;
};
using MapEntries = std::vector<MapEntry>;

class Reader {
public:
  Reader(DiagnosticEngine &diag, Location file) : diag_(diag), file_(std::move(file)) {}

  DiagnosticEngine &diag() { return diag_; }
  /// The location of a mark (0-based in yaml-cpp, 1-based here).
  Location loc(const YAML::Mark &m) const;
  Location loc(const Bound &b) const;
  Location loc(const YAML::Node &n) const { return loc(n.Mark()); }
  Location fileLoc() const { return file_; }

  /// Reports an error at the node; returns false so callers can `return r.error(...)`.
  bool error(const Bound &b, const llvm::Twine &msg);
  bool error(const YAML::Node &n, const llvm::Twine &msg);
  bool error(const Location &l, const llvm::Twine &msg);

  /// The batch size that the shape symbol `B` stands for, once known.
  void setBatch(int64_t b) { batch_ = b; }
  std::optional<int64_t> batch() const { return batch_; }

  /// Replaces a `$name` scalar by the block argument it names. Anything else
  /// comes back unchanged.
  bool resolve(const Bound &in, Bound &out);

  /// The entries of a map (a null node reads as an empty map). Keys must be
  /// plain scalars and unique. `what` names the map in messages.
  bool readMap(const Bound &n, const llvm::Twine &what, MapEntries &out);
  /// Reports the first key not in `known` as "unknown <noun> 'x'<suffix>",
  /// suggesting the closest known name within edit distance 2.
  bool checkKnownKeys(const MapEntries &entries, llvm::ArrayRef<llvm::StringRef> known,
                      llvm::StringRef noun, const llvm::Twine &suffix);
  /// A one-key map `{kind: args}`; `what` names it in messages.
  bool readOneKeyMap(const Bound &n, const llvm::Twine &what, MapEntry &out);

  // Scalars. `what` is the quoted key in messages: "'out_features'".
  bool readInt(const Bound &n, const llvm::Twine &what, int64_t &out);
  bool readFloat(const Bound &n, const llvm::Twine &what, double &out);
  bool readBool(const Bound &n, const llvm::Twine &what, bool &out);
  bool readString(const Bound &n, const llvm::Twine &what, std::string &out);
  /// A list of ints; `B` stands for the batch size when `allowBatch`.
  bool readIntList(const Bound &n, const llvm::Twine &what, std::vector<int64_t> &out,
                   bool allowBatch);
  bool readFloatList(const Bound &n, const llvm::Twine &what, std::vector<double> &out);
  /// A name or a list of names.
  bool readStringList(const Bound &n, const llvm::Twine &what, std::vector<Bound> &items);

  /// Reads a value of the given attribute type. Ints attributes named in
  /// kPairAttrs also accept a single int (repeated twice).
  bool readAttribute(const Bound &n, llvm::StringRef name, AttrType type, Attribute &out);

  /// Names that take "an int or a 2-list" (kernel, stride, padding, dilation).
  static bool isPairAttr(llvm::StringRef name);

  /// "'abc'", "a list", "a map", "nothing": what a node holds, for messages.
  static std::string describe(const YAML::Node &n);
  /// The closest candidate within edit distance 2, or "".
  static std::string closest(llvm::StringRef name, llvm::ArrayRef<llvm::StringRef> candidates);

private:
  bool scalarText(const Bound &n, const llvm::Twine &what, llvm::StringRef kind, Bound &resolved);

  DiagnosticEngine &diag_;
  Location file_;
  std::optional<int64_t> batch_;
};

/// Model names, input names and layer names: [A-Za-z0-9_.-]+.
bool isValidName(llvm::StringRef name);

} // namespace ampc::yamlfe

#endif
