//===- TrainLog.cpp ---------------------------------------------------------===//
#include "runtime/train/TrainLog.h"

#include "llvm/Support/Format.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <unistd.h>

namespace ampc {

namespace {

/// JSON has no inf/NaN literals; a non-finite value is written as null.
std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// M:SS, or H:MM:SS from an hour on.
std::string clockText(double seconds) {
  auto total = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  return buf;
}

} // namespace

std::string stepRecordJson(const StepRecord &r) {
  std::string s = "{\"step\": " + std::to_string(r.step);
  if (r.epoch > 0)
    s += ", \"epoch\": " + std::to_string(r.epoch);
  s += ", \"loss\": " + jsonNumber(r.loss);
  if (r.lr)
    s += ", \"lr\": " + jsonNumber(*r.lr);
  if (r.lossScale)
    s += ", \"loss_scale\": " + jsonNumber(*r.lossScale);
  if (r.skipped)
    s += std::string(", \"skipped\": ") + (*r.skipped ? "true" : "false");
  auto list = [&](const char *key, const std::vector<double> &values) {
    if (values.empty())
      return;
    s += std::string(", \"") + key + "\": [";
    for (size_t i = 0; i < values.size(); ++i)
      s += (i ? ", " : "") + jsonNumber(values[i]);
    s += "]";
  };
  list("losses", r.lossTerms);
  list("loss_scales", r.lossScales);
  list("lrs", r.lrs);
  s += ", \"step_ms\": " + jsonNumber(r.stepMs);
  s += ", \"data_ms\": " + jsonNumber(r.dataMs);
  s += ", \"samples_per_s\": " + jsonNumber(r.samplesPerSecond);
  if (r.eval) {
    s += ", \"eval_loss\": " + jsonNumber(r.eval->loss);
    if (r.eval->accuracy)
      s += ", \"eval_accuracy\": " + jsonNumber(*r.eval->accuracy);
    if (r.eval->top5)
      s += ", \"eval_top5\": " + jsonNumber(*r.eval->top5);
    s += ", \"eval_samples\": " + std::to_string(r.eval->samples);
  }
  return s + "}";
}

TrainLog::TrainLog(llvm::raw_ostream &out, ProgressStyle style, int64_t logEvery,
                   int64_t totalSteps, int64_t firstStep, int64_t totalEpochs)
    : out_(out), style_(style), logEvery_(logEvery), totalSteps_(totalSteps), firstStep_(firstStep),
      totalEpochs_(totalEpochs) {
  if (style_ == ProgressStyle::Auto)
    style_ = (&out == &llvm::outs() && ::isatty(STDOUT_FILENO)) ? ProgressStyle::Bar
                                                                : ProgressStyle::Lines;
}

TrainLog::~TrainLog() {
  finish();
  if (metrics_)
    std::fclose(metrics_);
}

bool TrainLog::openMetrics(const std::string &path, bool append, std::string &err) {
  if (path.empty())
    return true;
  // A metrics file is a log that grows while the run goes on (so it can be
  // followed); each line is flushed whole. Checkpoints are the atomic files.
  metrics_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!metrics_) {
    err = "cannot open metrics file '" + path + "': " + std::strerror(errno);
    return false;
  }
  metricsPath_ = path;
  return true;
}

bool TrainLog::record(const StepRecord &r, std::string &err) {
  if (metrics_) {
    std::string line = stepRecordJson(r) + "\n";
    if (std::fwrite(line.data(), 1, line.size(), metrics_) != line.size() ||
        std::fflush(metrics_) != 0) {
      err = "cannot write metrics file '" + metricsPath_ + "': " + std::strerror(errno);
      return false;
    }
  }
  bool logged = logEvery_ > 0 && (r.step % logEvery_ == 0 || r.step == totalSteps_ || r.step == 1);
  switch (style_) {
  case ProgressStyle::Bar:
    drawBar(r);
    if (r.eval) // evaluations stay on screen
      printLine(r);
    break;
  case ProgressStyle::Lines:
    if (logged || r.eval)
      printLine(r);
    break;
  case ProgressStyle::None:
  case ProgressStyle::Auto:
    break;
  }
  return true;
}

std::string TrainLog::epochText(const StepRecord &r) const {
  if (r.epoch <= 0)
    return "";
  std::string s = "epoch " + std::to_string(r.epoch);
  if (totalEpochs_ > 0)
    s += "/" + std::to_string(totalEpochs_);
  return s + "  ";
}

std::string TrainLog::timeText(const StepRecord &r) const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string s = "elapsed " + clockText(elapsed);
  // The time left at this run's mean pace so far (evaluations included).
  int64_t done = r.step - firstStep_, left = totalSteps_ - r.step;
  if (done > 0 && left >= 0)
    s += ", left " + clockText(elapsed / double(done) * double(left));
  return s;
}

void TrainLog::printLine(const StepRecord &r) {
  if (barDrawn_) {
    out_ << "\r\x1b[K";
    barDrawn_ = false;
  }
  int width = static_cast<int>(std::to_string(totalSteps_).size());
  out_ << "step " << llvm::format_decimal(r.step, width) << "/" << totalSteps_ << "  "
       << epochText(r) << "loss " << llvm::format("%.6f", r.loss);
  for (size_t k = 0; k < r.lossTerms.size(); ++k)
    out_ << (k ? " " : " (") << llvm::format("%.4g", r.lossTerms[k])
         << (k + 1 == r.lossTerms.size() ? ")" : "");
  if (r.lr)
    out_ << "  lr " << llvm::format("%.3e", *r.lr);
  if (!r.lossScales.empty()) {
    out_ << "  scales";
    for (double scale : r.lossScales)
      out_ << " " << llvm::format("%g", scale);
  } else if (r.lossScale) {
    out_ << "  scale " << llvm::format("%g", *r.lossScale);
  }
  if (r.skipped && *r.skipped)
    out_ << "  (skipped: overflow)";
  out_ << "  " << llvm::format("%.2f", r.stepMs) << " ms/step  "
       << llvm::format("%.0f", r.samplesPerSecond) << " samples/s";
  if (r.eval) {
    out_ << "  eval loss " << llvm::format("%.6f", r.eval->loss);
    if (r.eval->accuracy)
      out_ << " accuracy " << llvm::format("%.2f%%", 100 * *r.eval->accuracy);
  }
  out_ << "  " << timeText(r) << "\n";
  out_.flush();
}

void TrainLog::drawBar(const StepRecord &r) {
  constexpr int kWidth = 30;
  int filled = totalSteps_ > 0 ? static_cast<int>(kWidth * r.step / totalSteps_) : kWidth;
  out_ << "\r\x1b[K[" << std::string(filled, '=') << std::string(kWidth - filled, ' ') << "] "
       << r.step << "/" << totalSteps_ << "  " << epochText(r) << "loss "
       << llvm::format("%.6f", r.loss) << "  " << llvm::format("%.2f", r.stepMs) << " ms/step  "
       << timeText(r);
  out_.flush();
  barDrawn_ = true;
}

void TrainLog::finish() {
  if (barDrawn_) {
    out_ << "\n";
    out_.flush();
    barDrawn_ = false;
  }
}

} // namespace ampc
