//===- ampc/Program.h - Compiled models: run, train, evaluate -*- C++ -*-===//
#ifndef AMPC_PUBLIC_PROGRAM_H
#define AMPC_PUBLIC_PROGRAM_H

#include "ampc/Compare.h"
#include "ampc/Export.h"
#include "ampc/Model.h"
#include "ampc/Profile.h"
#include "ampc/Status.h"
#include "ampc/Types.h"
#include "ampc/World.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ampc::api {

struct CompileOptions {
  /// "cpu" (oneDNN + OpenMP), "cpu-ref" (the reference kernels), "cuda",
  /// "auto" (CUDA when a GPU is present, else the CPU).
  std::string device = "cpu";
  /// Serve casts of state tensors from the cast cache.
  bool castCache = true;
  /// Folder that relative data and weight paths are resolved against; the
  /// model file's folder when empty.
  std::string baseDir;
  /// Refuse a program whose memory plan needs more bytes; 0 means this
  /// machine's physical memory on a host device, no limit on a GPU (whose
  /// allocator refuses by itself).
  uint64_t maxMemoryBytes = 0;
  /// Run chains of elementwise nodes as one kernel; off keeps every node's
  /// result written (Program::calibrate reads them all).
  bool fuseElementwise = true;
  /// The data-parallel job the program is a rank of (World::join()), which
  /// runs the graph's all-reduces; needed when the model was rewritten for
  /// more than one rank (PipelineOptions::ranks), whose count it must have.
  /// train() then trains on this rank's shard of each global batch, and
  /// only rank 0 writes the metrics, the checkpoint and progress.
  std::shared_ptr<World> world;
};

/// How evaluate(DataSpec) and predict() run their batches.
struct InferenceRunOptions {
  /// On the cpu device, size the kernels' thread team to the cores this
  /// process gets between batches, as TrainOptions::adaptThreads does for
  /// steps (smaller while another process shares the cores). Off: the team
  /// stays at api::threads().
  bool adaptThreads = false;
};

/// Data to evaluate or predict on (Program::evaluate, Program::predict),
/// to calibrate or record a step on (Program::calibrate, recordStep).
struct DataSpec {
  /// "" : the model's own `train.data`; a path ending in `.csv` (a CSV file
  /// in `train.data`'s csv format, label in the last column); or a data
  /// source in the model file's `train.data` syntax, as inline YAML:
  /// `{npy: {x: x.npy, y: y.npy}}`, `{csv: {path: t.csv, header: true}}`,
  /// `{idx: {images: i, labels: l}}`, `{synthetic: {seed: 1, size: 100}}`.
  std::string spec;
  /// Folder that relative paths in `spec` resolve against; the current
  /// directory when empty. (The model's own data resolves against the
  /// model's folder.)
  std::string baseDir;
};

/// `ampc calibrate` (Program::calibrate): each node's value range over a
/// few training steps in f32, against a half type's range.
struct CalibrateOptions {
  DType halfType = DType::F16;
  int64_t batches = 4;
  /// The batches: the first of this data ("" = the model's training data).
  DataSpec data;
};
struct CalibrationRow {
  std::string node, op;
  NodeRole role = NodeRole::Forward;
  double maxAbs = 0;
  /// Of the nonzero values: the fraction below the half type's smallest
  /// normal (they lose precision) and below half its smallest subnormal
  /// (they flush to zero).
  double subnormalFraction = 0, flushFraction = 0;
  bool overflows = false;
};
struct CalibrationReport {
  DType halfType = DType::F16;
  int64_t batches = 0;
  std::vector<CalibrationRow> rows; ///< every observed node, schedule order
  /// The nodes that would overflow or flush more than 1 % of their values
  /// to zero in the half type, with what would keep them safe.
  AMPC_API std::string str() const;
};

/// The device a name selects: "auto" picks CUDA when a GPU is present,
/// else the CPU, and says which in `note`.
struct DeviceChoice {
  std::string name; ///< "cpu", "cpu-ref" or "cuda"
  /// For "auto": one line saying what it picked and why
  /// ("device: auto -> cpu (...)"); "" otherwise.
  std::string note;
};
/// Checks that `device` exists and can run here; an error naming why not
/// (an unknown name, no CUDA device).
AMPC_API Result<DeviceChoice> selectDevice(std::string_view device);

/// How progress is shown while training.
enum class Progress {
  Auto,  ///< a bar when writing to a terminal's stdout, lines otherwise
  Bar,   ///< one line redrawn in place ('\r')
  Lines, ///< one line per logged step
  None,  ///< only what must be said (resuming, evaluation at the end)
};

/// The runtime's cast cache over a run: casts of state tensors served from
/// the cache (hits) and recomputed (misses).
struct CastCacheStats {
  uint64_t hits = 0, misses = 0;
  uint64_t bytesSaved = 0;
  /// "cast cache: H casts of weights reused (B bytes not recast), M made
  /// after a weight change".
  std::string str;
};

/// What a device backend did with the program (`ampc --device cuda` prints
/// it; all zero on the CPU): the nodes that run on the host fallback
/// (operands copied to the host and results back: slow, and the step is
/// never captured) and how the training steps were issued.
struct DeviceActivity {
  unsigned hostFallbackNodes = 0;
  std::vector<std::string> hostFallbackOps; ///< their op names, each once
  uint64_t eagerSteps = 0;                  ///< launched kernel by kernel
  uint64_t capturedSteps = 0;               ///< captured into a CUDA graph (and launched)
  uint64_t replayedSteps = 0;               ///< one launch of the captured graph
  /// Collectives (a data-parallel job's all-reduces) that run on the device
  /// through NCCL; those staged through the host count as host fallback.
  unsigned deviceCollectiveNodes = 0;
  /// "device: 0 nodes on the host fallback; steps: 1 eager, 1 captured into
  /// a CUDA graph, 18 replayed", and "; 3 all-reduces through NCCL" where
  /// there are some.
  std::string str;
};

/// One forward batch (Program::runForward).
struct ForwardReport {
  int64_t samples = 0;  ///< rows of the batch
  std::string dataKind; ///< where they came from ("synthetic", ...)
  struct Output {
    std::string name;
    TensorInfo info;
    std::string typeStr;
    /// A scalar's value; the mean of the elements otherwise.
    double value = 0;
  };
  std::vector<Output> outputs;
  uint64_t plannedBytes = 0, allocatedBytes = 0;
  /// Of the step arena's stepBytes, the bytes the kernels touched.
  uint64_t touchedStepBytes = 0, stepBytes = 0;
  /// False when a kernel wrote past the end of an arena (a bug).
  bool guardsIntact = true;
  /// Held by kernels outside the arenas: weights kept in oneDNN's layout
  /// (parameters that do not change between runs), on the `cpu` device.
  uint64_t kernelHeldBytes = 0;
};

struct EvalReport {
  /// The mean of the loss over every sample (the last partial batch included).
  double loss = 0;
  std::optional<double> accuracy; ///< classification losses only
  /// Classification with at least 5 classes: the label among the 5 largest logits.
  std::optional<double> top5;
  int64_t samples = 0;
  /// The loss op ("cross_entropy", "mse_loss", ...).
  std::string lossKind;
};

/// A model's predictions for every sample of some data (Program::predict).
struct Predictions {
  std::string name;           ///< the tensor predicted (the loss's input, else the first output)
  std::vector<int64_t> shape; ///< [samples, ...]
  std::vector<float> values;  ///< C order
  std::string dataKind;       ///< "npy", "csv", ...
  /// One name per sample where the data names them (an image folder's
  /// files, relative to it), else empty. A .csv file starts each row with it.
  std::vector<std::string> sampleNames;
};

/// Writes predictions atomically (docs/cli.md, "Output files"): `.npy`
/// (f32, or i64 class ids with `argmax`) or `.csv` (one sample a row), by
/// the path's extension. `argmax` writes the index of the largest value of
/// each row's last dimension (class ids).
AMPC_API Status savePredictions(const Predictions &predictions, const std::string &path,
                                bool argmax = false, bool writeThrough = false);

struct TrainOptions {
  /// Optimizer steps to reach, counting those already done; the model's
  /// `train.steps` when unset.
  std::optional<int64_t> steps;
  /// A progress line every N steps (0: none), handed to `log`.
  int64_t logEvery = 0;
  /// Where progress lines go; stdout when empty.
  std::function<void(std::string_view line)> log;
  /// Where progress goes as raw text, a terminal's view ('\r' redraws a
  /// bar, lines end in '\n'), handed over at each progress update (a point
  /// to flush a buffered stream); takes precedence over `log`.
  std::function<void(std::string_view text)> output;
  /// Lines when logEvery > 0, else none, when unset; Auto is a bar only when
  /// progress goes to stdout (no log or output) and stdout is a terminal.
  std::optional<Progress> progress;
  /// Evaluate on the held-out tenth (or `train.eval_data`) every N steps
  /// and at the end (0: never, except that a model with `train.eval_data`
  /// is evaluated at the end): needs a model planned with
  /// `train.eval_every` > 0 or `train.eval_data` (Model::planTraining).
  int64_t evalEvery = 0;
  /// One JSON object per step to this file ("" = none).
  std::string metricsPath;
  /// Write a checkpoint here at the end (and every checkpointEvery steps).
  std::string checkpointPath;
  int64_t checkpointEvery = 0;
  /// Let the checkpoint go through a symlink (to its target) or into a
  /// device or FIFO; refused by default (see writeFileAtomically).
  bool writeThrough = false;
  /// Make each next batch on background threads while the current step
  /// runs (off: in the step, on every core, as a measurement baseline):
  /// dataWorkers of them, at idle priority (0: the cores the kernels'
  /// threads leave free, at least one).
  bool prefetch = true;
  int dataWorkers = 0;
  /// On the cpu device, size the kernels' thread team to the cores this
  /// process gets between steps (ThreadGovernor: smaller while another
  /// process shares the cores, back to api::threads() when they are free
  /// again). Off: the team stays at api::threads(). It sets OpenMP's thread
  /// count for the process while training runs.
  bool adaptThreads = false;
  /// Time every kernel of the step from the second step on (TrainReport::
  /// profile); with traceSteps > 0, also keep a timeline of that many steps
  /// for Program::writeTrace.
  bool profile = false;
  size_t traceSteps = 0;
};

struct TrainReport {
  int64_t firstStep = 0; ///< steps already done when the run started
  int64_t steps = 0;     ///< steps done in total
  double firstLoss = 0, finalLoss = 0;
  int64_t skippedSteps = 0;             ///< steps the loss scaler skipped
  std::optional<double> finalLossScale; ///< with loss scaling
  double meanStepMs = 0;
  /// Of meanStepMs, waiting for batches and binding them (with prefetch,
  /// what loading took beyond the step before; without, all of it).
  double meanDataMs = 0;
  /// Each step's time in this run, in order (the first pays for first
  /// touches of memory and JIT compilation).
  std::vector<double> stepMs;
  /// The last evaluation (with evalEvery).
  std::optional<EvalReport> eval;
  uint64_t plannedBytes = 0, allocatedBytes = 0;
  /// The end-of-run summary `ampc` prints.
  std::string summary;
  /// With TrainOptions::profile (and more than one step).
  std::optional<StepProfile> profile;
};

/// The memory plan's rows (`ampc plan`), for a program that lays them out
/// itself (`ampc view`'s side panel).
struct MemoryPlanSummary {
  struct Class {
    std::string name; ///< "parameters", "activations kept for backward", ...
    /// Persistent classes: their total. Step classes: their bytes live at
    /// the step arena's peak.
    uint64_t bytes = 0;
    bool persistent = false;
  };
  std::vector<Class> classes; ///< in the order `ampc plan` prints them
  uint64_t persistentBytes = 0;
  uint64_t stepBytes = 0;             ///< the step arena's size (its peak)
  uint64_t stepBytesWithoutReuse = 0; ///< what no buffer reuse would cost
  uint64_t peakBytes = 0;             ///< persistent + step
};

class Program;
struct ExportOptions;
struct ExportReport;
/// The `onnx` export format's writer (ampc/ModelExport.h, exportProgram).
Result<ExportReport> exportOnnxFile(const Program &program, const ExportOptions &opts);
struct Weight;
/// Every parameter and buffer in fp32 (ampc/ModelExport.h).
AMPC_API Result<std::vector<Weight>> weightsOf(const Program &program);
struct BatchNormCount;
/// Each batchnorm's num_batches_tracked (ampc/ModelExport.h).
AMPC_API std::vector<BatchNormCount> batchNormCounts(const Program &program);

/// A Model compiled for a device: schedule, memory plan, kernels and state.
/// The Model must outlive its Program and must not be rewritten while the
/// Program exists. Not thread-safe: one thread at a time per Program;
/// different Programs (of different Models) may run on different threads.
class AMPC_API Program {
public:
  static Result<Program> compile(const Model &model, const CompileOptions &opts = {});
  Program(Program &&) noexcept;
  Program &operator=(Program &&) noexcept;
  ~Program();

  /// The device it runs on ("cpu", ...).
  std::string device() const;
  /// Bytes the memory plan needs at peak.
  uint64_t plannedBytes() const;
  /// Bytes the kernels hold outside the memory plan: weights kept in
  /// oneDNN's layout, the all-reduce's pack buffers (4 bytes a gradient
  /// element in f32).
  uint64_t kernelHeldBytes() const;
  /// Ops the schedule runs per step.
  size_t numScheduledOps() const;
  /// The memory plan as `ampc plan` prints it: peak bytes by what they hold
  /// (parameters, optimizer state, activations, ...), one row a line.
  std::string memoryPlan() const;
  /// The gradients' all-reduce of a data-parallel program, per rank and
  /// step: "data-parallel: 2 ranks, 3 all-reduce buckets, 12595200 bytes
  /// per step each way (f32)"; "" for a program of one rank. Every rank's
  /// memory is the plan's (each holds a whole replica).
  std::string collectives() const;
  /// The same plan as numbers.
  MemoryPlanSummary memoryPlanSummary() const;
  /// The cast cache's counts so far (all zero when nothing cacheable ran).
  CastCacheStats castCacheStats() const;
  /// The training program's device activity so far.
  DeviceActivity deviceActivity() const;

  /// The timeline train() kept (TrainOptions::traceSteps) as a Chrome
  /// trace-event JSON file, written atomically: one event per kernel call,
  /// named by node and op, on one track per step role.
  Status writeTrace(const std::string &path, bool writeThrough = false) const;

  /// Trains `batches` steps on the first batches of the data, recording
  /// every node's results; the program should be an f32 (O0) training step
  /// compiled with fuseElementwise off. The weights change as in training.
  Result<CalibrationReport> calibrate(const CalibrateOptions &opts);
  /// Runs one training step on the first batch of `data` (the model's
  /// training data when its spec is empty) and keeps every forward, loss
  /// and backward node's floating results, gradients unscaled (`ampc
  /// compare`, compareSteps). Compile with fuseElementwise off so that
  /// every node's results are written. The weights change as in training.
  Result<StepRecord> recordStep(const DataSpec &data = {});
  /// The same step, each value measured against `reference`'s (and
  /// `f64`'s) as it is made and not kept: the memory of one record, not
  /// two (`ampc compare`).
  Result<ComparisonReport> compareStep(const StepRecord &reference, const StepRecord *f64 = nullptr,
                                       const DataSpec &data = {}, const CompareOptions &opts = {});

  /// Runs one batch of the model's data (its first) through the graph:
  /// `ampc --run forward`. Opens the data if Model::openData() did not.
  Result<ForwardReport> runForward();

  /// Writes an input or state tensor from doubles (converted to its dtype);
  /// `values` must have its element count.
  Status write(std::string_view name, const std::vector<double> &values);
  /// Reads an input, a state tensor, or (after a step) an output.
  Result<std::vector<double>> read(std::string_view name) const;
  /// Runs one step on the inputs as written (a training step on a Train
  /// graph: forward, backward, optimizer update).
  Status step();

  /// Trains on the model's `train.data` from stepsDone() to opts.steps.
  Result<TrainReport> train(const TrainOptions &opts = {});
  /// The loss (and accuracy) over every sample of the model's data (the
  /// held-out part or `train.eval_data` when planned), with
  /// the current parameters, in inference mode. Needs a Train-stage model
  /// loaded from a file or string (the evaluation graph is imported afresh).
  Result<EvalReport> evaluate();
  /// The loss and metrics over every sample of `data` (the last partial
  /// batch runs through a program compiled for its size), with the current
  /// parameters, in inference mode. Any rewritten stage; needs a model
  /// loaded from a file or string.
  Result<EvalReport> evaluate(const DataSpec &data, const InferenceRunOptions &opts = {});
  /// The model's predictions (in inference mode) for every sample of `data`.
  Result<Predictions> predict(const DataSpec &data, const InferenceRunOptions &opts = {});
  /// Optimizer steps done (by train(), or restored by loadCheckpoint()).
  int64_t stepsDone() const;

  /// Every state tensor (parameters, optimizer state, master weights, loss
  /// scaler) and the step, atomically.
  Status saveCheckpoint(const std::string &path) const;
  /// Restores a checkpoint of the same model, written at any opt level
  /// (docs/checkpoints.md): refused, changing nothing, for another model
  /// (the error names the parameter that differs), another optimizer or a
  /// corrupt file; train() then continues from its step. A checkpoint of
  /// another level or dtypes succeeds with a note saying what was rebuilt
  /// from the fp32 masters, carried over, dropped or started afresh.
  Status loadCheckpoint(const std::string &path);
  /// Which weights loadCheckpoint puts into the parameters.
  enum class Weights {
    Trained, ///< as trained
    /// The average `train: {ema: ...}` kept of each trained parameter
    /// (ampc eval/predict/export --ema); refused for a checkpoint without.
    Average,
  };
  Status loadCheckpoint(const std::string &path, Weights weights);

  struct Impl;

private:
  friend Result<std::vector<Weight>> weightsOf(const Program &program);
  friend std::vector<BatchNormCount> batchNormCounts(const Program &program);
  friend Result<ExportReport> exportOnnxFile(const Program &program, const ExportOptions &opts);
  explicit Program(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace ampc::api

#endif
