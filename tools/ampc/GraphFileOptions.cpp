//===- GraphFileOptions.cpp - `ampc g.yaml`, `ampc g.ir`: as written ------===//
//
// A graph file is what --emit wrote: rewritten already, at its level, with
// its stage's nodes (docs/cli.md, "Graph files"). ampc runs it as it is: it
// trains a training graph, runs or plans a forward one, and emits either
// again. The load refuses what would rewrite it (another --opt-level, a
// mixed-precision override, another --batch, --lr); what is refused here is
// what would need the model file for another reason.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

namespace ampc::cli {

bool checkGraphFileOptions(const api::Model &m, const Options &opts) {
  const bool train = m.rewrittenStage() == api::Stage::Train;
  auto refuse = [&](const std::string &why) {
    err() << "error: '" << opts.model << "' holds " << (train ? "a training" : "a forward")
          << " graph rewritten at " << optLevelOf(m) << ", which runs as written: " << why << "\n";
    return false;
  };
  if (!opts.printAfter.empty() || opts.timePasses)
    return refuse("no pass runs on it, so --print-after and --time-passes have nothing to show "
                  "(ampc-opt runs passes on textual IR)");
  if (opts.graph == "forward" && train)
    return refuse("--graph forward needs the model file (emit the forward graph from it with "
                  "--graph forward)");
  if (opts.graph == "train" && !train)
    return refuse("it has no backward or optimizer nodes, so --graph train needs the model file "
                  "(emit the training graph from it with --graph train)");
  if (opts.run == "forward" && train)
    return refuse("--run forward runs a forward graph (emit one from the model file with --graph "
                  "forward)");
  // --run forward has taken --checkpoint as --resume by now.
  bool trainingOption = opts.steps || opts.epochs || !opts.checkpoint.empty() ||
                        !opts.metricsOut.empty() || opts.profile || !opts.trace.empty() ||
                        (!opts.resume.empty() && opts.run.empty());
  if (opts.evalEvery.value_or(0) > 0)
    return refuse("evaluating while training needs the model file, which builds the evaluation "
                  "graph; train the graph without it (--eval-every 0)");
  if (!train && trainingOption)
    return refuse("it does not train (emit the training graph from the model file, --graph "
                  "train, to train it)");
  return true;
}

} // namespace ampc::cli
