//===- Prefetch.h - The next batch made while the current step runs -------===//
//
// A training step waits for its batch only if making it took longer than
// the step before it: a worker thread fills one set of batch tensors while
// the caller uses the other. The worker runs at SCHED_IDLE priority and
// loads its rows one after another: it takes only cores the kernels leave
// idle, never preempting one of their threads (a preempted thread stalls
// the whole OpenMP team; measured on 2 cores, a normal-priority worker cost
// the step more than the batch it made). When the caller asks for a batch
// the worker has not started -- no core was idle -- the caller makes it
// itself, on every core, as without prefetching.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DATA_PREFETCH_H
#define AMPC_RUNTIME_DATA_PREFETCH_H

#include "runtime/HostTensor.h"
#include "runtime/data/DataSource.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace ampc {

class BatchPrefetcher {
public:
  /// Batches come from `batcher` (positioned where the run starts) into
  /// tensors shaped like `g`'s inputs. With `background` false every batch
  /// is made in next() (no thread), with the batcher's parallel loads.
  BatchPrefetcher(Batcher &batcher, const Graph &g, bool background);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher &) = delete;
  BatchPrefetcher &operator=(const BatchPrefetcher &) = delete;

  /// The next batch, waiting for it if it is not ready; `rows` as in
  /// Batcher::next. The tensors stay valid and unchanged until the next
  /// call. `another`: whether a batch will be asked for after this one (so
  /// the worker starts on it now). False with `err` when the batcher failed.
  bool next(llvm::MutableArrayRef<HostTensor> &batch, int64_t &rows, bool another,
            std::string &err);

  /// Waits until the worker is not loading: the source is the caller's
  /// again (evaluation on a subset of the same data reads it).
  void waitIdle();

private:
  struct Slot {
    llvm::SmallVector<HostTensor, 4> tensors;
    int64_t rows = 0;
    bool ok = true;
    std::string err;
  };
  void work();
  /// The next batch into `slot`, its rows loaded on OpenMP's threads or not.
  bool fill(Slot &slot, bool parallel);

  Batcher &batcher_;
  bool background_;
  Slot slots_[2];
  int current_ = 1; ///< the slot the caller holds; the worker fills the other

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  bool requested_ = false, ready_ = false, stop_ = false;
  bool outstanding_ = false; ///< a batch is asked for and not yet handed out
  std::thread worker_;
};

} // namespace ampc

#endif
