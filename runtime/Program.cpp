//===- Program.cpp ----------------------------------------------------------===//
#include "runtime/Program.h"
#include "runtime/dist/CollectiveKernel.h"

#include "ir/support/NpyFile.h"
#include "ir/support/TensorFile.h"
#include "kernels/common/Random.h"
#include "kernels/common/Storage.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace ampc {

namespace {
constexpr uint64_t kArenaGuard = 64;
constexpr unsigned char kGuardByte = 0xcd;
constexpr unsigned char kUntouchedByte = 0xee;
} // namespace

Program::~Program() {
  backend_.forgetProgram(this);
  if (persistent_)
    backend_.deallocate(persistent_);
  if (step_)
    backend_.deallocate(step_);
}

std::unique_ptr<Program> Program::compile(const Graph &g, Backend &backend, DiagnosticEngine &diag,
                                          const CompileOptions &opts, bool *outOfMemory) {
  if (outOfMemory)
    *outOfMemory = false;
  std::unique_ptr<Program> p(new Program(g, backend));
  unsigned errors = diag.numErrors();
  for (const Node &n : g.nodes()) {
    std::unique_ptr<kernels::NodeKernel> kernel;
    if (n.op().collective) {
      std::string err;
      if (dist::checkCollective(n, opts.communicator, err)) {
        kernel = backend.deviceCollective(n, *opts.communicator, err);
        if (kernel)
          ++p->deviceActivity_.deviceCollectiveNodes;
        else if (err.empty())
          kernel = backend.hostKernel(n, dist::prepareCollective(n, opts.communicator, err));
      }
      if (!kernel) {
        diag.error(n.loc(), err);
        continue;
      }
    } else {
      kernel = backend.prepare(n);
    }
    if (!kernel) {
      diag.error(n.loc(), n.opName() + ": no kernel on backend '" + backend.name() + "'");
      continue;
    }
    for (const Value *v : n.operands())
      if (!n.op().collective && isFloating(v->dtype()) && !backend.supports(n.op(), v->dtype())) {
        diag.error(n.loc(), n.opName() + ": backend '" + backend.name() + "' cannot run it in " +
                                dtypeName(v->dtype()));
        break;
      }
    if (kernel->runsOnHost()) {
      DeviceActivity &a = p->deviceActivity_;
      ++a.hostFallbackNodes;
      if (!llvm::is_contained(a.hostFallbackOps, n.opName().str()))
        a.hostFallbackOps.push_back(n.opName().str());
    }
    p->schedule_.push_back(&n);
    p->kernels_.push_back(std::move(kernel));
  }
  if (diag.numErrors() != errors)
    return nullptr;

  PlanOptions planOpts;
  planOpts.cacheStateCasts = opts.castCache;
  planOpts.inPlaceStateUpdates = opts.inPlaceStateUpdates;
  p->plan_ = planMemory(g, p->schedule_, planOpts);
  if (opts.planOnly)
    return p;
  if (opts.maxPlannedBytes && p->plan_.peakBytes() > opts.maxPlannedBytes) {
    diag.error(Location(), "the program needs " + llvm::Twine(p->plan_.peakBytes()) +
                               " bytes (its memory plan), more than the limit of " +
                               llvm::Twine(opts.maxPlannedBytes) +
                               " bytes; raise the limit with --max-memory");
    if (outOfMemory)
      *outOfMemory = true;
    return nullptr;
  }
  // Guard bytes after each arena catch kernels that write past the plan.
  uint64_t heldBefore = backend.bytesInUse();
  p->persistent_ = static_cast<char *>(backend.allocate(p->plan_.persistentBytes + kArenaGuard));
  p->step_ = static_cast<char *>(backend.allocate(p->plan_.stepBytes + kArenaGuard));
  p->allocatedBytes_ = backend.bytesInUse() - heldBefore - 2 * kArenaGuard;
  if (!p->persistent_ || !p->step_) {
    diag.error(Location(), "cannot allocate " + llvm::Twine(p->plan_.peakBytes()) +
                               " bytes for the program's arenas");
    if (outOfMemory)
      *outOfMemory = true;
    return nullptr;
  }
  if (backend.hostAccessible()) {
    std::memset(p->persistent_ + p->plan_.persistentBytes, kGuardByte, kArenaGuard);
    std::memset(p->step_, kUntouchedByte, p->plan_.stepBytes);
    std::memset(p->step_ + p->plan_.stepBytes, kGuardByte, kArenaGuard);
  } else {
    // Device arenas get the same guards, written and read back through the
    // copy hooks (measure()).
    char guard[kArenaGuard];
    std::memset(guard, kGuardByte, kArenaGuard);
    backend.copyToBackend(p->persistent_ + p->plan_.persistentBytes, guard, kArenaGuard);
    backend.copyToBackend(p->step_ + p->plan_.stepBytes, guard, kArenaGuard);
  }

  p->castCache_.init(g, p->schedule_, opts.castCache);
  if (opts.markStableInputs)
    p->findStableValues();
  for (const Node *n : p->schedule_) {
    std::vector<kernels::TensorArg> ins, outs;
    for (const Value *v : n->operands())
      ins.push_back(p->inputArg(v));
    for (unsigned r = 0; r < n->numResults(); ++r)
      outs.push_back({p->storage(n->result(r)), &n->result(r)->type()});
    p->inputArgs_.push_back(std::move(ins));
    p->outputArgs_.push_back(std::move(outs));
  }
  p->stateUnchanged_ = std::make_unique<bool[]>(p->schedule_.size());
  p->fusedAway_.assign(p->schedule_.size(), false);
  p->findFinishPositions();
  const char *noFusion = std::getenv("AMPC_NO_FUSION");
  if (opts.fuseElementwise && !(noFusion && llvm::StringRef(noFusion) != "0"))
    p->fuseElementwiseChains();

  // A node's "unchanged" report covers the state updates it feeds, but only
  // where the updated state is one of its operands: then the result it
  // reports equal to its state input is that state's own value.
  llvm::DenseMap<const Node *, int> position;
  for (unsigned i = 0; i < p->schedule_.size(); ++i)
    position[p->schedule_[i]] = static_cast<int>(i);
  for (const StateUpdate &u : g.stateUpdates()) {
    const Node *def = u.newValue->definingNode();
    bool readsState = def && llvm::is_contained(def->operands(), u.state);
    p->skippableBy_.push_back(readsState ? position.lookup(def) : -1);
  }
  p->runSeed_ = opts.runSeed;
  if (!p->initializeState(opts, diag))
    return nullptr;
  // A device backend's state was initialised in host copies: send them.
  if (!backend.hostAccessible())
    p->flushHostWrites(/*release=*/true);
  return p;
}

void Program::fuseElementwiseChains() {
  const Graph &g = graph_;
  // Values that outlive their reader: the step's results the host reads and
  // the new state values. They are always written, so they end a chain.
  llvm::DenseSet<const Value *> kept(g.outputs().begin(), g.outputs().end());
  for (const StateUpdate &u : g.stateUpdates())
    kept.insert(u.newValue);
  auto sameShape = [](const Node *n) {
    for (const Value *v : n->operands())
      if (v->type().dims() != n->result()->type().dims())
        return false;
    return true;
  };
  // A link: elementwise (the registry says), fused by this backend, one
  // result, its operands of its result's shape, and not a cast the cast
  // cache serves (its result must be in its own buffer).
  auto fusable = [&](const Node *n) {
    return n->op().elementwise && n->numResults() == 1 && backend_.fusable(*n) && sameShape(n) &&
           !isCacheableStateCast(*n);
  };
  // `next` continues a chain ending in `last`: same shape, and the only
  // reader of last's result, which nobody else needs.
  auto continues = [&](const Node *last, const Node *next) {
    const Value *r = last->result();
    return fusable(next) && r->type().dims() == next->result()->type().dims() && !kept.count(r) &&
           r->uses().size() == 1 && r->uses().front().user == next;
  };
  auto bytesOf = [&](const Value *v) {
    const char *begin = static_cast<const char *>(storage(v));
    return std::make_pair(begin, begin + v->type().sizeInBytes());
  };
  const unsigned end = schedule_.size();
  for (unsigned first = 0; first < end;) {
    unsigned last = first;
    if (fusable(schedule_[first]))
      while (last + 1 < end && continues(schedule_[last], schedule_[last + 1]))
        ++last;
    if (last == first) {
      ++first;
      continue;
    }
    llvm::ArrayRef<const Node *> chain(&schedule_[first], last - first + 1);
    std::unique_ptr<kernels::NodeKernel> fused = backend_.prepareFused(chain);
    // The chain's inputs from outside it, in order (Backend::prepareFused).
    std::vector<kernels::TensorArg> ins;
    for (unsigned i = first; i <= last; ++i)
      for (const Value *v : schedule_[i]->operands())
        if (i == first || v != schedule_[i - 1]->result())
          ins.push_back(inputArg(v));
    // The kernel writes the result block by block after reading the same
    // blocks of its inputs: an input may share the result's bytes exactly
    // (the memory plan reused a dead input's buffer), but not overlap them
    // otherwise.
    auto [outBegin, outEnd] = bytesOf(schedule_[last]->result());
    unsigned outSize = dtypeSize(schedule_[last]->result()->dtype());
    for (unsigned i = first; fused && i <= last; ++i)
      for (const Value *v : schedule_[i]->operands()) {
        if (i != first && v == schedule_[i - 1]->result())
          continue; // never written: its bytes may well be the result's
        auto [inBegin, inEnd] = bytesOf(v);
        bool overlaps = inBegin < outEnd && outBegin < inEnd;
        if (overlaps && !(inBegin == outBegin && dtypeSize(v->dtype()) == outSize))
          fused = nullptr;
      }
    if (fused) {
      kernels_[last] = std::move(fused);
      inputArgs_[last] = std::move(ins);
      for (unsigned i = first; i < last; ++i)
        fusedAway_[i] = true;
      ++fusedChains_;
      fusedNodes_ += last - first + 1;
    }
    first = last + 1;
  }
}

void Program::findStableValues() {
  // A state tensor keeps its bytes between runs unless a state update of
  // this graph writes it; the host's writes move its version on.
  llvm::DenseSet<const Value *> updated;
  for (const StateUpdate &u : graph_.stateUpdates())
    updated.insert(u.state);
  for (const Value *v : graph_.state())
    if (!updated.count(v))
      stableVersion_[v] = castCache_.versionSlot(v);
  // A cast the cache serves keeps its result in the persistent arena and
  // rewrites it only when its state's version moves on.
  for (unsigned pos = 0; pos < schedule_.size(); ++pos)
    if (castCache_.isCached(pos)) {
      auto it = stableVersion_.find(schedule_[pos]->operand(0));
      if (it != stableVersion_.end())
        stableVersion_[schedule_[pos]->result()] = it->second;
    }
}

kernels::TensorArg Program::inputArg(const Value *v) const {
  return {storage(v), &v->type(), stableVersion_.lookup(v)};
}

void *Program::data(const Value *v) {
  if (v->isState())
    castCache_.bump(v);
  return hostView(v, /*writable=*/true);
}

void *Program::dataToOverwrite(const Value *v) {
  if (v->isState())
    castCache_.bump(v);
  return hostView(v, /*writable=*/true, /*overwrite=*/true);
}

void *Program::hostView(const Value *v, bool writable, bool overwrite) const {
  void *stored = storage(v);
  if (backend_.hostAccessible())
    return stored;
  HostCopy &copy = hostCopies_[v];
  size_t bytes = static_cast<size_t>(v->type().sizeInBytes());
  if (!copy.bytes) {
    if (v->isInput())
      copy.bytes = {static_cast<char *>(backend_.allocateHostBuffer(bytes)),
                    HostBufferFree(&backend_)};
    else
      copy.bytes = {new char[bytes ? bytes : 1], HostBufferFree()};
    if (!copy.bytes)
      throw std::bad_alloc();
  }
  // A copy handed out writable holds the newest value until it is sent.
  if (!copy.pendingWrite && !(overwrite && (v->isInput() || v->isState())))
    backend_.copyToHost(copy.bytes.get(), stored, bytes);
  // Only inputs and state are written by the host: a step-arena result may
  // share its bytes with an input, so it is never sent back.
  copy.pendingWrite |= writable && (v->isInput() || v->isState());
  return copy.bytes.get();
}

void Program::flushHostWrites(bool release) {
  for (auto &[v, copy] : hostCopies_)
    if (copy.pendingWrite) {
      backend_.copyToBackend(storage(v), copy.bytes.get(),
                             static_cast<size_t>(v->type().sizeInBytes()));
      copy.pendingWrite = false;
    }
  if (release)
    hostCopies_.clear();
}

void *Program::storage(const Value *v) const {
  const PlannedBuffer *b = plan_.find(v);
  assert(b && "value has no planned buffer");
  return (b->arena == ArenaKind::Persistent ? persistent_ : step_) + b->offset;
}

/// The random stream of state tensor `index`: its declaration index, except
/// that a master weight (`<param>.master`, passes/MasterWeights.h) draws from
/// its parameter's, so that the half parameter starts as the rounded master.
static unsigned initStream(const Graph &g, unsigned index) {
  const Value *v = g.state()[index];
  llvm::StringRef param = v->name();
  if (v->stateKind() != StateKind::MasterWeight || !param.consume_back(".master"))
    return index;
  const auto *it = llvm::find(g.state(), g.lookup(param));
  return it == g.state().end() ? index : static_cast<unsigned>(it - g.state().begin());
}

bool Program::initializeState(const CompileOptions &opts, DiagnosticEngine &diag) {
  for (unsigned index = 0; index < graph_.state().size(); ++index) {
    const Value *v = graph_.state()[index];
    const InitSpec &init = v->init();
    // On a device backend, a host copy sent after compile.
    void *dst = hostView(v, /*writable=*/true);
    int64_t n = v->type().numElements();
    DType t = v->dtype();
    // Each state tensor draws from its own stream (its declaration index), so
    // adding a parameter does not change the others' initial values.
    unsigned stream = initStream(graph_, index);
    switch (init.kind) {
    case InitSpec::Kind::None:
    case InitSpec::Kind::Zeros:
      for (int64_t i = 0; i < n; ++i)
        kernels::storeFromDouble(t, dst, i, 0.0);
      break;
    case InitSpec::Kind::Ones:
      for (int64_t i = 0; i < n; ++i)
        kernels::storeFromDouble(t, dst, i, 1.0);
      break;
    case InitSpec::Kind::Constant:
      for (int64_t i = 0; i < n; ++i)
        kernels::storeFromDouble(t, dst, i, init.a);
      break;
    case InitSpec::Kind::Uniform:
      for (int64_t i = 0; i < n; ++i)
        kernels::storeFromDouble(t, dst, i,
                                 init.a + (init.b - init.a) *
                                              kernels::uniform01Double(opts.initSeed, stream, i));
      break;
    case InitSpec::Kind::Normal:
      for (int64_t i = 0; i < n; ++i)
        kernels::storeFromDouble(
            t, dst, i, init.a + init.b * kernels::standardNormal(opts.initSeed, stream, i));
      break;
    case InitSpec::Kind::Data:
      if (!init.data || int64_t(init.data->size()) != n) {
        diag.error(v->loc(), "cannot initialise %" + v->name() + ": its data has " +
                                 llvm::Twine(init.data ? init.data->size() : 0) +
                                 " elements, its type " + v->type().str() + " needs " +
                                 llvm::Twine(n));
        return false;
      }
      for (int64_t i = 0; i < n; ++i)
        kernels::storeFromDouble(t, dst, i, (*init.data)[size_t(i)]);
      break;
    case InitSpec::Kind::File: {
      llvm::SmallString<256> path(init.path);
      if (!llvm::sys::path::is_absolute(path)) {
        path = opts.baseDir;
        llvm::sys::path::append(path, init.path);
      }
      NpyArray array;
      std::string err;
      if (!(init.key.empty() ? readNpy(path, array, err)
                             : readNamedTensor(path, init.key, array, err))) {
        diag.error(v->loc(), "cannot initialise %" + v->name() + ": " + err);
        return false;
      }
      if (llvm::ArrayRef<int64_t>(array.shape) != v->type().dims()) {
        diag.error(v->loc(), "cannot initialise %" + v->name() + " from '" + path +
                                 "': expected shape " + v->type().str() + ", found " +
                                 TensorType(array.dtype, array.shape).str());
        return false;
      }
      for (int64_t i = 0; i < n; ++i) {
        double x = array.isUint8 ? static_cast<unsigned char>(array.data[i])
                                 : kernels::loadAsDouble(array.dtype, array.data.data(), i);
        kernels::storeFromDouble(t, dst, i, x);
      }
      break;
    }
    }
  }
  return true;
}

void Program::setProfiling(bool on, size_t traceSteps) {
  profiling_ = on;
  traceSteps_ = traceSteps;
  profileMicros_.assign(schedule_.size(), 0.0);
  profileCalls_.assign(schedule_.size(), 0);
  profiledRuns_ = 0;
  profiledRunMicros_ = 0;
  trace_.clear();
  traceZero_.reset();
}

unsigned Program::chainStart(unsigned position) const {
  while (position > 0 && fusedAway_[position - 1])
    --position;
  return position;
}

// Apart from run()'s loop, so that the loop stays as it is without
// profiling (measured: timing code inside it slowed the transformer's step
// by 7 % even when off).
__attribute__((noinline)) void Program::runKernelsProfiled(kernels::KernelArgs &args) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point runStart = Clock::now();
  if (profiling_ && !traceZero_)
    traceZero_ = runStart;
  bool tracing = profiling_ && profiledRuns_ < traceSteps_;
  for (unsigned i : positions_) {
    // Waiting for a kernel that finishes later counts to the node that
    // needs its results.
    Clock::time_point start = Clock::now();
    if (!unfinished_.empty())
      finishStartedBefore(i, args);
    args.node = schedule_[i];
    args.inputs = inputArgs_[i];
    args.outputs = outputArgs_[i];
    args.stateUnchanged = &stateUnchanged_[i];
    kernels_[i]->run(args);
    if (!finishBefore_.empty() && kernels_[i]->finishesLater())
      unfinished_.push_back(i);
    // An observer reads the results right after the kernel.
    if (observer_ && !unfinished_.empty())
      finishStartedBefore(unsigned(schedule_.size()), args);
    Clock::time_point end = Clock::now();
    if (observer_)
      observer_(i);
    if (!profiling_)
      continue;
    double us = std::chrono::duration<double, std::micro>(end - start).count();
    profileMicros_[i] += us;
    ++profileCalls_[i];
    if (tracing)
      trace_.push_back({i, args.step,
                        std::chrono::duration<double, std::micro>(start - *traceZero_).count(),
                        us});
  }
}

void Program::findFinishPositions() {
  if (llvm::none_of(kernels_, [](const auto &k) { return k->finishesLater(); }))
    return;
  llvm::DenseMap<const Node *, unsigned> positionOf;
  for (unsigned i = 0; i < schedule_.size(); ++i)
    positionOf[schedule_[i]] = i;
  finishBefore_.assign(schedule_.size(), unsigned(schedule_.size()));
  for (unsigned i = 0; i < schedule_.size(); ++i) {
    if (!kernels_[i]->finishesLater())
      continue;
    for (const Value *r : schedule_[i]->results())
      for (const Use &u : r->uses())
        if (auto it = positionOf.find(u.user); it != positionOf.end() && it->second > i)
          finishBefore_[i] = std::min(finishBefore_[i], it->second);
  }
}

void Program::finishStartedBefore(unsigned position, kernels::KernelArgs &args) {
  // Few at a time (a data-parallel step's buckets): a linear scan.
  for (size_t k = 0; k < unfinished_.size();) {
    unsigned started = unfinished_[k];
    if (finishBefore_[started] > position) {
      ++k;
      continue;
    }
    args.node = schedule_[started];
    args.inputs = inputArgs_[started];
    args.outputs = outputArgs_[started];
    args.stateUnchanged = &stateUnchanged_[started];
    kernels_[started]->finish(args);
    unfinished_.erase(unfinished_.begin() + k);
  }
}

void Program::run(uint64_t step) {
  assert(step_ && "a plan-only program (CompileOptions::planOnly) never runs");
  std::optional<std::chrono::steady_clock::time_point> runStartTime;
  if (profiling_)
    runStartTime = std::chrono::steady_clock::now();
  if (!backend_.hostAccessible())
    flushHostWrites(/*release=*/false);
  positions_.clear();
  for (unsigned i = 0; i < schedule_.size(); ++i) {
    stateUnchanged_[i] = false;
    if (!castCache_.serve(i) && !fusedAway_[i])
      positions_.push_back(i);
  }
  llvm::ArrayRef<StateUpdate> updates = graph_.stateUpdates();
  auto skipped = [&](size_t u) { return skippableBy_[u] >= 0 && stateUnchanged_[skippableBy_[u]]; };
  // The backend runs this (or replays what it captured of it earlier).
  StepLaunch launch = backend_.runStep(this, step, positions_, [&] {
    kernels::KernelArgs args;
    args.step = step;
    args.runSeed = runSeed_;
    if (profiling_ || observer_) {
      runKernelsProfiled(args);
    } else {
      for (unsigned i : positions_) {
        if (!unfinished_.empty())
          finishStartedBefore(i, args);
        args.node = schedule_[i];
        args.inputs = inputArgs_[i];
        args.outputs = outputArgs_[i];
        args.stateUnchanged = &stateUnchanged_[i];
        kernels_[i]->run(args);
        if (!finishBefore_.empty() && kernels_[i]->finishesLater())
          unfinished_.push_back(i);
      }
    }
    // The rest before the state updates and the end of the step.
    if (!unfinished_.empty())
      finishStartedBefore(unsigned(schedule_.size()), args);
    for (size_t u = 0; u < updates.size(); ++u) {
      void *state = storage(updates[u].state), *next = storage(updates[u].newValue);
      if (!skipped(u) && state != next) // else unchanged, or updated in place
        backend_.copyWithin(state, next,
                            static_cast<size_t>(updates[u].state->type().sizeInBytes()));
    }
  });
  switch (launch) {
  case StepLaunch::Direct:
    break;
  case StepLaunch::Eager:
    ++deviceActivity_.eagerSteps;
    break;
  case StepLaunch::Captured:
    ++deviceActivity_.capturedSteps;
    break;
  case StepLaunch::Replayed:
    ++deviceActivity_.replayedSteps;
    break;
  }
  for (size_t u = 0; u < updates.size(); ++u)
    if (!skipped(u))
      castCache_.bump(updates[u].state);
  backend_.synchronize();
  if (profiling_) {
    ++profiledRuns_;
    profiledRunMicros_ +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - *runStartTime)
            .count();
  }
}

uint64_t Program::kernelHeldBytes() const {
  uint64_t held = 0;
  for (const auto &k : kernels_)
    held += k->heldBytes();
  return held;
}

MeasuredMemory Program::measure() const {
  MeasuredMemory m;
  m.allocatedBytes = allocatedBytes_;
  m.kernelHeldBytes = kernelHeldBytes();
  if (!backend_.hostAccessible()) {
    char guards[2][kArenaGuard];
    backend_.copyToHost(guards[0], persistent_ + plan_.persistentBytes, kArenaGuard);
    backend_.copyToHost(guards[1], step_ + plan_.stepBytes, kArenaGuard);
    for (const char *guard : guards)
      for (uint64_t i = 0; i < kArenaGuard; ++i)
        if (static_cast<unsigned char>(guard[i]) != kGuardByte)
          m.guardsIntact = false;
    return m;
  }
  for (uint64_t i = plan_.stepBytes; i > 0; --i)
    if (static_cast<unsigned char>(step_[i - 1]) != kUntouchedByte) {
      m.touchedStepBytes = i;
      break;
    }
  for (uint64_t i = 0; i < kArenaGuard; ++i)
    if (static_cast<unsigned char>(persistent_[plan_.persistentBytes + i]) != kGuardByte ||
        static_cast<unsigned char>(step_[plan_.stepBytes + i]) != kGuardByte)
      m.guardsIntact = false;
  return m;
}

} // namespace ampc
