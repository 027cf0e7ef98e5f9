//===- ampc/View.h - The rewritten graph as a picture and a page -*- C++ -*-===//
//
// `ampc --emit dot` is GraphView::toDot(); `ampc view` is graphPage() on a
// rewritten model and its compiled program (docs/inspect.md).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_VIEW_H
#define AMPC_PUBLIC_VIEW_H

#include "ampc/Export.h"
#include "ampc/Status.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace ampc::api {

class Model;
class Program;

/// Whether this build lays graphs out (Graphviz's libgvc; the CMake option
/// AMPC_WITH_GRAPHVIZ).
AMPC_API bool canLayOutGraphs();

/// Lays DOT text (GraphView::toDot()) out with Graphviz's `dot` engine and
/// returns the SVG document.
AMPC_API Result<std::string> layoutSvg(std::string_view dot);

/// How much a page draws: every node, or each block instance as one box.
enum class ViewDetail {
  Auto,   ///< every node while the drawing lays out fast, else folded
  Ops,    ///< every node, however long the layout takes (up to maxDrawnNodes)
  Blocks, ///< folded (every node when the graph has no blocks)
};

struct ViewOptions {
  /// Shown in the memory panel when no program is given: why there is no
  /// plan ("the plan needs more memory than this machine has").
  std::string memoryNote;
  /// The most nodes, inputs, state tensors and boxes a page draws: an
  /// unfolded drawing of more is refused (ViewDetail::Ops), and so is a
  /// graph that even folded would draw more.
  size_t maxDrawnNodes = 20000;
  ViewDetail detail = ViewDetail::Auto;
  /// Graphviz's layout time grows with the nodes it draws and faster with
  /// the ranks its edges cross (DotSize): a drawing with more of either is
  /// folded (Auto), and folding draws as many block instances unfolded as
  /// it can within both. On a 2-core machine, of 34 model graphs those
  /// within both limits laid out in at most 10 s, those beyond in up to
  /// minutes (docs/inspect.md).
  size_t foldAboveNodes = 1500;
  size_t foldAboveSpan = 40000;
  /// Another level of the same model, rewritten for the same stage (`ampc
  /// view --diff LEVEL`): the page marks the nodes that compute in another
  /// dtype than there and those that level lacks, and a panel lists them
  /// with the nodes only that level has, both levels' casts and peak
  /// memory (`againstProgram`'s plan, when given).
  const Model *against = nullptr;
  const Program *againstProgram = nullptr;
};

/// What a page of a model draws (ViewOptions::detail and the limits).
struct ViewPlan {
  size_t nodes = 0;       ///< the graph's nodes, inputs and state tensors
  unsigned foldDepth = 0; ///< 0: every node; d: block instances d deep are boxes
  size_t drawn = 0;       ///< nodes and boxes drawn
  size_t boxes = 0;       ///< of which boxes
  size_t edgeSpan = 0;    ///< the ranks the drawing's edges cross (an estimate)
  bool folded() const { return foldDepth > 0; }
};

/// Decides how a page of `model` is drawn, without laying anything out; an
/// error when the drawing would be too large (ViewOptions::maxDrawnNodes).
AMPC_API Result<ViewPlan> planView(const Model &model, const ViewOptions &opts = {});

/// One self-contained HTML page (no network, no external scripts): the
/// model's graph as SVG laid out by Graphviz, nodes coloured by the dtype
/// they compute in, casts drawn apart and counted, a box per role, layer
/// and block, the backward, optimizer and loss-scaling parts hideable; a
/// click on a node shows its op, types, memory, the precision rule that
/// chose its dtype (--explain's reason) and its place in the model file.
/// A side panel shows `program`'s memory plan by class (when a program is
/// given) and the cast summary. Opening the page as `view.html#select=%name`
/// shows that node's details at once. A large graph is drawn folded
/// (planView): each block instance one box, and a note at the top says so.
AMPC_API Result<std::string> graphPage(const Model &model, const Program *program,
                                       const ViewOptions &opts = {});

} // namespace ampc::api

#endif
