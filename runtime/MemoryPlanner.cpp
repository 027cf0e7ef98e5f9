//===- MemoryPlanner.cpp - Liveness and best-fit packing -------------------===//
#include "runtime/MemoryPlan.h"

#include "runtime/CastCache.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <map>

namespace ampc {

llvm::StringRef bufferClassName(BufferClass c) {
  switch (c) {
  case BufferClass::Parameter:
    return "parameters";
  case BufferClass::MasterWeight:
    return "master weights";
  case BufferClass::OptimizerState:
    return "optimizer state";
  case BufferClass::OtherState:
    return "other state";
  case BufferClass::CachedCast:
    return "cached cast copies";
  case BufferClass::Input:
    return "inputs";
  case BufferClass::Activation:
    return "activations kept for backward";
  case BufferClass::Gradient:
    return "gradients";
  case BufferClass::NewState:
    return "new state values";
  case BufferClass::CastCopy:
    return "cast copies";
  case BufferClass::Temporary:
    return "temporaries";
  }
  return "?";
}

static uint64_t alignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static BufferClass stateClass(StateKind k) {
  switch (k) {
  case StateKind::Parameter:
    return BufferClass::Parameter;
  case StateKind::MasterWeight:
    return BufferClass::MasterWeight;
  case StateKind::OptimizerState:
    return BufferClass::OptimizerState;
  case StateKind::Buffer:
  case StateKind::ScalerState:
    return BufferClass::OtherState;
  }
  return BufferClass::OtherState;
}

static bool isBackwardRole(NodeRole r) {
  return r == NodeRole::Backward || r == NodeRole::Optimizer || r == NodeRole::LossScale;
}

/// A result's class from who makes it and who reads it.
static BufferClass resultClass(const Value *v, bool updatesState) {
  const Node *def = v->definingNode();
  if (updatesState)
    return BufferClass::NewState;
  if (def->kind() == OpKind::Cast)
    return BufferClass::CastCopy;
  if (isBackwardRole(def->role()))
    return BufferClass::Gradient;
  for (const Use &u : v->uses())
    if (isBackwardRole(u.user->role()))
      return BufferClass::Activation;
  return BufferClass::Temporary;
}

namespace {
/// Free space in the step arena, as offset -> size, coalesced.
class FreeList {
public:
  /// Best fit: the smallest free block that holds `bytes`; else grow the arena.
  uint64_t allocate(uint64_t bytes, uint64_t &arenaEnd) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= bytes && (best == free_.end() || it->second < best->second))
        best = it;
    if (best == free_.end()) {
      // Extend from a free block that touches the end of the arena, if any.
      if (!free_.empty()) {
        auto last = std::prev(free_.end());
        if (last->first + last->second == arenaEnd) {
          uint64_t offset = last->first;
          free_.erase(last);
          arenaEnd = offset + bytes;
          return offset;
        }
      }
      uint64_t offset = arenaEnd;
      arenaEnd += bytes;
      return offset;
    }
    uint64_t offset = best->first, size = best->second;
    free_.erase(best);
    if (size > bytes)
      free_[offset + bytes] = size - bytes;
    return offset;
  }
  void release(uint64_t offset, uint64_t bytes) {
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += bytes;
        return;
      }
    }
    free_[offset] = bytes;
  }

private:
  std::map<uint64_t, uint64_t> free_;
};
} // namespace

MemoryPlan planMemory(const Graph &g, llvm::ArrayRef<const Node *> schedule,
                      const PlanOptions &opts) {
  const uint64_t alignment = opts.alignment;
  MemoryPlan plan;
  const int end = static_cast<int>(schedule.size());
  auto add = [&](const Value *v, BufferClass cls, ArenaKind arena, int first) {
    plan.indexOf[v] = plan.buffers.size();
    plan.buffers.push_back(
        {v, cls, arena, 0, static_cast<uint64_t>(v->type().sizeInBytes()), first, first});
  };

  // Persistent arena: every state tensor, laid out in declaration order.
  for (const Value *v : g.state()) {
    add(v, stateClass(v->stateKind()), ArenaKind::Persistent, -1);
    PlannedBuffer &b = plan.buffers.back();
    b.offset = plan.persistentBytes;
    b.last = end;
    plan.persistentBytes += alignUp(b.bytes, alignment);
    plan.bytesAtPeak[static_cast<unsigned>(b.cls)] += b.bytes;
  }
  // Then the cast cache's copies, which outlive a step: casts of one state
  // tensor to one dtype share a buffer, as they share a cache entry.
  std::map<std::pair<const Value *, DType>, uint64_t> cachedCastOffset;
  for (int i = 0; opts.cacheStateCasts && i < end; ++i) {
    const Node &n = *schedule[i];
    if (!isCacheableStateCast(n))
      continue;
    const Value *v = n.result();
    add(v, BufferClass::CachedCast, ArenaKind::Persistent, i);
    PlannedBuffer &b = plan.buffers.back();
    b.last = end;
    auto [it, inserted] =
        cachedCastOffset.try_emplace({n.operand(0), v->dtype()}, plan.persistentBytes);
    b.offset = it->second;
    if (inserted) {
      plan.persistentBytes += alignUp(b.bytes, alignment);
      plan.bytesAtPeak[static_cast<unsigned>(b.cls)] += b.bytes;
    }
  }

  llvm::DenseMap<const Node *, int> position;
  for (int i = 0; i < end; ++i)
    position[schedule[i]] = i;

  // In-place state updates: a state's next value takes the state's own
  // buffer when its op allows it and nothing later in the schedule reads the
  // old value. There is then no second buffer and no copy-back.
  for (const StateUpdate &u : g.stateUpdates()) {
    if (!opts.inPlaceStateUpdates)
      break;
    const Node *def = u.newValue->definingNode();
    auto defPos = def ? position.find(def) : position.end();
    if (defPos == position.end() || !def->op().updatesStateInPlace ||
        !llvm::is_contained(def->operands(), u.state) || u.newValue->type() != u.state->type())
      continue;
    bool oldValueReadLater = llvm::any_of(u.state->uses(), [&](const Use &use) {
      auto it = position.find(use.user);
      return it != position.end() && it->second > defPos->second;
    });
    if (oldValueReadLater)
      continue;
    uint64_t stateOffset = plan.buffers[plan.indexOf.lookup(u.state)].offset;
    add(u.newValue, BufferClass::NewState, ArenaKind::Persistent, defPos->second);
    plan.buffers.back().offset = stateOffset;
    plan.buffers.back().last = end;
  }

  llvm::DenseSet<const Value *> updateSources;
  for (const StateUpdate &u : g.stateUpdates())
    updateSources.insert(u.newValue);
  // Step arena: inputs live from the start; results from their node.
  for (const Value *v : g.inputs())
    add(v, BufferClass::Input, ArenaKind::Step, -1);
  for (int i = 0; i < end; ++i)
    for (unsigned r = 0; r < schedule[i]->numResults(); ++r) {
      const Value *v = schedule[i]->result(r);
      if (plan.indexOf.count(v))
        continue; // a cached cast, placed above
      add(v, resultClass(v, updateSources.count(v)), ArenaKind::Step, i);
    }

  // Liveness: last reader in the schedule; outputs and update sources to the end.
  for (PlannedBuffer &b : plan.buffers) {
    if (b.arena == ArenaKind::Persistent)
      continue;
    for (const Use &u : b.value->uses()) {
      auto it = position.find(u.user);
      if (it != position.end())
        b.last = std::max(b.last, it->second);
    }
  }
  auto keepToEnd = [&](const Value *v) {
    auto it = plan.indexOf.find(v);
    if (it != plan.indexOf.end() && plan.buffers[it->second].arena == ArenaKind::Step)
      plan.buffers[it->second].last = end;
  };
  // Inputs stay intact for the whole step so a host can rerun the same batch
  // (evaluation, gradient checks) without refilling it; they are small next
  // to activations.
  for (const Value *v : g.inputs())
    keepToEnd(v);
  for (const Value *v : g.outputs())
    keepToEnd(v);
  for (const StateUpdate &u : g.stateUpdates())
    keepToEnd(u.newValue);

  // Views: the result of a reshape or flatten (OpInfo::resultViewsOperand)
  // takes its operand's step buffer instead of a copy of it. Step values are
  // never written after their node, so the two can share bytes; the shared
  // buffer lives until the last reader of either. In schedule order, so a
  // view of a view joins the first one's buffer.
  std::vector<int> viewOf(plan.buffers.size(), -1);
  for (int i = 0; opts.aliasViews && i < end; ++i) {
    const Node &n = *schedule[i];
    if (!n.op().resultViewsOperand || n.numOperands() < 1 || n.numResults() != 1)
      continue;
    auto from = plan.indexOf.find(n.operand(0)), to = plan.indexOf.find(n.result());
    if (from == plan.indexOf.end() || to == plan.indexOf.end())
      continue;
    unsigned root = from->second;
    while (viewOf[root] >= 0)
      root = static_cast<unsigned>(viewOf[root]);
    PlannedBuffer &source = plan.buffers[root], &view = plan.buffers[to->second];
    if (source.arena != ArenaKind::Step || view.arena != ArenaKind::Step ||
        view.cls == BufferClass::NewState || source.bytes != view.bytes)
      continue;
    viewOf[to->second] = static_cast<int>(root);
    source.last = std::max(source.last, view.last);
  }

  // Walk the schedule: allocate what a position defines, then free what it
  // read for the last time. A node's results never share memory with its
  // operands (kernels may read inputs while writing outputs), views apart.
  std::vector<std::vector<unsigned>> definedAt(end + 1), dyingAt(end + 1);
  for (unsigned i = 0; i < plan.buffers.size(); ++i) {
    const PlannedBuffer &b = plan.buffers[i];
    if (b.arena != ArenaKind::Step || viewOf[i] >= 0)
      continue;
    definedAt[b.first + 1].push_back(i); // -1 (inputs) maps to slot 0
    dyingAt[std::clamp(b.last, 0, end)].push_back(i);
    plan.stepBytesWithoutReuse += alignUp(b.bytes, alignment);
  }
  FreeList freeList;
  uint64_t arenaEnd = 0, live = 0, peakLive = 0;
  std::array<uint64_t, kNumBufferClasses> liveByClass{};
  auto allocate = [&](unsigned i) {
    PlannedBuffer &b = plan.buffers[i];
    uint64_t size = alignUp(std::max<uint64_t>(b.bytes, 1), alignment);
    b.offset = freeList.allocate(size, arenaEnd);
    live += size;
    liveByClass[static_cast<unsigned>(b.cls)] += b.bytes;
    if (live > peakLive) {
      peakLive = live;
      for (unsigned c = 0; c < kNumBufferClasses; ++c)
        if (!isPersistentClass(static_cast<BufferClass>(c)))
          plan.bytesAtPeak[c] = liveByClass[c];
    }
  };
  auto release = [&](unsigned i) {
    PlannedBuffer &b = plan.buffers[i];
    uint64_t size = alignUp(std::max<uint64_t>(b.bytes, 1), alignment);
    freeList.release(b.offset, size);
    live -= size;
    liveByClass[static_cast<unsigned>(b.cls)] -= b.bytes;
  };
  for (unsigned i : definedAt[0])
    allocate(i);
  for (int pos = 0; pos < end; ++pos) {
    for (unsigned i : definedAt[pos + 1])
      allocate(i);
    for (unsigned i : dyingAt[pos])
      release(i);
  }
  for (unsigned i = 0; i < plan.buffers.size(); ++i)
    if (viewOf[i] >= 0) {
      plan.buffers[i].offset = plan.buffers[viewOf[i]].offset;
      ++plan.views;
    }
  plan.stepBytes = arenaEnd;
  return plan;
}

void MemoryPlan::print(llvm::raw_ostream &os) const {
  auto row = [&](llvm::StringRef what, uint64_t bytes) {
    os << llvm::format("  %-32s %14llu B  %10.2f MiB\n", what.str().c_str(),
                       static_cast<unsigned long long>(bytes), bytes / 1048576.0);
  };
  os << "memory plan\n";
  os << " persistent arena (state and cached casts)\n";
  for (BufferClass c :
       {BufferClass::Parameter, BufferClass::MasterWeight, BufferClass::OptimizerState,
        BufferClass::OtherState, BufferClass::CachedCast})
    row(bufferClassName(c), bytesAtPeak[static_cast<unsigned>(c)]);
  row("total", persistentBytes);
  os << " step arena (live at the peak)\n";
  for (BufferClass c : {BufferClass::Input, BufferClass::Activation, BufferClass::Gradient,
                        BufferClass::NewState, BufferClass::CastCopy, BufferClass::Temporary})
    row(bufferClassName(c), bytesAtPeak[static_cast<unsigned>(c)]);
  row("arena size", stepBytes);
  row("without reuse", stepBytesWithoutReuse);
  row("peak (persistent + step)", peakBytes());
  if (views)
    os << "  " << views << " reshape/flatten result"
       << (views == 1 ? " shares its" : "s share their") << " operand's buffer (no copy)\n";
}

} // namespace ampc
