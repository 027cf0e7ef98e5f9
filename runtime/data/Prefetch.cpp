//===- Prefetch.cpp ---------------------------------------------------------===//
#include "runtime/data/Prefetch.h"

#include <cstring>
#include <pthread.h>
#include <sched.h>

namespace ampc {

BatchPrefetcher::BatchPrefetcher(Batcher &batcher, const Graph &g, bool background)
    : batcher_(batcher), background_(background && batcher.concurrentLoads()) {
  for (Slot &slot : slots_)
    slot.tensors = makeBatchTensors(g);
  if (!background_)
    return;
  worker_ = std::thread([this] {
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
  if (!worker_.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    abandoned_.store(started_, std::memory_order_relaxed);
  }
  wake_.notify_one();
  worker_.join();
}

void BatchPrefetcher::post(const BatchTicket &ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_ = Job{ticket, nextId_++};
  posted_ = pending_->id;
  wake_.notify_one();
}

void BatchPrefetcher::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return pending_ || stop_; });
    if (stop_)
      return;
    Job job = std::move(*pending_);
    pending_.reset();
    started_ = job.id;
    startedTicket_ = job.ticket;
    rowsDone_.store(0, std::memory_order_relaxed);
    // The caller's slot is current_; it changes only when a finished job
    // is handed over, never while one is started.
    Slot &slot = slots_[1 - current_];
    lock.unlock();
    std::string err;
    bool ok = true, dropped = false;
    for (int64_t r = 0; r < job.ticket.count && ok; ++r) {
      if (abandoned_.load(std::memory_order_relaxed) == job.id) {
        dropped = true;
        break;
      }
      ok = batcher_.loadRow(job.ticket, slot.tensors, r, err);
      if (ok)
        rowsDone_.store(r + 1, std::memory_order_release);
    }
    if (ok && !dropped && job.ticket.count < batcher_.options().batchSize)
      for (HostTensor &t : slot.tensors)
        t.zeroFrom(job.ticket.count * t.rowElements());
    lock.lock();
    started_ = 0;
    if (abandoned_.load(std::memory_order_relaxed) != job.id) {
      slot.ok = ok;
      slot.err = std::move(err);
      slot.rows = job.ticket.count;
      finished_ = job.id;
    }
  }
}

bool BatchPrefetcher::fillCallerSlot(const BatchTicket &ticket, int64_t from, std::string &err) {
  Slot &mine = slots_[current_];
  const Slot &theirs = slots_[1 - current_];
  // Rows below `from` are final in the worker's slot (rowsDone_ was read
  // with acquire), and the worker writes only rows at or past it.
  for (size_t i = 0; i < mine.tensors.size() && from > 0; ++i) {
    const HostTensor &src = theirs.tensors[i];
    std::memcpy(mine.tensors[i].data(), src.data(),
                static_cast<size_t>(from * src.rowElements() * dtypeSize(src.dtype())));
  }
  mine.rows = 0;
  if (!batcher_.loadRows(ticket, mine.tensors, from, /*parallel=*/true, err))
    return false;
  mine.rows = ticket.count;
  return true;
}

bool BatchPrefetcher::next(llvm::MutableArrayRef<HostTensor> &batch, int64_t &rows, bool another,
                           std::string &err) {
  if (!background_) {
    Slot &slot = slots_[0];
    if (!batcher_.next(slot.tensors, slot.rows, err))
      return false;
    batch = slot.tensors;
    rows = slot.rows;
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (posted_ && finished_ == posted_) {
    // The worker's batch is complete: its slot becomes the caller's.
    posted_ = 0;
    current_ = 1 - current_;
    ++counts_.fromWorker;
    lock.unlock();
    const Slot &slot = slots_[current_];
    if (!slot.ok) {
      err = slot.err;
      return false;
    }
  } else {
    BatchTicket ticket;
    int64_t from = 0;
    if (pending_ && pending_->id == posted_) {
      // Not started (no core was idle): the caller makes it, on every core.
      ticket = std::move(pending_->ticket);
      pending_.reset();
      ++counts_.byCaller;
    } else if (posted_ && started_ == posted_) {
      // Started and not finished: taken over, never waited for (a worker at
      // idle priority may not run again while another process is busy).
      abandoned_.store(posted_, std::memory_order_relaxed);
      from = rowsDone_.load(std::memory_order_acquire);
      ticket = startedTicket_;
      ++counts_.takenOver;
      counts_.rowsCopied += from;
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
    if (!fillCallerSlot(ticket, from, err))
      return false;
  }
  // The slot the caller held until now is free (or still the worker's):
  // the worker goes on with the batch after this one.
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
