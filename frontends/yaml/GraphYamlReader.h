//===- GraphYamlReader.h - A graph written by --emit yaml, read back -*- C++ -*-===//
//
// Internal to the YAML frontend. The inverse of GraphYamlEmitter: a YAML map
// with a `graph:` key is a graph as `ampc --emit yaml` wrote it (meta,
// inputs, state, nodes, updates, outputs), not a model file. It is read back
// as the same graph, node for node, without running any pass: emitting it
// again gives the same bytes. The checks are the textual IR parser's (names,
// op rows, attributes, operand counts) followed by the verifier; every
// problem is a "file:line:col: error: ..." at the YAML node.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_YAML_GRAPHYAMLREADER_H
#define AMPC_FRONTENDS_YAML_GRAPHYAMLREADER_H

#include "frontends/yaml/ModelLoader.h"
#include "frontends/yaml/YamlReader.h"

#include "ir/Graph.h"

#include <memory>

namespace ampc::yamlfe {

/// Whether `root` is a graph written by `ampc --emit yaml`: a map with a
/// `graph:` key (a model file has `model:` instead).
bool isGraphYaml(const YAML::Node &root);

/// Reads the graph under `root` (isGraphYaml) and verifies it. The file's
/// size and nesting limits are checked before (checkYamlLimits); here the
/// node count (opts.maxNodes) and every tensor's element count
/// (opts.maxElements). Null after reporting the problems through `r`.
std::unique_ptr<Graph> readGraphYaml(const YAML::Node &root, Reader &r, const LoadOptions &opts,
                                     const OpRegistry &registry = OpRegistry::builtin());

} // namespace ampc::yamlfe

#endif
