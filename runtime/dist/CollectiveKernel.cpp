//===- CollectiveKernel.cpp - all_reduce through the Communicator ----------===//
//
// One bucket, one collective: the operands are packed into one buffer in the
// node's dtype (f32, or their own half type), reduced in place, and unpacked
// into the results, so a bucket of many small gradients pays one latency.
//
//===----------------------------------------------------------------------===//
#include "runtime/dist/CollectiveKernel.h"

#include "ir/HalfConversion.h"
#include "ir/OpAttrs.h"
#include "kernels/common/CollectiveMath.h"
#include "runtime/dist/Communicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ampc::dist {

namespace {

void widen(const kernels::TensorArg &in, float *to) {
  int64_t n = in.numElements();
  switch (in.dtype()) {
  case DType::F32:
    std::memcpy(to, in.data, size_t(n) * sizeof(float));
    return;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      to[i] = bf16BitsToFloat(in.as<const uint16_t>()[i]);
    return;
  default: // f16 (inference admits f32, f16, bf16)
    for (int64_t i = 0; i < n; ++i)
      to[i] = halfBitsToFloat(in.as<const uint16_t>()[i]);
    return;
  }
}

/// The sums in `from` (wire dtype Wire), divided by `divisor` (the mean;
/// 1 for the sum) as they are stored: the division rides on the pass that
/// stores them (kernels/common/CollectiveMath.h, as on the GPU).
template <DType Wire>
void unpackFrom(const void *from, float divisor, const kernels::TensorArg &out) {
  int64_t n = out.numElements();
  switch (out.dtype()) {
  case DType::F32:
    for (int64_t i = 0; i < n; ++i)
      kernels::unpackReducedElement<Wire, DType::F32>(from, out.data, i, divisor);
    return;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      kernels::unpackReducedElement<Wire, DType::BF16>(from, out.data, i, divisor);
    return;
  default: // f16 (inference admits f32, f16, bf16)
    for (int64_t i = 0; i < n; ++i)
      kernels::unpackReducedElement<Wire, DType::F16>(from, out.data, i, divisor);
    return;
  }
}

class AllReduceKernel final : public kernels::NodeKernel {
public:
  AllReduceKernel(const Node &n, Communicator &comm) : comm_(comm) {
    attrs::AllReduce a(n);
    wire_ = a.dtype();
    op_ = a.reduce() == CollectiveReduce::Sum ? ReduceOp::Sum : ReduceOp::Mean;
    accumulate_ = static_cast<uint64_t>(a.accumulate());
    int64_t total = 0;
    for (const Value *v : n.operands())
      total += v->type().numElements();
    if (wire_ == DType::F32)
      wide_.resize(size_t(total));
    else
      half_.resize(size_t(total));
  }

  void run(const kernels::KernelArgs &args) override {
    // Mid-accumulation the gradients are not complete: pass them through.
    if ((args.step + 1) % accumulate_ != 0) {
      for (size_t i = 0; i < args.inputs.size(); ++i)
        if (args.out(i).data != args.in(i).data)
          std::memcpy(args.out(i).data, args.in(i).data, args.in(i).type->sizeInBytes());
      return;
    }
    std::string err;
    bool ok;
    if (wire_ == DType::F32) {
      int64_t at = 0;
      for (const kernels::TensorArg &in : args.inputs) {
        widen(in, wide_.data() + at);
        at += in.numElements();
      }
      // The communicator sums; the mean's division (in f32, as
      // Communicator::allReduce's Mean does it) happens while unpacking.
      ok = comm_.allReduce(wide_.data(), at, DType::F32, ReduceOp::Sum, err);
      at = 0;
      for (const kernels::TensorArg &out : args.outputs) {
        unpackFrom<DType::F32>(wide_.data() + at, divisor(), out);
        at += out.numElements();
      }
    } else {
      size_t at = 0;
      for (const kernels::TensorArg &in : args.inputs) {
        std::memcpy(half_.data() + at, in.data, in.type->sizeInBytes());
        at += size_t(in.numElements());
      }
      // Summed as the 16-bit values travel; the mean's division in f32
      // while unpacking, as for f32.
      ok = comm_.allReduceHalfWire(half_.data(), int64_t(at), wire_, ReduceOp::Sum, err);
      at = 0;
      for (const kernels::TensorArg &out : args.outputs) {
        if (wire_ == DType::BF16)
          unpackFrom<DType::BF16>(half_.data() + at, divisor(), out);
        else
          unpackFrom<DType::F16>(half_.data() + at, divisor(), out);
        at += size_t(out.numElements());
      }
    }
    if (!ok) {
      // Kernels do not fail, and this rank cannot go on alone: the others
      // wait in this collective. The launcher ends the job on the exit.
      std::fprintf(stderr, "ampc: error: rank %d of %d: all_reduce %%%s: %s\n", comm_.rank(),
                   comm_.size(), args.node->result(0)->name().str().c_str(), err.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

  uint64_t heldBytes() const override {
    return wide_.size() * sizeof(float) + half_.size() * sizeof(uint16_t);
  }

private:
  float divisor() const { return op_ == ReduceOp::Mean ? float(comm_.size()) : 1.0f; }

  Communicator &comm_;
  DType wire_ = DType::F32;
  ReduceOp op_ = ReduceOp::Mean;
  uint64_t accumulate_ = 1;
  std::vector<float> wide_;
  std::vector<uint16_t> half_;
};

} // namespace

bool checkCollective(const Node &n, const Communicator *comm, std::string &err) {
  if (n.kind() != OpKind::AllReduce) {
    err = n.opName().str() + ": no collective kernel";
    return false;
  }
  int64_t ranks = attrs::AllReduce(n).ranks();
  if (!comm || (comm->size() == 1 && ranks > 1)) {
    err = "all_reduce: the graph was rewritten for " + std::to_string(ranks) +
          " ranks of a data-parallel job; run it under a launcher (mpirun -np " +
          std::to_string(ranks) + " ampc ...)";
    return false;
  }
  if (comm->size() != ranks) {
    err = "all_reduce: the graph was rewritten for " + std::to_string(ranks) +
          " ranks, but this job has " + std::to_string(comm->size());
    return false;
  }
  return true;
}

std::unique_ptr<kernels::NodeKernel> prepareCollective(const Node &n, Communicator *comm,
                                                       std::string &err) {
  if (!checkCollective(n, comm, err))
    return nullptr;
  return std::make_unique<AllReduceKernel>(n, *comm);
}

} // namespace ampc::dist
