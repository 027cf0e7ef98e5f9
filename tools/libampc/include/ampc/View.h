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

struct ViewOptions {
  /// Shown in the memory panel when no program is given: why there is no
  /// plan ("the plan needs more memory than this machine has").
  std::string memoryNote;
  /// The most nodes, inputs and state tensors a page draws: Graphviz's
  /// layout grows faster than linearly, so a larger graph is refused
  /// rather than left to run for hours.
  size_t maxDrawnNodes = 20000;
  /// Another level of the same model, rewritten for the same stage (`ampc
  /// view --diff LEVEL`): the page marks the nodes that compute in another
  /// dtype than there and those that level lacks, and a panel lists them
  /// with the nodes only that level has, both levels' casts and peak
  /// memory (`againstProgram`'s plan, when given).
  const Model *against = nullptr;
  const Program *againstProgram = nullptr;
};

/// One self-contained HTML page (no network, no external scripts): the
/// model's graph as SVG laid out by Graphviz, nodes coloured by the dtype
/// they compute in, casts drawn apart and counted, a box per role, layer
/// and block, the backward, optimizer and loss-scaling parts hideable; a
/// click on a node shows its op, types, memory, the precision rule that
/// chose its dtype (--explain's reason) and its place in the model file.
/// A side panel shows `program`'s memory plan by class (when a program is
/// given) and the cast summary. Opening the page as `view.html#select=%name`
/// shows that node's details at once.
AMPC_API Result<std::string> graphPage(const Model &model, const Program *program,
                                       const ViewOptions &opts = {});

} // namespace ampc::api

#endif
