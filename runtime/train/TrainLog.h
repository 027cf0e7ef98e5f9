//===- TrainLog.h - Progress display and the metrics file -----------------===//
#ifndef AMPC_RUNTIME_TRAIN_TRAINLOG_H
#define AMPC_RUNTIME_TRAIN_TRAINLOG_H

#include "runtime/train/Trainer.h"

#include <cstdio>
#include <memory>
#include <optional>

namespace ampc {

/// One optimizer step as logged and written to the metrics file.
struct StepRecord {
  int64_t step = 0; ///< from 1
  double loss = 0;
  std::optional<double> lr;
  /// With loss scaling: the scale this step's backward used, and whether
  /// the step was skipped because a gradient overflowed.
  std::optional<double> lossScale;
  std::optional<bool> skipped;
  double stepMs = 0;
  /// Of stepMs, the time spent loading and binding the step's batches.
  double dataMs = 0;
  double samplesPerSecond = 0;
  std::optional<EvalResult> eval;
};

/// Formats a record as one JSON object on one line (no trailing newline).
std::string stepRecordJson(const StepRecord &r);

class TrainLog {
public:
  TrainLog(llvm::raw_ostream &out, ProgressStyle style, int64_t logEvery, int64_t totalSteps);
  ~TrainLog();

  /// Opens the metrics file: truncated for a new run, appended to when resuming.
  bool openMetrics(const std::string &path, bool append, std::string &err);
  /// Records a step: a metrics line always, the display per style and logEvery.
  bool record(const StepRecord &r, std::string &err);
  /// Ends the progress bar's line, if one is drawn.
  void finish();

private:
  void printLine(const StepRecord &r);
  void drawBar(const StepRecord &r);

  llvm::raw_ostream &out_;
  ProgressStyle style_;
  int64_t logEvery_, totalSteps_;
  std::FILE *metrics_ = nullptr;
  std::string metricsPath_;
  bool barDrawn_ = false;
};

} // namespace ampc

#endif
