//===- Driver.h - What the ampc commands share ----------------------------===//
#ifndef AMPC_TOOLS_AMPC_DRIVER_H
#define AMPC_TOOLS_AMPC_DRIVER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"
#include "runtime/data/DataSource.h"
#include "runtime/train/Trainer.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ampc::cli {

/// Exit codes (docs/cli.md).
enum ExitCode { kSuccess = 0, kRuntimeFailure = 1, kBadInput = 2 };

/// Which graph the commands work on.
enum class GraphStage {
  Forward, ///< after the precision passes, before autodiff
  Train,   ///< the whole training step: forward, backward, optimizer
};

struct Options {
  std::string model;
  std::string optLevel; ///< "" = the model file's amp.opt_level, else O0
  std::string emit;
  std::string output;
  std::string graph; ///< "", "forward" or "train"
  int64_t maxElements = int64_t(1) << 32;
  int64_t batch = 0;
  bool verifyEach = false;
  std::string printAfter;
  bool timePasses = false;
  std::string run;                    ///< "" or "forward"
  std::string device = "auto";        ///< auto, cpu, cpu-ref, cuda
  bool planOnly = false;              ///< `ampc plan`
  bool bench = false;                 ///< `ampc bench`
  std::string levels = "O0,O1,O2,O3"; ///< the levels `ampc bench` compares
  // Training overrides of the model's `train`/`optimizer` sections.
  std::optional<int64_t> steps, epochs, evalEvery, logEvery, seed;
  std::optional<double> lr;
  std::string metricsOut, checkpoint, resume;
  int64_t checkpointEvery = 0;
  std::string progress = "auto"; ///< auto, bar, lines, none
  // Mixed-precision property overrides, (property, value) in command-line
  // order (docs/opt-levels.md).
  std::vector<std::pair<std::string, std::string>> ampOverrides;
  bool explain = false;  ///< print each node's precision and why
  bool castCache = true; ///< --no-cast-cache turns the runtime cache off
};

/// The opt level the graph's meta resolves to ("O0" when none is set).
std::string optLevelOf(const Graph &g);

/// Resolves the policy in `g`'s meta; prints it (one property a line, on
/// stdout) and its warnings (stderr) when `print`. False after reporting an
/// error. The commands print it once they have a device, at the start of
/// the run.
bool resolveAndShowPolicy(const Graph &g, bool print, DiagnosticEngine &diag);
/// Prints the policy and its warnings (the graph's policy is known valid).
/// With `backend`, also a note when the policy's half type is slow there.
void showPolicy(const Graph &g, const Backend *backend = nullptr);

/// The precision summary line and the cast cache's counts after a run.
void printPrecisionFooter(const Graph &g, const Program *program, llvm::raw_ostream &os);

/// Picks the backend; "auto" says which one it chose. Null after printing why.
std::unique_ptr<Backend> selectBackend(const Options &opts);

/// Compiles with the model's init seed and the model file's folder for data paths.
std::unique_ptr<Program> compileProgram(const Graph &g, Backend &backend, const Options &opts,
                                        DiagnosticEngine &diag);

/// The model file's folder ("." for a bare file name).
std::string modelDirOf(llvm::StringRef modelPath);

/// Imports `opts.model` (with --batch and --max-elements), verifies it and
/// writes the command line's overrides into its meta; null after printing
/// the diagnostics. The policy is resolved (so known valid) but not shown.
std::unique_ptr<Graph> loadModel(const Options &opts, DiagnosticEngine &diag);

int runPlan(const Graph &g, const Options &opts, DiagnosticEngine &diag);
int runForward(const Graph &g, const Options &opts, DiagnosticEngine &diag);
void printSummary(const Graph &g, const Options &opts, llvm::raw_ostream &os);

/// Runs the pipeline for `stage` at the chosen opt level: the precision
/// passes, then (Train) autodiff and the optimizer lowering.
bool runPipeline(Graph &g, const Options &opts, GraphStage stage, DiagnosticEngine &diag);

/// Trains the imported model `g` per its meta (overrides applied): resolves
/// the step count, runs the Train pipeline, holds out an evaluation split,
/// runs the loop and prints the summary.
int runTraining(Graph &g, const Options &opts, DiagnosticEngine &diag);

/// A training run made ready by prepareTraining: the data (with the
/// held-out split when evaluating), the loop's options and the compiled
/// training step (and evaluation program).
struct PreparedTraining {
  std::unique_ptr<DataSource> all, trainPart, evalPart;
  DataSource *trainData = nullptr; ///< `all` or `trainPart`
  BatchOptions batching;
  TrainOptions options;
  std::unique_ptr<Graph> evalGraph;
  std::unique_ptr<Program> evalProgram, program;
};

/// What runTraining does before the loop: opens the data, resolves the step
/// count, runs the Train pipeline on `g` and compiles it for `backend`.
/// Returns kSuccess, or the exit code after printing why not.
int prepareTraining(Graph &g, Backend &backend, const Options &opts, PreparedTraining &run,
                    DiagnosticEngine &diag);

/// `ampc bench`: trains the model for opts.steps (default 20) at each of
/// opts.levels in turn, importing it afresh for each, and prints a table of
/// step time, speedup over the first level, peak memory and final loss.
int runBench(const Options &opts, DiagnosticEngine &diag);

} // namespace ampc::cli

#endif
