//===- OptimizerSets.h - Several optimizers over disjoint parameters ------===//
#ifndef AMPC_PASSES_OPTIMIZERSETS_H
#define AMPC_PASSES_OPTIMIZERSETS_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include <optional>
#include <string>
#include <vector>

namespace ampc {

/// One of several optimizers (a list under `optimizer:`, docs/training.md
/// "Several optimizers"): its own parameters, update, learning rate and
/// step count, stepping on its own loss term on the turns train.schedule
/// gives it (a GAN's discriminator, then its generator). The frontend writes
/// it into meta as
///
///   optimizers = N, optimizers.period = P (the schedule's length; 1 without one)
///   optimizers.<i> = kind, optimizers.<i>.<setting> (as optimizer.<setting>)
///   optimizers.<i>.name, optimizers.<i>.loss = k (term %loss.<k>),
///   optimizers.<i>.turns = the schedule's slots it steps on
///   optimizer.of.<parameter> = i
struct OptimizerSet {
  std::string name;
  /// The globs of its parameters, as written (for reports).
  std::string params;
  /// The loss term whose gradients it applies.
  int64_t lossTerm = 0;
  /// Of every `period` optimizer steps, the slots on which it steps.
  int64_t period = 1;
  std::vector<int64_t> turns = {0};
  /// The graph's meta with this optimizer's settings as optimizer.*: the
  /// one optimizer's meta, as the optimizer pass reads it.
  AttrMap meta;
};

/// The graph's several optimizers; empty for a graph with one (meta
/// `optimizer`). nullopt after reporting a malformed entry.
std::optional<std::vector<OptimizerSet>> readOptimizerSets(const Graph &g, DiagnosticEngine &diag);

/// Whether the graph has several optimizers (meta `optimizers`).
bool hasOptimizerSets(const Graph &g);

/// The index of the optimizer that updates `param` (meta
/// optimizer.of.<name>), -1 when none does.
int64_t optimizerIndexOf(const Graph &g, const Value *param);

} // namespace ampc

#endif
