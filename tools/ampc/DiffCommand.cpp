//===- DiffCommand.cpp - `ampc diff`: two opt levels' graphs side by side -===//
//
// What changes between two levels of one model: the nodes that compute in
// another dtype (with the rule that chose each side), the nodes only one
// level has (master-weight updates, loss scaling), the casts added and
// removed, and the memory plan class by class. It answers the question
// users answered before with `--explain` twice and diff: "what did O2 do
// that O1 did not?"
//
// Nodes are matched by what they compute (GraphView::structuralKeys):
// their op, its attributes (a slice's offsets) and, recursively, their
// operands, looking through casts and the loss scaler's additions, down to
// the graph's inputs and state by name, one to one. So O1's
// `matmul(cast(%x), cast(%w))` is O2's `matmul(%x, %w)`, whatever fresh
// names the passes gave the backward nodes at each level. Casts are matched
// by what they cast to what dtype.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

namespace ampc::cli {

namespace {

/// One level's rewritten graph and what the diff reads from it.
struct LevelGraph {
  std::string level;
  std::optional<api::Model> model;
  std::optional<api::Program> program;
};

/// The dtype a node computes in: the precision pass's decision for forward
/// nodes, else its first floating result's dtype ("" for none).
std::string computeDType(const api::NodeView &n) {
  if (std::optional<api::DType> p = n.precision())
    return std::string(api::dtypeName(*p));
  for (const api::ValueView &v : n.outputs())
    if (v.dtype() == api::DType::F32 || v.dtype() == api::DType::F16 ||
        v.dtype() == api::DType::BF16 || v.dtype() == api::DType::F64)
      return std::string(api::dtypeName(v.dtype()));
  return "";
}

std::string nodeName(const api::NodeView &n) {
  return n.outputs().empty() ? "" : "%" + n.output(0).name();
}

/// One graph's structural keys (GraphView::structuralKeys): equal keys at
/// two levels mean the same quantity.
class StructuralKeys {
public:
  explicit StructuralKeys(const api::GraphView &g) : keys_(g.structuralKeys()) {}
  uint64_t ofValue(const api::ValueView &v) const { return keys_.at(v.name()); }
  uint64_t ofNode(const api::NodeView &n) const { return keys_.at(n.output(0).name()); }

private:
  std::unordered_map<std::string, uint64_t> keys_;
};

/// "%x -> bf16", "%4 (matmul) -> f32": what a cast reads (and, for a value
/// the passes named, what made it) and the dtype it makes.
std::string castText(const api::NodeView &n) {
  api::ValueView source = n.inputs().at(0);
  std::string text = "%" + source.name();
  if (!source.isInput() && !source.isState())
    text += " (" + source.producer().op() + ")";
  return text + " -> " + std::string(api::dtypeName(n.output(0).dtype()));
}

std::string signedBytes(int64_t delta) {
  if (delta == 0)
    return "0";
  return (delta > 0 ? "+" : "") + std::to_string(delta);
}

/// Imports, rewrites and compiles the model at `level`; false after
/// printing why not (with the exit code in `code`).
bool buildLevel(const Options &cmdline, api::Stage stage, const std::string &device,
                LevelGraph &out, int &code) {
  Options opts = cmdline;
  opts.optLevel = out.level;
  out.model = loadModel(opts);
  if (!out.model) {
    code = kBadInput;
    return false;
  }
  if (stage == api::Stage::Train && !out.model->trainable()) {
    err() << "error: --graph train needs a model with a loss and an 'optimizer' section\n";
    code = kBadInput;
    return false;
  }
  if (!runPipeline(*out.model, opts, stage)) {
    code = kBadInput;
    return false;
  }
  out.program = compileProgram(*out.model, device, opts, code);
  return out.program.has_value();
}

void printPrecisionChanges(const LevelGraph &a, const LevelGraph &b) {
  StructuralKeys keysA(a.model->graph()), keysB(b.model->graph());
  std::map<uint64_t, api::NodeView> nodesA, nodesB;
  for (const api::NodeView &n : a.model->graph().nodes())
    if (!n.isCast() && !nodeName(n).empty())
      nodesA.emplace(keysA.ofNode(n), n);
  for (const api::NodeView &n : b.model->graph().nodes())
    if (!n.isCast() && !nodeName(n).empty())
      nodesB.emplace(keysB.ofNode(n), n);

  // Rows in B's order (the graph's topological order reads best).
  struct Row {
    std::string node, op, dtypeA, dtypeB, reason;
  };
  std::vector<Row> changed;
  std::vector<std::string> onlyA, onlyB;
  for (const api::NodeView &n : b.model->graph().nodes()) {
    std::string name = nodeName(n);
    if (n.isCast() || name.empty())
      continue;
    auto it = nodesA.find(keysB.ofNode(n));
    if (it == nodesA.end()) {
      onlyB.push_back(name + " (" + n.op() + ")");
      continue;
    }
    std::string da = computeDType(it->second), db = computeDType(n);
    // Named as at the second level; the first level's name when it differs.
    std::string shown =
        nodeName(it->second) == name ? name : name + " (" + nodeName(it->second) + ")";
    if (da != db)
      changed.push_back({shown, n.op(), da.empty() ? "-" : da, db.empty() ? "-" : db, n.reason()});
  }
  for (const api::NodeView &n : a.model->graph().nodes())
    if (!n.isCast() && !nodeName(n).empty() && !nodesB.count(keysA.ofNode(n)))
      onlyA.push_back(nodeName(n) + " (" + n.op() + ")");

  out() << "nodes: " << nodesA.size() << " at " << a.level << ", " << nodesB.size() << " at "
        << b.level << " (casts apart); " << changed.size()
        << (changed.size() == 1 ? " computes" : " compute") << " in another dtype\n";
  if (!changed.empty()) {
    size_t nodeWidth = 4, opWidth = 2;
    for (const Row &r : changed) {
      nodeWidth = std::max(nodeWidth, r.node.size());
      opWidth = std::max(opWidth, r.op.size());
    }
    int nw = static_cast<int>(nodeWidth), ow = static_cast<int>(opWidth);
    out() << format("  %-*s  %-*s  %-5s  %-5s  %s\n", nw, "node", ow, "op", a.level.c_str(),
                    b.level.c_str(), ("why, at " + b.level).c_str());
    for (const Row &r : changed)
      out() << format("  %-*s  %-*s  %-5s  %-5s  %s\n", nw, r.node.c_str(), ow, r.op.c_str(),
                      r.dtypeA.c_str(), r.dtypeB.c_str(),
                      r.reason.empty() ? "-" : r.reason.c_str());
  }
  auto list = [](const std::string &title, const std::vector<std::string> &names) {
    if (names.empty())
      return;
    out() << title << " (" << names.size() << "):";
    for (const std::string &n : names)
      out() << "\n  " << n;
    out() << "\n";
  };
  list("only at " + a.level, onlyA);
  list("only at " + b.level, onlyB);
}

void printCastChanges(const LevelGraph &a, const LevelGraph &b) {
  struct Cast {
    std::string text;
    int64_t bytes = 0;
    size_t order = 0; ///< the first such cast's position: rows in graph order
  };
  // Keyed by what is cast (structurally, as nodes are) and to what dtype.
  auto casts = [](const LevelGraph &l) {
    StructuralKeys keys(l.model->graph());
    std::map<std::pair<uint64_t, std::string>, Cast> out;
    for (const api::NodeView &c : l.model->graph().casts()) {
      const api::ValueView &r = c.output(0);
      int64_t elements = 1;
      for (int64_t d : r.shape())
        elements *= d;
      auto [it, added] =
          out.try_emplace({keys.ofValue(c.inputs().at(0)), std::string(api::dtypeName(r.dtype()))});
      Cast &entry = it->second;
      if (added)
        entry.order = out.size();
      entry.text = castText(c);
      entry.bytes += elements * api::dtypeSize(r.dtype());
    }
    return out;
  };
  auto castsA = casts(a), castsB = casts(b);
  api::PrecisionStats sa = a.model->graph().precisionStats(),
                      sb = b.model->graph().precisionStats();
  out() << "casts: " << sa.casts << " at " << a.level << " (" << sa.castBytes
        << " bytes per step), " << sb.casts << " at " << b.level << " (" << sb.castBytes
        << " bytes per step)\n";
  auto only = [](const auto &in, const auto &notIn, const char *sign, const std::string &level) {
    std::vector<const Cast *> rows;
    for (const auto &[key, cast] : in)
      if (!notIn.count(key))
        rows.push_back(&cast);
    std::sort(rows.begin(), rows.end(),
              [](const Cast *x, const Cast *y) { return x->order < y->order; });
    for (const Cast *cast : rows)
      out() << "  " << sign << " " << cast->text << "  (" << cast->bytes << " bytes; only at "
            << level << ")\n";
  };
  only(castsB, castsA, "+", b.level);
  only(castsA, castsB, "-", a.level);
}

void printMemory(const LevelGraph &a, const LevelGraph &b) {
  api::MemoryPlanSummary ma = a.program->memoryPlanSummary(), mb = b.program->memoryPlanSummary();
  // Classes by name: both plans list the same classes in the same order.
  std::map<std::pair<bool, std::string>, uint64_t> bytesA;
  for (const auto &c : ma.classes)
    bytesA[{c.persistent, c.name}] = c.bytes;
  size_t width = 24;
  for (const auto &c : mb.classes)
    width = std::max(width, c.name.size() + 2);
  int w = static_cast<int>(width);
  auto row = [&](const std::string &name, uint64_t x, uint64_t y) {
    out() << format("  %-*s  %14llu  %14llu  %14s\n", w, name.c_str(),
                    static_cast<unsigned long long>(x), static_cast<unsigned long long>(y),
                    signedBytes(static_cast<int64_t>(y) - static_cast<int64_t>(x)).c_str());
  };
  out() << format("memory plan (bytes)%*s  %14s  %14s  %14s\n", w - 17, "", a.level.c_str(),
                  b.level.c_str(), (b.level + " - " + a.level).c_str());
  for (bool persistent : {true, false}) {
    out() << (persistent ? "  persistent arena\n" : "  step arena (live at its peak)\n");
    for (const auto &c : mb.classes)
      if (c.persistent == persistent) {
        auto it = bytesA.find({c.persistent, c.name});
        row("  " + c.name, it == bytesA.end() ? 0 : it->second, c.bytes);
      }
  }
  row("persistent total", ma.persistentBytes, mb.persistentBytes);
  row("step arena size", ma.stepBytes, mb.stepBytes);
  row("peak", ma.peakBytes, mb.peakBytes);
}

} // namespace

int runDiff(Options cmdline) {
  std::vector<std::string> levels;
  if (!parseLevels(cmdline.levels, levels))
    return kBadInput;
  if (levels.size() != 2) {
    err() << "error: --levels: ampc diff compares two opt levels, got " << levels.size()
          << " (e.g. --levels O1,O2)\n";
    return kBadInput;
  }
  std::optional<api::DeviceChoice> device = selectDevice(cmdline);
  if (!device)
    return kRuntimeFailure;

  // The stage: the training step when the model trains, as `ampc` would.
  LevelGraph a{levels[0], {}, {}}, b{levels[1], {}, {}};
  {
    std::optional<api::Model> probe = loadModel(cmdline);
    if (!probe)
      return kBadInput;
    if (cmdline.graph.empty())
      cmdline.graph = probe->trainable() ? "train" : "forward";
  }
  api::Stage stage = cmdline.graph == "train" ? api::Stage::Train : api::Stage::Forward;
  int code = kSuccess;
  if (!buildLevel(cmdline, stage, device->name, a, code) ||
      !buildLevel(cmdline, stage, device->name, b, code))
    return code;

  out() << "ampc diff " << a.model->name() << ", " << cmdline.graph << " graph on "
        << a.program->device() << ": " << a.level << " -> " << b.level << "\n";
  for (const LevelGraph *l : {&a, &b})
    if (api::Result<api::Policy> p = l->model->policy())
      out() << "  " << p->summary() << "\n";
  printPrecisionChanges(a, b);
  printCastChanges(a, b);
  printMemory(a, b);
  return kSuccess;
}

} // namespace ampc::cli
