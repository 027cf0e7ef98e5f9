//===- DataSource.h - Training data: sources and batching -------------------===//
//
// A DataSource yields samples for every graph input: sample i of each input is
// written into one row (a slice along dim 0) of that input's batch tensor.
// Sources are synthetic (seeded, with labels from a fixed random teacher so a
// model has something to learn), .npy files, CSV and IDX (MNIST's format).
// createDataSource picks one from the model's meta (train.data and its keys).
//
// A Batcher walks a source in batches: a seeded permutation per epoch when
// shuffling, the last partial batch dropped or kept. Every sample and every
// order is a pure function of (seed, epoch, index), so runs repeat exactly and
// a resumed run (skipTo) sees the same later batches as an uninterrupted one.
// docs/data.md describes the formats and rules.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DATA_DATASOURCE_H
#define AMPC_RUNTIME_DATA_DATASOURCE_H

#include "runtime/HostTensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ampc {

class DiagnosticEngine;
class Graph;

/// The draw of an evaluation (DataSource::loadDrawnSample): deterministic,
/// the same in every epoch: no augmentation, fixed token windows.
inline constexpr int64_t kEvaluationDraw = -1;

class DataSource {
public:
  virtual ~DataSource();
  /// "synthetic", "npy", "csv", "idx", "image_folder" or "tokens".
  virtual llvm::StringRef kind() const = 0;
  virtual int64_t numSamples() const = 0;
  /// Writes sample `index` of every graph input into row `row` of `batch`
  /// (one tensor per graph input, in Graph::inputs() order, each shaped like
  /// the input: dim 0 is the batch). Returns false with `err` on failure.
  /// A source whose samples vary between draws gives the evaluation draw.
  virtual bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                          std::string &err) = 0;
  /// Sample `index` as drawn in training epoch `epoch` (from 0), or in an
  /// evaluation (kEvaluationDraw). Sources whose samples are random per draw
  /// (augmented images, random token windows) make them from (seed, epoch,
  /// index) alone, so a batch is the same on any thread and after a resume;
  /// the others ignore the epoch.
  virtual bool loadDrawnSample(int64_t index, int64_t epoch,
                               llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                               std::string &err) {
    (void)epoch;
    return loadSample(index, batch, row, err);
  }
  /// A name for sample `index` (an image's file, relative to its folder), or
  /// "" when samples are only numbered. `ampc predict` writes it per row.
  virtual std::string sampleName(int64_t index) const {
    (void)index;
    return "";
  }
  /// Whether the samples come sorted by class (an image folder's), so that a
  /// held-out tenth is taken across the data rather than from its end.
  virtual bool groupedByClass() const { return false; }
  /// Whether loadSample may run on several threads at once (for different
  /// rows of one batch). Sources that read from memory say yes; the batcher
  /// then fills a batch's rows in parallel.
  virtual bool concurrentLoads() const { return false; }
  /// Samples of the file left out for holding NaN or inf
  /// (train.non_finite_data: skip), and where the first one was.
  virtual int64_t skippedSamples() const { return 0; }
  virtual std::string firstSkipped() const { return ""; }
};

/// The source the graph's meta asks for (train.data: synthetic | npy | csv |
/// idx; synthetic with seed 0 and 1024 samples when absent). Relative file
/// paths are resolved against `modelDir`. Files are read and checked against
/// the graph's inputs here, so a bad file is reported before training starts;
/// on failure reports an error naming the file and returns nullptr.
/// `key` names the meta keys of the source ("train.data", or
/// "train.eval_data" for the evaluation data: the same syntax).
/// `optional` names inputs the data may lack: those the run at hand does not
/// read (predicting reads no labels). A source without one leaves its rows
/// zero: npy data needs no file for it, idx data no labels file, and a CSV
/// file's rows may lack the label column (every row as the first one);
/// synthetic data makes every input all the same.
std::unique_ptr<DataSource> createDataSource(const Graph &g, llvm::StringRef modelDir,
                                             DiagnosticEngine &diag,
                                             llvm::StringRef key = "train.data",
                                             llvm::ArrayRef<std::string> optional = {});

/// Samples [begin, begin + count) of `base` (which must outlive the view), for
/// holding out an evaluation split.
std::unique_ptr<DataSource> makeSubset(DataSource &base, int64_t begin, int64_t count);
/// The samples `indices` of `base`, in that order.
std::unique_ptr<DataSource> makeSubset(DataSource &base, std::vector<int64_t> indices);

/// One zero-filled tensor per graph input, shaped like it.
llvm::SmallVector<HostTensor, 4> makeBatchTensors(const Graph &g);

struct BatchOptions {
  int64_t batchSize = 1;
  bool shuffle = true;
  uint64_t seed = 0;
  bool dropLast = true;
  /// Data-parallel training: `ranks` processes walk the same seeded order
  /// in global batches of ranks x batchSize samples, and rank r takes rows
  /// [r x batchSize, (r + 1) x batchSize) of each. Together they see what
  /// one process with the global batch would, step for step.
  int64_t ranks = 1, rank = 0;
  /// Batches for evaluating or predicting: every sample is its evaluation
  /// draw (kEvaluationDraw), not an epoch's.
  bool evaluation = false;
};

/// batch (meta "batch", else dim 0 of the first input), train.shuffle,
/// train.seed and train.drop_last, with the model format's defaults.
BatchOptions batchOptionsFromMeta(const Graph &g);

/// Which samples fill one batch, fixed when the batch is taken: positions
/// [begin, begin + count) of its epoch's order fill rows [0, count). A
/// ticket owns its share of the order, so its rows can be loaded on any
/// thread while the batcher moves on.
struct BatchTicket {
  std::shared_ptr<const std::vector<int64_t>> order;
  int64_t begin = 0, count = 0;
  /// The draw its samples are loaded for (DataSource::loadDrawnSample).
  int64_t epoch = 0;
};

/// Hands out batches forever, epoch after epoch; the caller decides when to
/// stop (steps or epochs).
class Batcher {
public:
  Batcher(DataSource &source, BatchOptions options);

  /// Fills the next batch. `rows` is the number of samples written; it is
  /// less than the batch size only for a kept partial last batch, whose
  /// remaining rows are zero. Returns false with `err` when the source fails
  /// or the data cannot make a batch (the step is then not advanced).
  bool next(llvm::MutableArrayRef<HostTensor> batch, int64_t &rows, std::string &err);

  /// next() in two halves, for loading a batch on another thread: take()
  /// advances to the next batch and says which samples fill it (false with
  /// `err` when the data cannot make a batch); loadRows() then fills the
  /// rows [0, count) of `batch` that `made` does not mark (made[r] != 0: row
  /// r is there already; empty: none is) and zeroes the rows past `count`.
  /// loadRows and loadRow only read the source, so several threads may call
  /// them at once (DataSource::concurrentLoads).
  bool take(BatchTicket &ticket, std::string &err);
  bool loadRows(const BatchTicket &ticket, llvm::MutableArrayRef<HostTensor> batch,
                llvm::ArrayRef<uint8_t> made, bool parallel, std::string &err) const;
  bool loadRow(const BatchTicket &ticket, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
               std::string &err) const;
  /// Whether `batch` has one tensor per graph input with the batch size as
  /// dim 0; else false with `err`.
  bool checkBatchTensors(llvm::ArrayRef<HostTensor> batch, std::string &err) const;
  /// Whether the source's rows may load on several threads at once.
  bool concurrentLoads() const { return source_.concurrentLoads(); }

  /// Batches per epoch: floor(N / G) with drop_last, else ceil(N / G), G
  /// the global batch (ranks x batch size).
  int64_t batchesPerEpoch() const;
  /// Batches handed out so far (the global step of the next batch).
  int64_t step() const { return step_; }
  /// Epoch of the next batch, counted from 0.
  int64_t epoch() const;
  /// Position of the next batch within its epoch.
  int64_t batchInEpoch() const;
  /// Makes the next batch the one a fresh Batcher hands out as batch `step`
  /// (for resuming from a checkpoint).
  void skipTo(int64_t step);
  void reset() { skipTo(0); }

  /// Sample index at `position` of epoch `epoch`'s order.
  int64_t sampleAt(int64_t epoch, int64_t position);
  const BatchOptions &options() const { return options_; }

private:
  void ensureOrder(int64_t epoch);

  DataSource &source_;
  BatchOptions options_;
  int64_t step_ = 0;
  int64_t orderEpoch_ = -1;
  /// Shared with the tickets taken in its epoch.
  std::shared_ptr<std::vector<int64_t>> order_;
};

} // namespace ampc

#endif
