//===- GraphYamlEmitter.cpp -------------------------------------------------===//
#include "frontends/yaml/GraphYamlEmitter.h"

#include <yaml-cpp/yaml.h>

namespace ampc {

namespace {

void emitDims(YAML::Emitter &out, llvm::ArrayRef<int64_t> dims) {
  out << YAML::Flow << YAML::BeginSeq;
  for (int64_t d : dims)
    out << d;
  out << YAML::EndSeq;
}

void emitAttribute(YAML::Emitter &out, const Attribute &a) {
  switch (a.type()) {
  case AttrType::Int:
    out << a.getInt();
    return;
  case AttrType::Float:
    // The shortest round-tripping spelling, always with '.' or 'e'.
    out << formatDouble(a.getFloat());
    return;
  case AttrType::Bool:
    out << a.getBool();
    return;
  case AttrType::String:
    // Quoted, so "true" or "1" stay strings when read back.
    out << YAML::DoubleQuoted << a.getString();
    return;
  case AttrType::Ints:
    emitDims(out, a.getInts());
    return;
  case AttrType::Floats:
    out << YAML::Flow << YAML::BeginSeq;
    for (double d : a.getFloats())
      out << formatDouble(d);
    out << YAML::EndSeq;
    return;
  case AttrType::DType:
    out << dtypeName(a.getDType()).str();
    return;
  }
}

void emitAttrMap(YAML::Emitter &out, const AttrMap &attrs) {
  out << YAML::BeginMap;
  for (const auto &[name, value] : attrs) {
    out << YAML::Key << name.str() << YAML::Value;
    emitAttribute(out, value);
  }
  out << YAML::EndMap;
}

/// name, dtype and shape of a value, on one line.
void emitValue(YAML::Emitter &out, const Value &v) {
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << v.name().str();
  out << YAML::Key << "dtype" << YAML::Value << dtypeName(v.dtype()).str();
  out << YAML::Key << "shape" << YAML::Value;
  emitDims(out, v.type().dims());
  out << YAML::EndMap;
}

void emitLoc(YAML::Emitter &out, const Location &loc) {
  if (loc.known())
    out << YAML::Key << "loc" << YAML::Value << loc.str();
}

std::vector<std::string> names(llvm::ArrayRef<Value *> values) {
  std::vector<std::string> out;
  for (const Value *v : values)
    out.push_back(v ? v->name().str() : std::string("<null>"));
  return out;
}

} // namespace

std::string emitGraphYaml(const Graph &g) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "graph" << YAML::Value << g.name();
  out << YAML::Key << "meta" << YAML::Value;
  emitAttrMap(out, g.meta());

  out << YAML::Key << "inputs" << YAML::Value << YAML::BeginSeq;
  for (const Value *v : g.inputs()) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << v->name().str();
    out << YAML::Key << "dtype" << YAML::Value << dtypeName(v->dtype()).str();
    out << YAML::Key << "shape" << YAML::Value;
    emitDims(out, v->type().dims());
    emitLoc(out, v->loc());
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "state" << YAML::Value << YAML::BeginSeq;
  for (const Value *v : g.state()) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << v->name().str();
    out << YAML::Key << "kind" << YAML::Value << stateKindKeyword(v->stateKind()).str();
    out << YAML::Key << "dtype" << YAML::Value << dtypeName(v->dtype()).str();
    out << YAML::Key << "shape" << YAML::Value;
    emitDims(out, v->type().dims());
    out << YAML::Key << "init" << YAML::Value << v->init().str();
    out << YAML::Key << "trainable" << YAML::Value << v->trainable();
    emitLoc(out, v->loc());
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const Node &n : g.nodes()) {
    out << YAML::BeginMap;
    out << YAML::Key << "op" << YAML::Value << n.opName().str();
    out << YAML::Key << "inputs" << YAML::Value << YAML::Flow << names(n.operands());
    out << YAML::Key << "outputs" << YAML::Value << YAML::BeginSeq;
    for (const Value *r : n.results())
      emitValue(out, *r);
    out << YAML::EndSeq;
    out << YAML::Key << "attrs" << YAML::Value;
    emitAttrMap(out, n.attrs());
    out << YAML::Key << "role" << YAML::Value << roleName(n.role()).str();
    out << YAML::Key << "precision" << YAML::Value
        << precisionOverrideName(n.precisionOverride()).str();
    emitLoc(out, n.loc());
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "updates" << YAML::Value << YAML::BeginSeq;
  for (const StateUpdate &u : g.stateUpdates()) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "state" << YAML::Value << u.state->name().str();
    out << YAML::Key << "value" << YAML::Value << u.newValue->name().str();
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "outputs" << YAML::Value << YAML::Flow << names(g.outputs());
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

} // namespace ampc
