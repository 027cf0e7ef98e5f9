//===- CudaCollectiveTest.cpp - all_reduce on the CUDA backend (NCCL) ------===//
//
// A job of one rank, which NCCL serves like any other: the CUDA backend's
// all_reduce (pack, ncclAllReduce, unpack with the mean's division) must
// give the bits the CPU route gives, captured into a CUDA graph or not, and
// AMPC_NCCL=0 must stage it through the host instead. Without a CUDA device
// every test here is skipped, naming the reason; two ranks on two GPUs are
// tests/dist/check_data_parallel.py's `nccl` check.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "kernels/common/Storage.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"
#include "runtime/dist/Communicator.h"

#if AMPC_HAVE_NCCL
#include "kernels/cuda/NcclLibrary.h"
#endif

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

using namespace ampc;

namespace {

std::unique_ptr<Graph> parse(const std::string &text) {
  DiagnosticEngine diag;
  auto g = parseGraph(text, "collective.ir", diag);
  std::string messages;
  for (const auto &d : diag.diagnostics())
    messages += d.str() + "\n";
  EXPECT_TRUE(g && verifyGraph(*g, diag)) << messages;
  return g;
}

/// A bucket of a bf16 and an f32 gradient, and a half-wire all-reduce.
std::string bucketGraph(const std::string &attrs) {
  return "graph @bucket {\n"
         "  input %a : bf16[1000]\n"
         "  input %b : f32[333]\n"
         "  input %c : bf16[77]\n"
         "  %a.avg, %b.avg = all_reduce(%a, %b) {" +
         attrs +
         "} : (bf16[1000], f32[333]) -> (bf16[1000], f32[333])\n"
         "  %c.sum = all_reduce(%c) {dtype = bf16, reduce = \"sum\", " +
         attrs +
         "} : (bf16[77]) -> bf16[77]\n"
         "  output %a.avg, %b.avg, %c.sum\n"
         "}\n";
}

struct StepsRun {
  std::vector<std::vector<double>> outputs;
  DeviceActivity activity;
};

/// `steps` steps of `g` on `backendName`, the inputs a function of the step.
StepsRun runOn(const Graph &g, const char *backendName, int steps) {
  StepsRun r;
  std::string err;
  std::unique_ptr<Backend> backend = createBackend(backendName, err);
  EXPECT_TRUE(backend) << err;
  if (!backend)
    return r;
  std::unique_ptr<dist::Communicator> comm = dist::createLocalCommunicator();
  DiagnosticEngine diag;
  CompileOptions opts;
  opts.communicator = comm.get();
  std::unique_ptr<Program> p = Program::compile(g, *backend, diag, opts);
  EXPECT_TRUE(p);
  if (!p)
    return r;
  for (int step = 0; step < steps; ++step) {
    for (const char *name : {"a", "b", "c"}) {
      const Value *v = g.lookup(name);
      for (int64_t i = 0; i < v->type().numElements(); ++i)
        kernels::storeFromDouble(v->dtype(), p->data(v), i,
                                 0.37 * double(i % 101) - 7.5 + 1.25 * step);
    }
    p->run(uint64_t(step));
  }
  for (const Value *v : g.outputs()) {
    std::vector<double> values(size_t(v->type().numElements()));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = kernels::loadAsDouble(v->dtype(), p->data(v), int64_t(i));
    r.outputs.push_back(std::move(values));
  }
  r.activity = p->deviceActivity();
  return r;
}

#if AMPC_HAVE_NCCL
// No device needed: NCCL is opened at run time (not linked), so this checks
// that the library is found and has the functions the backend calls.
TEST(CudaCollective, NcclOpensAtRunTime) {
  std::string why;
  const cuda::NcclLibrary *nccl = cuda::ncclLibrary(why);
  ASSERT_TRUE(nccl) << why;
  int version = 0;
  ASSERT_EQ(nccl->getVersion(&version), ncclSuccess);
  EXPECT_EQ(version / 10000, NCCL_MAJOR)
      << "opened NCCL " << version << ", built against " << NCCL_VERSION_CODE;
  EXPECT_NE(nccl->describe(ncclInvalidArgument, nullptr).find("invalid argument"),
            std::string::npos)
      << nccl->describe(ncclInvalidArgument, nullptr);
}
#endif

TEST(CudaCollective, NcclGivesTheBitsOfTheCpuRoute) {
  AMPC_REQUIRE_CUDA_DEVICE();
  auto g = parse(bucketGraph("ranks = 1"));
  ASSERT_TRUE(g);
  // Four steps: the first eager, the second captured, the rest replayed.
  StepsRun cpu = runOn(*g, "cpu-ref", 4), cuda = runOn(*g, "cuda", 4);
  EXPECT_EQ(cuda.outputs, cpu.outputs);
#if AMPC_HAVE_NCCL
  EXPECT_EQ(cuda.activity.deviceCollectiveNodes, 2u);
  EXPECT_EQ(cuda.activity.hostFallbackNodes, 0u);
  EXPECT_GE(cuda.activity.replayedSteps, 1u) << "the NCCL step was not captured";
#else
  EXPECT_EQ(cuda.activity.hostFallbackNodes, 2u) << "no NCCL: staged through the host";
#endif
}

TEST(CudaCollective, AccumulationRunsEagerlyAndReducesOncePerGroup) {
  AMPC_REQUIRE_CUDA_DEVICE();
  auto g = parse(bucketGraph("ranks = 1, accumulate = 2"));
  ASSERT_TRUE(g);
  StepsRun cpu = runOn(*g, "cpu-ref", 3), cuda = runOn(*g, "cuda", 3);
  EXPECT_EQ(cuda.outputs, cpu.outputs);
#if AMPC_HAVE_NCCL
  EXPECT_EQ(cuda.activity.deviceCollectiveNodes, 2u);
  EXPECT_EQ(cuda.activity.capturedSteps + cuda.activity.replayedSteps, 0u);
#endif
}

TEST(CudaCollective, SwitchedOffNcclStagesThroughTheHost) {
  AMPC_REQUIRE_CUDA_DEVICE();
  auto g = parse(bucketGraph("ranks = 1"));
  ASSERT_TRUE(g);
  setenv("AMPC_NCCL", "0", 1);
  StepsRun cuda = runOn(*g, "cuda", 2);
  unsetenv("AMPC_NCCL");
  StepsRun cpu = runOn(*g, "cpu-ref", 2);
  EXPECT_EQ(cuda.outputs, cpu.outputs);
  EXPECT_EQ(cuda.activity.deviceCollectiveNodes, 0u);
  EXPECT_EQ(cuda.activity.hostFallbackNodes, 2u);
}

} // namespace
