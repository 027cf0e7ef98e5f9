//===- ParamBuilders.h - Layers that create parameters ----------*- C++ -*-===//
//
// Internal to the YAML frontend. Most layers are a registry op used as is;
// the six that own parameters (linear, conv2d, batchnorm2d, layernorm,
// embedding, prelu) also have a builder here: the extra arguments they take, the
// attributes they set themselves, and a plan of the state tensors to create
// (shape, init, which op operand each feeds) from the input's type.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_YAML_PARAMBUILDERS_H
#define AMPC_FRONTENDS_YAML_PARAMBUILDERS_H

#include "ir/Graph.h"

#include <optional>
#include <string>
#include <vector>

namespace ampc::yamlfe {

/// An argument a builder reads in addition to its op's attributes.
struct BuilderArg {
  const char *name;
  AttrType type;
  /// nullopt: required.
  std::optional<Attribute> defaultValue;
};

/// One state tensor a layer owns, named "<layer>.<suffix>".
struct ParamDecl {
  std::string suffix;
  /// The op operand it feeds (matched by the row's operand name).
  std::string operand;
  llvm::SmallVector<int64_t, 4> shape;
  InitSpec init;
  StateKind kind = StateKind::Parameter;
};

struct ParamPlan {
  std::vector<ParamDecl> params;
  /// Attributes the builder sets (hidden from the model file).
  AttrMap attrs;
  /// Names of results after the first: "<layer>.<suffix>".
  std::vector<std::string> extraResultSuffixes;
  /// After a step, the param with this suffix takes the node's result i.
  std::vector<std::pair<unsigned, std::string>> updates;
};

/// What a builder sees: the layer's input, its own arguments (defaults filled
/// in) and the op attributes the user gave (normalised, defaults filled in).
struct PlanRequest {
  const Value &input;
  const AttrMap &args;
  const AttrMap &opAttrs;
};

using PlanFn = bool (*)(const PlanRequest &req, ParamPlan &plan, std::string &err);

struct ParamBuilder {
  const char *kind;
  std::vector<BuilderArg> args;
  /// Op attributes the builder sets itself; the model file may not give them.
  std::vector<const char *> hiddenAttrs;
  PlanFn plan;
};

/// The builder for a layer kind, or nullptr when the op has no parameters.
const ParamBuilder *findParamBuilder(llvm::StringRef kind);

} // namespace ampc::yamlfe

#endif
