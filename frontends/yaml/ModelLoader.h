//===- ModelLoader.h - Model files (YAML) to a Graph -----------*- C++ -*-===//
//
// Reads a model file (docs/model-format.md) into a Graph: inputs, parameters
// and buffers as state with their initialisers, one node per layer built and
// shape-checked through ir/Builder.h, the loss as the graph output, and the
// optimizer and training settings in the graph's meta. Every problem is a
// "file:line:col: error: ..." diagnostic and a nullptr result; nothing throws.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_YAML_MODELLOADER_H
#define AMPC_FRONTENDS_YAML_MODELLOADER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <optional>

namespace ampc {

struct LoadOptions {
  /// Largest element count of any input, parameter or intermediate tensor.
  int64_t maxElements = int64_t(1) << 32;
  /// Deepest nesting of the YAML tree (aliases expanded) and of blocks
  /// instantiating blocks: the readers recurse once per level.
  int64_t maxNesting = 100;
  /// Most YAML nodes the file may expand to through aliases.
  int64_t maxYamlNodes = 4'000'000;
  /// Most graph nodes the layers may lower to after block expansion.
  int64_t maxNodes = 1'000'000;
  /// Replaces the file's `batch:` (the value of the shape symbol B).
  std::optional<int64_t> batchOverride;
  /// ONNX graph inputs held constant at import, each with the .npy file of
  /// its value (`--fix-input NAME=FILE`): for operands ampc needs when it
  /// imports (a Reshape's shape, a Clip's bounds) that a model takes as
  /// inputs. They stop being inputs of the graph.
  std::vector<std::pair<std::string, std::string>> fixedInputs;
};

/// What a YAML file holds: a model file (docs/model-format.md), imported, or
/// a graph written by `ampc --emit yaml` (a map with `graph:`), read back
/// as written, with no pass run on it (frontends/yaml/GraphYamlReader.h).
enum class YamlContent { Model, Graph };

/// Loads a model file, or a graph written by `ampc --emit yaml`; `content`
/// (when given) says which it was. A missing or unreadable file is
/// "error: cannot open model file 'x': <reason>".
std::unique_ptr<Graph> loadModelFile(llvm::StringRef path, DiagnosticEngine &diag,
                                     const LoadOptions &opts = {}, YamlContent *content = nullptr);

/// Loads a model (or an emitted graph) from text; diagnostics name
/// `bufferName`, and init.from folders are relative to `baseDir`.
std::unique_ptr<Graph> loadModelString(llvm::StringRef text, llvm::StringRef bufferName,
                                       DiagnosticEngine &diag, const LoadOptions &opts = {},
                                       llvm::StringRef baseDir = ".",
                                       YamlContent *content = nullptr);

/// Reads a data source written as in the model file's `train.data`
/// (`{csv: {path: t.csv}}`, `{npy: {x: x.npy, y: y.npy}}`, ...) from `text`
/// into meta[key] and its settings (meta[key + ".path"], ...), checked
/// against `g`'s inputs; errors name `bufferName`. The inputs named in
/// `optional` may go without data (createDataSource's `optional`): npy data
/// needs no file for them, idx data no labels when the label input is one.
bool parseDataSpec(llvm::StringRef text, llvm::StringRef bufferName, const Graph &g,
                   llvm::StringRef key, AttrMap &meta, DiagnosticEngine &diag,
                   llvm::ArrayRef<std::string> optional = {});

} // namespace ampc

#endif
