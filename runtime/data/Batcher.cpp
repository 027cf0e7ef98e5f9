//===- Batcher.cpp - Batches, seeded shuffling, epochs -----------------------===//
//
// Epoch e's order is a Fisher-Yates shuffle whose draws are counter-based
// random numbers of (seed, e, position), so any epoch's order can be rebuilt
// on its own: skipTo(step) needs no replay of earlier epochs.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/DataSource.h"

#include "kernels/common/Random.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace ampc {

static constexpr uint64_t kShuffleStreamBase = 0x7368756666000000ull; // + epoch

Batcher::Batcher(DataSource &source, BatchOptions options) : source_(source), options_(options) {
  assert(options_.batchSize > 0 && "batch size must be positive");
  assert(options_.ranks > 0 && options_.rank >= 0 && options_.rank < options_.ranks &&
         "rank out of range");
}

int64_t Batcher::batchesPerEpoch() const {
  int64_t n = source_.numSamples(), b = options_.batchSize * options_.ranks;
  return options_.dropLast ? n / b : (n + b - 1) / b;
}

int64_t Batcher::epoch() const {
  int64_t perEpoch = batchesPerEpoch();
  return perEpoch ? step_ / perEpoch : 0;
}

int64_t Batcher::batchInEpoch() const {
  int64_t perEpoch = batchesPerEpoch();
  return perEpoch ? step_ % perEpoch : 0;
}

void Batcher::skipTo(int64_t step) {
  assert(step >= 0 && "negative step");
  step_ = step;
}

void Batcher::ensureOrder(int64_t epoch) {
  if (orderEpoch_ == epoch)
    return;
  int64_t n = source_.numSamples();
  // A fresh vector: tickets of the previous epoch may still be loading.
  auto order = std::make_shared<std::vector<int64_t>>(n);
  std::iota(order->begin(), order->end(), int64_t(0));
  if (options_.shuffle) {
    uint64_t stream = kShuffleStreamBase + static_cast<uint64_t>(epoch);
    for (int64_t i = n - 1; i > 0; --i) {
      uint64_t bits = kernels::randomBits(options_.seed, stream, static_cast<uint64_t>(i));
      auto j = static_cast<int64_t>((static_cast<unsigned __int128>(bits) * uint64_t(i + 1)) >> 64);
      std::swap((*order)[i], (*order)[j]);
    }
  }
  order_ = std::move(order);
  orderEpoch_ = epoch;
}

int64_t Batcher::sampleAt(int64_t epoch, int64_t position) {
  ensureOrder(epoch);
  return (*order_)[position];
}

bool Batcher::loadRow(const BatchTicket &ticket, llvm::MutableArrayRef<HostTensor> batch,
                      int64_t row, std::string &err) const {
  return source_.loadDrawnSample((*ticket.order)[ticket.begin + row], ticket.epoch, batch, row,
                                 err);
}

bool Batcher::loadRows(const BatchTicket &ticket, llvm::MutableArrayRef<HostTensor> batch,
                       llvm::ArrayRef<uint8_t> made, bool parallel, std::string &err) const {
  int64_t count = ticket.count;
  auto wanted = [&](int64_t r) { return made.empty() || !made[static_cast<size_t>(r)]; };
  int64_t missing = 0;
  for (int64_t r = 0; r < count; ++r)
    missing += wanted(r);
  if (!parallel || !source_.concurrentLoads() || missing < 2) {
    for (int64_t r = 0; r < count; ++r)
      if (wanted(r) && !loadRow(ticket, batch, r, err))
        return false;
  } else {
    // Rows are disjoint, so threads fill them independently. Of several
    // failures the lowest row's is reported, as a sequential fill would.
    std::vector<std::string> errors(static_cast<size_t>(count));
    std::vector<char> failed(static_cast<size_t>(count), 0);
#pragma omp parallel for schedule(dynamic)
    for (int64_t r = 0; r < count; ++r)
      if (wanted(r))
        failed[r] = !loadRow(ticket, batch, r, errors[r]);
    for (int64_t r = 0; r < count; ++r)
      if (failed[r]) {
        err = std::move(errors[r]);
        return false;
      }
  }
  if (count < options_.batchSize)
    for (HostTensor &t : batch)
      t.zeroFrom(count * t.rowElements());
  return true;
}

bool Batcher::checkBatchTensors(llvm::ArrayRef<HostTensor> batch, std::string &err) const {
  for (const HostTensor &t : batch)
    if (t.type().rank() == 0 || t.dims()[0] != options_.batchSize) {
      err = "batch tensor " + t.type().str() + " does not have the batch size " +
            std::to_string(options_.batchSize) + " as its first dimension";
      return false;
    }
  return true;
}

bool Batcher::take(BatchTicket &ticket, std::string &err) {
  int64_t n = source_.numSamples(), b = options_.batchSize;
  if (batchesPerEpoch() == 0) {
    err = "the data has " + std::to_string(n) + " samples, fewer than one batch of " +
          std::to_string(b * options_.ranks) +
          (options_.ranks > 1
               ? " (" + std::to_string(options_.ranks) + " ranks x " + std::to_string(b) + ")"
               : std::string()) +
          "; use a smaller batch or drop_last: false";
    return false;
  }
  int64_t perEpoch = batchesPerEpoch();
  int64_t epochIndex = step_ / perEpoch;
  int64_t begin = (step_ % perEpoch) * b * options_.ranks + options_.rank * b;
  ensureOrder(epochIndex);
  ticket.order = order_;
  ticket.begin = begin;
  ticket.epoch = options_.evaluation ? kEvaluationDraw : epochIndex;
  // A kept partial last global batch may leave a rank fewer rows, or none.
  ticket.count = std::clamp<int64_t>(n - begin, 0, b);
  ++step_;
  return true;
}

bool Batcher::next(llvm::MutableArrayRef<HostTensor> batch, int64_t &rows, std::string &err) {
  rows = 0;
  BatchTicket ticket;
  if (!checkBatchTensors(batch, err) || !take(ticket, err))
    return false;
  if (!loadRows(ticket, batch, {}, /*parallel=*/true, err)) {
    --step_; // the step is not advanced by a failed batch
    return false;
  }
  rows = ticket.count;
  return true;
}

} // namespace ampc
