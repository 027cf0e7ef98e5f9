//===- Communicator.h - Collectives across the processes of a job -*- C++ -*-===//
//
// Data-parallel training (docs/distributed.md) runs one process per rank;
// what they exchange goes through a Communicator: the gradients' all-reduce,
// the loss and the overflow flag, a broadcast of rank 0's checkpoint. The
// implementations are an existing engine's, never a home-made transport:
// Open MPI for processes on the CPU (MpiCommunicator.cpp, the one file that
// includes mpi.h), and a single-process one that makes every collective
// the identity. Nothing outside runtime/dist/ includes MPI's headers.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DIST_COMMUNICATOR_H
#define AMPC_RUNTIME_DIST_COMMUNICATOR_H

#include "ir/DType.h"

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ampc::dist {

enum class ReduceOp { Sum, Mean, Max };

class Communicator {
public:
  virtual ~Communicator() = default;
  /// "local" or "mpi".
  virtual llvm::StringRef name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// A stand-in that only lets a job's program be compiled and planned
  /// (createPlanningCommunicator): nothing may be set up over it.
  virtual bool planningOnly() const { return false; }

  /// Reduces `count` elements of dtype `t` in place; every rank ends with
  /// the same bits. f32 and f64 reduce as they are; f16 and bf16 through
  /// f32 (each rank's values widened, the result rounded once), as a
  /// half all-reduce in f32 does. Mean divides the sum by size() in the
  /// reduction's type. Integers (i64, i32) take Sum and Max. False with
  /// `err` when the engine fails or the dtype cannot be reduced.
  virtual bool allReduce(void *data, int64_t count, DType t, ReduceOp op, std::string &err) = 0;
  /// Like allReduce of f16 or bf16 data (`t`), but the 16-bit values travel
  /// as they are: half the bytes of the f32 route, and each partial sum is
  /// computed in f32 and rounded to `t` (as NCCL's half all-reduce does);
  /// Mean divides the sum in f32 and rounds once more. Every rank ends with
  /// the same bits. Sum and Mean only.
  virtual bool allReduceHalfWire(uint16_t *data, int64_t count, DType t, ReduceOp op,
                                 std::string &err) = 0;
  /// `bytes` from rank `root` to every rank.
  virtual bool broadcast(void *data, size_t bytes, int root, std::string &err) = 0;
  virtual bool barrier(std::string &err) = 0;

  /// How long one collective may wait for the other ranks (seconds; 0, the
  /// default: for ever). Past it the process reports which collective timed
  /// out on which rank and exits with kCollectiveTimeoutExit, and the
  /// launcher ends the job: a rank that died, hangs or took another path
  /// ends the job instead of hanging it.
  virtual void setTimeout(double seconds) {}
  /// Puts a wait on the other ranks that happens outside this
  /// communicator's calls under the same timeout, until unwatch(): a step
  /// whose collectives NCCL runs on the GPU makes the host wait for the
  /// device, not in a call here. `what` names the wait in the timeout's
  /// message. Not nested.
  virtual void watch(const char *what) {}
  virtual void unwatch() {}
  /// Ends every process of the job now with exit status `code` (a rank that
  /// fails alone: the others would wait for it in the next collective).
  /// Returns only where there is one process.
  virtual void abort(int code) {}

  /// Set when the ranks agreed, through a collective, that they all stop
  /// with an error: each can then exit normally instead of aborting the job.
  void setFailedTogether() { failedTogether_ = true; }
  bool failedTogether() const { return failedTogether_; }

private:
  bool failedTogether_ = false;
};

/// watch() for one scope; `comm` may be null (no job).
class WatchedWait {
public:
  WatchedWait(Communicator *comm, const char *what) : comm_(comm) {
    if (comm_)
      comm_->watch(what);
  }
  ~WatchedWait() {
    if (comm_)
      comm_->unwatch();
  }
  WatchedWait(const WatchedWait &) = delete;
  WatchedWait &operator=(const WatchedWait &) = delete;

private:
  Communicator *comm_;
};

/// The exit status of a rank whose collective timed out (docs/cli.md).
constexpr int kCollectiveTimeoutExit = 3;

/// One process: every collective leaves the data as it is.
std::unique_ptr<Communicator> createLocalCommunicator();

/// A stand-in for a job of `size` ranks, to compile and plan a program of
/// that job in one process (`ampc plan --data-parallel N`): every
/// collective fails, saying so.
std::unique_ptr<Communicator> createPlanningCommunicator(int size);

/// Whether a launcher that starts ranks (mpirun, srun with PMI) started this
/// process: its environment names a world size.
bool launchedByMpiLauncher();

/// Whether this build has the MPI communicator (Open MPI found at configure).
bool mpiAvailable();

/// The MPI world, initialising MPI on first use (finalised at exit); nullptr
/// with `err` when this build has no MPI or MPI does not start.
std::unique_ptr<Communicator> createMpiCommunicator(std::string &err);

} // namespace ampc::dist

#endif
