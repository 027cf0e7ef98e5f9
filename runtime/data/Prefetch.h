//===- Prefetch.h - The next batch made while the current step runs -------===//
//
// A training step waits for its batch only if making it took longer than
// the step before it: a worker thread fills one set of batch tensors while
// the caller uses the other. The worker runs at SCHED_IDLE priority and
// loads its rows one after another: it takes only cores the kernels leave
// idle, never preempting one of their threads (a preempted thread stalls
// the whole OpenMP team; measured on 2 cores, a normal-priority worker cost
// the step more than the batch it made).
//
// Such a worker gets no core at all while another process keeps the
// machine busy, so the caller never waits for it: when it asks for a batch
// the worker has not finished, it takes the batch over. It copies the rows
// the worker has finished into its own set of tensors (the step that used
// them is over), loads the rest itself on every core, and tells the worker
// to drop the batch. The worker stops at its next row and goes on with the
// batch after. Batches are tickets (which samples fill which rows), so the
// batcher moves on while a ticket is loaded on either side.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DATA_PREFETCH_H
#define AMPC_RUNTIME_DATA_PREFETCH_H

#include "runtime/HostTensor.h"
#include "runtime/data/DataSource.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

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
  /// tensors shaped like `g`'s inputs. With `background` false, or a source
  /// whose rows cannot load on two threads at once, every batch is made in
  /// next() (no thread), with the batcher's parallel loads.
  BatchPrefetcher(Batcher &batcher, const Graph &g, bool background);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher &) = delete;
  BatchPrefetcher &operator=(const BatchPrefetcher &) = delete;

  /// The next batch, made now if the worker has not finished it; `rows` as
  /// in Batcher::next. The tensors stay valid and unchanged until the next
  /// call. `another`: whether a batch will be asked for after this one (so
  /// the worker starts on it now). False with `err` when the batcher failed.
  bool next(llvm::MutableArrayRef<HostTensor> &batch, int64_t &rows, bool another,
            std::string &err);

  bool background() const { return background_; }
  PrefetchCounts counts() const { return counts_; }

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
  /// The caller's own slot filled from `ticket`, rows [0, from) copied from
  /// the worker's slot first.
  bool fillCallerSlot(const BatchTicket &ticket, int64_t from, std::string &err);
  void post(const BatchTicket &ticket);

  Batcher &batcher_;
  bool background_;
  Slot slots_[2];
  int current_ = 1; ///< the slot the caller holds; the worker fills the other
  PrefetchCounts counts_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<Job> pending_; ///< posted, not started by the worker
  uint64_t posted_ = 0;        ///< id of the job the caller will ask for; 0: none
  uint64_t started_ = 0;       ///< id of the job the worker is loading; 0: none
  BatchTicket startedTicket_;  ///< what that job loads
  uint64_t finished_ = 0;      ///< id of the last job the worker finished
  uint64_t nextId_ = 1;
  bool stop_ = false;
  /// Rows of the started job that are final (release: the caller copies
  /// them), and the id of a job the caller took over (the worker stops).
  std::atomic<int64_t> rowsDone_{0};
  std::atomic<uint64_t> abandoned_{0};
  std::thread worker_;
};

} // namespace ampc

#endif
