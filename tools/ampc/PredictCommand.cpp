//===- PredictCommand.cpp - `ampc predict`: a trained model's outputs ------===//
//
// ampc predict MODEL [--checkpoint C [--ema]] [--data SPEC] -o OUT.npy|OUT.csv [--argmax]
//
// Runs every sample of the data through the model in inference mode and
// writes the prediction (the loss's input: logits, or the regression
// output; else the model's first output) atomically, one row per sample
// (a [B*T, V] output is written [N, T, V]). The data needs only the inputs
// the prediction reads: no labels. A thin client of Program::predict and
// savePredictions.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "CLI/CLI.hpp"

#include <cctype>

namespace ampc::cli {

void addInferenceOptions(CLI::App &app, InferenceOptions &o); // EvalCommand.cpp

int runPredict(int argc, char **argv) {
  InferenceOptions o;
  std::string output;
  bool argmax = false, writeThrough = false;
  CLI::App app{"write a trained model's predictions for every sample of some data"};
  app.name("ampc predict");
  app.footer("\nData, output files and exit codes: docs/cli.md");
  addInferenceOptions(app, o);
  app.add_option("-o,--output", output, "where: FILE.npy or FILE.csv (the extension decides)")
      ->required();
  app.add_flag("--argmax", argmax, "write class ids (the largest logit's index) instead of values");
  app.add_flag("--write-through", writeThrough,
               "let -o follow a symlink or write into a device or FIFO");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? kSuccess : kBadInput;
  }
  if (output.empty()) {
    err() << "error: --output needs a file name, got an empty one\n";
    return kBadInput;
  }
  std::string lower = output;
  for (char &c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto endsWith = [&](const std::string &s) {
    return lower.size() >= s.size() && lower.compare(lower.size() - s.size(), s.size(), s) == 0;
  };
  if (!endsWith(".npy") && !endsWith(".csv")) {
    err() << "error: output '" << output << "': the extension picks the format: .npy or .csv\n";
    return kBadInput;
  }
  // The output before any work (docs/cli.md, "Output files").
  if (api::Status s = api::checkOutputPath(output, writeThrough); !s) {
    printDiagnostics(s);
    return kBadInput;
  }
  std::optional<api::Model> model;
  std::optional<api::Program> program;
  if (int code = prepareInference(o, model, program, false); code != kSuccess)
    return code;
  api::Result<api::Predictions> p = program->predict(api::DataSpec{o.data, ""}, o.runOptions());
  if (!p) {
    printDiagnostics(p.status());
    return kBadInput;
  }
  if (api::Status s = api::savePredictions(*p, output, argmax, writeThrough); !s) {
    printDiagnostics(s);
    return kRuntimeFailure;
  }
  int64_t perSample = 1;
  for (size_t i = 1; i < p->shape.size(); ++i)
    perSample *= p->shape[i];
  out() << "wrote " << (argmax ? "class ids" : "'" + p->name + "'") << " for " << p->shape[0]
        << " samples (" << p->dataKind << " data";
  if (!argmax)
    out() << ", " << perSample << " values each";
  out() << ") to " << output << "\n";
  return kSuccess;
}

} // namespace ampc::cli
