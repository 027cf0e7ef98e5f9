//===- Driver.h - What the ampc commands share ----------------------------===//
//
// The CLI is a client of the public library (tools/libampc, docs/library.md):
// it includes only "ampc/..." headers. What it prints is the library's text
// (the policy, the explain table, the memory plan, the training summary)
// arranged the way docs/cli.md shows it.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TOOLS_AMPC_DRIVER_H
#define AMPC_TOOLS_AMPC_DRIVER_H

#include "ampc/ampc.h"

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ampc::cli {

/// printf-style formatting into a string (report tables' columns; one
/// row at most 512 characters).
template <class... Args> std::string format(const char *fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

/// Exit codes (docs/cli.md).
enum ExitCode { kSuccess = 0, kRuntimeFailure = 1, kBadInput = 2 };

struct Options {
  std::string model;
  std::string optLevel; ///< "" = the model file's amp.opt_level, else O0
  std::string emit;
  std::string output;
  std::string graph; ///< "", "forward" or "train"
  // Limits on what a model file may ask for (docs/cli.md, "Limits").
  int64_t maxElements = int64_t(1) << 32;
  int64_t maxNesting = api::LoadOptions().maxNesting;
  int64_t maxYamlNodes = api::LoadOptions().maxYamlNodes;
  int64_t maxNodes = api::LoadOptions().maxNodes;
  int64_t maxMemory = 0; ///< bytes; 0 = the machine's memory
  int64_t batch = 0;
  /// --fix-input NAME=FILE.npy: ONNX graph inputs held constant at import.
  std::vector<std::string> fixInputs;
  bool verifyEach = false;
  std::string printAfter;
  bool timePasses = false;
  std::string run;             ///< "" or "forward"
  std::string device = "auto"; ///< auto, cpu, cpu-ref, cuda
  /// --threads: the cpu device's thread count; unset = OpenMP's default
  /// (OMP_NUM_THREADS, else one per core this process may use).
  std::optional<int64_t> threads;
  bool planOnly = false;              ///< `ampc plan`
  bool maxBatch = false;              ///< `ampc plan --max-batch`
  int64_t memoryBudget = 0;           ///< --memory BYTES; 0: the device's free memory
  bool bench = false;                 ///< `ampc bench`
  bool diff = false;                  ///< `ampc diff`
  bool compare = false;               ///< `ampc compare`
  std::string levels = "O0,O1,O2,O3"; ///< the levels `ampc bench` compares
  // Training overrides of the model's `train`/`optimizer` sections.
  std::optional<int64_t> steps, epochs, evalEvery, logEvery, seed;
  std::optional<double> lr;
  std::optional<std::string> recompute; ///< --recompute none|cheap
  std::string metricsOut, checkpoint, resume;
  /// Outputs may follow a symlink or go into a device or FIFO.
  bool writeThrough = false;
  int64_t checkpointEvery = 0;
  std::string progress = "auto"; ///< auto, bar, lines, none
  // Mixed-precision property overrides, (property, value) in command-line
  // order (docs/opt-levels.md).
  std::vector<std::pair<std::string, std::string>> ampOverrides;
  bool explain = false;  ///< print each node's precision and why
  bool castCache = true; ///< --no-cast-cache turns the runtime cache off
  bool prefetch = true;  ///< --no-prefetch: batches made inside the step
  int dataWorkers = 0;   ///< --data-workers N (0: the cores the kernels leave free)
  bool profile = false;  ///< --profile: per-kernel times of the step
  std::string trace;     ///< --trace FILE: a timeline of the first steps
  // `ampc compare`: the step's data, the f64 reference, what diverges.
  std::string data;
  std::string reference; ///< "" or "f64"
  double tolerance = api::CompareOptions().tolerance;
  int64_t worst = 10;
  // Data-parallel training (docs/distributed.md).
  int64_t dataParallel = 0;           ///< --data-parallel N; 0: the launcher's world size
  std::string allreduceDtype = "f32"; ///< --allreduce-dtype f32|half
  double bucketMb = 25;               ///< --bucket-mb
  double collectiveTimeout = 300;     ///< --collective-timeout seconds (0: none)
  bool syncBatchnorm = false;         ///< --sync-batchnorm
};

/// Where results go (stdout) and where diagnostics go (stderr); main() sets
/// up their buffering.
inline std::ostream &out() { return std::cout; }
/// -v: the whole precision policy table instead of its one-line summary.
bool &verboseFlag();
inline bool verbose() { return verboseFlag(); }
inline std::ostream &err() { return std::cerr; }

/// Every diagnostic of `s` (errors, warnings, notes) to stderr, one a line.
void printDiagnostics(const api::Status &s);

/// The opt level the model's meta resolves to ("O0" when none is set).
std::string optLevelOf(const api::Model &m);

/// Prints the model's policy (stdout) and its warnings (stderr); with a
/// device, also a note when the policy's half type is slow there.
void showPolicy(const api::Model &m, const std::string &device = "");

/// The precision summary line and the cast cache's counts after a run.
void printPrecisionFooter(const api::Model &m, const api::Program *program);

/// Picks the device; "auto" says which one it chose. Nullopt after
/// printing why not.
std::optional<api::DeviceChoice> selectDevice(const Options &opts);

/// Compiles for `device` (the model's seeds, the model file's folder for
/// data paths); nullopt after printing the diagnostics, with the exit code
/// in `failureCode`: 1 when the machine lacked the memory, 2 when the model
/// cannot run.
/// `world`: the job the program is a rank of; jobWorld() when null.
std::optional<api::Program> compileProgram(const api::Model &m, const std::string &device,
                                           const Options &opts, int &failureCode,
                                           std::shared_ptr<api::World> world = nullptr);

/// Data-parallel jobs (DataParallel.cpp). joinJob joins the launcher's world
/// (a world of one without a launcher), silences stdout on ranks other than
/// 0 and resolves opts.dataParallel to the ranks the graph is rewritten
/// for; false after printing why not.
bool joinJob(Options &opts);
/// The world joinJob joined (null before).
std::shared_ptr<api::World> jobWorld();
/// What main returns: on a rank of a job of several that fails alone, the
/// whole job is ended (the others would wait for it in a collective).
int endJob(int code);

/// Imports `opts.model` (with --batch, --max-elements and the command
/// line's policy and training overrides) and verifies it; nullopt after
/// printing the diagnostics. The policy is resolved (so known valid) but
/// not shown.
std::optional<api::Model> loadModel(const Options &opts);
/// The same without printing: the errors or warnings are the result's.
api::Result<api::Model> loadModelQuietly(const Options &opts);

/// A graph file (textual IR, or YAML written by --emit yaml) runs as
/// written: refuses, after saying why, the options that need the model file
/// (another stage of the graph, passes to print or time, training a
/// forward graph). The load refused those that would rewrite it.
bool checkGraphFileOptions(const api::Model &m, const Options &opts);

int runPlan(const api::Model &m, const Options &opts);
/// The plan table's row for memory kernels hold outside the arenas; ""
/// when they hold none.
std::string heldByKernelsRow(uint64_t held);
/// `ampc plan --max-batch`: the largest batch whose plan fits, per level.
int runMaxBatch(const Options &opts);
int runForward(api::Model &m, const Options &opts);
void printSummary(const api::Model &m, const Options &opts);

/// Runs the pipeline for `stage` at the chosen opt level: the precision
/// passes, then (Train) autodiff and the optimizer lowering. Prints the
/// diagnostics; false on an error.
bool runPipeline(api::Model &m, const Options &opts, api::Stage stage);
/// The same without printing.
api::Status rewriteQuietly(api::Model &m, const Options &opts, api::Stage stage);

/// Trains the imported model per its meta (overrides applied): resolves
/// the step count, runs the Train pipeline, holds out an evaluation split,
/// runs the loop and prints the summary.
int runTraining(api::Model &m, const Options &opts);

/// A training run made ready by prepareTraining: the data as planned and
/// the compiled training step (with its evaluation program).
struct PreparedTraining {
  api::DataInfo data;
  std::optional<api::Program> program;
};

/// What runTraining does before the loop: opens the data, resolves the step
/// count, runs the Train pipeline on `m` and compiles it for `device`.
/// Returns kSuccess, or the exit code after printing why not.
int prepareTraining(api::Model &m, const std::string &device, const Options &opts,
                    PreparedTraining &run);

/// The training loop's options from the model's meta and the command line.
api::TrainOptions trainOptions(const api::Model &m, const Options &opts);

/// `ampc bench`: trains the model for opts.steps (default 20) at each of
/// opts.levels in turn, importing it afresh for each, and prints a table of
/// step time, speedup over the first level, peak memory and final loss.
int runBench(const Options &opts);

/// Splits a --levels list ("O0,O2"); false after printing what is wrong.
bool parseLevels(const std::string &list, std::vector<std::string> &levels);

/// `ampc diff MODEL --levels A,B`: the two levels' rewritten graphs side by
/// side (precision changes, nodes and casts only one has, memory by class).
int runDiff(Options opts);

/// `ampc compare MODEL --levels A,B`: one training step at both levels
/// from the same weights and batch, every node's results compared.
int runCompare(Options opts);

/// `ampc calibrate MODEL [--half-type f16|bf16]` (argv[0] is "calibrate"):
/// the nodes whose f32 values would not fit the half type.
int runCalibrate(int argc, char **argv);

/// `ampc export MODEL --format F -o OUT [--checkpoint C]`: parses its own
/// command line (argv[0] is "export") and writes the model's weights.
int runExport(int argc, char **argv);

/// What `ampc eval` and `ampc predict` share.
struct InferenceOptions {
  std::string model, data, optLevel;
  /// The trained weights; without it, the model's own initial ones (an ONNX
  /// file's initializers, `init.from`, the seeded initialisation).
  std::optional<std::string> checkpoint;
  /// --ema: the checkpoint's average of the weights (train.ema) instead.
  bool ema = false;
  int64_t batch = 0;
  std::string device = "cpu";
  int64_t threads = 0; ///< 0: OpenMP's default
  /// --threads N is a fixed team; without it the team follows the cores
  /// this process gets, as in training.
  api::InferenceRunOptions runOptions() const {
    api::InferenceRunOptions r;
    r.adaptThreads = threads <= 0;
    return r;
  }
};

/// How loadWeights reports a checkpoint it loaded.
enum class WeightsReport {
  Quiet,     ///< nothing (ampc eval --json)
  Line,      ///< "weights from C (step N)"
  LineNotes, ///< that, and what a checkpoint of another level had rebuilt
};
/// Loads `checkpoint` into `program`; false after printing why not (a
/// runtime failure, exit 1).
bool loadWeights(api::Program &program, const std::string &checkpoint, WeightsReport report,
                 api::Program::Weights weights = api::Program::Weights::Trained);

/// Applies --threads N (N > 0) to the cpu device and warns, on stderr, when
/// N is more than the cores free now.
void applyThreads(int64_t threads);
/// Loads the model, rewrites it at the Forward stage (inference mode),
/// compiles it and loads the checkpoint, if any; kSuccess or the exit code
/// after printing why not.
int prepareInference(const InferenceOptions &o, std::optional<api::Model> &model,
                     std::optional<api::Program> &program, bool quiet);
/// `ampc eval` and `ampc predict` (argv[0] is the subcommand).
int runEval(int argc, char **argv);
int runPredict(int argc, char **argv);

/// `ampc view MODEL -o OUT.html` (argv[0] is "view"): the rewritten graph
/// as one self-contained HTML page.
int runView(int argc, char **argv);

} // namespace ampc::cli

#endif
