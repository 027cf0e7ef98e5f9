//===- CalibrateCommand.cpp - `ampc calibrate`: what would not fit a half --===//
//
// Trains a few steps at O0 (f32) with every node's results read as they are
// made, and lists the nodes whose values the half type would overflow or
// flush to zero, with the override that keeps each safe (docs/inspect.md).
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "CLI/CLI.hpp"

namespace ampc::cli {

int runCalibrate(int argc, char **argv) {
  std::string model, checkpoint, data, halfType = "f16", device = "cpu";
  int64_t batches = 4, batch = 0, threads = 0;
  CLI::App app{"train a few steps in f32 and list the nodes whose values would overflow or "
               "flush to zero in a half type"};
  app.name("ampc calibrate");
  app.footer("\nThe other commands: ampc --help; docs/inspect.md");
  app.add_option("model", model, "model file (.yaml or .onnx), with a loss and an optimizer")
      ->required();
  app.add_option("--half-type", halfType, "the half type to check against")
      ->check(CLI::IsMember({"f16", "bf16"}));
  app.add_option("--batches", batches, "training steps to observe (default 4)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--checkpoint", checkpoint,
                 "start from these trained weights (a checkpoint of this model, any level)");
  app.add_option("--data", data,
                 "the batches: the first of this data (a .csv file or a data source as in "
                 "train.data, e.g. '{npy: {x: x.npy, y: y.npy}}'; default: the model's)");
  app.add_option("--batch", batch, "samples per batch (default: the model's)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  app.add_option("--device", device, "where to run: cpu, cpu-ref")
      ->check(CLI::IsMember({"cpu", "cpu-ref"}));
  app.add_option("--threads", threads, "threads of the cpu device")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? kSuccess : kBadInput;
  }
  if (app.count("--checkpoint") && checkpoint.empty()) {
    err() << "error: --checkpoint needs a file name, got an empty one\n";
    return kBadInput;
  }
  applyThreads(threads);
  api::LoadOptions load;
  load.optLevel = "O0"; // everything in f32: the ranges are the model's own
  if (batch > 0)
    load.batch = batch;
  api::Result<api::Model> m = api::Model::loadFile(model, load);
  printDiagnostics(m.status());
  if (!m)
    return kBadInput;
  if (!m->trainable()) {
    err() << "error: ampc calibrate trains a few steps; the model needs a loss and an "
             "'optimizer' section\n";
    return kBadInput;
  }
  api::PipelineOptions p;
  p.stage = api::Stage::Train;
  if (api::Status s = m->rewrite(p); !s) {
    printDiagnostics(s);
    return kBadInput;
  }
  api::CompileOptions copts;
  copts.device = device;
  copts.fuseElementwise = false; // every node's result is written and read
  api::Result<api::Program> program = api::Program::compile(*m, copts);
  if (!program) {
    printDiagnostics(program.status());
    return program.status().outOfMemory() ? kRuntimeFailure : kBadInput;
  }
  if (!checkpoint.empty() && !loadWeights(*program, checkpoint, WeightsReport::LineNotes))
    return kRuntimeFailure;
  api::CalibrateOptions opts;
  opts.halfType = halfType == "bf16" ? api::DType::BF16 : api::DType::F16;
  opts.batches = batches;
  opts.data.spec = data; // relative paths against the current directory
  api::Result<api::CalibrationReport> report = program->calibrate(opts);
  if (!report) {
    printDiagnostics(report.status());
    return data.empty() ? kRuntimeFailure : kBadInput;
  }
  out() << report->str();
  return kSuccess;
}

} // namespace ampc::cli
