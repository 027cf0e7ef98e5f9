//===- Loops.cpp - Our own vectorised CPU kernels: which op gets which -----===//
//
// The table of ops with a loop kernel (kernels/cpu/Loop*.cpp) and what the
// loops share at run time: the CPU's vector width and OpenMP's threads. An op
// not in the table, or a node whose dtypes or shapes its preparer declines,
// runs the reference kernel.
//
//===----------------------------------------------------------------------===//
#include "kernels/Pointwise.h"
#include "kernels/cpu/Families.h"
#include "kernels/cpu/LoopFamilies.h"
#include "kernels/cpu/LoopKernels.h"
#include "kernels/cpu/LoopSupport.h"

#include <atomic>
#include <cstring>

#include <omp.h>

namespace ampc::kernels::cpu {

namespace {

using Preparer = std::unique_ptr<NodeKernel> (*)(const Node &n);

struct LoopOp {
  OpKind kind;
  Preparer prepare;
};

// A table rather than a switch over OpKind: most ops have no loop kernel,
// and a new op should not have to be listed here to build.
constexpr LoopOp kLoopOps[] = {
#define AMPC_POINTWISE_UNARY(Op, Fn) {OpKind::Op, prepareLoopUnary<Fn>},
#define AMPC_POINTWISE_GRAD(Op, GradOp, Fn, Saved) {OpKind::GradOp, prepareLoopGrad<Fn>},
#define AMPC_POINTWISE_BINARY(Op, Fn) {OpKind::Op, prepareLoopBinary<Fn>},
#include "ir/Pointwise.def"
    {OpKind::Cast, prepareLoopCast},
    {OpKind::MseLoss, prepareLoopMseLoss},
    {OpKind::MseLossGrad, prepareLoopMseLossGrad},
    {OpKind::ReduceSum, prepareLoopReduceSum},
    {OpKind::ReduceMean, prepareLoopReduceMean},
    {OpKind::GlobalAvgPool, prepareLoopGlobalAvgPool},
    {OpKind::GlobalAvgPoolGrad, prepareLoopGlobalAvgPoolGrad},
    {OpKind::BatchNorm2d, prepareLoopBatchNorm2d},
    {OpKind::BatchNorm2dGrad, prepareLoopBatchNorm2dGrad},
    {OpKind::LayerNorm, prepareLoopLayerNorm},
    {OpKind::LayerNormGrad, prepareLoopLayerNormGrad},
    {OpKind::SgdUpdate, prepareLoopSgdUpdate},
    {OpKind::SgdMomentumUpdate, prepareLoopSgdMomentumUpdate},
    {OpKind::AdamUpdate, prepareLoopAdamUpdate},
    {OpKind::LambUpdate, prepareLoopLambUpdate},
    {OpKind::EmaUpdate, prepareLoopEmaUpdate},
    {OpKind::AccumulateGrad, prepareLoopAccumulateGrad},
    {OpKind::UnscaleCheck, prepareLoopUnscaleCheck},
    {OpKind::Softmax, prepareLoopSoftmax},
    {OpKind::LogSoftmax, prepareLoopLogSoftmax},
    {OpKind::SoftmaxGrad, prepareLoopSoftmaxGrad},
    {OpKind::LogSoftmaxGrad, prepareLoopLogSoftmaxGrad},
    {OpKind::CrossEntropy, prepareLoopCrossEntropy},
    {OpKind::CrossEntropyGrad, prepareLoopCrossEntropyGrad},
    {OpKind::ScaledDotProductAttention, prepareLoopAttention},
    {OpKind::ScaledDotProductAttentionGrad, prepareLoopAttentionGrad},
    {OpKind::MaxPool2d, prepareLoopMaxPool2d},
    {OpKind::AvgPool2d, prepareLoopAvgPool2d},
    {OpKind::MaxPool2dGrad, prepareLoopMaxPool2dGrad},
    {OpKind::AvgPool2dGrad, prepareLoopAvgPool2dGrad},
    {OpKind::Dropout, prepareLoopDropout},
    {OpKind::Flatten, prepareLoopReshape},
    {OpKind::Reshape, prepareLoopReshape},
    {OpKind::Transpose, prepareLoopTranspose},
    {OpKind::Permute, prepareLoopPermute},
    {OpKind::BroadcastTo, prepareLoopBroadcastTo},
    {OpKind::Slice, prepareLoopSlice},
    {OpKind::Concat, prepareLoopConcat},
    {OpKind::Embedding, prepareLoopEmbedding},
    {OpKind::EmbeddingGrad, prepareLoopEmbeddingGrad},
    {OpKind::Fill, prepareLoopFill},
    {OpKind::Where, prepareLoopWhere},
    {OpKind::Conv2dGradWeight, prepareLoopConv2dGradWeight},
    {OpKind::GlobalNorm, prepareLoopGlobalNorm},
};

std::atomic<bool> wideVectorsAllowed{true};

} // namespace

std::unique_ptr<NodeKernel> prepareLoopKernel(const Node &n) {
  for (const LoopOp &op : kLoopOps)
    if (op.kind == n.kind())
      return op.prepare(n);
  return nullptr;
}

bool isLoopKernel(const NodeKernel &k) { return dynamic_cast<const LoopKernel *>(&k) != nullptr; }

void setLoopWideVectorsAllowed(bool allowed) { wideVectorsAllowed = allowed; }

bool loopsUseWideVectors() {
  return cpuHasAvx512() && wideVectorsAllowed.load(std::memory_order_relaxed);
}

int loopThreads() { return omp_get_max_threads(); }

void copyInParallel(const void *from, void *to, int64_t bytes) {
  if (from == to)
    return;
  const char *src = static_cast<const char *>(from);
  char *dst = static_cast<char *>(to);
  // memcpy vectorizes itself: no wide copy needed, only the threads.
  auto copy = [=](int64_t begin, int64_t end) {
    std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin));
  };
  parallelFor(bytes, kElementwiseGrain * 4, copy, /*alignment=*/4096);
}

} // namespace ampc::kernels::cpu
