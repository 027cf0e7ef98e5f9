//===- main.cpp - The ampc command line -------------------------------------===//
//
// ampc [options] model.yaml      train per the model's train/optimizer sections
// ampc plan [options] model.yaml the memory plan of the training step
// ampc bench [options] model.yaml train a few steps at each opt level, compare
// ampc export model.yaml --format npy -o DIR [--checkpoint C]  the weights out
// ampc view model.yaml -o OUT.html  the rewritten graph as a page
//
// Imports a model file, verifies it, runs the pipeline for the opt level and
// then trains, or prints the graph (--emit), its summary, or one forward
// batch (--run forward). A graph file (what --emit wrote) runs as written,
// with no pass (GraphFileOptions.cpp). Exit codes: 0 success, 2 bad usage
// or bad input, 1 runtime failure (docs/cli.md).
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "CLI/CLI.hpp"

#include <charconv>

#include <cmath>
#include <limits>

#include <unistd.h>

using namespace ampc;
using namespace ampc::cli;

namespace {

/// Integer options are checked on their text, so that a value past int64
/// is an error rather than silently clamped, and the message names the
/// range in words rather than printing DBL_MAX in full.
CLI::Validator integerAtLeast(int64_t least, const std::string &what) {
  return CLI::Validator(
      [least, what](std::string &text) -> std::string {
        int64_t value = 0;
        const char *end = text.data() + text.size();
        auto [stop, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range)
          return "'" + text + "' is out of range: at most 2^63-1";
        if (ec != std::errc() || stop != end)
          return "'" + text + "' is not " + what;
        if (value < least)
          return "'" + text + "' is not " + what;
        return {};
      },
      what);
}
CLI::Validator positiveInteger() { return integerAtLeast(1, "a positive integer"); }
CLI::Validator nonNegativeInteger() { return integerAtLeast(0, "a non-negative integer"); }
CLI::Validator positiveReal() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        double value = 0;
        const char *end = text.data() + text.size();
        auto [stop, ec] = std::from_chars(text.data(), end, value);
        if (ec != std::errc() || stop != end || !(value > 0) || !std::isfinite(value))
          return "'" + text + "' is not a positive number";
        return {};
      },
      "a positive number");
}

/// Which command a command line is for: each shows only its own options in
/// --help. The others stay parseable but hidden, so that using one with the
/// wrong command gets an error that says where it belongs rather than
/// CLI11's "not expected".
enum class Command { Main, Plan, Bench, Diff, Compare };

void addOptions(CLI::App &app, Options &opts, Command command) {
  const bool isMain = command == Command::Main, isPlan = command == Command::Plan,
             isBench = command == Command::Bench, isDiff = command == Command::Diff,
             isCompare = command == Command::Compare;
  // Options that train, and those that run the passes for inspection.
  const bool trains = isMain || isBench, debugsPasses = isMain || isPlan;
  // Hides `option` from this command's help unless `shown`.
  auto only = [](CLI::Option *option, bool shown) {
    if (!shown)
      option->group("");
    return option;
  };
  app.set_version_flag("--version", std::string("ampc ") + AMPC_VERSION);
  app.add_option("model", opts.model,
                 "model file (.yaml or .onnx), or a graph file ampc wrote (.yaml, .ir), "
                 "which runs as written")
      ->required();
  only(app.add_option("--opt-level,-O", opts.optLevel, "optimization level (Apex semantics)")
           ->check(CLI::IsMember({"O0", "O1", "O2", "O3"})),
       !isBench && !isDiff && !isCompare);
  only(app.add_option("--emit", opts.emit,
                      "print the graph as textual IR, YAML or Graphviz DOT instead of training")
           ->check(CLI::IsMember({"ir", "yaml", "dot"})),
       isMain);
  only(app.add_option("-o,--output", opts.output, "write the emitted graph to FILE (atomically)"),
       isMain);
  only(app.add_flag("--write-through", opts.writeThrough,
                    "let -o and --checkpoint follow a symlink to its target or write into a "
                    "device or FIFO (refused by default)"),
       isMain);
  only(app.add_option("--graph", opts.graph,
                      std::string(isPlan   ? "which graph to plan"
                                  : isDiff ? "which graph to compare"
                                           : "which graph --emit uses") +
                          ": forward, or train (forward + backward + optimizer; the default "
                          "when the model has an optimizer)")
           ->check(CLI::IsMember({"forward", "train"})),
       !isBench && !isCompare);
  app.add_option("--batch", opts.batch, "override the model's batch size")
      ->check(positiveInteger());
  app.add_option("--fix-input", opts.fixInputs,
                 "NAME=FILE.npy: hold the ONNX model's input NAME constant at import (an "
                 "operand ampc needs when it imports, such as a Reshape's shape)")
      ->check(CLI::Validator(
          [](std::string &v) {
            return v.find('=') == std::string::npos ? std::string("expected NAME=FILE.npy")
                                                    : std::string();
          },
          "NAME=FILE"));
  auto *limits = "Limits (what a model file may ask for; docs/cli.md)";
  app.add_option("--max-elements", opts.maxElements, "largest element count allowed for one tensor")
      ->check(positiveInteger())
      ->group(limits);
  app.add_option("--max-nesting", opts.maxNesting,
                 "deepest nesting of the model file's YAML and of blocks (default 100)")
      ->check(positiveInteger())
      ->group(limits);
  app.add_option("--max-yaml-nodes", opts.maxYamlNodes,
                 "most YAML nodes the model file may expand to through aliases (default 4000000)")
      ->check(positiveInteger())
      ->group(limits);
  app.add_option("--max-memory", opts.maxMemory,
                 "most bytes a program's memory plan may need (default: this machine's memory)")
      ->check(positiveInteger())
      ->group(limits);
  app.add_option("--max-nodes", opts.maxNodes,
                 "most graph nodes the layers may lower to (default 1000000)")
      ->check(positiveInteger())
      ->group(limits);
  app.add_flag("-v,--verbose", verboseFlag(),
               "print the whole precision policy table (default: a one-line summary)");
  only(app.add_flag("--verify-each", opts.verifyEach, "verify the graph after every pass"),
       debugsPasses);
  only(app.add_option("--print-after", opts.printAfter, "print the IR after these passes (or all)"),
       debugsPasses);
  only(app.add_flag("--time-passes", opts.timePasses, "print each pass's time"), debugsPasses);
  only(
      app.add_option("--run", opts.run, "run the model: forward = one batch through forward + loss")
          ->check(CLI::IsMember({"forward"})),
      isMain);
  app.add_option("--device", opts.device, "where to run: auto, cpu, cpu-ref, cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cpu-ref", "cuda"}));
  only(app.add_option("--threads", opts.threads,
                      "threads of the cpu device (default: the cores this process may use, "
                      "or OMP_NUM_THREADS)")
           ->check(integerAtLeast(1, "a positive integer")),
       trains || isCompare);

  auto *train = isMain ? "Training (override the model's train and optimizer sections)"
                       : "Training (override the model's train and optimizer sections; each "
                         "level trains afresh)";
  only(app.add_option("--levels", opts.levels,
                      isDiff      ? "the two opt levels to compare, e.g. O1,O2"
                      : isCompare ? "the reference level and the level measured against it "
                                    "(default O0,O2)"
                      : isPlan    ? "with --max-batch: the opt levels to search, comma-separated "
                                    "(default O0,O1,O2,O3; -O picks one)"
                                  : "the opt levels to compare, comma-separated (default "
                                    "O0,O1,O2,O3)"),
       isBench || isDiff || isCompare || isPlan);
  only(app.add_flag("--max-batch", opts.maxBatch,
                    "the largest batch whose memory plan fits --memory, at each opt level, "
                    "found from plans without running a step"),
       isPlan);
  only(app.add_option("--memory", opts.memoryBudget,
                      "with --max-batch: the budget in bytes (default: the free memory of the "
                      "device, this machine's or the GPU's)")
           ->check(positiveInteger()),
       isPlan);
  only(app.add_option("--data", opts.data,
                      "the batch: the first of this data (a .csv file or a data source as in "
                      "train.data, e.g. '{npy: {x: x.npy, y: y.npy}}'; default: the model's)"),
       isCompare);
  only(app.add_option("--reference", opts.reference,
                      "also measure both levels against the model in f64 on cpu-ref")
           ->check(CLI::IsMember({"f64"})),
       isCompare);
  only(app.add_option("--tolerance", opts.tolerance,
                      "relative error past which a value diverges (default 0.05)")
           ->check(positiveReal()),
       isCompare);
  only(app.add_option("--worst", opts.worst, "how many of the largest errors to list (default 10)")
           ->check(nonNegativeInteger()),
       isCompare);
  only(
      app.add_option("--steps", opts.steps,
                     isBench ? "optimizer steps to train (default 20)" : "optimizer steps to train")
          ->check(positiveInteger())
          ->group(train),
      trains);
  only(app.add_option("--epochs", opts.epochs, "passes over the training data (instead of --steps)")
           ->check(positiveInteger())
           ->group(train),
       trains);
  only(app.add_option("--lr", opts.lr, "learning rate")->check(positiveReal())->group(train),
       trains);
  only(app.add_option("--recompute", opts.recompute,
                      "cheap: compute again for the backward the forward values that "
                      "elementwise ops and views make from values live anyway, instead of "
                      "keeping them (same results; a lower memory peak); none (the default)")
           ->check(CLI::IsMember({"none", "cheap"}))
           ->group(train),
       trains || isPlan);
  only(app.add_option("--seed", opts.seed, "seed of parameter init, shuffling and dropout")
           ->check(integerAtLeast(std::numeric_limits<int64_t>::min(), "an integer"))
           ->group(train),
       trains || isCompare);
  only(app.add_option("--eval-every", opts.evalEvery,
                      "evaluate on the held-out data (train.eval_data, else the last tenth) "
                      "every N steps (0: never)")
           ->check(nonNegativeInteger())
           ->group(train),
       isMain);
  only(app.add_option("--log-every", opts.logEvery, "print a progress line every N steps")
           ->check(nonNegativeInteger())
           ->group(train),
       isMain);
  only(app.add_option("--progress", opts.progress,
                      "progress display: auto (a bar on a terminal), bar, lines, none")
           ->check(CLI::IsMember({"auto", "bar", "lines", "none"}))
           ->group(train),
       isMain);
  only(app.add_option("--metrics-out", opts.metricsOut, "write one JSON object per step to FILE")
           ->group(train),
       isMain);
  only(app.add_option("--checkpoint", opts.checkpoint,
                      isCompare ? "start both levels from these trained weights (a checkpoint of "
                                  "this model, any level)"
                                : "write a checkpoint to FILE at the end (atomically); with --run "
                                  "forward, read the weights from FILE")
           ->group(train),
       isMain || isCompare);
  only(app.add_option("--checkpoint-every", opts.checkpointEvery,
                      "also write the checkpoint every N steps")
           ->check(nonNegativeInteger())
           ->group(train),
       isMain);
  only(app.add_option("--resume", opts.resume, "continue the run saved in checkpoint FILE")
           ->group(train),
       isMain);
  only(app.add_flag("--profile", opts.profile,
                    "time every kernel of the training step (the first step left out) and print "
                    "where the time goes, by op kind and by node (docs/inspect.md)")
           ->group(train),
       trains);
  only(app.add_option("--trace", opts.trace,
                      "write a timeline of the first steps' kernels to FILE (Chrome trace-event "
                      "JSON: Perfetto, chrome://tracing); implies --profile")
           ->group(train),
       isMain);
  only(app.add_flag("!--no-prefetch", opts.prefetch,
                    "make each batch inside its step instead of on a background thread during "
                    "the step before (to measure what prefetching saves)")
           ->group(train),
       trains);
  only(app.add_option("--data-workers", opts.dataWorkers,
                      "threads that make batches ahead of the step (default: the cores the "
                      "kernels' threads leave free, at least one; they run at idle priority)")
           ->check(CLI::Range(1, 256))
           ->group(train),
       trains);

  auto *amp = "Mixed precision (override the opt level's properties; docs/opt-levels.md)";
  auto property = [&](const char *flag, const char *name, const char *help) {
    app.add_option_function<std::string>(
           flag, [&opts, name](const std::string &v) { opts.ampOverrides.emplace_back(name, v); },
           help)
        ->group(amp);
  };
  property("--half-type", "half_type", "the half type: bf16 (CPU default) or f16");
  property("--cast-model-type", "cast_model_type", "store parameters in: none (f32) or half");
  property("--per-op-casting", "per_op_casting", "cast per op by precision category: true|false");
  property("--keep-batchnorm-fp32", "keep_batchnorm_fp32",
           "batchnorm in f32 when the model is half: true|false");
  property("--master-weights", "master_weights",
           "f32 master copies of half parameters: true|false");
  property("--loss-scale", "loss_scale", "dynamic, or a static scale VALUE");
  property("--fp32-ops", "fp32_ops", "op kinds to run in fp32 (comma-separated)");
  property("--half-ops", "half_ops", "op kinds to run in half (comma-separated)");
  app.add_flag_callback(
         "--allow-banned", [&opts] { opts.ampOverrides.emplace_back("allow_banned", "true"); },
         "run banned ops (binary cross-entropy) in fp32 instead of failing")
      ->group(amp);
  only(app.add_flag("--explain", opts.explain,
                    "print each node's precision and the rule that chose it, then stop")
           ->group(amp),
       isMain);
  app.add_flag("!--no-cast-cache", opts.castCache,
               "recast state tensors at every use (the runtime's cast cache off)")
      ->group(amp);

  auto *dp = "Data-parallel training (mpirun -np N ampc ...; docs/distributed.md)";
  only(app.add_option("--data-parallel", opts.dataParallel,
                      "rewrite the training graph for N ranks (default: the launcher's; "
                      "without a launcher, to inspect the job's graph and plan)")
           ->check(CLI::PositiveNumber)
           ->group(dp),
       isMain || isPlan);
  only(app.add_option("--allreduce-dtype", opts.allreduceDtype,
                      "what the gradients' all-reduce moves and sums: f32 (default) or half")
           ->check(CLI::IsMember({"f32", "half"}))
           ->group(dp),
       isMain || isPlan);
  only(app.add_option("--bucket-mb", opts.bucketMb,
                      "most MiB one all-reduce bucket holds (default 25)")
           ->check(CLI::PositiveNumber)
           ->group(dp),
       isMain || isPlan);
  only(app.add_flag("--sync-batchnorm", opts.syncBatchnorm,
                    "batchnorm over the global batch's statistics, reduced across the ranks "
                    "(as the model file's train.sync_batchnorm)")
           ->group(dp),
       isMain || isPlan);
  only(app.add_option("--collective-timeout", opts.collectiveTimeout,
                      "seconds a collective may wait for the other ranks before the job ends "
                      "(default 300; 0: for ever)")
           ->check(CLI::NonNegativeNumber)
           ->group(dp),
       isMain);
}

int emitGraph(const api::Model &m, const Options &opts) {
  api::GraphView g = m.graph();
  std::string text = opts.emit == "ir" ? g.printIR() : opts.emit == "dot" ? g.toDot() : g.toYaml();
  if (opts.output.empty() || opts.output == "-") {
    out() << text;
    return kSuccess;
  }
  if (api::Status s = api::writeFileAtomically(opts.output, text, opts.writeThrough); !s) {
    printDiagnostics(s);
    return kRuntimeFailure;
  }
  return kSuccess;
}

/// Options that name a file must name one: `--checkpoint ''` is a mistake,
/// not a request for no checkpoint.
bool checkFileOptionsGiven(const CLI::App &app, const Options &opts) {
  const std::pair<const char *, const std::string *> fileOptions[] = {
      {"--output", &opts.output},
      {"--checkpoint", &opts.checkpoint},
      {"--metrics-out", &opts.metricsOut},
      {"--resume", &opts.resume},
      {"--trace", &opts.trace},
  };
  for (const auto &[flag, value] : fileOptions)
    if (app.count(flag) && value->empty()) {
      err() << "error: " << flag << " needs a file name, got an empty one\n";
      return false;
    }
  if (opts.steps && opts.epochs) {
    err() << "error: --steps and --epochs both set the length of the run; give one\n";
    return false;
  }
  if (opts.checkpointEvery > 0 && opts.checkpoint.empty()) {
    err() << "error: --checkpoint-every needs --checkpoint FILE\n";
    return false;
  }
  return true;
}

/// Every file the run will write must be writable before any work starts:
/// a bad path found after training would lose the training.
bool checkOutputsWritable(const Options &opts) {
  std::vector<std::pair<std::string, bool>> outputs; // path, whether replaced atomically
  if (!opts.output.empty() && opts.output != "-")
    outputs.emplace_back(opts.output, true);
  if (!opts.checkpoint.empty())
    outputs.emplace_back(opts.checkpoint, true);
  if (!opts.trace.empty())
    outputs.emplace_back(opts.trace, true);
  // The metrics file is a log written in place as the run goes, never
  // replaced, so it may be a FIFO or /dev/stderr.
  if (!opts.metricsOut.empty())
    outputs.emplace_back(opts.metricsOut, false);
  for (const auto &[path, replaced] : outputs)
    if (api::Status s = api::checkOutputPath(path, opts.writeThrough || !replaced); !s) {
      printDiagnostics(s);
      return false;
    }
  return true;
}

} // namespace

int runCommandLine(int argc, char **argv);

int main(int argc, char **argv) {
  // The library reports what the input gets wrong as diagnostics; what is
  // left to throw is the machine running out of memory (an allocation the
  // limits let through) or a bug. Either is a message and exit 1, not an
  // abort.
  try {
    return endJob(runCommandLine(argc, argv));
  } catch (const std::bad_alloc &) {
    err() << "error: out of memory (a smaller --batch or model may fit; docs/cli.md, "
             "\"Limits\")\n";
  } catch (const std::exception &e) {
    err() << "error: internal failure: " << e.what() << "\n";
  }
  return kRuntimeFailure;
}

int runCommandLine(int argc, char **argv) {
  // stdout as ampc has always written it: unbuffered on a terminal (the
  // progress bar redraws in place), else buffered and flushed at each
  // progress update and at exit; stderr (diagnostics, --time-passes) goes
  // out at once, without flushing stdout first.
  if (::isatty(STDOUT_FILENO))
    out() << std::unitbuf;
  err().tie(nullptr);
  Options opts;
  CLI::App app{"ampc: mixed-precision model-rewriting compiler"};
  app.footer("\nCommands:\n"
             "  ampc [options] MODEL        train MODEL (or --emit, --run, --explain)\n"
             "  ampc plan [options] MODEL   print the memory plan of the training step\n"
             "                              (--max-batch: the largest batch that fits, per level)\n"
             "  ampc bench [options] MODEL  train a few steps at each opt level and compare\n"
             "  ampc diff MODEL --levels A,B\n"
             "                              what changes between two opt levels' graphs\n"
             "  ampc compare MODEL --levels A,B [--checkpoint C] [--data SPEC] [--reference f64]\n"
             "                              one step at both levels, node by node: where B's "
             "numbers part from A's\n"
             "  ampc calibrate MODEL [--half-type f16|bf16] [--checkpoint C]\n"
             "                              nodes whose values would overflow or flush in half\n"
             "  ampc export MODEL --format npy -o DIR [--checkpoint C]\n"
             "                              write the weights (every parameter and buffer, "
             "fp32)\n"
             "  ampc eval MODEL [--checkpoint C] [--data SPEC] [--json]\n"
             "                              loss and metrics over every sample of the data\n"
             "  ampc predict MODEL [--checkpoint C] [--data SPEC] -o OUT.npy|OUT.csv [--argmax]\n"
             "                              write the model's predictions\n"
             "  ampc view MODEL -o OUT.html [-O Ox] [--graph forward|train]\n"
             "                              the rewritten graph as a page (docs/inspect.md)\n"
             "Limits, exit codes and output files: docs/cli.md");

  // `ampc export`, `eval` and `predict` have options of their own
  // (--checkpoint reads there).
  if (argc > 1 && std::string(argv[1]) == "export")
    return runExport(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "eval")
    return runEval(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "predict")
    return runPredict(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "view")
    return runView(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "calibrate")
    return runCalibrate(argc - 1, argv + 1);
  // `ampc plan MODEL` and `ampc bench MODEL` share the main command's
  // options, each showing its own; everything else is the main command.
  std::vector<char *> args(argv, argv + argc);
  Command command = Command::Main;
  if (argc > 1 && std::string(argv[1]) == "plan") {
    command = Command::Plan;
    opts.planOnly = true;
    args.erase(args.begin() + 1);
    app.name("ampc plan");
    app.description("print the memory plan of a model: peak bytes by what they hold");
    app.footer("\nThe other commands: ampc --help");
  } else if (argc > 1 && std::string(argv[1]) == "diff") {
    command = Command::Diff;
    opts.diff = true;
    opts.levels.clear(); // required: no default pair
    args.erase(args.begin() + 1);
    app.name("ampc diff");
    app.description("what changes between two opt levels of a model: nodes that compute in "
                    "another dtype and why, nodes and casts only one level has, memory by class");
    app.footer("\nThe other commands: ampc --help; docs/inspect.md");
  } else if (argc > 1 && std::string(argv[1]) == "compare") {
    command = Command::Compare;
    opts.compare = true;
    opts.levels = "O0,O2";
    args.erase(args.begin() + 1);
    app.name("ampc compare");
    app.description("one training step at two opt levels from the same weights and batch, "
                    "every node's results compared: the first that parts from the reference "
                    "level and the worst");
    app.footer("\nThe other commands: ampc --help; docs/inspect.md");
  } else if (argc > 1 && std::string(argv[1]) == "bench") {
    command = Command::Bench;
    opts.bench = true;
    args.erase(args.begin() + 1);
    app.name("ampc bench");
    app.description("train a few steps at each opt level and compare step time, peak memory "
                    "and final loss");
    app.footer("\nThe other commands: ampc --help");
  }
  addOptions(app, opts, command);
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? kSuccess : kBadInput;
  }
  if (!checkFileOptionsGiven(app, opts))
    return kBadInput;
  if (opts.threads) {
    if (opts.planOnly) {
      err() << "error: --threads sets how training runs; ampc plan runs nothing\n";
      return kBadInput;
    }
    applyThreads(*opts.threads);
  }
  if (opts.planOnly && (!opts.emit.empty() || !opts.output.empty() || !opts.run.empty())) {
    err() << "error: ampc plan prints the memory plan; --emit, -o and --run belong to the "
             "main command\n";
    return kBadInput;
  }
  if (opts.bench &&
      (!opts.emit.empty() || !opts.output.empty() || !opts.run.empty() || !opts.optLevel.empty() ||
       !opts.graph.empty() || opts.explain || !opts.resume.empty() || !opts.checkpoint.empty() ||
       !opts.metricsOut.empty())) {
    err() << "error: ampc bench trains at each of --levels; --opt-level, --emit, -o, "
             "--graph, --run, --explain, --resume, --checkpoint and --metrics-out belong "
             "to the main command\n";
    return kBadInput;
  }
  if (opts.bench)
    return runBench(opts);
  if (opts.diff) {
    if (!opts.emit.empty() || !opts.output.empty() || !opts.run.empty() || !opts.optLevel.empty() ||
        opts.explain || !opts.resume.empty() || !opts.checkpoint.empty() ||
        !opts.metricsOut.empty() || opts.threads) {
      err() << "error: ampc diff compares the two --levels; --opt-level, --emit, -o, --run, "
               "--explain, --resume, --checkpoint, --metrics-out and --threads belong to the "
               "main command\n";
      return kBadInput;
    }
    if (opts.levels.empty()) {
      err() << "error: ampc diff needs --levels A,B (e.g. --levels O1,O2)\n";
      return kBadInput;
    }
    return runDiff(opts);
  }
  if (opts.compare) {
    if (!opts.emit.empty() || !opts.output.empty() || !opts.run.empty() || !opts.optLevel.empty() ||
        !opts.graph.empty() || opts.explain || !opts.resume.empty() || !opts.metricsOut.empty()) {
      err() << "error: ampc compare runs one training step at each of --levels; --opt-level, "
               "--emit, -o, --graph, --run, --explain, --resume and --metrics-out belong to the "
               "main command\n";
      return kBadInput;
    }
    return runCompare(opts);
  }
  if (!opts.data.empty() || !opts.reference.empty() || app.count("--tolerance") ||
      app.count("--worst")) {
    err() << "error: --data, --reference, --tolerance and --worst belong to ampc compare\n";
    return kBadInput;
  }
  if ((opts.maxBatch || opts.memoryBudget) && !opts.planOnly) {
    err() << "error: --max-batch and --memory belong to ampc plan\n";
    return kBadInput;
  }
  if (opts.planOnly && opts.memoryBudget && !opts.maxBatch) {
    err() << "error: --memory is the budget of --max-batch; ampc plan --max-memory limits one "
             "plan\n";
    return kBadInput;
  }
  if (opts.planOnly && opts.maxBatch) {
    if (opts.batch) {
      err() << "error: --max-batch searches the batch; it cannot be combined with --batch\n";
      return kBadInput;
    }
    if (opts.levels != Options().levels && !opts.optLevel.empty()) {
      err() << "error: --max-batch searches -O's level or each of --levels, not both\n";
      return kBadInput;
    }
  } else if (opts.levels != Options().levels) {
    err() << "error: --levels belongs to ampc bench, ampc diff, ampc compare and ampc plan "
             "--max-batch\n";
    return kBadInput;
  }
  if (!opts.output.empty() && opts.emit.empty()) {
    err() << "error: -o needs --emit ir, --emit yaml or --emit dot\n";
    return kBadInput;
  }
  if (opts.explain && (!opts.emit.empty() || !opts.run.empty() || opts.planOnly)) {
    err() << "error: --explain prints the precision decisions; it cannot be combined with "
             "--emit, --run or plan\n";
    return kBadInput;
  }
  if (!opts.resume.empty() && (!opts.emit.empty() || opts.planOnly || opts.explain)) {
    err() << "error: --resume continues training (or gives --run forward its weights); it "
             "cannot be combined with --emit, --explain or plan\n";
    return kBadInput;
  }
  // --run forward takes its weights from --checkpoint as from --resume.
  if (opts.run == "forward" && !opts.checkpoint.empty()) {
    if (!opts.resume.empty() && opts.resume != opts.checkpoint) {
      err() << "error: --run forward reads its weights from one checkpoint; give --checkpoint "
               "or --resume, not both\n";
      return kBadInput;
    }
    opts.resume = opts.checkpoint;
    opts.checkpoint.clear();
  }
  // Training's outputs: another action would silently not write them.
  if ((!opts.checkpoint.empty() || !opts.metricsOut.empty() || !opts.trace.empty() ||
       opts.profile) &&
      (!opts.emit.empty() || !opts.run.empty() || opts.planOnly || opts.explain)) {
    err() << "error: --checkpoint, --metrics-out, --profile and --trace come from training; "
             "they cannot be combined with --emit, --run, --explain or plan\n";
    return kBadInput;
  }

  if (!checkOutputsWritable(opts))
    return kBadInput;
  if (opts.maxBatch)
    return runMaxBatch(opts);

  if (!joinJob(opts))
    return kRuntimeFailure;
  std::optional<api::Model> model = loadModel(opts);
  if (!model)
    return kBadInput;

  // A graph file holds one stage, rewritten already: it runs as written.
  if (model->asWritten() && !checkGraphFileOptions(*model, opts))
    return kBadInput;
  bool trainable = model->trainable();
  if (opts.graph == "train" && !trainable) {
    err() << "error: --graph train needs a model with a loss and an 'optimizer' section\n";
    return kBadInput;
  }
  api::Stage stage = opts.graph == "forward" || opts.run == "forward" || !trainable ||
                             (opts.explain && opts.graph.empty())
                         ? api::Stage::Forward
                         : api::Stage::Train;
  if (model->asWritten())
    stage = *model->rewrittenStage();

  // Training resolves its step count (epochs need the data) before lowering.
  if (stage == api::Stage::Train && opts.emit.empty() && !opts.planOnly && !opts.explain)
    return runTraining(*model, opts);

  // Prints the warnings, if any, or the errors.
  if (!runPipeline(*model, opts, stage))
    return kBadInput;

  if (opts.planOnly)
    return runPlan(*model, opts);
  if (opts.run == "forward")
    return runForward(*model, opts);
  if (!opts.emit.empty())
    return emitGraph(*model, opts);
  if (opts.explain) {
    out() << model->graph().explain() << model->graph().precisionStats().str << "\n";
    if (std::string c = model->graph().collectives(); !c.empty())
      out() << c << "\n";
    if (std::string recomputed = model->graph().recomputed(); !recomputed.empty())
      out() << recomputed << "\n";
    if (std::string groups = model->graph().parameterGroups(); !groups.empty())
      out() << groups << "\n";
    return kSuccess;
  }
  printSummary(*model, opts);
  return kSuccess;
}
