//===- TrainLog.h - Progress display and the metrics file -----------------===//
#ifndef AMPC_RUNTIME_TRAIN_TRAINLOG_H
#define AMPC_RUNTIME_TRAIN_TRAINLOG_H

#include "runtime/train/Trainer.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

namespace ampc {

/// One optimizer step as logged and written to the metrics file.
struct StepRecord {
  int64_t step = 0;  ///< from 1
  int64_t epoch = 0; ///< the epoch of the step's last batch, from 1; 0 = not known
  double loss = 0;
  std::optional<double> lr;
  /// With loss scaling: the scale this step's backward used, and whether
  /// the step was skipped because a gradient overflowed.
  std::optional<double> lossScale;
  std::optional<bool> skipped;
  /// With a list of losses: each term's value (unweighted), and with
  /// amp.num_losses > 1 each term's loss scale.
  std::vector<double> lossTerms, lossScales;
  /// With several optimizers: each one's learning rate, in the model
  /// file's order (lr is the first one's).
  std::vector<double> lrs;
  double stepMs = 0;
  /// Of stepMs, the time spent waiting for the step's batches (loading them,
  /// when not prefetched) and binding them.
  double dataMs = 0;
  double samplesPerSecond = 0;
  std::optional<EvalResult> eval;
};

/// Formats a record as one JSON object on one line (no trailing newline).
std::string stepRecordJson(const StepRecord &r);

class TrainLog {
public:
  /// `firstStep`: the step this run starts after (a resumed run's
  /// checkpoint step), so the time left is estimated from this run's steps;
  /// `totalEpochs` 0 when the data's epochs are not known.
  TrainLog(llvm::raw_ostream &out, ProgressStyle style, int64_t logEvery, int64_t totalSteps,
           int64_t firstStep = 0, int64_t totalEpochs = 0);
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
  /// "epoch E/N  " (or "" without an epoch), "elapsed M:SS, left M:SS".
  std::string epochText(const StepRecord &r) const;
  std::string timeText(const StepRecord &r) const;

  llvm::raw_ostream &out_;
  ProgressStyle style_;
  int64_t logEvery_, totalSteps_, firstStep_, totalEpochs_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::FILE *metrics_ = nullptr;
  std::string metricsPath_;
  bool barDrawn_ = false;
};

} // namespace ampc

#endif
