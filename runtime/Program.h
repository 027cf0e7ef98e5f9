//===- Program.h - A compiled graph, ready to run many steps ---------------===//
//
// Compiling fixes the schedule, the memory plan and a kernel per node, and
// allocates the arenas once. Running a step binds no kernels and allocates
// nothing. The Graph must outlive its Program.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_PROGRAM_H
#define AMPC_RUNTIME_PROGRAM_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "runtime/Backend.h"
#include "runtime/CastCache.h"
#include "runtime/MemoryPlan.h"

#include "llvm/ADT/DenseMap.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace ampc {

namespace dist {
class Communicator;
}

struct CompileOptions {
  /// Seeds state initialisation (uniform/normal InitSpecs).
  uint64_t initSeed = 0;
  /// The run's seed, mixed into every random op's stream (dropout).
  uint64_t runSeed = 0;
  /// Directory that relative InitSpec file paths are resolved against.
  std::string baseDir = ".";
  /// Serve cacheable casts of state tensors from the cast cache. Off, every
  /// cast runs every step (same results, bit for bit; for tests and
  /// benchmarks).
  bool castCache = true;
  /// Let optimizer updates and other state updates whose op allows it write
  /// over the state itself (MemoryPlan.h). Off, each new state value gets a
  /// step-arena buffer copied back after the step (same results, bit for
  /// bit; for tests).
  bool inPlaceStateUpdates = true;
  /// Run chains of elementwise nodes as one kernel where the backend offers
  /// one (Backend::prepareFused; the `cpu` backend does). Off, or with the
  /// environment variable AMPC_NO_FUSION set to anything but "0", every
  /// node runs its own kernel (same results, bit for bit).
  bool fuseElementwise = true;
  /// Tell kernels which inputs keep their bytes from one run to the next
  /// (TensorArg::stableVersion: state the graph never updates - parameters
  /// in evaluation and inference, frozen ones in training - and cached
  /// casts of it), so that they may keep derived copies: the `cpu` backend's
  /// convolutions then keep such weights in oneDNN's layout instead of
  /// reordering them every run. Off, nothing is kept (same results, bit for
  /// bit; for benchmarks).
  bool markStableInputs = true;
  /// Refuse, before allocating, a memory plan that needs more bytes (0: no
  /// limit). An over-committing OS would otherwise hand out the arenas and
  /// kill the process when a step touches them.
  uint64_t maxPlannedBytes = 0;
  /// Prepare the kernels and plan the memory, but allocate nothing: the
  /// program reports its plan and the bytes its kernels hold, and never
  /// runs (`ampc plan --max-batch` plans many batches this way).
  /// maxPlannedBytes is not checked.
  bool planOnly = false;
  /// The job's communicator, which runs the graph's collective ops
  /// (all_reduce, inserted by the data-parallel pass); it must outlive the
  /// Program. Null: a graph with collectives does not compile.
  dist::Communicator *communicator = nullptr;
};

/// Bytes the executor actually holds and touched, to set against the plan.
struct MeasuredMemory {
  uint64_t allocatedBytes = 0;   ///< arena bytes as the backend's allocator counts them
  uint64_t touchedStepBytes = 0; ///< highest step-arena byte written + 1
  bool guardsIntact = true;      ///< nothing wrote past an arena's end
  /// Held by kernels outside the arenas between runs (NodeKernel::heldBytes:
  /// weights kept in oneDNN's layout, an all-reduce's pack buffer).
  uint64_t kernelHeldBytes = 0;
};

/// What a device backend did with a Program (all zero on a host backend):
/// the nodes that run on the host fallback, and how its steps were issued.
/// Tests assert "no host fallback, graph replayed"; `ampc --device cuda`
/// prints it.
struct DeviceActivity {
  unsigned hostFallbackNodes = 0;
  /// The op names of those nodes, each once, in schedule order.
  std::vector<std::string> hostFallbackOps;
  /// Collective nodes that run on the device (Backend::deviceCollective:
  /// NCCL); a collective staged through the host counts as a host fallback.
  unsigned deviceCollectiveNodes = 0;
  uint64_t eagerSteps = 0, capturedSteps = 0, replayedSteps = 0;
};

class Program {
public:
  /// Verifies the graph is runnable on `backend` (a kernel for every node, a
  /// supported dtype), plans memory, allocates arenas and initialises state.
  /// Returns nullptr after reporting diagnostics.
  /// `outOfMemory`, when given, says whether the failure was the memory
  /// plan exceeding opts.maxPlannedBytes or the arenas failing to allocate
  /// (the machine's limit rather than the graph's fault).
  static std::unique_ptr<Program> compile(const Graph &g, Backend &backend, DiagnosticEngine &diag,
                                          const CompileOptions &opts = {},
                                          bool *outOfMemory = nullptr);
  ~Program();

  const Graph &graph() const { return graph_; }
  const MemoryPlan &plan() const { return plan_; }
  llvm::ArrayRef<const Node *> schedule() const { return schedule_; }

  /// Storage of a graph input, state tensor or (after run, for outputs and
  /// update sources) a result. Host pointers on host-accessible backends.
  /// On a device backend (CUDA), a host copy: fetched from the device when
  /// handed out (so it shows the value as of this call; ask again after the
  /// next run), and, for inputs and state handed out through a non-const
  /// Program, sent back to the device before the next step.
  /// Through a non-const Program, access to a state tensor counts as a
  /// write: its version moves on, so cached casts of it are recomputed.
  /// Through a const Program it does not, so write state only through a
  /// non-const one (and read it through a const one where that is easy, to
  /// spare the cache a recomputation).
  void *data(const Value *v);
  void *data(const Value *v) const { return hostView(v, /*writable=*/false); }
  /// Like the non-const data(), for a caller that overwrites every byte (a
  /// batch bound to an input): on a device backend the current value is not
  /// fetched first, only the new one sent before the next step.
  void *dataToOverwrite(const Value *v);

  /// Runs one step: every node in schedule order (cacheable casts of state
  /// whose cached result is current are skipped; a fused elementwise chain
  /// runs as one kernel in its last node's place), then the state updates -
  /// except those fed by a node that reported its state results equal its
  /// state operands (KernelArgs::stateUnchanged), which keep their value
  /// and version.
  void run(uint64_t step);

  /// Hits, misses and bytes saved by the cast cache so far; print with
  /// castCacheStats().print(os).
  const CastCacheStats &castCacheStats() const { return castCache_.stats(); }
  /// How many times state tensor `state` was written since compile (state
  /// updates that changed it, writable host access).
  uint64_t stateVersion(const Value *state) const { return castCache_.version(state); }

  /// What the arenas hold; scans the step arena for the touched high-water mark.
  MeasuredMemory measure() const;
  /// Bytes the kernels hold outside the arenas (NodeKernel::heldBytes:
  /// weights kept in oneDNN's layout, an all-reduce's pack buffer).
  uint64_t kernelHeldBytes() const;
  /// Chains of elementwise nodes that run as one kernel
  /// (CompileOptions::fuseElementwise), and the nodes in them.
  unsigned fusedChains() const { return fusedChains_; }
  const DeviceActivity &deviceActivity() const { return deviceActivity_; }
  unsigned fusedNodes() const { return fusedNodes_; }

  /// Profiling: with it on, run() times every kernel it calls (host wall
  /// time around the call; on a device backend that is the launch unless
  /// the backend synchronises) and keeps, for the first `traceSteps` runs,
  /// one event per kernel call (a timeline).
  void setProfiling(bool on, size_t traceSteps = 0);
  /// Called with each schedule position right after its kernel ran (its
  /// results are current then); empty to stop. Compile with
  /// fuseElementwise off to see every node's result.
  void setKernelObserver(std::function<void(unsigned position)> observer) {
    observer_ = std::move(observer);
  }
  struct KernelEvent {
    unsigned position;          ///< in schedule()
    uint64_t step;              ///< run()'s argument
    double startUs, durationUs; ///< from the first profiled run's start
  };
  /// Per schedule position: the kernel's total time over the profiled runs
  /// (0 for a position that ran nothing: fused away, served from the cast
  /// cache) and how many times it ran.
  const std::vector<double> &profileMicros() const { return profileMicros_; }
  const std::vector<uint64_t> &profileCalls() const { return profileCalls_; }
  /// Profiled runs, and their wall time in total (state updates included).
  uint64_t profiledRuns() const { return profiledRuns_; }
  double profiledRunMicros() const { return profiledRunMicros_; }
  const std::vector<KernelEvent> &trace() const { return trace_; }
  /// For position i, the first position of the fused chain whose kernel
  /// runs at i (i itself when not fused).
  unsigned chainStart(unsigned position) const;

private:
  Program(const Graph &g, Backend &backend) : graph_(g), backend_(backend) {}
  bool initializeState(const CompileOptions &opts, DiagnosticEngine &diag);
  /// Finds chains of elementwise nodes and runs each as one kernel where the
  /// backend has one: the last node's position runs it, the others none.
  void fuseElementwiseChains();
  /// Fills stableVersion_ (CompileOptions::markStableInputs).
  void findStableValues();
  void *storage(const Value *v) const;
  /// A kernel's view of `v` as an input: its storage, type and, where it
  /// keeps its bytes between runs, its version (markStableInputs).
  kernels::TensorArg inputArg(const Value *v) const;
  /// data(): storage(v) on host backends, else v's host copy.
  void *hostView(const Value *v, bool writable, bool overwrite = false) const;
  /// Device backends: sends host copies handed out writable to the device;
  /// with `release`, frees every host copy afterwards.
  void flushHostWrites(bool release);
  /// run()'s kernel loop with every call timed (setProfiling) and observed.
  void runKernelsProfiled(kernels::KernelArgs &args);

  const Graph &graph_;
  Backend &backend_;
  std::vector<const Node *> schedule_;
  std::vector<std::unique_ptr<kernels::NodeKernel>> kernels_;
  MemoryPlan plan_;
  char *persistent_ = nullptr;
  char *step_ = nullptr;
  /// What the backend's allocator handed out for the arenas, guards excluded.
  uint64_t allocatedBytes_ = 0;
  uint64_t runSeed_ = 0;
  // Per node, argument arrays prepared at compile time.
  std::vector<std::vector<kernels::TensorArg>> inputArgs_, outputArgs_;
  /// Per node, set by its kernel when this step left its state results
  /// equal to its state operands (KernelArgs::stateUnchanged).
  std::unique_ptr<bool[]> stateUnchanged_;
  /// Per state update (graph order), the schedule position of the node whose
  /// "unchanged" report lets the update be skipped, or -1.
  std::vector<int> skippableBy_;
  CastCache castCache_;
  /// Schedule positions that run this step (reused across steps).
  std::vector<unsigned> positions_;
  /// Per schedule position: part of a fused chain other than its last node
  /// (runs nothing; the last node's fused kernel computes its result into
  /// a block buffer, and its own buffer stays unwritten).
  std::vector<bool> fusedAway_;
  /// For a kernel that finishesLater(): the first later schedule position
  /// whose node reads one of its results (schedule size: none, the end of
  /// the step). Empty when no kernel finishes later.
  std::vector<unsigned> finishBefore_;
  /// Positions of this step's started kernels not finished yet.
  std::vector<unsigned> unfinished_;
  void findFinishPositions();
  void finishStartedBefore(unsigned position, kernels::KernelArgs &args);
  /// Values whose bytes change only when a state version does, with the
  /// version that counts (CompileOptions::markStableInputs).
  llvm::DenseMap<const Value *, const uint64_t *> stableVersion_;
  unsigned fusedChains_ = 0, fusedNodes_ = 0;
  DeviceActivity deviceActivity_;
  bool profiling_ = false;
  std::function<void(unsigned)> observer_;
  size_t traceSteps_ = 0;
  std::vector<double> profileMicros_;
  std::vector<uint64_t> profileCalls_;
  uint64_t profiledRuns_ = 0;
  double profiledRunMicros_ = 0;
  std::vector<KernelEvent> trace_;
  /// The clock's zero for trace events: the first profiled run's start.
  std::optional<std::chrono::steady_clock::time_point> traceZero_;
  /// Device backends: host copies of values handed out by data(). Inputs'
  /// come from Backend::allocateHostBuffer (pinned on CUDA: a batch goes to
  /// the device without a staging copy), the rest from the heap.
  struct HostBufferFree {
    HostBufferFree() noexcept : backend(nullptr) {}
    explicit HostBufferFree(Backend *b) noexcept : backend(b) {}
    Backend *backend; ///< null: new[]'d
    void operator()(char *p) const {
      if (backend)
        backend->freeHostBuffer(p);
      else
        delete[] p;
    }
  };
  struct HostCopy {
    std::unique_ptr<char, HostBufferFree> bytes;
    bool pendingWrite = false; ///< handed out writable: send before the next step
  };
  mutable llvm::DenseMap<const Value *, HostCopy> hostCopies_;
};

} // namespace ampc

#endif
