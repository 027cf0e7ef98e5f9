//===- GraphFile.cpp - Graph files, loaded as written ----------------------===//
//
// A graph file is what `ampc --emit ir` or `--emit yaml` wrote: a graph the
// pass pipeline has rewritten already, at the opt level its meta names, with
// fixed shapes. Model::loadFile loads one as written and never runs the
// pipeline on it again (a second autodiff would differentiate the backward
// pass). What would change it -- another level, another policy property,
// another batch -- is refused here, with the file named.
//
//===----------------------------------------------------------------------===//
#include "Internal.h"

#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "passes/PrecisionPolicy.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

namespace ampc::api {

namespace {

/// The graph's limits, checked after the parse: the text's size bounds the
/// parser's work, and these bound what compiling the graph would allocate.
bool checkIRLimits(const Graph &g, const ampc::LoadOptions &load, DiagnosticEngine &diag) {
  if (g.numNodes() > uint64_t(load.maxNodes)) {
    diag.error(Location(), "the graph has " + llvm::Twine(g.numNodes()) +
                               " nodes, more than the limit of " + llvm::Twine(load.maxNodes) +
                               "; raise the limit with --max-nodes");
    return false;
  }
  auto check = [&](const Value *v) {
    std::optional<int64_t> n = v->type().checkedNumElements();
    if (n && *n <= load.maxElements)
      return true;
    diag.error(v->loc(),
               "%" + v->name() + " : " + v->type().str() + " has " +
                   (n ? llvm::Twine(*n) + " elements, more than the limit of " +
                            llvm::Twine(load.maxElements) + "; raise the limit with --max-elements"
                      : llvm::Twine("an element count that overflows int64")));
    return false;
  };
  for (const Value *v : g.inputs())
    if (!check(v))
      return false;
  for (const Value *v : g.state())
    if (!check(v))
      return false;
  for (const Node &n : g.nodes())
    for (const Value *r : n.results())
      if (!check(r))
        return false;
  return true;
}

/// The policy's properties, one "name: value" a line, without the marks of
/// which were set explicitly: two policies that print the same lines make
/// the same graph.
std::vector<std::string> policyLines(const PrecisionPolicy &p) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printPolicy(p, os);
  os.flush();
  llvm::SmallVector<llvm::StringRef, 16> lines;
  llvm::StringRef(text).split(lines, '\n', -1, /*KeepEmpty=*/false);
  std::vector<std::string> out;
  for (llvm::StringRef line : lines) {
    line.consume_back("(override)");
    out.push_back(line.rtrim().str());
  }
  return out;
}

std::string graphFileSubject(const std::string &path, const Graph &g) {
  const char *what = stageOfGraph(g) == Stage::Train ? "a training graph" : "a forward graph";
  return "'" + path + "' holds " + what + " rewritten at " + optLevelOf(g) +
         ", which runs as written";
}

} // namespace

std::unique_ptr<Graph> loadIRFile(const std::string &path, DiagnosticEngine &diag,
                                  const ampc::LoadOptions &load) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    diag.error(Location(), "cannot open graph file '" + path + "': " + buffer.getError().message());
    return nullptr;
  }
  llvm::StringRef text = (*buffer)->getBuffer();
  std::unique_ptr<Graph> g = parseGraph(text, path, diag);
  if (!g || !checkIRLimits(*g, load, diag))
    return nullptr;
  DiagnosticEngine findings;
  if (verifyGraph(*g, findings)) {
    for (const ampc::Diagnostic &d : findings.diagnostics())
      diag.add(d.severity, d.loc, d.message);
    return g;
  }
  // Nodes carry the model file's positions (loc(...)); a wrong type in the
  // .ir file is reported at its line there instead.
  if (std::unique_ptr<Graph> located = parseGraph(text, path, diag, OpRegistry::builtin(),
                                                  /*fileLocations=*/true);
      located && !verifyGraph(*located, diag))
    return nullptr;
  for (const ampc::Diagnostic &d : findings.diagnostics())
    diag.add(d.severity, d.loc, d.message);
  return nullptr;
}

Stage stageOfGraph(const Graph &g) {
  for (const Node &n : g.nodes())
    if (n.role() == ampc::NodeRole::Backward || n.role() == ampc::NodeRole::Optimizer ||
        n.role() == ampc::NodeRole::LossScale)
      return Stage::Train;
  return Stage::Forward;
}

bool checkLoadKeepsGraph(const Graph &g, const std::string &path, const LoadOptions &load,
                         DiagnosticEngine &diag) {
  std::string subject = graphFileSubject(path, g);
  if (load.batch) {
    std::optional<int64_t> batch;
    auto it = g.meta().find("batch");
    if (it != g.meta().end() && it->second.is(AttrType::Int))
      batch = it->second.getInt();
    if (batch != load.batch) {
      diag.error(Location(), subject + ", with fixed shapes" +
                                 (batch ? " (batch " + std::to_string(*batch) + ")" : "") +
                                 ": its batch cannot change to " + std::to_string(*load.batch) +
                                 " (give ampc the model file to rewrite it at another batch)");
      return false;
    }
  }
  if (load.optLevel.empty() && load.policyOverrides.empty())
    return true;
  // The options are applied to a copy of the meta; what they change in the
  // resolved policy would need the passes to run again.
  AttrMap asked = g.meta();
  DiagnosticEngine scratch;
  if (!load.optLevel.empty() && !setPolicyOverride(asked, "opt_level", load.optLevel, diag))
    return false;
  for (const auto &[property, value] : load.policyOverrides)
    if (!setPolicyOverride(asked, property, value, diag))
      return false;
  std::optional<PrecisionPolicy> written = resolvePolicy(g.meta(), scratch);
  std::optional<PrecisionPolicy> wanted = resolvePolicy(asked, diag);
  if (!written || !wanted)
    return false;
  if (wanted->optLevel != written->optLevel) {
    diag.error(Location(), subject + ": it cannot be rewritten at " +
                               optLevelName(wanted->optLevel).str() +
                               " (give ampc the model file to rewrite it at another level)");
    return false;
  }
  std::vector<std::string> before = policyLines(*written), after = policyLines(*wanted);
  for (size_t i = 0; i < std::max(before.size(), after.size()); ++i) {
    std::string was = i < before.size() ? before[i] : "", now = i < after.size() ? after[i] : "";
    if (was == now)
      continue;
    diag.error(Location(), subject + ": its policy cannot change (" +
                               (was.empty() ? "" : "'" + was + "'") +
                               (was.empty() || now.empty() ? "" : " would become ") +
                               (now.empty() ? "" : "'" + now + "'") +
                               "; give ampc the model file to rewrite it with that policy)");
    return false;
  }
  return true;
}

std::string graphFileSubject(const Model::Impl &m) {
  return graphFileSubject(m.source.bufferName, *m.graph);
}

} // namespace ampc::api
