//===- NcclKernels.cpp - all_reduce with NCCL on the backend's stream -----===//
//
// One bucket, one NCCL call, as on the CPU route: the operands are cast into
// one packed device buffer of the node's wire dtype (f32, or the gradients'
// own half type), summed in place by ncclAllReduce on the step's stream,
// and unpacked into the results with the mean's division
// (kernels/common/CollectiveMath.h). NCCL sums in the wire type, each
// partial sum rounded to it, and every rank ends with the same bits.
//
// The packing runs on the step's stream, where the gradients were made; the
// reduction and the unpacking on NCCL's stream (CudaContext::ncclStream),
// which waits for the packing through an event. The kernel finishes later
// (NodeKernel::finishesLater): the step's stream goes on with the rest of
// the backward and waits for the unpacking's event only before the first
// node that reads a result (Program calls finish() there), so the
// reduction overlaps that work. In a captured step the two events are the
// graph's fork and join.
//
// The kernel is captured into the step's CUDA graph like any other, except
// under gradient accumulation: mid-accumulation the gradients pass through
// without a collective, a choice made on the host from the step, which a
// captured graph could not replay; such a step runs eagerly.
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/CudaContext.h"

#include "ir/OpAttrs.h"
#include "kernels/cuda/NcclLibrary.h"

namespace ampc::cuda {

namespace {

bool ncclTypeOf(DType t, ncclDataType_t &out) {
  switch (t) {
  case DType::F32:
    out = ncclFloat32;
    return true;
  case DType::F16:
    out = ncclFloat16;
    return true;
  case DType::BF16:
    out = ncclBfloat16;
    return true;
  default:
    return false;
  }
}

class NcclAllReduceKernel final : public kernels::NodeKernel {
public:
  NcclAllReduceKernel(CudaContext &ctx, const NcclLibrary &nccl, const Node &n, DType wire,
                      ncclDataType_t ncclType, int64_t total)
      : ctx_(ctx), nccl_(nccl), wire_(wire), ncclType_(ncclType), total_(total),
        packed_(size_t(total) * dtypeSize(wire), n) {
    attrs::AllReduce a(n);
    divisor_ = a.reduce() == CollectiveReduce::Mean ? float(ctx.ncclRanks) : 1.0f;
    accumulate_ = static_cast<uint64_t>(a.accumulate());
    check(cudaEventCreateWithFlags(&packedEvent_, cudaEventDisableTiming), "cudaEventCreate", &n);
    check(cudaEventCreateWithFlags(&doneEvent_, cudaEventDisableTiming), "cudaEventCreate", &n);
  }
  ~NcclAllReduceKernel() override {
    if (packedEvent_)
      cudaEventDestroy(packedEvent_);
    if (doneEvent_)
      cudaEventDestroy(doneEvent_);
  }
  NcclAllReduceKernel(const NcclAllReduceKernel &) = delete;
  NcclAllReduceKernel &operator=(const NcclAllReduceKernel &) = delete;

  bool finishesLater() const override { return true; }
  void finish(const kernels::KernelArgs &args) override {
    if (!started_)
      return; // passed through on the step's stream
    started_ = false;
    check(cudaStreamWaitEvent(ctx_.stream, doneEvent_, 0), "cudaStreamWaitEvent (all_reduce)",
          args.node);
  }

  void run(const kernels::KernelArgs &args) override {
    const Node *n = args.node;
    kernels::cuda::Launch l = ctx_.launch();
    if (accumulate_ > 1) {
      if (ctx_.capturing) {
        ctx_.captureFailed = true; // see the file comment
        return;
      }
      if ((args.step + 1) % accumulate_ != 0) {
        for (size_t i = 0; i < args.inputs.size(); ++i)
          if (args.out(i).data != args.in(i).data)
            check(cudaMemcpyAsync(args.out(i).data, args.in(i).data, args.in(i).type->sizeInBytes(),
                                  cudaMemcpyDeviceToDevice, ctx_.stream),
                  "cudaMemcpyAsync (all_reduce pass-through)", n);
        return;
      }
    }
    char *packed = static_cast<char *>(packed_.ptr);
    size_t wireSize = dtypeSize(wire_);
    int64_t at = 0;
    for (const kernels::TensorArg &in : args.inputs) {
      check(kernels::cuda::cast(l, tensorOf(in),
                                {packed + size_t(at) * wireSize, wire_, in.numElements()}),
            "all_reduce packing", n);
      at += in.numElements();
    }
    check(cudaEventRecord(packedEvent_, ctx_.stream), "cudaEventRecord (all_reduce packed)", n);
    check(cudaStreamWaitEvent(ctx_.ncclStream, packedEvent_, 0),
          "cudaStreamWaitEvent (all_reduce packed)", n);
    ncclResult_t r = nccl_.allReduce(packed, packed, size_t(total_), ncclType_, ncclSum, ctx_.nccl,
                                     ctx_.ncclStream);
    if (r != ncclSuccess)
      reportFailure("ncclAllReduce", nccl_.describe(r, ctx_.nccl), n);
    kernels::cuda::Launch onNccl{ctx_.ncclStream, l.step};
    at = 0;
    for (const kernels::TensorArg &out : args.outputs) {
      check(kernels::cuda::unpackReduced(onNccl,
                                         {packed + size_t(at) * wireSize, wire_, out.numElements()},
                                         divisor_, mutableOf(out)),
            "all_reduce unpacking", n);
      at += out.numElements();
    }
    check(cudaEventRecord(doneEvent_, ctx_.ncclStream), "cudaEventRecord (all_reduce done)", n);
    started_ = true;
  }

  uint64_t heldBytes() const override { return uint64_t(total_) * dtypeSize(wire_); }

private:
  CudaContext &ctx_;
  const NcclLibrary &nccl_;
  DType wire_;
  ncclDataType_t ncclType_;
  int64_t total_;
  DeviceScratch packed_;
  float divisor_ = 1;
  uint64_t accumulate_ = 1;
  cudaEvent_t packedEvent_ = nullptr, doneEvent_ = nullptr;
  /// run() issued the reduction and finish() has not joined it yet.
  bool started_ = false;
};

} // namespace

std::unique_ptr<kernels::NodeKernel> prepareNcclKernel(CudaContext &ctx, const Node &n,
                                                       std::string &err) {
  if (n.kind() != OpKind::AllReduce) {
    err = n.opName().str() + ": no NCCL kernel";
    return nullptr;
  }
  if (!ctx.nccl || !ctx.ncclStream) {
    err = "all_reduce: no NCCL communicator";
    return nullptr;
  }
  attrs::AllReduce a(n);
  if (a.ranks() != ctx.ncclRanks) {
    err = "all_reduce: the graph was rewritten for " + std::to_string(a.ranks()) +
          " ranks, but NCCL's communicator has " + std::to_string(ctx.ncclRanks);
    return nullptr;
  }
  DType wire = a.dtype();
  ncclDataType_t type;
  if (!ncclTypeOf(wire, type)) {
    err = "all_reduce: NCCL cannot reduce " + dtypeName(wire).str();
    return nullptr;
  }
  const NcclLibrary *nccl = ncclLibrary(err);
  if (!nccl)
    return nullptr;
  int64_t total = 0;
  for (const Value *v : n.operands())
    total += v->type().numElements();
  return std::make_unique<NcclAllReduceKernel>(ctx, *nccl, n, wire, type, total);
}

} // namespace ampc::cuda
