//===- Prefetch.cpp ---------------------------------------------------------===//
#include "runtime/data/Prefetch.h"

#include <pthread.h>
#include <sched.h>

namespace ampc {

BatchPrefetcher::BatchPrefetcher(Batcher &batcher, const Graph &g, bool background)
    : batcher_(batcher), background_(background) {
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
  std::lock_guard<std::mutex> lock(mutex_);
  requested_ = outstanding_ = true;
  wake_.notify_one();
}

BatchPrefetcher::~BatchPrefetcher() {
  if (!worker_.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  worker_.join();
  batcher_.setParallelLoads(true);
}

bool BatchPrefetcher::fill(Slot &slot, bool parallel) {
  batcher_.setParallelLoads(parallel);
  slot.err.clear();
  slot.ok = batcher_.next(slot.tensors, slot.rows, slot.err);
  return slot.ok;
}

void BatchPrefetcher::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return requested_ || stop_; });
    if (stop_)
      return;
    requested_ = false;
    Slot &slot = slots_[1 - current_];
    lock.unlock();
    // The batcher and this slot are the worker's alone until ready_ is set.
    fill(slot, /*parallel=*/false);
    lock.lock();
    ready_ = true;
    done_.notify_one();
  }
}

void BatchPrefetcher::waitIdle() {
  if (!background_)
    return;
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return !outstanding_ || ready_; });
}

bool BatchPrefetcher::next(llvm::MutableArrayRef<HostTensor> &batch, int64_t &rows, bool another,
                           std::string &err) {
  if (!background_) {
    Slot &slot = slots_[0];
    if (!fill(slot, /*parallel=*/true)) {
      err = slot.err;
      return false;
    }
    batch = slot.tensors;
    rows = slot.rows;
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!outstanding_) { // the last call said no batch would follow; one does
    requested_ = outstanding_ = true;
    wake_.notify_one();
  }
  if (requested_) {
    // Not started (the worker had no idle core yet): the caller makes the
    // batch itself, on every core, as without prefetching.
    requested_ = outstanding_ = false;
    lock.unlock();
    fill(slots_[1 - current_], /*parallel=*/true);
    lock.lock();
  } else {
    done_.wait(lock, [this] { return ready_; });
    ready_ = outstanding_ = false;
  }
  current_ = 1 - current_;
  Slot &slot = slots_[current_];
  if (!slot.ok) {
    err = slot.err;
    return false;
  }
  // The slot the caller held until now is free: fill it with the batch
  // after this one.
  if (another) {
    requested_ = outstanding_ = true;
    wake_.notify_one();
  }
  batch = slot.tensors;
  rows = slot.rows;
  return true;
}

} // namespace ampc
