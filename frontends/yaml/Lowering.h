//===- Lowering.h - Shared state of one model-file import -------*- C++ -*-===//
//
// Internal to the YAML frontend: the pieces of ModelLoader (layers and
// blocks, optimizer and training settings) and what they share.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_YAML_LOWERING_H
#define AMPC_FRONTENDS_YAML_LOWERING_H

#include "frontends/yaml/ModelLoader.h"
#include "frontends/yaml/YamlReader.h"

#include "ir/Graph.h"

#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace ampc::yamlfe {

/// A `blocks:` entry.
struct BlockDef {
  BlockDef() = default;
  BlockDef(const BlockDef &) = default;
  BlockDef &operator=(const BlockDef &other) {
    name = other.name;
    keyNode.reset(other.keyNode); // rebind, see Bound
    params = other.params;
    layers = other.layers;
    return *this;
  }

  std::string name;
  YAML::Node keyNode;
  std::vector<std::string> params;
  Bound layers;
};

struct ModelContext {
  Reader &r;
  Graph &g;
  const LoadOptions &opts;
  llvm::StringMap<BlockDef> blocks;
};

/// Checks a state tensor's or value's element count against the options;
/// reports at `loc` naming `what`.
bool checkElementCount(ModelContext &ctx, const TensorType &t, const llvm::Twine &what,
                       const Location &loc);

/// Reads `blocks:` into ctx.blocks (checks params and `$name` uses).
bool readBlocks(ModelContext &ctx, const Bound &blocks);

/// Lowers `layers:`; `last` is the last layer's value. `names` maps the
/// top-level layer names (and the graph inputs) to values, for `loss:`.
bool lowerLayers(ModelContext &ctx, const Bound &layers, Value *&last,
                 llvm::StringMap<Value *> &names);

/// `optimizer:` and `train:` into the graph's meta.
/// The optimizer's parameter groups (`groups:`) are matched against `g`'s
/// parameters here, so a glob that matches nothing or a parameter in two
/// groups is an error at its place in the file.
bool readOptimizer(Reader &r, const Bound &node, const Graph &g, AttrMap &meta);
bool readTrain(Reader &r, const Bound &node, const Graph &g, AttrMap &meta);
/// A data source (`train.data`'s syntax) into meta[key] and meta[key.*].
bool readData(Reader &r, const Bound &node, const Graph &g, AttrMap &meta, const std::string &key,
              llvm::ArrayRef<std::string> optional = {});
/// `amp:` (the precision policy) into the graph's meta as amp.* keys
/// (docs/model-format.md, "amp").
bool readAmp(Reader &r, const Bound &node, AttrMap &meta);

} // namespace ampc::yamlfe

#endif
