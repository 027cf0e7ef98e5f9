//===- ampc/Pipeline.h - Running the passes, with the host's hooks -*- C++ -*-===//
//
// The standard pipeline (docs/opt-levels.md):
//   forward:  assign-precision, cast-optimize
//   train:    assign-precision, sync-batchnorm, autodiff, optimizer,
//             master-weights, data-parallel, loss-scale, cast-optimize, dce
// A host program can watch the graph after every pass and insert passes of
// its own before or after any named pass.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_PIPELINE_H
#define AMPC_PUBLIC_PIPELINE_H

#include "ampc/Export.h"
#include "ampc/Graph.h"
#include "ampc/Status.h"
#include "ampc/Types.h"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ampc::api {

/// A host program's pass: edits the graph through the editor; an error
/// Status stops the pipeline (the Model is then in an unspecified state:
/// load it again).
struct HostPass {
  std::string name;
  std::function<Status(GraphEditor &graph)> run;
};

struct AMPC_API PipelineOptions {
  Stage stage = Stage::Train;
  /// The device whose capabilities the precision passes ask (which ops it
  /// runs in half): "cpu", "cpu-ref", "cuda", "auto".
  std::string device = "cpu";
  /// Run the verifier after every pass.
  bool verifyEach = false;
  /// Print each pass's wall time to stderr.
  bool timePasses = false;
  /// Train stage: a model that gives `train.epochs` gets its step count
  /// from its data first (Model::planTraining), as the optimizer lowering
  /// needs it. False leaves it unresolved (inspecting the graph, without
  /// opening the data).
  bool resolveEpochs = true;
  /// Forward stage: run training-mode ops (batchnorm with batch statistics,
  /// dropout) as in training. Unset: the model file's
  /// `train.forward_training` (default false: the forward graph is an
  /// inference graph, batchnorm uses its running statistics, dropout is off).
  std::optional<bool> training;
  /// Train stage, data-parallel training (docs/distributed.md): the ranks
  /// of the job the graph is for (World::size()); more than one inserts the
  /// gradients' all-reduce (the data-parallel pass). 1: one process.
  int ranks = 1;
  /// What the all-reduce moves and sums: "f32" (half gradients widened,
  /// the average rounded once) or "half" (half gradients in their own type:
  /// half the bytes).
  std::string allreduceDtype = "f32";
  /// Most bytes one all-reduce bucket holds (DistributedDataParallel's 25 MiB).
  int64_t bucketBytes = int64_t(25) << 20;
  /// With ranks > 1: batchnorm over the global batch's statistics
  /// (SyncBatchNorm; the sync-batchnorm pass), as the model file's
  /// `train.sync_batchnorm: true` asks.
  bool syncBatchnorm = false;
  /// Called after every pass (built-in and host) with its name and the graph.
  std::function<void(std::string_view pass, const GraphView &graph)> afterPass;
  /// Passes after which the textual IR is handed to `print` ("all": every pass).
  std::vector<std::string> printAfter;
  /// Where printAfter's IR goes; stderr when empty.
  std::function<void(std::string_view pass, std::string_view ir)> print;

  /// Runs `pass` right after (or before) the standard pass named `anchor`;
  /// "begin" and "end" name the two ends. Several at one point run in the
  /// order added. An unknown anchor is an error of Model::rewrite.
  PipelineOptions &insertAfter(std::string anchor, HostPass pass);
  PipelineOptions &insertBefore(std::string anchor, HostPass pass);

  struct Insertion {
    std::string anchor;
    bool before = false;
    HostPass pass;
  };
  std::vector<Insertion> insertions;
};

/// The standard pass names of `stage`, in order.
AMPC_API std::vector<std::string> standardPasses(Stage stage);

} // namespace ampc::api

#endif
