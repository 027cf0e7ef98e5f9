//===- CpuTrainingEquivalenceTest.cpp - Whole training steps: cpu vs cpu-ref ===//
//
// The transformer example (embeddings, layernorm, attention, gelu, Adam)
// trained one optimizer step at a time on the `cpu` backend and on the
// reference from the same state, at O0-O3: each step's parameter update
// must match the reference's within the tolerances of
// TrainingEquivalence.h (1e-3 of the update at O0, 0.15 at the bf16
// levels). At O1-O3 this runs the bf16 paths whose bits differ from the
// reference's (oneDNN's bf16 GEMMs and, on CPUs with AVX512_BF16, the
// attention's dot products) next to those that keep them (gelu's tables,
// the elementwise loops).
//
//===----------------------------------------------------------------------===//
#include "TrainingEquivalence.h"

#include "kernels/cpu/LoopKernels.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace ampc;
using namespace ampc::testing::training;

TEST(CpuTrainingEquivalence, TransformerStepsTrackTheReferenceAtEveryLevel) {
  for (const char *level : {"O0", "O1", "O2", "O3"}) {
    SCOPED_TRACE(level);
    std::unique_ptr<Backend> cpu = createCpuBackend();
    expectUpdatesTrack(*cpu, "cpu", "transformer.yaml", level, "bf16", /*accumulate=*/1,
                       /*steps=*/3, /*expectAllOnDevice=*/false);
  }
}

TEST(CpuTrainingEquivalence, TransformerStepsTrackTheReferenceWithExactAttention) {
  // The same at O2 with bf16 attention in its exact loops: the dot
  // products' margin above is theirs, not the comparison's.
  kernels::cpu::setAttentionDotProductsAllowed(false);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  expectUpdatesTrack(*cpu, "cpu", "transformer.yaml", "O2", "bf16", /*accumulate=*/1,
                     /*steps=*/3, /*expectAllOnDevice=*/false);
  kernels::cpu::setAttentionDotProductsAllowed(true);
}

} // namespace
