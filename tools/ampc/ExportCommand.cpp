//===- ExportCommand.cpp - `ampc export`: weights out of ampc -------------===//
//
// ampc export MODEL [--checkpoint C [--ema]] --format npy -o DIR
// ampc export MODEL [--checkpoint C [--ema]] --format onnx [-O O1] -o FILE.onnx
//
// Writes the model's weights -- a checkpoint's, or the initial ones -- in a
// format another framework reads (docs/cli.md, "ampc export"). A thin client
// of the library's exportProgram (ampc/ModelExport.h): the formats are its
// table, so a new one needs no change here beyond what it asks of the user.
//
// For npy the model is compiled at O0 with fp32 parameters, whatever level
// the model file names: loading the checkpoint there takes every parameter
// from its fp32 master where the checkpoint's level kept one, else widens
// it (docs/checkpoints.md) -- the fp32 truth, under the parameter's name.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "CLI/CLI.hpp"

namespace ampc::cli {

int runExport(int argc, char **argv) {
  std::string model, checkpoint, format, output;
  bool writeThrough = false, ema = false;
  Options limits;
  CLI::App app{"write a model's weights in another format: every parameter and buffer, from a "
               "checkpoint or as initialised"};
  app.name("ampc export");
  std::string formats;
  std::vector<std::string> names;
  for (const api::ExportFormat &f : api::exportFormats()) {
    formats += "\n  " + f.name + (f.available ? "" : " (not supported yet)") + ": " + f.description;
    names.push_back(f.name);
  }
  app.footer("\nFormats:" + formats + "\nOutput files and exit codes: docs/cli.md");
  app.add_option("model", model, "model file (.yaml or .onnx)")->required();
  app.add_option("--checkpoint", checkpoint,
                 "take the weights from checkpoint FILE (of any opt level; default: the initial "
                 "weights)");
  app.add_flag("--ema", ema,
               "write the checkpoint's average of the weights (trained with train.ema) instead of "
               "the weights as trained");
  app.add_option("--format", format, "what to write")->required()->check(CLI::IsMember(names));
  std::string optLevel, halfType = "f16";
  app.add_option("-O,--opt-level", optLevel,
                 "onnx: the level whose rewritten graph is written (default: the model file's)")
      ->check(CLI::IsMember({"O0", "O1", "O2", "O3"}));
  app.add_option("--half-type", halfType,
                 "onnx: the half type of the rewritten graph (default f16: ONNX runtimes have "
                 "no bf16 convolution)")
      ->check(CLI::IsMember({"f16", "bf16"}));
  app.add_option("-o,--output", output, "where: a directory for npy (created if missing)")
      ->required();
  app.add_flag("--write-through", writeThrough,
               "let the output files follow a symlink or go into a device or FIFO");
  auto *limitsGroup = "Limits (what a model file may ask for; docs/cli.md)";
  app.add_option("--max-elements", limits.maxElements, "largest element count of one tensor")
      ->group(limitsGroup);
  app.add_option("--max-nesting", limits.maxNesting, "deepest nesting of the model file")
      ->group(limitsGroup);
  app.add_option("--max-yaml-nodes", limits.maxYamlNodes, "most YAML nodes through aliases")
      ->group(limitsGroup);
  app.add_option("--max-nodes", limits.maxNodes, "most graph nodes the layers may lower to")
      ->group(limitsGroup);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? kSuccess : kBadInput;
  }
  for (const auto &[flag, value] :
       {std::pair{"--checkpoint", &checkpoint}, std::pair{"--output", &output}})
    if (app.count(flag) && value->empty()) {
      err() << "error: " << flag << " needs a file name, got an empty one\n";
      return kBadInput;
    }
  if (ema && checkpoint.empty()) {
    err() << "error: --ema needs --checkpoint: the average is kept in a training checkpoint\n";
    return kBadInput;
  }

  api::ExportOptions eopts;
  eopts.format = format;
  eopts.output = output;
  eopts.writeThrough = writeThrough;
  // The format and the output, before any work (docs/cli.md, "Output files").
  if (api::Status s = api::checkExport(eopts); !s) {
    printDiagnostics(s);
    return kBadInput;
  }

  api::LoadOptions load;
  load.maxElements = limits.maxElements;
  load.maxNesting = limits.maxNesting;
  load.maxYamlNodes = limits.maxYamlNodes;
  load.maxNodes = limits.maxNodes;
  if (format == "onnx") {
    // The graph at the asked level, in the asked half type; the checkpoint
    // loads into it whatever level wrote it (docs/checkpoints.md).
    load.optLevel = optLevel;
    load.policyOverrides = {{"half_type", halfType}};
  } else {
    load.optLevel = "O0";
    load.policyOverrides = {{"cast_model_type", "none"}};
  }
  api::Result<api::Model> m = api::Model::loadFile(model, load);
  printDiagnostics(m.status());
  if (!m)
    return kBadInput;
  api::PipelineOptions p;
  p.stage = api::Stage::Forward;
  p.resolveEpochs = false;
  if (api::Status s = m->rewrite(p); !s) {
    printDiagnostics(s);
    return kBadInput;
  }
  api::CompileOptions copts;
  copts.device = "cpu-ref"; // nothing runs: the state is initialised and read
  copts.maxMemoryBytes = static_cast<uint64_t>(limits.maxMemory);
  api::Result<api::Program> program = api::Program::compile(*m, copts);
  if (!program) {
    printDiagnostics(program.status());
    return program.status().outOfMemory() ? kRuntimeFailure : kBadInput;
  }
  if (!checkpoint.empty()) {
    if (!loadWeights(*program, checkpoint, WeightsReport::Line,
                     ema ? api::Program::Weights::Average : api::Program::Weights::Trained))
      return kRuntimeFailure;
  } else {
    out() << "initial weights of " << m->name() << " (init.seed "
          << m->graph().metaInt("init.seed").value_or(0) << ")\n";
  }
  api::Result<api::ExportReport> report = api::exportProgram(*program, eopts);
  printDiagnostics(report.status());
  if (!report)
    return kRuntimeFailure;
  out() << report->summary << "\n";
  return kSuccess;
}

} // namespace ampc::cli
