//===- Trainer.h - The training loop --------------------------------------===//
//
// Runs a compiled training step (a graph after autodiff and the optimizer
// lowering) over a data source: micro-batches in order, the optimizer step
// once per `accumulate` of them (the update ops gate themselves on the step
// counter, so the loop only counts), evaluation on a held-out split, logging,
// a JSON-lines metrics file, checkpoints and resume.
//
// Step numbering: `step` counts optimizer steps from 1 in logs and metrics;
// the Program runs micro-step m = 0, 1, 2, ... (it seeds dropout and the
// schedule). A run resumed from a checkpoint at step N continues with
// micro-step N * accumulate and the batch the uninterrupted run would have
// drawn, so N + M steps equal N steps, resume, M steps, bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_TRAIN_TRAINER_H
#define AMPC_RUNTIME_TRAIN_TRAINER_H

#include "ir/support/AtomicFile.h"
#include "runtime/Program.h"
#include "runtime/data/DataSource.h"
#include "runtime/data/Prefetch.h"

#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ampc {

namespace dist {
class Communicator;
}

enum class ProgressStyle {
  Auto,  ///< a progress bar on a terminal, lines otherwise
  Bar,   ///< one line redrawn in place
  Lines, ///< one line per logged step
  None,  ///< only the summary
};

struct TrainOptions {
  int64_t steps = 1;      ///< optimizer steps to reach (counting resumed ones)
  int64_t accumulate = 1; ///< micro-batches per optimizer step
  int64_t evalEvery = 0;  ///< evaluate every N steps (and at the end); 0: never
  int64_t logEvery = 10;  ///< log every N steps (and the first and last); 0: never
  ProgressStyle progress = ProgressStyle::Auto;
  std::string metricsPath;     ///< JSON lines, one per step ("" = none)
  std::string checkpointPath;  ///< written at the end ("" = none)
  int64_t checkpointEvery = 0; ///< also every N steps (needs checkpointPath)
  std::string resumePath;      ///< checkpoint to continue from ("" = none)
  std::string optLevel = "O0"; ///< recorded in checkpoints
  /// Whether the checkpoint may go through a symlink or into a device.
  SpecialOutputs specialOutputs = SpecialOutputs::Refuse;
  /// What the run trains on, recorded in checkpoints and checked on resume:
  /// a changed batch size is refused, a changed data source or learning-rate
  /// schedule is applied and said in one line (0 / "" = not recorded).
  int64_t batchSize = 0;
  std::string dataDescription, scheduleDescription;
  /// Make the next batch on background threads while a step runs: this
  /// many (0: BatchPrefetcher::defaultWorkers, the cores the kernels'
  /// threads leave free, at least one).
  bool prefetch = true;
  int dataWorkers = 0;
  /// Size the kernels' thread team to the cores the process gets, between
  /// steps (ThreadGovernor), starting from kernelThreads().
  bool adaptThreads = false;
  /// Time the program's kernels from the second step on (the first, when
  /// it is the only one): Program::setProfiling with traceSteps.
  bool profile = false;
  size_t traceSteps = 0;
  /// Data-parallel training (docs/distributed.md): this rank's job, of more
  /// than one rank. The ranks first agree that they run the same training
  /// graph from the same step (else every rank fails, saying so); the
  /// logged loss is the mean over the ranks' shards (the global batch's),
  /// and at the end the ranks check that their parameters, optimizer and
  /// scaler state kept the same bits. The caller gives rank 0 alone the
  /// metrics file, checkpoint and progress. Null: one process.
  dist::Communicator *communicator = nullptr;
};

struct EvalResult {
  double loss = 0;
  std::optional<double> accuracy; ///< classification losses only
  /// Classification with at least 5 classes: the label among the 5 largest logits.
  std::optional<double> top5;
  int64_t samples = 0;
};

struct TrainResult {
  int64_t firstStep = 0; ///< steps already done when the run started (resume)
  int64_t steps = 0;     ///< optimizer steps done in total
  double firstLoss = 0, finalLoss = 0;
  /// With loss scaling: steps skipped for overflow in this run, and the
  /// scale after the last step.
  int64_t skippedSteps = 0;
  std::optional<double> finalLossScale;
  /// With amp.num_losses > 1: each loss's final scale.
  std::vector<double> finalLossScales;
  std::optional<EvalResult> eval; ///< the last evaluation
  double meanStepMs = 0;          ///< over the steps this run did, the first excluded
  /// Of meanStepMs, waiting for batches and binding them (with prefetch,
  /// only what loading took beyond the step before).
  double meanDataMs = 0;
  std::vector<double> stepMs; ///< each step's time in this run, in order
  /// With adaptThreads: the steps run at each team size, and how often it
  /// changed (no changes: one entry).
  std::map<int, int64_t> stepsAtThreads;
  int threadChanges = 0;
  /// How the batches were made (with prefetch).
  PrefetchCounts prefetch;
  uint64_t plannedBytes = 0, allocatedBytes = 0;
  /// Held by kernels outside the arenas (frozen weights kept in oneDNN's
  /// layout; MeasuredMemory::kernelHeldBytes), the evaluation program's
  /// included.
  uint64_t kernelHeldBytes = 0;
};

/// Evaluation: a forward-only Program in inference mode (see the eval-mode
/// pass) that shares the training Program's parameters and buffers by name,
/// and the held-out samples.
struct Evaluator {
  Program *program = nullptr;
  DataSource *data = nullptr;
  /// The same graph compiled for the last partial batch (data size modulo
  /// the program's batch); null when the batch divides the data, or when
  /// the model cannot be built at another batch (an ONNX export with the
  /// batch in its reshapes): the last samples then run padded to a whole
  /// batch through `program`, their loss separated exactly (evaluate()).
  Program *tail = nullptr;
};

class Trainer {
public:
  Trainer(Program &train, DataSource &data, BatchOptions batching, TrainOptions options,
          Evaluator eval = {})
      : train_(train), data_(data), batching_(batching), options_(std::move(options)), eval_(eval) {
  }

  /// Trains; progress goes to `out`. False + `err` on a failure (bad data,
  /// a non-finite loss, an unwritable file, a refused checkpoint).
  bool run(llvm::raw_ostream &out, TrainResult &result, std::string &err);

  /// Copies shared state into the eval Program(s) and runs every sample of
  /// the evaluation data (the last partial batch through eval.tail): the
  /// loss is the mean over samples.
  bool evaluate(EvalResult &result, std::string &err);

private:
  Program &train_;
  DataSource &data_;
  BatchOptions batching_;
  TrainOptions options_;
  Evaluator eval_;
};

/// Writes `result` as the end-of-run summary (final loss, eval, step time, memory).
void printTrainSummary(const TrainResult &result, llvm::raw_ostream &out);

} // namespace ampc

#endif
