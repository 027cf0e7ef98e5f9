//===- ampc/Profile.h - Where a training step's time goes -------*- C++ -*-===//
//
// `ampc --profile` and TrainOptions::profile: every kernel of the training
// step timed over the run's steps (the first, which pays for JIT and first
// touches, left out), as a table by op kind and by node, with GFLOP/s for
// the dense ops (GEMMs, convolutions, attention: the registry's flop
// counts) and bytes moved for the rest; and, with a trace, a timeline of
// the first steps in the Chrome trace-event format (Perfetto,
// chrome://tracing). docs/inspect.md.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_PROFILE_H
#define AMPC_PUBLIC_PROFILE_H

#include "ampc/Export.h"
#include "ampc/Types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampc::api {

/// One kernel of the step: a node, or a chain of elementwise nodes fused
/// into one kernel.
struct ProfileRow {
  std::string node; ///< "%fc1"; a fused chain "%a..%c (3 fused)"
  std::string op;   ///< "linear"; a fused chain "fused relu+add+..."
  NodeRole role = NodeRole::Forward;
  std::string dtype; ///< the dtype it computes in ("" when none)
  double totalMs = 0;
  uint64_t calls = 0;
  double flopsPerCall = 0; ///< 0 for the ops that are not dense
  double bytesPerCall = 0; ///< operands read + results written
};

struct StepProfile {
  uint64_t runs = 0;            ///< program runs profiled (micro-batches)
  double runMs = 0;             ///< their mean wall time
  double kernelMs = 0;          ///< the kernels' time, per run (sum of rows / runs)
  std::vector<ProfileRow> rows; ///< schedule order
  /// The tables `ampc --profile` prints: by op kind, then the `topNodes`
  /// slowest kernels.
  AMPC_API std::string str(size_t topNodes = 15) const;
};

} // namespace ampc::api

#endif
