//===- MpiCommunicator.cpp - Collectives through Open MPI ------------------===//
//
// MPI_COMM_WORLD, initialised once per process (MPI_Init_thread, funneled:
// only the thread that trains calls MPI) and finalised at exit. MPI has no
// 16-bit float types: f16 and bf16 reduce through an f32 buffer, or travel
// as 16-bit integers summed by an MPI_Op of ours (allReduceHalfWire). A
// watchdog thread ends the process when a collective outlives the timeout.
//
//===----------------------------------------------------------------------===//
#include "runtime/dist/Communicator.h"

#include "ir/HalfConversion.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace ampc::dist {

namespace {

std::string mpiError(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(what) + " failed: " + std::string(text, static_cast<size_t>(length));
}

/// MPI_Init once; MPI_Finalize at exit (after every communicator is gone).
bool ensureInitialised(std::string &err) {
  static std::once_flag once;
  static std::string initError;
  std::call_once(once, [] {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised)
      return;
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
      initError = mpiError("MPI_Init_thread", rc);
      return;
    }
    // Errors come back as codes (reported with the op) instead of aborting.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit([] {
      int finalised = 0;
      MPI_Finalized(&finalised);
      if (!finalised)
        MPI_Finalize();
    });
  });
  err = initError;
  return initError.empty();
}

/// The sum of two 16-bit floats, in f32, rounded back: the reduction of a
/// half all-reduce. MPI calls it with `inout` = in (+) inout.
template <bool Bf16> void addHalves(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) {
    float sum = Bf16 ? bf16BitsToFloat(a[i]) + bf16BitsToFloat(b[i])
                     : halfBitsToFloat(a[i]) + halfBitsToFloat(b[i]);
    b[i] = Bf16 ? floatToBf16Bits(sum) : floatToHalfBits(sum);
  }
}

/// Ends the process when one collective waits longer than the timeout: MPI
/// has no timeouts of its own, and a rank that died or hangs would keep the
/// others in MPI_Allreduce for ever. The launcher sees the exit and ends
/// the job. MPI is funneled, so the watchdog calls no MPI itself.
class Watchdog {
public:
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable())
      thread_.join();
  }
  void setTimeout(double seconds, int rank, int size) {
    timeoutNs_ = seconds > 0 ? static_cast<int64_t>(seconds * 1e9) : 0;
    timeoutSeconds_ = seconds;
    rank_ = rank;
    size_ = size;
    if (timeoutNs_ && !thread_.joinable())
      thread_ = std::thread([this] { watch(); });
  }
  /// Marks a collective as started (`what` names it) until disarm().
  void arm(const char *what) {
    what_.store(what);
    since_.store(now());
  }
  void disarm() { since_.store(0); }

private:
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(50));
      int64_t since = since_.load();
      if (stop_ || !since || !timeoutNs_ || now() - since < timeoutNs_)
        continue;
      std::fprintf(stderr,
                   "ampc: error: rank %d of %d: %s waited %g s for the other ranks "
                   "(--collective-timeout): a rank died, hangs, or runs a different "
                   "model or step count; ending the job\n",
                   rank_.load(), size_.load(), what_.load(), timeoutSeconds_.load());
      std::fflush(stderr);
      std::_Exit(kCollectiveTimeoutExit);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
  bool stop_ = false;
  std::atomic<int64_t> since_{0};
  std::atomic<const char *> what_{""};
  std::atomic<int64_t> timeoutNs_{0};
  std::atomic<double> timeoutSeconds_{0};
  std::atomic<int> rank_{0}, size_{1};
};

/// Arms the watchdog for one collective's lifetime.
class Armed {
public:
  Armed(Watchdog &w, const char *what) : w_(w) { w_.arm(what); }
  ~Armed() { w_.disarm(); }

private:
  Watchdog &w_;
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override {
    int finalised = 0;
    MPI_Finalized(&finalised);
    for (MPI_Op *op : {&addBf16_, &addF16_})
      if (!finalised && *op != MPI_OP_NULL)
        MPI_Op_free(op);
  }
  void setTimeout(double seconds) override { watchdog_.setTimeout(seconds, rank_, size_); }
  void watch(const char *what) override { watchdog_.arm(what); }
  void unwatch() override { watchdog_.disarm(); }
  void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  llvm::StringRef name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  bool allReduceHalfWire(uint16_t *data, int64_t count, DType t, ReduceOp op,
                         std::string &err) override {
    if (count == 0)
      return true;
    if ((t != DType::F16 && t != DType::BF16) || op == ReduceOp::Max) {
      err = "half all-reduce: takes the sum or mean of f16 or bf16 values";
      return false;
    }
    Armed armed(watchdog_, "an all-reduce of half gradients");
    bool bf16 = t == DType::BF16;
    MPI_Op &sum = bf16 ? addBf16_ : addF16_;
    if (sum == MPI_OP_NULL) {
      int rc = MPI_Op_create(bf16 ? &addHalves<true> : &addHalves<false>, /*commute=*/1, &sum);
      if (rc != MPI_SUCCESS) {
        err = mpiError("MPI_Op_create", rc);
        return false;
      }
    }
    if (!reduceWith(data, count, MPI_UINT16_T, sum, /*viaRoot=*/size_ > 2, err))
      return false;
    if (op == ReduceOp::Mean)
      for (int64_t i = 0; i < count; ++i) {
        float v = (bf16 ? bf16BitsToFloat(data[i]) : halfBitsToFloat(data[i])) / float(size_);
        data[i] = bf16 ? floatToBf16Bits(v) : floatToHalfBits(v);
      }
    return true;
  }

  bool allReduce(void *data, int64_t count, DType t, ReduceOp op, std::string &err) override {
    if (count == 0)
      return true;
    Armed armed(watchdog_, "an all-reduce");
    switch (t) {
    case DType::F32:
      return reduce(data, count, MPI_FLOAT, op, err) &&
             (op != ReduceOp::Mean || divide(static_cast<float *>(data), count));
    case DType::F64:
      return reduce(data, count, MPI_DOUBLE, op, err) &&
             (op != ReduceOp::Mean || divide(static_cast<double *>(data), count));
    case DType::F16:
    case DType::BF16:
      return reduceHalf(static_cast<uint16_t *>(data), count, t == DType::BF16, op, err);
    case DType::I64:
    case DType::I32:
      if (op == ReduceOp::Mean) {
        err = "all-reduce: integers take sum or max, not mean";
        return false;
      }
      return reduce(data, count, t == DType::I64 ? MPI_INT64_T : MPI_INT32_T, op, err);
    case DType::Bool:
      break;
    }
    err = "all-reduce: dtype " + dtypeName(t).str() + " cannot be reduced";
    return false;
  }

  bool broadcast(void *data, size_t bytes, int root, std::string &err) override {
    Armed armed(watchdog_, "a broadcast");
    auto *at = static_cast<char *>(data);
    // MPI counts are ints: large buffers go in pieces.
    constexpr size_t kPiece = size_t(1) << 30;
    for (size_t done = 0; done < bytes; done += kPiece) {
      int n = static_cast<int>(std::min(kPiece, bytes - done));
      int rc = MPI_Bcast(at + done, n, MPI_BYTE, root, MPI_COMM_WORLD);
      if (rc != MPI_SUCCESS) {
        err = mpiError("MPI_Bcast", rc);
        return false;
      }
    }
    return true;
  }

  bool barrier(std::string &err) override {
    Armed armed(watchdog_, "a barrier");
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS)
      return true;
    err = mpiError("MPI_Barrier", rc);
    return false;
  }

private:
  static MPI_Op mpiOp(ReduceOp op) { return op == ReduceOp::Max ? MPI_MAX : MPI_SUM; }

  /// In place, in pieces of at most 2^30 elements. Every rank must end with
  /// the same bits (else the replicas' weights drift apart): MPI does not
  /// promise that of MPI_Allreduce on floats, whose algorithms may add in a
  /// different order on each rank once there are more than two. So floats
  /// over more than two ranks are summed on rank 0 and broadcast; two
  /// ranks (a + b on both) and integers take MPI_Allreduce.
  bool reduce(void *data, int64_t count, MPI_Datatype type, ReduceOp op, std::string &err) {
    bool viaRoot = size_ > 2 && (type == MPI_FLOAT || type == MPI_DOUBLE);
    return reduceWith(data, count, type, mpiOp(op), viaRoot, err);
  }
  bool reduceWith(void *data, int64_t count, MPI_Datatype type, MPI_Op mop, bool viaRoot,
                  std::string &err) {
    int elementBytes = 0;
    MPI_Type_size(type, &elementBytes);
    auto *at = static_cast<char *>(data);
    constexpr int64_t kPiece = int64_t(1) << 30;
    for (int64_t done = 0; done < count; done += kPiece) {
      int n = static_cast<int>(std::min(kPiece, count - done));
      void *piece = at + done * elementBytes;
      int rc;
      if (!viaRoot) {
        rc = MPI_Allreduce(MPI_IN_PLACE, piece, n, type, mop, MPI_COMM_WORLD);
      } else {
        rc = rank_ == 0 ? MPI_Reduce(MPI_IN_PLACE, piece, n, type, mop, 0, MPI_COMM_WORLD)
                        : MPI_Reduce(piece, nullptr, n, type, mop, 0, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS)
          rc = MPI_Bcast(piece, n, type, 0, MPI_COMM_WORLD);
      }
      if (rc != MPI_SUCCESS) {
        err = mpiError(viaRoot ? "MPI_Reduce/MPI_Bcast" : "MPI_Allreduce", rc);
        return false;
      }
    }
    return true;
  }

  template <class T> bool divide(T *data, int64_t count) {
    T n = static_cast<T>(size_);
    for (int64_t i = 0; i < count; ++i)
      data[i] /= n;
    return true;
  }

  bool reduceHalf(uint16_t *data, int64_t count, bool bf16, ReduceOp op, std::string &err) {
    std::vector<float> wide(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      wide[i] = bf16 ? bf16BitsToFloat(data[i]) : halfBitsToFloat(data[i]);
    if (!reduce(wide.data(), count, MPI_FLOAT, op, err))
      return false;
    if (op == ReduceOp::Mean)
      divide(wide.data(), count);
    for (int64_t i = 0; i < count; ++i)
      data[i] = bf16 ? floatToBf16Bits(wide[i]) : floatToHalfBits(wide[i]);
    return true;
  }

  int rank_ = 0, size_ = 1;
  MPI_Op addBf16_ = MPI_OP_NULL, addF16_ = MPI_OP_NULL;
  Watchdog watchdog_;
};

} // namespace

bool mpiAvailable() { return true; }

std::unique_ptr<Communicator> createMpiCommunicator(std::string &err) {
  if (!ensureInitialised(err))
    return nullptr;
  return std::make_unique<MpiCommunicator>();
}

} // namespace ampc::dist
