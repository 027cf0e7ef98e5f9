//===- Prefetch.h - The next batch made while the current step runs -------===//
//
// A training step waits for its batch only if making it took longer than
// the step before it: worker threads fill one set of batch tensors while
// the caller uses the other. The workers run at SCHED_IDLE priority and
// share a batch's rows (each claims the next row not yet claimed): they
// take only cores the kernels leave idle, never preempting one of their
// threads (a preempted thread stalls the whole OpenMP team; measured on 2
// cores, a normal-priority worker cost the step more than the batch it
// made). There are as many workers as cores the kernels' threads leave
// free, at least one: a 16-core machine training on 8 threads decodes
// images on the other 8.
//
// Such workers get no core at all while another process keeps the machine
// busy, so the caller never waits for them: when it asks for a batch the
// workers have not finished, it takes the batch over. It copies the rows
// they have finished into its own set of tensors (the step that used them
// is over), loads the rest itself on every core, and tells the workers to
// drop the batch. Each stops at its next row; the batch after starts once
// all of them have left the dropped one (until then they would write rows
// of the same tensors). Batches are tickets (which samples fill which
// rows), so the batcher moves on while a ticket is loaded on either side.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DATA_PREFETCH_H
#define AMPC_RUNTIME_DATA_PREFETCH_H

#include "runtime/HostTensor.h"
#include "runtime/data/DataSource.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace ampc {

/// How the batches of a run were made, for reports and tests.
struct PrefetchCounts {
  int64_t fromWorker = 0; ///< finished by the worker before the caller asked
  int64_t takenOver = 0;  ///< started by the worker, finished by the caller
  int64_t byCaller = 0;   ///< made by the caller alone (the worker had not started)
  int64_t rowsCopied = 0; ///< rows of taken-over batches the worker had made
};

class BatchPrefetcher {
public:
  /// Batches come from `batcher` (positioned where the run starts) into
  /// tensors shaped like `g`'s inputs, made ahead by `workers` threads.
  /// With no workers, or a source whose rows cannot load on two threads at
  /// once, every batch is made in next() (no thread), with the batcher's
  /// parallel loads.
  BatchPrefetcher(Batcher &batcher, const Graph &g, int workers);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher &) = delete;
  BatchPrefetcher &operator=(const BatchPrefetcher &) = delete;

  /// The workers a run gets by default: the cores this process may use
  /// that `kernelThreads` leave free, at least one.
  static int defaultWorkers(int kernelThreads);

  /// The next batch, made now if the workers have not finished it; `rows`
  /// as in Batcher::next. The tensors stay valid and unchanged until the
  /// next call. `another`: whether a batch will be asked for after this one
  /// (so the workers start on it now). False with `err` when the batcher
  /// failed.
  bool next(llvm::MutableArrayRef<HostTensor> &batch, int64_t &rows, bool another,
            std::string &err);

  bool background() const { return !workers_.empty(); }
  int workers() const { return static_cast<int>(workers_.size()); }
  PrefetchCounts counts() const { return counts_; }
  /// Rows of the batch the workers are making that are finished (a row is
  /// counted once the caller could copy it).
  int64_t rowsReady() const { return rowsMade_.load(std::memory_order_acquire); }

private:
  struct Slot {
    llvm::SmallVector<HostTensor, 4> tensors;
    int64_t rows = 0;
    bool ok = true;
    std::string err;
  };
  struct Job {
    BatchTicket ticket;
    uint64_t id = 0;
  };
  void work();
  /// Rows of the active job for one worker, until none is left to claim,
  /// the job is dropped or a row fails (then `failedRow`, `err`). True
  /// when this worker finished the job's last row.
  bool loadClaimedRows(const Job &job, Slot &slot, int64_t &failedRow, std::string &err);
  /// Whether a worker may join the active job, or start the pending one
  /// (with the mutex held).
  bool canJoin() const;
  bool canStart() const;
  void startPending();
  /// The caller's own slot filled from `ticket`, copying first the rows the
  /// workers finished when `copyMade`.
  bool fillCallerSlot(const BatchTicket &ticket, bool copyMade, std::string &err);
  void post(const BatchTicket &ticket);

  Batcher &batcher_;
  Slot slots_[2];
  int current_ = 1; ///< the slot the caller holds; the workers fill the other
  PrefetchCounts counts_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<Job> pending_; ///< posted, not started by a worker
  uint64_t posted_ = 0;        ///< id of the job the caller will ask for; 0: none
  Job active_;                 ///< the job workers load (id 0: none yet)
  int activeSlot_ = 0;         ///< the slot it fills
  int busy_ = 0;               ///< workers inside the active job
  int64_t failedRow_ = -1;     ///< the active job's lowest failed row; -1: none
  std::string failedErr_;
  uint64_t finished_ = 0; ///< id of the last job the workers finished
  uint64_t nextId_ = 1;
  bool stop_ = false;
  /// The active job's rows: the next to claim, which are final (release:
  /// the caller copies them) and how many; the id of a job the caller took
  /// over (the workers stop), and whether a row failed (they stop too).
  std::atomic<int64_t> nextRow_{0};
  std::unique_ptr<std::atomic<uint8_t>[]> rowMade_;
  std::atomic<int64_t> rowsMade_{0};
  std::atomic<uint64_t> abandoned_{0};
  std::atomic<bool> failing_{false};
  std::vector<std::thread> workers_;
};

} // namespace ampc

#endif
