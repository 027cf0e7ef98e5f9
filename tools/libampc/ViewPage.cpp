//===- ViewPage.cpp - `ampc view`: the graph as one self-contained page ---===//
//
// The page is the DOT drawing (passes/GraphDot) laid out by Graphviz, with
// what a click shows kept as JSON beside it: per node the precision report
// that --explain prints (explainPrecision), never a second opinion. The
// style sheet and the script are ViewAssets.cpp's.
//
//===----------------------------------------------------------------------===//
#include "Internal.h"
#include "ViewAssets.h"

#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "ir/support/Utf8.h"
#include "passes/GraphDot.h"
#include "passes/PrecisionReport.h"
#include "passes/StructuralKeys.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace ampc::api {

namespace {

/// A JSON string literal that is also safe inside <script>: '<', '>' and
/// '&' as \u escapes, so no name can close the element.
std::string jsonString(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : validUtf8(s)) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || c == '<' || c == '>' || c == '&') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string html(llvm::StringRef s) {
  std::string out;
  for (char c : validUtf8(s)) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

uint64_t bytesOf(const ampc::Value &v) {
  int64_t n = v.type().sizeInBytes();
  return n > 0 ? static_cast<uint64_t>(n) : 0;
}

std::string mib(uint64_t bytes) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.2f MiB", bytes / 1048576.0);
  return s;
}

/// One JSON object, written member by member.
class JsonObject {
public:
  JsonObject &str(llvm::StringRef key, llvm::StringRef value) {
    return raw(key, jsonString(value));
  }
  JsonObject &num(llvm::StringRef key, uint64_t value) { return raw(key, std::to_string(value)); }
  JsonObject &raw(llvm::StringRef key, llvm::StringRef json) {
    text_ += (text_.empty() ? "{" : ", ") + jsonString(key) + ": " + json.str();
    return *this;
  }
  std::string done() const { return text_.empty() ? "{}" : text_ + "}"; }

private:
  std::string text_;
};

std::string valueList(llvm::ArrayRef<const ampc::Value *> values) {
  std::string out = "[";
  for (const ampc::Value *v : values) {
    if (out.size() > 1)
      out += ", ";
    out += JsonObject()
               .str("name", v ? "%" + v->name().str() : "-")
               .str("type", v ? v->type().str() : "")
               .num("bytes", v ? bytesOf(*v) : 0)
               .done();
  }
  return out + "]";
}

std::string opEntry(const ampc::Node &n, const NodePrecision &p) {
  llvm::SmallVector<const ampc::Value *, 4> results;
  for (unsigned r = 0; r < n.numResults(); ++r)
    results.push_back(n.result(r));
  llvm::SmallVector<const ampc::Value *, 8> operands(n.operands().begin(), n.operands().end());
  uint64_t bytes = 0;
  for (const ampc::Value *r : results)
    bytes += bytesOf(*r);
  std::string attrs = "[";
  for (const auto &[name, value] : n.attrs()) {
    if (isAnnotationAttr(name))
      continue;
    if (attrs.size() > 1)
      attrs += ", ";
    attrs += "[" + jsonString(name) + ", " + jsonString(value.str()) + "]";
  }
  attrs += "]";
  JsonObject o;
  o.str("kind", "op")
      .str("name", p.label)
      .str("op", n.opName())
      .str("role", ampc::roleName(n.role()))
      .str("precision", p.precision)
      .str("reason", p.reason)
      .str("location", n.loc().known() ? n.loc().str() : "")
      .num("bytes", bytes)
      .raw("results", valueList(results))
      .raw("operands", valueList(operands))
      .raw("attrs", attrs);
  if (n.kind() == OpKind::Cast)
    o.str("castFrom", ampc::dtypeName(n.operand(0)->dtype()))
        .str("castTo", ampc::dtypeName(n.result(0)->dtype()))
        .raw("cacheable", attrs::Cast(n).cacheable() ? "true" : "false");
  return o.done();
}

/// A box's name in the page: its block, and its role when that is not
/// the forward pass (an instance has a box in each role).
std::string boxName(const DotBox &b) {
  if (b.role == ampc::NodeRole::Forward)
    return b.block;
  return b.block + " (" + ampc::roleName(b.role).str() + ")";
}

std::string valueEntry(const ampc::Value &v) {
  size_t users = 0;
  for (const Use &u : v.uses())
    users += u.user != nullptr;
  return JsonObject()
      .str("kind", v.isInput() ? "input" : ampc::stateKindKeyword(v.stateKind()))
      .str("name", "%" + v.name().str())
      .str("type", v.type().str())
      .num("bytes", bytesOf(v))
      .str("location", v.loc().known() ? v.loc().str() : "")
      .num("users", users)
      .done();
}

/// Graphviz keeps each DOT `id` as the SVG element's id; the page's script
/// and its tests find nodes by `data-node="%name"` too, so it is added
/// to each node's <g> here rather than by the script.
std::string tagNodes(llvm::StringRef svg, const llvm::StringMap<std::string> &nameOf,
                     const llvm::StringMap<std::string> &diffOf) {
  std::string out;
  out.reserve(svg.size() + nameOf.size() * 32);
  const llvm::StringRef open = "<g id=\"";
  size_t pos = 0;
  while (true) {
    size_t at = svg.find(open, pos);
    if (at == llvm::StringRef::npos)
      break;
    size_t idStart = at + open.size();
    size_t idEnd = svg.find('"', idStart);
    if (idEnd == llvm::StringRef::npos)
      break;
    out.append(svg.data() + pos, idEnd + 1 - pos);
    auto it = nameOf.find(svg.slice(idStart, idEnd));
    if (it != nameOf.end())
      out += " data-node=\"" + html(it->second) + "\"";
    auto diff = diffOf.find(svg.slice(idStart, idEnd));
    if (diff != diffOf.end())
      out += " data-diff=\"" + diff->second + "\"";
    pos = idEnd + 1;
  }
  out.append(svg.data() + pos, svg.size() - pos);
  return out;
}

std::string memoryPanel(const Program *program, const ViewOptions &opts) {
  std::string out = "<section id=\"memory\"><h2>Memory plan</h2>\n";
  if (!program) {
    std::string why = opts.memoryNote.empty() ? "no compiled program" : opts.memoryNote;
    return out + "<p class=\"note\">" + html(why) + "</p></section>\n";
  }
  MemoryPlanSummary plan = program->memoryPlanSummary();
  out += "<p class=\"note\">on " + html(program->device()) + ", before the first step</p>\n";
  out += "<table class=\"plan\">\n";
  auto row = [&](llvm::StringRef what, uint64_t bytes, llvm::StringRef cls) {
    out += "<tr class=\"" + cls.str() + "\"><td>" + html(what) + "</td><td class=\"num\">" +
           std::to_string(bytes) + " B</td><td class=\"num\">" + mib(bytes) + "</td></tr>\n";
  };
  for (bool persistent : {true, false}) {
    out += std::string("<tr class=\"group\"><th colspan=\"3\">") +
           (persistent ? "persistent arena (state and cached casts)"
                       : "step arena (live at the peak)") +
           "</th></tr>\n";
    for (const MemoryPlanSummary::Class &c : plan.classes)
      if (c.persistent == persistent)
        row(c.name, c.bytes, "class");
    if (persistent)
      row("total", plan.persistentBytes, "total");
    else
      row("arena size", plan.stepBytes, "total");
  }
  row("without reuse", plan.stepBytesWithoutReuse, "aside");
  row("peak (persistent + step)", plan.peakBytes, "peak");
  return out + "</table></section>\n";
}

/// The optimizer's parameter groups (GraphView::parameterGroups: the
/// optimizer's settings, then each group's globs, settings and parameters);
/// "" for a model without groups.
std::string groupsPanel(const std::string &groups) {
  if (groups.empty())
    return "";
  return "<section id=\"groups\"><h2>Parameter groups</h2>\n<pre>" + html(groups) +
         "</pre></section>\n";
}

/// The casts by conversion ("f32→bf16"), and each one, clickable.
std::string castPanel(const ampc::Graph &g, const PrecisionStats &stats) {
  struct Count {
    unsigned casts = 0, cacheable = 0;
    uint64_t bytes = 0;
  };
  std::map<std::string, Count> byPair;
  std::string list;
  unsigned index = 0;
  for (const ampc::Node &n : g.nodes()) {
    unsigned i = index++;
    if (n.kind() != OpKind::Cast)
      continue;
    std::string pair =
        (ampc::dtypeName(n.operand(0)->dtype()) + "\u2192" + ampc::dtypeName(n.result(0)->dtype()))
            .str();
    bool cacheable = attrs::Cast(n).cacheable();
    Count &c = byPair[pair];
    ++c.casts;
    c.cacheable += cacheable;
    c.bytes += bytesOf(*n.result(0));
    list += "<li><a href=\"#select=" + dotOpId(i) + "\" data-target=\"" + dotOpId(i) + "\">" +
            html("%" + n.result(0)->name().str()) + "</a> " + html(pair) +
            (cacheable ? " <span class=\"tag\">cacheable</span>" : "") + " <span class=\"role\">" +
            html(ampc::roleName(n.role())) + "</span></li>\n";
  }
  std::string out =
      "<section id=\"casts\"><h2>Casts</h2>\n<p id=\"cast-summary\">" + html(stats.str) + "</p>\n";
  if (byPair.empty())
    return out + "</section>\n";
  out += "<table class=\"pairs\"><tr><th>conversion</th><th>casts</th><th>of state</th>"
         "<th>bytes per step</th></tr>\n";
  for (const auto &[pair, c] : byPair)
    out += "<tr><td>" + html(pair) + "</td><td class=\"num\">" + std::to_string(c.casts) +
           "</td><td class=\"num\">" + std::to_string(c.cacheable) + "</td><td class=\"num\">" +
           std::to_string(c.bytes) + "</td></tr>\n";
  out += "</table>\n<details><summary>every cast</summary><ul class=\"castlist\">\n" + list +
         "</ul></details>\n";
  return out + "</section>\n";
}

/// What changed from another level (ViewOptions::against), by element id:
/// "changed" (another dtype there) or "new" (no such node there), with the
/// other level's dtype for the details panel and a panel of its own.
struct LevelDiff {
  llvm::StringMap<std::string> kindOf, before;
  std::string panel;
  size_t changed = 0;
};

LevelDiff diffAgainst(const ampc::Graph &g, const std::vector<NodePrecision> &precision,
                      const ampc::Graph &other, const Program *program,
                      const Program *otherProgram) {
  LevelDiff d;
  std::string level = optLevelOf(g), otherLevel = optLevelOf(other);
  // The other level's nodes (and casts, by what they cast to which dtype)
  // by structural key.
  llvm::DenseMap<const ampc::Value *, uint64_t> keys = computeStructuralKeys(g),
                                                otherKeys = computeStructuralKeys(other);
  std::vector<NodePrecision> otherPrecision = explainPrecision(other);
  std::map<uint64_t, const NodePrecision *> otherNodes;
  std::map<std::pair<uint64_t, ampc::DType>, const ampc::Node *> otherCasts;
  std::map<uint64_t, bool> matched;
  for (const NodePrecision &p : otherPrecision) {
    const ampc::Node &n = *p.node;
    if (n.numResults() == 0)
      continue;
    if (n.kind() == OpKind::Cast)
      otherCasts.emplace(std::make_pair(otherKeys.lookup(n.operand(0)), n.result()->dtype()), &n);
    else
      otherNodes.emplace(otherKeys.lookup(n.result()), &p);
  }
  std::string changedList, newList;
  size_t added = 0;
  for (unsigned i = 0; i < precision.size(); ++i) {
    const ampc::Node &n = *precision[i].node;
    if (n.numResults() == 0)
      continue;
    std::string id = dotOpId(i);
    std::string link = "<li><a href=\"#select=" + id + "\" data-target=\"" + id + "\">" +
                       html(precision[i].label) + "</a> " + html(n.opName());
    if (n.kind() == OpKind::Cast) {
      if (!otherCasts.count(std::make_pair(keys.lookup(n.operand(0)), n.result()->dtype()))) {
        d.kindOf[id] = "new";
        d.before[id] = "no such cast at " + otherLevel;
      }
      continue;
    }
    auto it = otherNodes.find(keys.lookup(n.result()));
    if (it == otherNodes.end()) {
      d.kindOf[id] = "new";
      d.before[id] = "not at " + otherLevel;
      newList += link + "</li>\n";
      ++added;
      continue;
    }
    matched[it->first] = true;
    if (it->second->precision != precision[i].precision) {
      d.kindOf[id] = "changed";
      d.before[id] = it->second->precision + " at " + otherLevel + " (" + it->second->reason + ")";
      changedList += link + " " + html(it->second->precision) + " \u2192 " +
                     html(precision[i].precision) + "</li>\n";
      ++d.changed;
    }
  }
  std::string goneList;
  size_t gone = 0;
  for (const auto &[key, p] : otherNodes)
    if (!matched.count(key)) {
      goneList += "<li>" + html(p->label) + " " + html(p->node->opName()) + "</li>\n";
      ++gone;
    }
  PrecisionStats stats = Access::graph(&g).precisionStats(),
                 otherStats = Access::graph(&other).precisionStats();
  std::string &out = d.panel;
  out = "<section id=\"diff\"><h2>Against " + html(otherLevel) + "</h2>\n<p id=\"diff-summary\">" +
        std::to_string(d.changed) + " nodes compute in another dtype at " + html(level) + ", " +
        std::to_string(added) + " only at " + html(level) + ", " + std::to_string(gone) +
        " only at " + html(otherLevel) + "; casts " + std::to_string(otherStats.casts) +
        " \u2192 " + std::to_string(stats.casts) + " (" + std::to_string(otherStats.castBytes) +
        " \u2192 " + std::to_string(stats.castBytes) + " bytes per step)";
  if (program && otherProgram)
    out += "; peak memory " + std::to_string(otherProgram->memoryPlanSummary().peakBytes) +
           " \u2192 " + std::to_string(program->memoryPlanSummary().peakBytes) + " B";
  out += "</p>\n";
  auto list = [&](const std::string &title, const std::string &items) {
    if (!items.empty())
      out += "<details open><summary>" + html(title) + "</summary><ul class=\"castlist\">\n" +
             items + "</ul></details>\n";
  };
  list("another dtype", changedList);
  list("only at " + level, newList);
  list("only at " + otherLevel, goneList);
  out += "</section>\n";
  return d;
}

/// `against`: the level a --diff page is marked against ("" for none);
/// `folded`: the page draws block instances as boxes.
std::string legend(const ampc::Graph &g, const std::string &against, bool folded) {
  bool has[5] = {};
  for (const ampc::Node &n : g.nodes())
    has[static_cast<unsigned>(n.role())] = true;
  std::string out = "<div class=\"legend\">";
  for (const char *dt : {"f32", "bf16", "f16", "other"})
    out += std::string("<span class=\"swatch dt-") + dt + "\">" + dt + "</span>";
  out += "<span class=\"swatch cast\">cast</span><span class=\"swatch cacheable\">cast of "
         "state</span>";
  if (folded)
    out += "<span class=\"swatch fold\">block instance</span>";
  if (!against.empty())
    out += "<span class=\"swatch changed\">other dtype at " + html(against) +
           "</span><span class=\"swatch new\">not at " + html(against) + "</span>";
  out += "</div>\n<div class=\"toggles\">";
  // Only the parts this graph has can be hidden.
  for (ampc::NodeRole r :
       {ampc::NodeRole::Backward, ampc::NodeRole::Optimizer, ampc::NodeRole::LossScale}) {
    if (!has[static_cast<unsigned>(r)])
      continue;
    std::string name = ampc::roleName(r).str();
    out += "<label><input type=\"checkbox\" checked data-role=\"" + name + "\" id=\"show-" + name +
           "\"> " + (r == ampc::NodeRole::LossScale ? std::string("loss scaling") : name) +
           "</label>";
  }
  out += "<span class=\"zoom\"><button type=\"button\" data-zoom=\"out\" title=\"zoom out "
         "(-)\">\u2212</button><button type=\"button\" data-zoom=\"fit\" title=\"the whole "
         "width (0)\">fit</button><button type=\"button\" data-zoom=\"in\" title=\"zoom in "
         "(+)\">+</button> <span id=\"zoom-level\">100%</span> <span class=\"hint\">drag to "
         "pan, Ctrl+wheel or double-click to zoom</span></span></div>\n";
  return out;
}

/// Whether Graphviz lays a drawing of this size out fast (ViewOptions).
bool laysOutFast(const DotSize &s, const ViewOptions &opts) {
  return s.nodes <= opts.foldAboveNodes && s.span <= opts.foldAboveSpan;
}

size_t drawnItems(const ampc::Graph &g) {
  return g.numNodes() + g.inputs().size() + g.state().size();
}

Result<ViewPlan> planOf(const ampc::Graph &g, const DotDrawing &drawing, const ViewOptions &opts) {
  ViewPlan plan;
  plan.nodes = drawnItems(g);
  auto use = [&](unsigned depth, const DotSize &s) {
    plan.foldDepth = depth;
    plan.drawn = s.nodes;
    plan.boxes = s.boxes;
    plan.edgeSpan = s.span;
    return plan;
  };
  auto tooMany = [&](const std::string &what) {
    return Status::error("the graph has " + std::to_string(plan.nodes) +
                         " nodes, inputs and state tensors" + what + "; a page draws at most " +
                         std::to_string(opts.maxDrawnNodes) +
                         " (try --graph forward, or --emit dot and a layout tool of your choice)");
  };
  if (opts.detail == ViewDetail::Ops) {
    if (plan.nodes > opts.maxDrawnNodes)
      return tooMany("");
    return use(0, drawing.size(0));
  }
  DotSize all = drawing.size(0);
  if (opts.detail == ViewDetail::Auto && laysOutFast(all, opts) && all.nodes <= opts.maxDrawnNodes)
    return use(0, all);
  // As little folded as lays out fast, the innermost instances first; if
  // nothing does, as folded as it gets.
  unsigned deepest = drawing.maxFoldDepth();
  for (unsigned depth = deepest; depth >= 1; --depth) {
    DotSize s = drawing.size(depth);
    if (laysOutFast(s, opts) || depth == 1) {
      if (s.nodes > opts.maxDrawnNodes)
        return tooMany(", and folded into its blocks " + std::to_string(s.nodes));
      return use(depth, s);
    }
  }
  // No blocks to fold.
  if (plan.nodes > opts.maxDrawnNodes)
    return tooMany(" and no blocks to fold");
  return use(0, all);
}

/// The details of a folded block instance: what its box counts, and its
/// nodes, each a link to its own details.
std::string boxEntry(const DotBox &b) {
  auto counts = [](llvm::ArrayRef<std::pair<std::string, unsigned>> list) {
    std::string out = "[";
    for (const auto &[what, n] : list)
      out += (out.size() > 1 ? ", [" : "[") + jsonString(what) + ", " + std::to_string(n) + "]";
    return out + "]";
  };
  auto ids = [](llvm::ArrayRef<unsigned> list, std::string (*idOf)(unsigned)) {
    std::string out = "[";
    for (unsigned k : list)
      out += (out.size() > 1 ? ", " : "") + jsonString(idOf(k));
    return out + "]";
  };
  return JsonObject()
      .str("kind", "block")
      .str("name", boxName(b))
      .str("block", b.block)
      .str("role", ampc::roleName(b.role))
      .str("precision", b.dtype)
      .raw("dtypes", counts(b.dtypes))
      .raw("kinds", counts(b.kinds))
      .raw("casts", counts(b.casts))
      .raw("ops", ids(b.ops, dotOpId))
      .raw("inputs", ids(b.inputs, dotInputId))
      .raw("state", ids(b.state, dotStateId))
      .done();
}

/// The note at the top of a folded page: that it is folded, why, and the
/// ways to every node.
std::string foldNote(const ViewPlan &plan, const ViewOptions &opts) {
  std::string why = opts.detail == ViewDetail::Blocks ? " (--detail blocks)"
                                                      : ", too many to lay out in reasonable time";
  return "<p id=\"fold-note\" class=\"folded\"><b>Folded.</b> The graph has <span "
         "id=\"total-count\">" +
         std::to_string(plan.nodes) + "</span> nodes, inputs and state tensors" + why +
         ": each block instance nested " + std::to_string(plan.foldDepth) +
         " deep, and each shallower one with no blocks inside, is drawn as one box (<span "
         "id=\"box-count\">" +
         std::to_string(plan.boxes) + "</span> boxes, " + std::to_string(plan.drawn) +
         " drawn in all); a click on a box lists what it holds. Every node: <code>ampc view "
         "--detail ops</code> (slow), <code>ampc --emit dot</code>, or <code>--graph "
         "forward</code> for the forward pass alone.</p>\n";
}

} // namespace

Result<ViewPlan> planView(const Model &model, const ViewOptions &opts) {
  const ampc::Graph &g = *Access::impl(model).graph;
  return planOf(g, DotDrawing(g), opts);
}

Result<std::string> graphPage(const Model &model, const Program *program, const ViewOptions &opts) {
  const ampc::Graph &g = *Access::impl(model).graph;
  DotDrawing drawing(g);
  Result<ViewPlan> plan = planOf(g, drawing, opts);
  if (!plan)
    return plan.status();
  std::string dot;
  llvm::raw_string_ostream dotOs(dot);
  drawing.print(dotOs, plan->foldDepth);
  dotOs.flush();
  Result<std::string> svg = layoutSvg(dot);
  if (!svg)
    return svg.status();
  // The <svg> element alone: the XML prologue and doctype have no place
  // inside HTML.
  size_t start = svg->find("<svg");
  if (start == std::string::npos)
    return Status::error("graph layout failed: Graphviz wrote no <svg> element");

  // What a click shows, by element id, and the names the SVG is tagged with.
  llvm::StringMap<std::string> nameOf;
  std::string nodes = "{";
  auto add = [&](const std::string &id, const std::string &name, const std::string &entry) {
    nameOf[id] = name;
    nodes += (nodes.size() > 1 ? ",\n" : "\n") + jsonString(id) + ": " + entry;
  };
  std::vector<NodePrecision> precision = explainPrecision(g);
  std::optional<LevelDiff> diff;
  if (opts.against)
    diff =
        diffAgainst(g, precision, *Access::impl(*opts.against).graph, program, opts.againstProgram);
  // Folded, each node's entry names the box it is drawn in.
  std::vector<DotBox> boxes = drawing.boxes(plan->foldDepth);
  llvm::StringMap<std::string> boxOf;
  for (const DotBox &b : boxes) {
    for (unsigned i : b.ops)
      boxOf[dotOpId(i)] = b.id;
    for (unsigned k : b.inputs)
      boxOf[dotInputId(k)] = b.id;
    for (unsigned k : b.state)
      boxOf[dotStateId(k)] = b.id;
  }
  auto extend = [](std::string &entry, llvm::StringRef key, llvm::StringRef value) {
    entry =
        entry.substr(0, entry.size() - 1) + ", " + jsonString(key) + ": " + jsonString(value) + "}";
  };
  auto addValue = [&](const std::string &id, const ampc::Value &v) {
    std::string entry = valueEntry(v);
    if (auto it = boxOf.find(id); it != boxOf.end())
      extend(entry, "box", it->second);
    add(id, "%" + v.name().str(), entry);
  };
  for (unsigned i = 0; i < precision.size(); ++i) {
    std::string entry = opEntry(*precision[i].node, precision[i]);
    if (diff)
      if (auto it = diff->before.find(dotOpId(i)); it != diff->before.end())
        extend(entry, "before", it->second);
    if (auto it = boxOf.find(dotOpId(i)); it != boxOf.end())
      extend(entry, "box", it->second);
    add(dotOpId(i), precision[i].label, entry);
  }
  for (const DotBox &b : boxes)
    add(b.id, boxName(b), boxEntry(b));
  for (unsigned k = 0; k < g.inputs().size(); ++k)
    addValue(dotInputId(k), *g.inputs()[k]);
  for (unsigned k = 0; k < g.state().size(); ++k)
    addValue(dotStateId(k), *g.state()[k]);
  nodes += "\n}";

  PrecisionStats stats = model.graph().precisionStats();
  std::string level = optLevelOf(g);
  bool train = false;
  for (const ampc::Node &n : g.nodes())
    train |= n.role() == ampc::NodeRole::Backward || n.role() == ampc::NodeRole::Optimizer;
  std::string title = g.name() + " (" + level + ", " + (train ? "train" : "forward") + " graph)";

  std::string page;
  page.reserve(svg->size() + nodes.size() + 16384);
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"generator\" content=\"ampc view\">\n<title>ampc view: " +
          html(title) + "</title>\n<style>\n" + kViewStyle + "</style>\n</head>\n<body>\n";
  page += "<header>\n<h1>" + html(g.name()) + " <span class=\"sub\">" + html(level) + " \u00b7 " +
          (train ? "training graph" : "forward graph") + "</span></h1>\n";
  page += "<div class=\"stats\"><span id=\"node-count\">" + std::to_string(g.numNodes()) +
          "</span> nodes \u00b7 <span id=\"cast-count\">" + std::to_string(stats.casts) +
          "</span> casts \u00b7 <span id=\"half-count\">" + std::to_string(stats.halfOps) +
          "</span> of " + std::to_string(stats.ops) + " ops in half";
  if (program)
    page += " \u00b7 peak memory <span id=\"peak-bytes\">" +
            std::to_string(program->memoryPlanSummary().peakBytes) + "</span> B";
  if (diff)
    page += " \u00b7 <span id=\"diff-count\">" + std::to_string(diff->changed) +
            "</span> in another dtype than at " +
            html(optLevelOf(*Access::impl(*opts.against).graph));
  page += "</div>\n" +
          legend(g, diff ? optLevelOf(*Access::impl(*opts.against).graph) : "", plan->folded());
  if (plan->folded())
    page += foldNote(*plan, opts);
  page += "</header>\n<div id=\"main\">\n<div id=\"graph\">\n";
  page += tagNodes(llvm::StringRef(*svg).drop_front(start), nameOf,
                   diff ? diff->kindOf : llvm::StringMap<std::string>());
  page += "</div>\n<aside id=\"side\">\n<section id=\"details\"><h2>Node</h2>\n"
          "<p class=\"hint\">Click a node to see its op, types, memory, the rule that chose its "
          "precision and where the model file defines it.</p></section>\n";
  if (diff)
    page += diff->panel;
  page += castPanel(g, stats);
  page += groupsPanel(model.graph().parameterGroups());
  page += memoryPanel(program, opts);
  page += "</aside>\n</div>\n<script type=\"application/json\" id=\"ampc-nodes\">" + nodes +
          "</script>\n<script>\n" + kViewScript + "</script>\n</body>\n</html>\n";
  return page;
}

} // namespace ampc::api
