//===- DataParallel.cpp - `mpirun -np N ampc ...`: one rank of a job ------===//
#include "Driver.h"

#include <iostream>

namespace ampc::cli {

namespace {

std::shared_ptr<api::World> &world() {
  static std::shared_ptr<api::World> w;
  return w;
}

} // namespace

std::shared_ptr<api::World> jobWorld() { return world(); }

bool joinJob(Options &opts) {
  api::Result<std::shared_ptr<api::World>> joined = api::World::join();
  if (!joined) {
    printDiagnostics(joined.status());
    return false;
  }
  world() = *joined;
  api::World &w = *world();
  if (w.size() > 1) {
    // Rank 0 speaks for the job; the others report only their errors.
    if (w.rank() != 0)
      out().setstate(std::ios::badbit);
    w.setCollectiveTimeout(opts.collectiveTimeout);
    if (opts.dataParallel && opts.dataParallel != w.size()) {
      err() << "error: --data-parallel " << opts.dataParallel << " asks for " << opts.dataParallel
            << " ranks, but the launcher started " << w.size() << "\n";
      return false;
    }
  }
  if (!opts.dataParallel)
    opts.dataParallel = w.size();
  return true;
}

int endJob(int code) {
  std::shared_ptr<api::World> &w = world();
  if (code != kSuccess && w && w->size() > 1 && !w->failedTogether()) {
    err() << "error: rank " << w->rank() << " of " << w->size()
          << " failed; ending the job (the other ranks would wait for it)\n";
    w->abort(code);
  }
  w.reset();
  return code;
}

} // namespace ampc::cli
