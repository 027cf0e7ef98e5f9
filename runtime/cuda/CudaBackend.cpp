//===- CudaBackend.cpp - Device discovery, memory, transfers, graphs -------===//
//
// One device (0), one stream. Arenas are one cudaMalloc each (Program asks
// for exactly two, sized by the memory plan). Host <-> device copies go on
// the stream; copyToHost waits for it. A step runs eagerly the first time;
// from the second step on, while the same schedule positions run (the cast
// cache serves the same casts), the step is captured once into a CUDA graph
// and replayed with one cudaGraphLaunch. A step holding a host fallback
// node is never captured.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaBackend.h"

#include "kernels/cuda/CudaContext.h"
#include "runtime/cuda/NcclSetup.h"
#include "runtime/dist/Communicator.h"

#include "kernels/custom/CustomKernels.h"
#include "kernels/reference/ReferenceKernels.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace ampc::cuda {

//===----------------------------------------------------------------------===//
// Discovery
//===----------------------------------------------------------------------===//

bool probeDevice(std::string &why, std::string *description) {
  struct Probe {
    bool ok = false;
    std::string why, description;
  };
  static const Probe probe = [] {
    Probe p;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError(); // clear the sticky error
      p.why = "no CUDA device (cudaGetDeviceCount: error " + std::to_string(static_cast<int>(e)) +
              ", " + cudaGetErrorString(e) + ")";
      return p;
    }
    if (count == 0) {
      p.why = "no CUDA device (cudaGetDeviceCount found 0)";
      return p;
    }
    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) {
      p.why = "CUDA device 0 does not answer (cudaGetDeviceProperties: " + errorText(e) + ")";
      return p;
    }
    if (prop.major < 8) {
      p.why = std::string("CUDA device 0 (") + prop.name + ", sm_" + std::to_string(prop.major) +
              std::to_string(prop.minor) + ") is older than sm_80, which ampc is built for";
      return p;
    }
    p.ok = true;
    p.description = std::string(prop.name) + ", sm_" + std::to_string(prop.major) +
                    std::to_string(prop.minor) + ", " + std::to_string(prop.totalGlobalMem >> 30) +
                    " GiB";
    return p;
  }();
  if (!probe.ok)
    why = probe.why;
  else if (description)
    *description = probe.description;
  return probe.ok;
}

CudaOptions CudaOptions::fromEnvironment() {
  CudaOptions o;
  auto flag = [](const char *name, bool fallback) {
    const char *v = std::getenv(name);
    if (!v || !*v)
      return fallback;
    return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 ||
             std::strcmp(v, "false") == 0);
  };
  o.allowTf32 = flag("AMPC_CUDA_TF32", false);
  if (const char *d = std::getenv("AMPC_CUDA_DEVICE"); d && *d) {
    char *end = nullptr;
    long v = std::strtol(d, &end, 10);
    o.device = *end == 0 && v >= 0 && v < 1024 ? int(v) : -2;
  }
  o.cudaGraphs = flag("AMPC_CUDA_GRAPHS", true);
  // CUDA_LAUNCH_BLOCKING=1 asks the driver for the same: errors at the
  // launch that caused them.
  o.syncEachNode = flag("AMPC_CUDA_SYNC", false) || flag("CUDA_LAUNCH_BLOCKING", false);
  if (o.syncEachNode)
    o.cudaGraphs = false;
  return o;
}

//===----------------------------------------------------------------------===//
// The host fallback
//===----------------------------------------------------------------------===//

namespace {

class HostFallbackKernel final : public kernels::NodeKernel {
public:
  HostFallbackKernel(CudaContext &ctx, std::unique_ptr<kernels::NodeKernel> host)
      : ctx_(ctx), host_(std::move(host)) {}
  bool runsOnHost() const override { return true; }

  void run(const kernels::KernelArgs &args) override {
    if (ctx_.capturing) {
      ctx_.captureFailed = true;
      return;
    }
    const Node *n = args.node;
    prepareBuffers(args);
    for (size_t i = 0; i < args.inputs.size(); ++i)
      copyIn(args.inputs[i], inputs_[i], n);
    check(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize (host fallback)", n);
    // Results that share a buffer with an operand (in-place updates) start
    // from the operand's value, as they would on the device.
    for (size_t o = 0; o < args.outputs.size(); ++o) {
      for (size_t i = 0; i < args.inputs.size(); ++i)
        if (args.outputs[o].data == args.inputs[i].data) {
          std::memcpy(outputs_[o].get(), inputs_[i].get(), bytesOf(args.outputs[o]));
          break;
        }
    }
    kernels::KernelArgs host = args;
    host.inputs = hostIn_;
    host.outputs = hostOut_;
    host_->run(host);
    for (size_t o = 0; o < args.outputs.size(); ++o)
      if (size_t bytes = bytesOf(args.outputs[o]))
        check(cudaMemcpyAsync(args.outputs[o].data, outputs_[o].get(), bytes,
                              cudaMemcpyHostToDevice, ctx_.stream),
              "cudaMemcpyAsync (host fallback result)", n);
    // The source buffers are reused next step: wait for the copies.
    check(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize (host fallback)", n);
  }

private:
  static size_t bytesOf(const kernels::TensorArg &t) {
    return static_cast<size_t>(t.type->sizeInBytes());
  }
  void copyIn(const kernels::TensorArg &t, std::unique_ptr<char[]> &buffer, const Node *n) {
    if (size_t bytes = bytesOf(t))
      check(cudaMemcpyAsync(buffer.get(), t.data, bytes, cudaMemcpyDeviceToHost, ctx_.stream),
            "cudaMemcpyAsync (host fallback operand)", n);
  }
  void prepareBuffers(const kernels::KernelArgs &args) {
    if (!hostIn_.empty() || !hostOut_.empty() || (args.inputs.empty() && args.outputs.empty()))
      return;
    for (const kernels::TensorArg &t : args.inputs) {
      inputs_.push_back(std::make_unique<char[]>(bytesOf(t) + 64));
      hostIn_.push_back({inputs_.back().get(), t.type});
    }
    for (const kernels::TensorArg &t : args.outputs) {
      outputs_.push_back(std::make_unique<char[]>(bytesOf(t) + 64));
      hostOut_.push_back({outputs_.back().get(), t.type});
    }
  }

  CudaContext &ctx_;
  std::unique_ptr<kernels::NodeKernel> host_;
  std::vector<std::unique_ptr<char[]>> inputs_, outputs_;
  std::vector<kernels::TensorArg> hostIn_, hostOut_;
};

/// A host program's own CUDA kernel for a custom op (CustomOpSpec::cudaKernel):
/// it gets device pointers and launches on a stream of its choosing, which
/// ours knows nothing of, so the step's stream is drained before and the
/// device after. Not capturable into a CUDA graph: a step with one runs
/// eagerly.
class CustomDeviceKernel final : public kernels::NodeKernel {
public:
  CustomDeviceKernel(CudaContext &ctx, std::unique_ptr<kernels::NodeKernel> kernel)
      : ctx_(ctx), kernel_(std::move(kernel)) {}

  void run(const kernels::KernelArgs &args) override {
    if (ctx_.capturing) {
      ctx_.captureFailed = true;
      return;
    }
    check(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize (custom kernel)", args.node);
    kernel_->run(args);
    check(cudaDeviceSynchronize(), "the custom op's CUDA kernel", args.node);
  }

private:
  CudaContext &ctx_;
  std::unique_ptr<kernels::NodeKernel> kernel_;
};

/// AMPC_CUDA_SYNC=1: waits for each node's kernels and checks for an
/// asynchronous fault, so that it is reported against the op that caused
/// it rather than at the end of the step. Slow; for debugging.
class SynchronizedKernel final : public kernels::NodeKernel {
public:
  SynchronizedKernel(CudaContext &ctx, std::unique_ptr<kernels::NodeKernel> kernel)
      : ctx_(ctx), kernel_(std::move(kernel)) {}
  void run(const kernels::KernelArgs &args) override {
    kernel_->run(args);
    if (kernel_->finishesLater())
      kernel_->finish(args);
    check(cudaStreamSynchronize(ctx_.stream), "the node's kernels (AMPC_CUDA_SYNC=1)", args.node);
    check(cudaGetLastError(), "the node's kernels (AMPC_CUDA_SYNC=1)", args.node);
  }
  uint64_t heldBytes() const override { return kernel_->heldBytes(); }
  bool runsOnHost() const override { return kernel_->runsOnHost(); }
  // Run and finished at once: waiting for each node is the point.
  bool finishesLater() const override { return false; }

private:
  CudaContext &ctx_;
  std::unique_ptr<kernels::NodeKernel> kernel_;
};

} // namespace

/// Runs `host` (a reference or custom CPU kernel) on host copies of the
/// operands and copies the results back: slow, but every op runs.
std::unique_ptr<kernels::NodeKernel> makeHostFallback(CudaContext &ctx, const Node &n,
                                                      std::unique_ptr<kernels::NodeKernel> host) {
  if (!host)
    return nullptr;
  return std::make_unique<HostFallbackKernel>(ctx, std::move(host));
}

//===----------------------------------------------------------------------===//
// The backend
//===----------------------------------------------------------------------===//

namespace {

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const CudaOptions &opts) : opts_(opts) { ctx_.allowTf32 = opts.allowTf32; }
  ~CudaBackend() override {
    for (auto &entry : graphs_)
      if (entry.second.exec)
        cudaGraphExecDestroy(entry.second.exec);
    if (!initialized_)
      return;
    cudaStreamSynchronize(ctx_.stream);
    tearDownNccl(ctx_);
    if (staging_)
      cudaFreeHost(staging_);
    if (ctx_.cudnn)
      cudnnDestroy(ctx_.cudnn);
    if (ctx_.cublas)
      cublasDestroy(ctx_.cublas);
    cudaFree(ctx_.workspace);
    for (void *w : ctx_.retiredWorkspaces)
      cudaFree(w);
    cudaFree(ctx_.cublasWorkspace);
    cudaFree(ctx_.deviceStep);
    cudaStreamDestroy(ctx_.stream);
  }

  llvm::StringRef name() const override { return "cuda"; }
  bool supports(const OpInfo &op, DType dtype) const override {
    // Every op runs: natively, or through the host fallback.
    if (op.kind == OpKind::Custom)
      return kernels::customKernelSupports(op, dtype);
    return kernels::referenceSupports(op, dtype);
  }
  kernels::KernelFn kernelFor(const Node &n) const override {
    return kernels::referenceKernel(n.kind());
  }
  std::unique_ptr<kernels::NodeKernel>
  hostKernel(const Node &n, std::unique_ptr<kernels::NodeKernel> host) override {
    return makeHostFallback(ctx_, n, std::move(host));
  }
  std::unique_ptr<kernels::NodeKernel> deviceCollective(const Node &n, dist::Communicator &comm,
                                                        std::string &err) override {
    if (comm.planningOnly())
      return nullptr; // `ampc plan`: the program is planned, never run
    if (!initialize(err))
      return nullptr;
    if (!ncclDecided_) {
      // The first collective of the first program: every rank compiles the
      // same graph, so all of them decide here together.
      ncclDecided_ = true;
      std::string why;
      NcclRoute route = setUpNccl(ctx_, comm, why);
      if (route == NcclRoute::Failed) {
        ncclError_ = "cuda: NCCL: " + why;
      } else if (route == NcclRoute::Host && comm.size() > 1 && comm.rank() == 0) {
        llvm::errs() << "note: cuda: the job's all-reduces go through the host over MPI (" << why
                     << ")\n";
      }
    }
    if (!ncclError_.empty()) {
      err = ncclError_;
      return nullptr;
    }
    if (!ctx_.nccl)
      return nullptr; // staged through the host
    std::unique_ptr<kernels::NodeKernel> k = prepareNcclKernel(ctx_, n, err);
    if (k && opts_.syncEachNode)
      return std::make_unique<SynchronizedKernel>(ctx_, std::move(k));
    return k;
  }
  std::unique_ptr<kernels::NodeKernel> prepare(const Node &n) override {
    std::string err;
    if (!initialize(err)) {
      llvm::errs() << "error: cuda: " << err << "\n";
      return nullptr;
    }
    if (n.kind() == OpKind::Custom) {
      if (std::unique_ptr<kernels::NodeKernel> device = kernels::prepareCustomCudaKernel(n))
        return std::make_unique<CustomDeviceKernel>(ctx_, std::move(device));
      return makeHostFallback(ctx_, n, kernels::prepareCustomCpuKernel(n));
    }
    std::unique_ptr<kernels::NodeKernel> k = prepareCudaKernel(ctx_, n);
    if (!k)
      k = makeHostFallback(ctx_, n, Backend::prepare(n));
    if (k && opts_.syncEachNode)
      return std::make_unique<SynchronizedKernel>(ctx_, std::move(k));
    return k;
  }

  void *allocate(size_t bytes) override {
    std::string err;
    if (!initialize(err)) {
      llvm::errs() << "error: cuda: " << err << "\n";
      return nullptr;
    }
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 64);
    if (e != cudaSuccess) {
      cudaGetLastError();
      llvm::errs() << "error: cuda: cudaMalloc of " << bytes << " bytes failed: " << errorText(e)
                   << "\n";
      return nullptr;
    }
    sizes_[p] = bytes;
    inUse_ += bytes;
    return p;
  }
  void deallocate(void *p) override {
    auto it = sizes_.find(p);
    if (it == sizes_.end())
      return;
    inUse_ -= it->second;
    sizes_.erase(it);
    // Kernels may still be using it.
    check(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize (free)");
    check(cudaFree(p), "cudaFree");
  }
  bool hostAccessible() const override { return false; }
  uint64_t bytesInUse() const override { return inUse_; }
  uint64_t availableMemoryBytes() const override {
    std::string err;
    size_t freeBytes = 0, totalBytes = 0;
    if (!const_cast<CudaBackend *>(this)->initialize(err) ||
        cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
      return 0;
    return freeBytes;
  }

  /// Page-locked, so that a batch goes to the device straight from where
  /// the data source wrote it (no copy into the staging buffer first).
  /// Pageable memory when pinning fails (the process's locked-memory limit).
  void *allocateHostBuffer(size_t bytes) override {
    std::string err;
    void *p = nullptr;
    if (initialize(err) &&
        cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) == cudaSuccess) {
      pinned_[static_cast<const char *>(p)] = bytes;
      return p;
    }
    cudaGetLastError();
    return Backend::allocateHostBuffer(bytes);
  }
  void freeHostBuffer(void *p) override {
    auto it = pinned_.find(static_cast<const char *>(p));
    if (it == pinned_.end())
      return Backend::freeHostBuffer(p);
    // A copy from it may be in flight.
    cudaStreamSynchronize(ctx_.stream);
    cudaFreeHost(p);
    pinned_.erase(it);
  }

  /// From an allocateHostBuffer buffer: one asynchronous copy (the buffer
  /// is not written again before synchronize()). From anywhere else:
  /// through pinned staging, as an asynchronous copy from pageable memory
  /// that the caller frees or rewrites at once would rely on the driver
  /// having staged it; large copies go through in chunks.
  void copyToBackend(void *dst, const void *hostSrc, size_t bytes) override {
    if (bytes && inPinnedBuffer(hostSrc, bytes)) {
      check(cudaMemcpyAsync(dst, hostSrc, bytes, cudaMemcpyHostToDevice, ctx_.stream),
            "cudaMemcpyAsync (host to device)");
      return;
    }
    auto *to = static_cast<char *>(dst);
    const auto *from = static_cast<const char *>(hostSrc);
    while (bytes) {
      size_t chunk = std::min(bytes, kStagingBytes);
      char *staged = stage(chunk);
      std::memcpy(staged, from, chunk);
      check(cudaMemcpyAsync(to, staged, chunk, cudaMemcpyHostToDevice, ctx_.stream),
            "cudaMemcpyAsync (host to device)");
      to += chunk, from += chunk, bytes -= chunk;
    }
  }
  void copyToHost(void *hostDst, const void *src, size_t bytes) override {
    if (!bytes)
      return;
    check(cudaMemcpyAsync(hostDst, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream),
          "cudaMemcpyAsync (device to host)");
    synchronizeStream("cudaStreamSynchronize (device to host)");
  }
  void copyWithin(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_.stream),
            "cudaMemcpyAsync (device to device)");
  }

  StepLaunch runStep(const void *program, uint64_t step, llvm::ArrayRef<unsigned> positions,
                     llvm::function_ref<void()> issue) override {
    copyToBackend(ctx_.deviceStep, &step, sizeof step);
    ProgramGraph &g = graphs_[program];
    bool same = g.exec && llvm::ArrayRef<unsigned>(g.positions) == positions;
    if (opts_.cudaGraphs && g.capturable && same) {
      check(cudaGraphLaunch(g.exec, ctx_.stream), "cudaGraphLaunch");
      return StepLaunch::Replayed;
    }
    // The first step runs eagerly (it fills caches and sizes nothing
    // lazily, but a failure shows up outside a capture); later ones are
    // captured while the positions stay the same.
    if (!opts_.cudaGraphs || !g.capturable || g.steps++ == 0) {
      issue();
      return StepLaunch::Eager;
    }
    if (g.exec) {
      check(cudaGraphExecDestroy(g.exec), "cudaGraphExecDestroy");
      g.exec = nullptr;
    }
    check(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
    ctx_.capturing = true;
    ctx_.captureFailed = false;
    ctx_.captureError.clear();
    setCapture(&ctx_);
    issue();
    setCapture(nullptr);
    ctx_.capturing = false;
    cudaGraph_t graph = nullptr;
    cudaError_t ended = cudaStreamEndCapture(ctx_.stream, &graph);
    cudaError_t made = cudaSuccess;
    if (ended == cudaSuccess && !ctx_.captureFailed)
      made = cudaGraphInstantiate(&g.exec, graph, 0);
    if (graph)
      cudaGraphDestroy(graph);
    if (ended != cudaSuccess || made != cudaSuccess || ctx_.captureFailed) {
      // A host fallback node, or a call that cannot be captured: nothing
      // ran during the capture. Run eagerly now and from here on.
      cudaGetLastError(); // a failed capture's error is not sticky
      if (!ctx_.captureError.empty() || ended != cudaSuccess || made != cudaSuccess)
        llvm::errs() << "warning: cuda: the step could not be captured into a CUDA graph ("
                     << (!ctx_.captureError.empty()
                             ? ctx_.captureError
                             : errorText(ended != cudaSuccess ? ended : made))
                     << "); running it without graphs\n";
      g.exec = nullptr;
      g.capturable = false;
      issue();
      return StepLaunch::Eager;
    }
    g.positions.assign(positions.begin(), positions.end());
    check(cudaGraphLaunch(g.exec, ctx_.stream), "cudaGraphLaunch");
    return StepLaunch::Captured;
  }
  void forgetProgram(const void *program) override {
    auto it = graphs_.find(program);
    if (it == graphs_.end())
      return;
    if (it->second.exec)
      cudaGraphExecDestroy(it->second.exec);
    graphs_.erase(it);
  }
  void synchronize() override { synchronizeStream("the step"); }

private:
  static constexpr size_t kStagingBytes = size_t(16) << 20;

  /// `bytes` (at most kStagingBytes) of pinned staging no pending copy
  /// reads; waits for the stream when the buffer is used up.
  char *stage(size_t bytes) {
    if (!staging_) {
      void *p = nullptr;
      check(cudaHostAlloc(&p, kStagingBytes, cudaHostAllocDefault), "cudaHostAlloc (staging)");
      staging_ = static_cast<char *>(p);
    }
    if (stagingUsed_ + bytes > kStagingBytes)
      synchronizeStream("cudaStreamSynchronize (staging)");
    char *at = staging_ + stagingUsed_;
    stagingUsed_ += (bytes + 255) & ~size_t(255);
    return at;
  }

  /// Whether [p, p + bytes) lies in one allocateHostBuffer buffer.
  bool inPinnedBuffer(const void *p, size_t bytes) const {
    const char *at = static_cast<const char *>(p);
    auto it = pinned_.upper_bound(at);
    if (it == pinned_.begin())
      return false;
    --it;
    return at + bytes <= it->first + it->second;
  }

  /// Waits for the stream; the staging buffer is free again. A fault that
  /// an earlier kernel caused surfaces here, far from its op: the message
  /// says how to find it.
  void synchronizeStream(const char *what) {
    cudaError_t e = cudaStreamSynchronize(ctx_.stream);
    if (e != cudaSuccess)
      fatal(std::string(what) + " failed: " + errorText(e) +
            (opts_.syncEachNode ? ""
                                : "; an asynchronous fault of an earlier kernel surfaces here: "
                                  "rerun with AMPC_CUDA_SYNC=1 to name the op that caused it"));
    stagingUsed_ = 0;
  }

  struct ProgramGraph {
    cudaGraphExec_t exec = nullptr;
    std::vector<unsigned> positions;
    uint64_t steps = 0;
    bool capturable = true;
  };

  /// Creates the stream and library handles on first use, so that merely
  /// creating the backend (the passes ask it what it supports) touches
  /// nothing.
  bool initialize(std::string &err) {
    if (initialized_)
      return initError_.empty() || (err = initError_, false);
    initialized_ = true;
    auto fail = [&](const std::string &what) {
      initError_ = what;
      err = what;
      return false;
    };
    cudaError_t e;
    if (!chooseDevice(err))
      return fail(err);
    if ((e = cudaSetDevice(ctx_.device)) != cudaSuccess)
      return fail("cudaSetDevice(" + std::to_string(ctx_.device) + ") failed: " + errorText(e));
    if ((e = cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking)) != cudaSuccess)
      return fail("cudaStreamCreate failed: " + errorText(e));
    if ((e = cudaMalloc(reinterpret_cast<void **>(&ctx_.deviceStep), sizeof(uint64_t))) !=
        cudaSuccess)
      return fail("cudaMalloc (step word) failed: " + errorText(e));
    cublasStatus_t s;
    if ((s = cublasCreate(&ctx_.cublas)) != CUBLAS_STATUS_SUCCESS)
      return fail("cublasCreate failed: " + errorText(s));
    if ((s = cublasSetStream(ctx_.cublas, ctx_.stream)) != CUBLAS_STATUS_SUCCESS)
      return fail("cublasSetStream failed: " + errorText(s));
    // f32 accumulation all the way, also in split-K reductions of half GEMMs.
    if ((s = cublasSetMathMode(
             ctx_.cublas,
             static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                       CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))) !=
        CUBLAS_STATUS_SUCCESS)
      return fail("cublasSetMathMode failed: " + errorText(s));
    constexpr size_t kCublasWorkspace = size_t(32) << 20;
    if ((e = cudaMalloc(&ctx_.cublasWorkspace, kCublasWorkspace)) != cudaSuccess)
      return fail("cudaMalloc (cuBLAS workspace) failed: " + errorText(e));
    if ((s = cublasSetWorkspace(ctx_.cublas, ctx_.cublasWorkspace, kCublasWorkspace)) !=
        CUBLAS_STATUS_SUCCESS)
      return fail("cublasSetWorkspace failed: " + errorText(s));
    cudnnStatus_t d;
    if ((d = cudnnCreate(&ctx_.cudnn)) != CUDNN_STATUS_SUCCESS)
      return fail("cudnnCreate failed: " + errorText(d));
    if ((d = cudnnSetStream(ctx_.cudnn, ctx_.stream)) != CUDNN_STATUS_SUCCESS)
      return fail("cudnnSetStream failed: " + errorText(d));
    return true;
  }

  /// ctx_.device: AMPC_CUDA_DEVICE's, or under a launcher that starts
  /// several ranks per machine the rank's local index modulo the devices
  /// (one GPU per rank where there are enough), or 0.
  bool chooseDevice(std::string &err) {
    int count = 0;
    if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
      cudaGetLastError();
      err = "no CUDA device";
      return false;
    }
    if (opts_.device == -2) {
      err = "AMPC_CUDA_DEVICE must be a device index (0 to " + std::to_string(count - 1) + ")";
      return false;
    }
    if (opts_.device >= 0) {
      if (opts_.device >= count) {
        err = "AMPC_CUDA_DEVICE=" + std::to_string(opts_.device) + ", but there are " +
              std::to_string(count) + " devices";
        return false;
      }
      ctx_.device = opts_.device;
      return true;
    }
    for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
      if (const char *v = std::getenv(name); v && *v) {
        ctx_.device = int(std::strtol(v, nullptr, 10) % count);
        if (ctx_.device < 0)
          ctx_.device = 0;
        return true;
      }
    ctx_.device = 0;
    return true;
  }

  CudaOptions opts_;
  CudaContext ctx_;
  bool ncclDecided_ = false;
  std::string ncclError_;
  bool initialized_ = false;
  std::string initError_;
  llvm::DenseMap<void *, uint64_t> sizes_;
  uint64_t inUse_ = 0;
  char *staging_ = nullptr;
  size_t stagingUsed_ = 0;
  /// allocateHostBuffer's page-locked buffers: start -> bytes.
  std::map<const char *, size_t> pinned_;
  llvm::DenseMap<const void *, ProgramGraph> graphs_;
};

} // namespace

std::unique_ptr<Backend> createCudaBackend(const CudaOptions &opts) {
  return std::make_unique<CudaBackend>(opts);
}

} // namespace ampc::cuda
