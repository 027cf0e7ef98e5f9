//===- MemoryPlan.h - Where every tensor lives, decided before running ----===//
//
// Two arenas: a persistent one for what lives across steps - state
// (parameters, master weights, optimizer state, buffers, loss-scaler state)
// and the cast cache's copies of state tensors - and a step arena for
// everything a step computes (inputs, activations, temporaries, gradients,
// other cast copies), packed by liveness over the schedule with best-fit
// reuse. Peak bytes are known before the first step.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_MEMORYPLAN_H
#define AMPC_RUNTIME_MEMORYPLAN_H

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <vector>

namespace ampc {

/// What a buffer holds, for the plan's breakdown.
enum class BufferClass : uint8_t {
  Parameter,
  MasterWeight,
  OptimizerState,
  OtherState, ///< batchnorm running statistics, loss-scaler state
  /// Results of cacheable casts of state tensors (runtime/CastCache.h):
  /// persistent, one buffer per (state tensor, dtype).
  CachedCast,
  Input,      ///< a step's data
  Activation, ///< forward values kept for the backward pass
  Gradient,   ///< values the backward pass computes
  NewState,   ///< next values of state tensors, copied back after the step
              ///< (none when the update runs in place, over the state)
  CastCopy,   ///< results of the other cast nodes
  Temporary,  ///< everything else
};
inline constexpr unsigned kNumBufferClasses = 11;
llvm::StringRef bufferClassName(BufferClass c);
/// Whether buffers of class `c` live in the persistent arena.
inline bool isPersistentClass(BufferClass c) { return c <= BufferClass::CachedCast; }

enum class ArenaKind : uint8_t { Persistent, Step };

struct PlannedBuffer {
  const Value *value;
  BufferClass cls;
  ArenaKind arena;
  uint64_t offset; ///< within its arena, aligned
  uint64_t bytes;  ///< the tensor's size (unpadded)
  /// Schedule positions: defined before `first` (-1 = before the step),
  /// last read at `last` (schedule size = kept to the end of the step).
  int first, last;
};

struct MemoryPlan {
  std::vector<PlannedBuffer> buffers;
  llvm::DenseMap<const Value *, unsigned> indexOf;
  uint64_t persistentBytes = 0; ///< persistent arena size
  uint64_t stepBytes = 0;       ///< step arena size (its peak)
  /// Per class: persistent classes their total; step classes their bytes live
  /// at the step arena's peak moment.
  std::array<uint64_t, kNumBufferClasses> bytesAtPeak{};
  /// Sum of all step buffers' sizes: what no reuse would cost.
  uint64_t stepBytesWithoutReuse = 0;
  /// Step values that share their operand's buffer (reshape, flatten:
  /// OpInfo::resultViewsOperand) instead of holding a copy.
  unsigned views = 0;

  uint64_t peakBytes() const { return persistentBytes + stepBytes; }
  const PlannedBuffer *find(const Value *v) const {
    auto it = indexOf.find(v);
    return it == indexOf.end() ? nullptr : &buffers[it->second];
  }
  /// The table `ampc plan` prints.
  void print(llvm::raw_ostream &os) const;
};

struct PlanOptions {
  uint64_t alignment = 64;
  /// Give cacheable casts of state tensors persistent buffers (the cast
  /// cache is on); otherwise they are ordinary step-arena cast copies.
  bool cacheStateCasts = true;
  /// Let state updates whose op allows it (OpInfo::updatesStateInPlace)
  /// write over the state's buffer instead of a step-arena buffer that is
  /// copied back after the step.
  bool inPlaceStateUpdates = true;
  /// Give a reshape's or flatten's result its operand's step buffer (the
  /// same bytes under another shape) instead of a copy.
  bool aliasViews = true;
};

/// Plans memory for running `schedule` (nodes of g in execution order).
/// Values that are graph outputs or sources of state updates stay live to
/// the end of the step.
MemoryPlan planMemory(const Graph &g, llvm::ArrayRef<const Node *> schedule,
                      const PlanOptions &opts = {});

} // namespace ampc

#endif
