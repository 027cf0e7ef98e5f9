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
#include "runtime/MemoryPlan.h"

#include <memory>
#include <vector>

namespace ampc {

struct CompileOptions {
  /// Seeds state initialisation (uniform/normal InitSpecs).
  uint64_t initSeed = 0;
  /// The run's seed, mixed into every random op's stream (dropout).
  uint64_t runSeed = 0;
  /// Directory that relative InitSpec file paths are resolved against.
  std::string baseDir = ".";
};

/// Bytes the executor actually holds and touched, to set against the plan.
struct MeasuredMemory {
  uint64_t allocatedBytes = 0; ///< arena bytes as the backend's allocator counts them
  uint64_t touchedStepBytes = 0; ///< highest step-arena byte written + 1
  bool guardsIntact = true;      ///< nothing wrote past an arena's end
};

class Program {
public:
  /// Verifies the graph is runnable on `backend` (a kernel for every node, a
  /// supported dtype), plans memory, allocates arenas and initialises state.
  /// Returns nullptr after reporting diagnostics.
  static std::unique_ptr<Program> compile(const Graph &g, Backend &backend,
                                          DiagnosticEngine &diag,
                                          const CompileOptions &opts = {});
  ~Program();

  const Graph &graph() const { return graph_; }
  const MemoryPlan &plan() const { return plan_; }
  llvm::ArrayRef<const Node *> schedule() const { return schedule_; }

  /// Storage of a graph input, state tensor or (after run, for outputs and
  /// update sources) a result. Host pointers on host-accessible backends.
  void *data(const Value *v) const;

  /// Runs one step: every node in schedule order, then the state updates.
  void run(uint64_t step);

  /// What the arenas hold; scans the step arena for the touched high-water mark.
  MeasuredMemory measure() const;

private:
  Program(const Graph &g, Backend &backend) : graph_(g), backend_(backend) {}
  bool initializeState(const CompileOptions &opts, DiagnosticEngine &diag);

  const Graph &graph_;
  Backend &backend_;
  std::vector<const Node *> schedule_;
  std::vector<kernels::KernelFn> kernels_;
  MemoryPlan plan_;
  char *persistent_ = nullptr;
  char *step_ = nullptr;
  /// What the backend's allocator handed out for the arenas, guards excluded.
  uint64_t allocatedBytes_ = 0;
  uint64_t runSeed_ = 0;
  // Per node, argument arrays prepared at compile time.
  std::vector<std::vector<kernels::TensorArg>> inputArgs_, outputArgs_;
};

} // namespace ampc

#endif
