//===- MpiCommunicator.cpp - Collectives through Open MPI ------------------===//
//
// MPI_COMM_WORLD, initialised once per process (MPI_Init_thread, funneled:
// only the thread that trains calls MPI) and finalised at exit. MPI has no
// 16-bit float types: f16 and bf16 reduce through an f32 buffer.
//
//===----------------------------------------------------------------------===//
#include "runtime/dist/Communicator.h"

#include "ir/HalfConversion.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
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

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  llvm::StringRef name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  bool allReduce(void *data, int64_t count, DType t, ReduceOp op, std::string &err) override {
    if (count == 0)
      return true;
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
    int elementBytes = 0;
    MPI_Type_size(type, &elementBytes);
    bool viaRoot = size_ > 2 && (type == MPI_FLOAT || type == MPI_DOUBLE);
    auto *at = static_cast<char *>(data);
    constexpr int64_t kPiece = int64_t(1) << 30;
    for (int64_t done = 0; done < count; done += kPiece) {
      int n = static_cast<int>(std::min(kPiece, count - done));
      void *piece = at + done * elementBytes;
      int rc;
      if (!viaRoot) {
        rc = MPI_Allreduce(MPI_IN_PLACE, piece, n, type, mpiOp(op), MPI_COMM_WORLD);
      } else {
        rc = rank_ == 0 ? MPI_Reduce(MPI_IN_PLACE, piece, n, type, mpiOp(op), 0, MPI_COMM_WORLD)
                        : MPI_Reduce(piece, nullptr, n, type, mpiOp(op), 0, MPI_COMM_WORLD);
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
};

} // namespace

bool mpiAvailable() { return true; }

std::unique_ptr<Communicator> createMpiCommunicator(std::string &err) {
  if (!ensureInitialised(err))
    return nullptr;
  return std::make_unique<MpiCommunicator>();
}

} // namespace ampc::dist
