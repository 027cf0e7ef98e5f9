//===- ampc/World.h - The processes of a data-parallel job ------*- C++ -*-===//
//
// Data-parallel training (docs/distributed.md): `mpirun -np N` starts N
// processes, each joins the launcher's world, rewrites its model for N
// ranks (PipelineOptions::ranks) and compiles it with the world
// (CompileOptions::world); Program::train then reads the rank's shard of
// every global batch and averages the gradients across the ranks.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_WORLD_H
#define AMPC_PUBLIC_WORLD_H

#include "ampc/Export.h"
#include "ampc/Status.h"

#include <memory>
#include <string>

namespace ampc::api {

class AMPC_API World {
public:
  /// The launcher's job when an MPI launcher (mpirun) started this process,
  /// else a job of this process alone. An error when a launcher started it
  /// but this ampc was built without MPI or MPI does not start.
  static Result<std::shared_ptr<World>> join();
  /// A job of this process alone.
  static std::shared_ptr<World> single();
  /// A stand-in for a job of `size` ranks, for compiling and planning one
  /// of its programs in one process (Program::plannedBytes, collectives());
  /// running a step fails.
  static std::shared_ptr<World> planning(int size);
  ~World();

  int rank() const;
  int size() const;
  /// The engine underneath: "mpi" (Open MPI) or "local".
  std::string engine() const;
  /// How long one collective may wait for the other ranks, in seconds (0:
  /// for ever). Past it this process says which collective timed out and
  /// exits with status 3; the launcher then ends the job. A rank that died,
  /// hangs or runs another model thus ends the job instead of hanging it.
  void setCollectiveTimeout(double seconds);
  /// Whether the ranks agreed that they all stop with an error (a different
  /// model on one rank, a diverged loss): each can exit normally.
  bool failedTogether() const;
  /// Ends every process of the job with exit status `code`; returns only in
  /// a world of one.
  void abort(int code);

  struct Impl;
  Impl &impl() const { return *impl_; }

private:
  explicit World(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace ampc::api

#endif
