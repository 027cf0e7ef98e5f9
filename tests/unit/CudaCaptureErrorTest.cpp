//===- CudaCaptureErrorTest.cpp - Failures while a step is captured --------===//
//
// During a step there is no way back to the caller, so a failing CUDA call
// ends the process with its op named; but while the step is being captured
// into a CUDA graph, a failure is recorded in the context instead, and the
// backend runs the step eagerly (docs/cuda.md, "CUDA graphs"). Host logic
// only: runs wherever the CUDA backend is built, device or not.
//
//===----------------------------------------------------------------------===//
#ifdef AMPC_HAVE_CUDA

#include "kernels/cuda/CudaContext.h"

#include <gtest/gtest.h>

namespace {

using namespace ampc::cuda;

TEST(CudaCaptureErrorTest, AFailureWhileCapturingIsRecordedNotFatal) {
  CudaContext ctx;
  ctx.capturing = true;
  setCapture(&ctx);
  check(cudaErrorInvalidValue, "launch of the relu kernel");
  check(cudaErrorMemoryAllocation, "launch of the second kernel");
  setCapture(nullptr);
  EXPECT_TRUE(ctx.captureFailed);
  // The first failure is the one reported.
  EXPECT_NE(ctx.captureError.find("launch of the relu kernel failed"), std::string::npos)
      << ctx.captureError;
  EXPECT_NE(ctx.captureError.find("cudaErrorInvalidValue"), std::string::npos) << ctx.captureError;
  EXPECT_EQ(ctx.captureError.find("second"), std::string::npos) << ctx.captureError;
}

TEST(CudaCaptureErrorTest, OutsideACaptureAFailureEndsTheProcessNamingTheCall) {
  EXPECT_EXIT(check(cudaErrorInvalidValue, "cudaMemcpyAsync (host to device)"),
              ::testing::ExitedWithCode(1),
              "error: cuda: cudaMemcpyAsync \\(host to device\\) failed: error 1 "
              "\\(cudaErrorInvalidValue");
  // A context that is not capturing does not take the failure either.
  CudaContext idle;
  setCapture(&idle);
  EXPECT_EXIT(check(cudaErrorInvalidValue, "a launch"), ::testing::ExitedWithCode(1),
              "a launch failed");
  setCapture(nullptr);
}

} // namespace

#endif
