//===- MetaReader.h - Typed reads of a graph's meta block -----------------===//
#ifndef AMPC_IR_METAREADER_H
#define AMPC_IR_METAREADER_H

#include "ir/Attribute.h"
#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <optional>
#include <string>
#include <vector>

namespace ampc {

/// The graph's meta block holds the model file's settings (`train.*`,
/// `optimizer.*`, `init.*`, `batch`); this is the one place that reads them by
/// type. Two flavours: a MetaReader reports a missing or mistyped key (the
/// passes that turn a setting into ops), the free functions fall back to a
/// default (the runtime and the API, which read graphs the frontend filled and
/// the passes checked; a graph from textual IR or built by hand may lack keys).
class MetaReader {
public:
  /// `prefix` starts every diagnostic ("optimizer: ").
  MetaReader(const AttrMap &meta, DiagnosticEngine &diag, llvm::StringRef prefix)
      : meta_(meta), diag_(diag), prefix_(prefix.str()) {}

  bool failed() const { return failed_; }
  bool has(llvm::StringRef key) const { return meta_.count(key) != 0; }

  /// An int or float; without `def` the key is required.
  double number(llvm::StringRef key, std::optional<double> def);
  int64_t integer(llvm::StringRef key, int64_t def);
  bool boolean(llvm::StringRef key, bool def);
  std::string string(llvm::StringRef key, llvm::StringRef def);
  /// A list of floats or ints.
  std::vector<double> numbers(llvm::StringRef key, std::vector<double> def);

  /// Reports `msg` (after the prefix) and marks the reader failed; false.
  bool error(const llvm::Twine &msg);

private:
  const Attribute *find(llvm::StringRef key, bool optional);
  void mistyped(llvm::StringRef key, llvm::StringRef what);

  const AttrMap &meta_;
  DiagnosticEngine &diag_;
  std::string prefix_;
  bool failed_ = false;
};

/// The setting at `key` when it has type `t`, else null.
const Attribute *findMeta(const Graph &g, llvm::StringRef key, AttrType t);

/// A setting of the given type, or `dflt` when it is absent or of another type.
std::string metaString(const Graph &g, llvm::StringRef key, llvm::StringRef dflt);
int64_t metaInt(const Graph &g, llvm::StringRef key, int64_t dflt);
bool metaBool(const Graph &g, llvm::StringRef key, bool dflt);

} // namespace ampc

#endif
