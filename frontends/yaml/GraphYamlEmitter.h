//===- GraphYamlEmitter.h - A graph as YAML (--emit yaml) -------*- C++ -*-===//
#ifndef AMPC_FRONTENDS_YAML_GRAPHYAMLEMITTER_H
#define AMPC_FRONTENDS_YAML_GRAPHYAMLEMITTER_H

#include "ir/Graph.h"

#include <string>

namespace ampc {

/// A YAML dump of a graph for tools and people: name, meta, inputs, state
/// (kind, type, init, trainable), nodes in execution order (op, operand and
/// result names with dtypes and shapes, attributes, role, precision override,
/// location), state updates and outputs. The order is deterministic: the
/// graph's own orders, and attributes and meta sorted by name. It is not a
/// model file but reads back as the same graph (GraphYamlReader.h; `ampc
/// g.yaml` runs it as written): emitting what was read gives the same bytes.
std::string emitGraphYaml(const Graph &g);

} // namespace ampc

#endif
