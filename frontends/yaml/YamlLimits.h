//===- YamlLimits.h - Bounds on a model file's YAML before it is read -*- C++ -*-===//
//
// Internal to the YAML frontend. Anchors and aliases let a few hundred bytes
// of YAML stand for a tree of billions of nodes ("billion laughs") or for a
// tree that contains itself (`&a {z: [*a]}`), and every reader of the tree
// walks it recursively. So before the tree is read, one pass over the
// parser's events measures the tree *as the readers will see it*, aliases
// expanded: its node count, its nesting depth, and whether an alias points
// into the node that holds it. That pass costs time linear in the text, not
// in the expansion, and refuses the file with a located error when a limit
// of LoadOptions is exceeded.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_YAML_YAMLLIMITS_H
#define AMPC_FRONTENDS_YAML_YAMLLIMITS_H

#include "frontends/yaml/ModelLoader.h"
#include "frontends/yaml/YamlReader.h"

#include "llvm/ADT/StringRef.h"

namespace ampc::yamlfe {

/// Parses `text` (the first document) and checks its expanded size, depth
/// and alias cycles against `opts`. Reports the first problem through `r`
/// and returns false. Malformed YAML throws YAML::Exception, as YAML::Load
/// would.
bool checkYamlLimits(llvm::StringRef text, Reader &r, const LoadOptions &opts);

} // namespace ampc::yamlfe

#endif
