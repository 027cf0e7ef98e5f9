//===- Prefetch.cpp ---------------------------------------------------------===//
#include "runtime/data/Prefetch.h"

#include "runtime/Threads.h"

#include <algorithm>
#include <cstring>
#include <pthread.h>
#include <sched.h>

namespace ampc {

int BatchPrefetcher::defaultWorkers(int kernelThreads) {
  return std::max(1, allowedCores() - kernelThreads);
}

BatchPrefetcher::BatchPrefetcher(Batcher &batcher, const Graph &g, int workers)
    : batcher_(batcher) {
  for (Slot &slot : slots_)
    slot.tensors = makeBatchTensors(g);
  if (workers <= 0 || !batcher.concurrentLoads())
    return;
  const int64_t batchSize = batcher_.options().batchSize;
  rowMade_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(batchSize));
  // No more workers than rows: a batch's rows are the unit of work.
  workers = static_cast<int>(std::min<int64_t>(workers, batchSize));
  for (int i = 0; i < workers; ++i)
    workers_.emplace_back([this] {
#ifdef SCHED_IDLE
      // Only cores nothing else wants: the kernels' threads are never
      // preempted for a batch (on a machine whose cores they fill, a batch
      // made at normal priority cost more compute time than it saved).
      sched_param param{};
      pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
#endif
      work();
    });
  // The first batch starts at once, while the caller sets up the rest.
  // (A batcher that cannot make one says so when the caller asks.)
  BatchTicket ticket;
  std::string ignored;
  if (batcher_.checkBatchTensors(slots_[0].tensors, ignored) && batcher_.take(ticket, ignored))
    post(ticket);
}

BatchPrefetcher::~BatchPrefetcher() {
  if (workers_.empty())
    return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    abandoned_.store(active_.id, std::memory_order_relaxed);
  }
  wake_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

void BatchPrefetcher::post(const BatchTicket &ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_ = Job{ticket, nextId_++};
  posted_ = pending_->id;
  wake_.notify_all();
}

bool BatchPrefetcher::canJoin() const {
  return active_.id != 0 && finished_ != active_.id &&
         abandoned_.load(std::memory_order_relaxed) != active_.id &&
         !failing_.load(std::memory_order_relaxed) &&
         nextRow_.load(std::memory_order_relaxed) < active_.ticket.count;
}

bool BatchPrefetcher::canStart() const {
  // Every worker has left the active job (finished, failed or dropped), so
  // none writes the slot the pending job fills.
  return pending_ && busy_ == 0;
}

void BatchPrefetcher::startPending() {
  active_ = std::move(*pending_);
  pending_.reset();
  // The caller holds current_; it changes only when a finished job is
  // handed over, never while one is active.
  activeSlot_ = 1 - current_;
  failedRow_ = -1;
  failedErr_.clear();
  for (int64_t r = 0; r < active_.ticket.count; ++r)
    rowMade_[r].store(0, std::memory_order_relaxed);
  rowsMade_.store(0, std::memory_order_relaxed);
  failing_.store(false, std::memory_order_relaxed);
  nextRow_.store(0, std::memory_order_relaxed);
  wake_.notify_all(); // the other workers join
}

bool BatchPrefetcher::loadClaimedRows(const Job &job, Slot &slot, int64_t &failedRow,
                                      std::string &err) {
  const int64_t count = job.ticket.count;
  while (abandoned_.load(std::memory_order_relaxed) != job.id &&
         !failing_.load(std::memory_order_relaxed)) {
    int64_t r = nextRow_.fetch_add(1, std::memory_order_relaxed);
    if (r >= count)
      return false;
    if (!batcher_.loadRow(job.ticket, slot.tensors, r, err)) {
      failedRow = r;
      failing_.store(true, std::memory_order_relaxed);
      return false;
    }
    rowMade_[r].store(1, std::memory_order_release);
    if (rowsMade_.fetch_add(1, std::memory_order_acq_rel) + 1 == count) {
      if (count < batcher_.options().batchSize)
        for (HostTensor &t : slot.tensors)
          t.zeroFrom(count * t.rowElements());
      return true;
    }
  }
  return false;
}

void BatchPrefetcher::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || canJoin() || canStart(); });
    if (stop_)
      return;
    if (!canJoin())
      startPending();
    const Job job = active_;
    Slot &slot = slots_[activeSlot_];
    ++busy_;
    lock.unlock();
    int64_t failedRow = -1;
    std::string err;
    bool last = loadClaimedRows(job, slot, failedRow, err);
    lock.lock();
    --busy_;
    if (failedRow >= 0 && (failedRow_ < 0 || failedRow < failedRow_)) {
      // Rows are claimed in order, so once the job's workers have all left,
      // the lowest failed row is the one a sequential fill would report.
      failedRow_ = failedRow;
      failedErr_ = std::move(err);
    }
    if (abandoned_.load(std::memory_order_relaxed) != job.id) {
      if (last) {
        slot.ok = true;
        slot.err.clear();
        slot.rows = job.ticket.count;
        finished_ = job.id;
      } else if (busy_ == 0 && failedRow_ >= 0) {
        slot.ok = false;
        slot.err = failedErr_;
        finished_ = job.id;
      }
    }
    if (busy_ == 0)
      wake_.notify_all(); // the pending job may start
  }
}

bool BatchPrefetcher::fillCallerSlot(const BatchTicket &ticket, bool copyMade, std::string &err) {
  Slot &mine = slots_[current_];
  const Slot &theirs = slots_[1 - current_];
  std::vector<uint8_t> made;
  if (copyMade) {
    // A row marked made (read with acquire) is final in the workers' slot;
    // they write only rows not yet marked, and only there.
    made.resize(static_cast<size_t>(ticket.count));
    for (int64_t r = 0; r < ticket.count; ++r) {
      made[r] = rowMade_[r].load(std::memory_order_acquire);
      if (!made[r])
        continue;
      ++counts_.rowsCopied;
      for (size_t i = 0; i < mine.tensors.size(); ++i) {
        const HostTensor &src = theirs.tensors[i];
        size_t rowBytes = static_cast<size_t>(src.rowElements()) * dtypeSize(src.dtype());
        std::memcpy(static_cast<char *>(mine.tensors[i].data()) + r * rowBytes,
                    static_cast<const char *>(src.data()) + r * rowBytes, rowBytes);
      }
    }
  }
  mine.rows = 0;
  if (!batcher_.loadRows(ticket, mine.tensors, made, /*parallel=*/true, err))
    return false;
  mine.rows = ticket.count;
  return true;
}

bool BatchPrefetcher::next(llvm::MutableArrayRef<HostTensor> &batch, int64_t &rows, bool another,
                           std::string &err) {
  if (workers_.empty()) {
    Slot &slot = slots_[0];
    if (!batcher_.next(slot.tensors, slot.rows, err))
      return false;
    batch = slot.tensors;
    rows = slot.rows;
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (posted_ && finished_ == posted_) {
    // The workers' batch is complete: its slot becomes the caller's.
    posted_ = 0;
    current_ = activeSlot_;
    ++counts_.fromWorker;
    lock.unlock();
    const Slot &slot = slots_[current_];
    if (!slot.ok) {
      err = slot.err;
      return false;
    }
  } else {
    BatchTicket ticket;
    bool copyMade = false;
    if (pending_ && pending_->id == posted_) {
      // Not started (no core was idle): the caller makes it, on every core.
      ticket = std::move(pending_->ticket);
      pending_.reset();
      ++counts_.byCaller;
    } else if (posted_ && active_.id == posted_) {
      // Started and not finished: taken over, never waited for (a worker at
      // idle priority may not run again while another process is busy).
      abandoned_.store(posted_, std::memory_order_relaxed);
      ticket = active_.ticket;
      copyMade = true;
      ++counts_.takenOver;
    } else {
      // Nothing posted (the last call said no batch would follow).
      lock.unlock();
      if (!batcher_.checkBatchTensors(slots_[current_].tensors, err) || !batcher_.take(ticket, err))
        return false;
      ++counts_.byCaller;
      lock.lock();
    }
    posted_ = 0;
    lock.unlock();
    if (!fillCallerSlot(ticket, copyMade, err))
      return false;
  }
  // The slot the caller held until now is free (or still the workers'):
  // they go on with the batch after this one.
  if (another) {
    BatchTicket ticket;
    std::string ignored; // a failure shows when that batch is asked for
    if (batcher_.take(ticket, ignored))
      post(ticket);
  }
  Slot &slot = slots_[current_];
  batch = slot.tensors;
  rows = slot.rows;
  return true;
}

} // namespace ampc
