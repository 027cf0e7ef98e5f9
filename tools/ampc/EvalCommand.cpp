//===- EvalCommand.cpp - `ampc eval`: a trained model's loss and metrics ---===//
//
// ampc eval MODEL [--checkpoint C [--ema]] [--data SPEC] [--json]
//
// The loss and metrics (accuracy and top-5 for a classifier, the loss for a
// regression) of the checkpoint's weights (else the model's initial ones)
// over every sample of the data, the last partial batch included (it runs
// through a program compiled for its size). The model runs in inference
// mode: batchnorm on its running statistics, dropout off. A thin client of
// Program::evaluate(DataSpec).
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "CLI/CLI.hpp"

#include <cstdio>

namespace ampc::cli {

void addInferenceOptions(CLI::App &app, InferenceOptions &o) {
  app.add_option("model", o.model, "model file (.yaml or .onnx)")->required();
  app.add_option("--checkpoint", o.checkpoint,
                 "the trained weights: a checkpoint of this model (any opt level); default: the "
                 "model's initial weights (an ONNX file's initializers, init.from, the seed)");
  app.add_flag("--ema", o.ema,
               "use the checkpoint's average of the weights (trained with train.ema) instead of "
               "the weights as trained");
  app.add_option("--data", o.data,
                 "the data: a .csv file, or a data source as in train.data, e.g. "
                 "'{npy: {x: x.npy, y: y.npy}}' (paths relative to the current directory; "
                 "default: the model's train.data)");
  app.add_option("-O,--opt-level", o.optLevel, "opt level to run at (default: the model file's)")
      ->check(CLI::IsMember({"O0", "O1", "O2", "O3"}));
  app.add_option("--batch", o.batch, "samples per batch (default: the model's)");
  app.add_option("--device", o.device, "where to run: auto, cpu, cpu-ref")
      ->check(CLI::IsMember({"auto", "cpu", "cpu-ref"}));
  app.add_option("--threads", o.threads,
                 "threads of the cpu device (default: the cores this process may use, or "
                 "OMP_NUM_THREADS)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
}

int prepareInference(const InferenceOptions &o, std::optional<api::Model> &model,
                     std::optional<api::Program> &program, bool quiet) {
  if (o.checkpoint && o.checkpoint->empty()) {
    err() << "error: --checkpoint needs a file name, got an empty one\n";
    return kBadInput;
  }
  if (o.ema && !o.checkpoint) {
    err() << "error: --ema needs --checkpoint: the average is kept in a training checkpoint\n";
    return kBadInput;
  }
  if (o.batch < 0) {
    err() << "error: --batch must be a positive integer\n";
    return kBadInput;
  }
  applyThreads(o.threads);
  api::LoadOptions load;
  load.optLevel = o.optLevel;
  if (o.batch > 0)
    load.batch = o.batch;
  api::Result<api::Model> m = api::Model::loadFile(o.model, load);
  printDiagnostics(m.status());
  if (!m)
    return kBadInput;
  model.emplace(std::move(*m));
  api::PipelineOptions p;
  p.stage = api::Stage::Forward; // an inference graph (eval mode)
  p.resolveEpochs = false;
  if (api::Status s = model->rewrite(p); !s) {
    printDiagnostics(s);
    return kBadInput;
  }
  api::Result<api::DeviceChoice> device = api::selectDevice(o.device);
  if (!device) {
    printDiagnostics(device.status());
    return kRuntimeFailure;
  }
  if (device->name == "cuda") // the outputs are read in host memory
    device->name = "cpu";
  api::CompileOptions copts;
  copts.device = device->name;
  api::Result<api::Program> prog = api::Program::compile(*model, copts);
  if (!prog) {
    printDiagnostics(prog.status());
    return prog.status().outOfMemory() ? kRuntimeFailure : kBadInput;
  }
  program.emplace(std::move(*prog));
  if (!o.checkpoint) {
    // Said, so that untrained numbers are not taken for trained ones.
    if (!quiet)
      out() << "weights: the model's initial ones (no --checkpoint)\n";
    return kSuccess;
  }
  if (!loadWeights(*program, *o.checkpoint, quiet ? WeightsReport::Quiet : WeightsReport::LineNotes,
                   o.ema ? api::Program::Weights::Average : api::Program::Weights::Trained))
    return kRuntimeFailure;
  return kSuccess;
}

namespace {
std::string number(double v, const char *fmt) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}
} // namespace

int runEval(int argc, char **argv) {
  InferenceOptions o;
  bool json = false;
  CLI::App app{"the loss and metrics of a trained model over every sample of some data, in "
               "inference mode"};
  app.name("ampc eval");
  app.footer("\nData, output and exit codes: docs/cli.md");
  addInferenceOptions(app, o);
  app.add_flag("--json", json, "print the result as one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? kSuccess : kBadInput;
  }
  std::optional<api::Model> model;
  std::optional<api::Program> program;
  if (int code = prepareInference(o, model, program, json); code != kSuccess)
    return code;
  api::DataSpec data{o.data, ""};
  api::Result<api::EvalReport> r = program->evaluate(data, o.runOptions());
  if (!r) {
    printDiagnostics(r.status());
    return kBadInput;
  }
  if (json) {
    // No checkpoint: no step to name (0 would read as a checkpoint's).
    std::string step = o.checkpoint ? std::to_string(program->stepsDone()) : "null";
    out() << "{\"model\": \"" << model->name() << "\", \"checkpoint_step\": " << step
          << ", \"samples\": " << r->samples << ", \"loss_kind\": \"" << r->lossKind
          << "\", \"loss\": " << number(r->loss, "%.9g");
    if (r->accuracy)
      out() << ", \"accuracy\": " << number(*r->accuracy, "%.9g");
    if (r->top5)
      out() << ", \"top5\": " << number(*r->top5, "%.9g");
    out() << "}\n";
    return kSuccess;
  }
  out() << "eval on " << r->samples << " samples: " << r->lossKind << " "
        << number(r->loss, "%.6f");
  if (r->accuracy)
    out() << ", accuracy " << number(100 * *r->accuracy, "%.2f") << "%";
  if (r->top5)
    out() << ", top-5 " << number(100 * *r->top5, "%.2f") << "%";
  out() << "\n";
  return kSuccess;
}

} // namespace ampc::cli
