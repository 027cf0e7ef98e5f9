//===- ampc/Model.h - A model: imported, rewritten, inspected -*- C++ -*-===//
#ifndef AMPC_PUBLIC_MODEL_H
#define AMPC_PUBLIC_MODEL_H

#include "ampc/Export.h"
#include "ampc/Graph.h"
#include "ampc/Pipeline.h"
#include "ampc/Policy.h"
#include "ampc/Status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ampc::api {

struct LoadOptions {
  /// Replaces the file's `batch:` (the shape symbol B).
  std::optional<int64_t> batch;
  /// Largest element count allowed for one tensor.
  int64_t maxElements = int64_t(1) << 32;
  /// Deepest nesting of the model file's YAML (aliases expanded) and of
  /// blocks within blocks.
  int64_t maxNesting = 100;
  /// Most YAML nodes the model file may expand to through aliases.
  int64_t maxYamlNodes = 4'000'000;
  /// Most graph nodes the layers may lower to after block expansion.
  int64_t maxNodes = 1'000'000;
  /// ONNX graph inputs held constant at import: (input name, .npy file of
  /// its value). For operands ampc needs when it imports (a Reshape's
  /// shape, a Clip's bounds) that a model takes as inputs; they stop being
  /// inputs of the graph.
  std::vector<std::pair<std::string, std::string>> fixedInputs;
  /// Replaces the file's `amp.opt_level` ("" keeps it).
  std::string optLevel;
  /// Policy properties set on top of the file's `amp:` section, in order,
  /// as `ampc --half-type bf16 ...` sets them (docs/opt-levels.md). A bad
  /// value is an error of the load, naming the property.
  Policy::Overrides policyOverrides;
};

/// Overrides of the model file's `train` and `optimizer` sections. Set them
/// before rewrite(): the optimizer lowering reads them (a cosine schedule
/// needs the step count).
struct TrainSettings {
  std::optional<int64_t> steps;
  std::optional<double> learningRate;
  /// Seeds parameter initialisation, shuffling and dropout.
  std::optional<int64_t> seed;
  /// Passes over the training data, instead of steps (planTraining turns
  /// them into steps). Setting one of steps and epochs drops the model
  /// file's other; setting both is an error.
  std::optional<int64_t> epochs;
  /// Evaluate on a held-out tenth of the data every N steps (0: never);
  /// planTraining holds the tenth out.
  std::optional<int64_t> evalEvery;
  /// The model's progress interval (`train.log_every`), as `ampc` uses it.
  std::optional<int64_t> logEvery;
  /// `train.recompute`: "none", or "cheap" (forward values the backward
  /// reads that elementwise ops and views make from values live anyway
  /// are computed again there instead of kept; same results, bit for bit;
  /// docs/runtime.md).
  std::optional<std::string> recompute;
};

/// The model's training data (`train.data`) as a training run sees it.
struct DataInfo {
  std::string kind;         ///< "synthetic", "npy", ...
  int64_t samples = 0;      ///< all of them
  int64_t trainSamples = 0; ///< those training draws from
  int64_t heldOut = 0;      ///< held out for evaluation (train.eval_every > 0)
  /// The samples of `train.eval_data` (planTraining), when the model has it.
  int64_t evalSamples = 0;
  std::string evalKind;
  int64_t batchSize = 0;
  int64_t accumulate = 1;      ///< micro-batches per optimizer step
  int64_t batchesPerEpoch = 0; ///< full batches of the training samples
  int64_t steps = 0;           ///< the resolved step count (planTraining)
};

/// Owns one graph. Movable, not copyable (clone() copies). Not thread-safe:
/// use one Model from one thread at a time; different Models may be used on
/// different threads at once.
class AMPC_API Model {
public:
  /// Imports a model file (docs/model-format.md), or loads a graph file as
  /// written: textual IR (`.ir`) or the YAML of `ampc --emit yaml` (a map
  /// with `graph:`). A graph file is rewritten already: asWritten() is true,
  /// rewrittenStage() is the stage it holds (Train when it has backward or
  /// optimizer nodes), rewrite() refuses it, and load options that would
  /// change it (another opt level, policy property or batch) are errors.
  /// Errors carry the file's line and column.
  static Result<Model> loadFile(const std::string &path, const LoadOptions &opts = {});
  /// Imports model-file text; diagnostics name `bufferName`, relative data
  /// and weight paths are resolved against `baseDir`. The YAML of `ampc
  /// --emit yaml` loads as written, as loadFile loads it.
  static Result<Model> loadString(std::string_view yaml, std::string_view bufferName = "<string>",
                                  const LoadOptions &opts = {}, std::string_view baseDir = ".");
  /// Reads a graph in textual IR (docs/textual-ir.md).
  static Result<Model> parseIR(std::string_view text, std::string_view bufferName = "<ir>");

  Model(Model &&) noexcept;
  Model &operator=(Model &&) noexcept;
  ~Model();

  /// A deep copy (through the textual IR, which round-trips exactly).
  Result<Model> clone() const;

  GraphView graph() const;
  std::string name() const;
  /// Whether the model has a loss and an optimizer (can be trained); for a
  /// graph as written, whether it is a training graph.
  bool trainable() const;
  /// Whether loadFile read a graph file (textual IR, or YAML written by
  /// `ampc --emit yaml`), which runs as written: compile() it as it is.
  bool asWritten() const;

  /// Replaces the model file's `amp:` section with `policy`.
  Status setPolicy(const Policy &policy);
  /// The policy in effect (the model file's `amp:` section, or setPolicy's).
  Result<Policy> policy() const;
  Status setTrainSettings(const TrainSettings &settings);

  /// Runs the pipeline of `opts.stage` at the policy's level. A model is
  /// rewritten once; rewriting again is an error.
  Status rewrite(const PipelineOptions &opts = {});
  /// The stage rewrite() ran, if it ran.
  std::optional<Stage> rewrittenStage() const;
  /// Retypes the model's f32 (inputs, parameters, buffers, dtype
  /// attributes) to f64: the reference `ampc compare --reference f64`
  /// measures against. Before rewrite(), at O0 (an fp32 policy); compile it
  /// for `cpu-ref`, the device that runs every op in f64.
  Status widenToF64();

  /// Opens the model's training data (`train.data`, relative paths against
  /// the model's folder) and keeps it for the Programs compiled from this
  /// model. Errors are the data's (a missing file, a wrong shape), with
  /// positions in the model file.
  Result<DataInfo> openData();
  /// What a training run needs before the Train pipeline: opens the data
  /// (if not yet), holds out the last tenth for evaluation when
  /// `train.eval_every` > 0, and resolves the step count (`train.steps`, or
  /// epochs over the training samples) into the model. Beyond openData()'s
  /// errors, fails when the data cannot fill a batch (or a batch beside the
  /// held-out tenth). Call it before rewrite(). `ranks` > 1: a
  /// data-parallel job's (World::size()), whose every step takes a global
  /// batch of ranks x the batch, so an epoch has fewer steps.
  Result<DataInfo> planTraining(int ranks = 1);

  struct Impl;

private:
  friend struct Access;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace ampc::api

#endif
