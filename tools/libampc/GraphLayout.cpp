//===- GraphLayout.cpp - DOT to SVG through Graphviz's libgvc -------------===//
//
// The only file that includes Graphviz: a build without it
// (AMPC_WITH_GRAPHVIZ=OFF) says so instead of laying out.
//
//===----------------------------------------------------------------------===//
#include "ampc/View.h"

#ifdef AMPC_HAVE_GRAPHVIZ
#include <graphviz/gvc.h>

#include <mutex>
#endif

namespace ampc::api {

#ifdef AMPC_HAVE_GRAPHVIZ

namespace {

/// Graphviz reports through one process-wide handler; the messages of the
/// layout in progress are collected here (under layoutMutex).
std::string *collectedErrors = nullptr;

int collectError(char *message) {
  if (collectedErrors && message)
    *collectedErrors += message;
  return 0;
}

std::mutex &layoutMutex() {
  static std::mutex m;
  return m;
}

} // namespace

bool canLayOutGraphs() { return true; }

Result<std::string> layoutSvg(std::string_view dot) {
  // libgvc keeps global state (the error handler, the graph being parsed):
  // one layout at a time.
  std::lock_guard<std::mutex> lock(layoutMutex());
  std::string errors;
  collectedErrors = &errors;
  agusererrf previous = agseterrf(collectError);
  agerrlevel_t previousLevel = agseterr(AGERR); // warnings are not failures
  struct Restore {
    agusererrf f;
    agerrlevel_t level;
    ~Restore() {
      agseterrf(f);
      agseterr(level);
      collectedErrors = nullptr;
    }
  } restore{previous, previousLevel};

  auto fail = [&](const std::string &what) {
    std::string msg = "graph layout failed: " + what;
    if (!errors.empty()) {
      while (!errors.empty() && (errors.back() == '\n' || errors.back() == ' '))
        errors.pop_back();
      msg += " (Graphviz: " + errors + ")";
    }
    return Status::error(msg);
  };

  std::string text(dot); // agmemread wants a NUL-terminated string
  GVC_t *gvc = gvContext();
  if (!gvc)
    return fail("cannot start Graphviz");
  Agraph_t *g = agmemread(text.c_str());
  if (!g) {
    gvFreeContext(gvc);
    return fail("the DOT text does not parse");
  }
  std::string svg;
  bool laidOut = gvLayout(gvc, g, "dot") == 0;
  bool rendered = false;
  if (laidOut) {
    char *data = nullptr;
    unsigned int length = 0;
    if (gvRenderData(gvc, g, "svg", &data, &length) == 0 && data) {
      svg.assign(data, length);
      rendered = true;
    }
    gvFreeRenderData(data);
    gvFreeLayout(gvc, g);
  }
  agclose(g);
  gvFreeContext(gvc);
  if (!laidOut)
    return fail("Graphviz has no 'dot' layout engine (is the graphviz package's plugin "
                "configuration in place? `dot -c` as root writes it)");
  if (!rendered)
    return fail("Graphviz cannot render SVG");
  return svg;
}

#else

bool canLayOutGraphs() { return false; }

Result<std::string> layoutSvg(std::string_view) {
  return Status::error("this ampc was built without Graphviz (AMPC_WITH_GRAPHVIZ=OFF): use "
                       "`ampc --emit dot` and Graphviz's `dot -Tsvg`");
}

#endif

} // namespace ampc::api
