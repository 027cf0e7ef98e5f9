//===- CommunicatorTest.cpp - The single-process communicator --------------===//
//
// The MPI one is tested under mpirun (tests/dist, ctest label dist).
//
//===----------------------------------------------------------------------===//
#include "runtime/dist/Communicator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

using namespace ampc;
using namespace ampc::dist;

TEST(CommunicatorTest, OneProcessLeavesDataAsItIs) {
  std::unique_ptr<Communicator> c = createLocalCommunicator();
  EXPECT_EQ(c->name(), "local");
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  std::vector<float> v = {1.5f, -2.0f, 3.25f};
  std::string err;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max})
    EXPECT_TRUE(c->allReduce(v.data(), 3, DType::F32, op, err)) << err;
  EXPECT_EQ(v, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_TRUE(c->broadcast(v.data(), sizeof(float) * 3, 0, err));
  EXPECT_FALSE(c->broadcast(v.data(), sizeof(float) * 3, 1, err));
  EXPECT_EQ(err, "broadcast from rank 1 of a 1-process job");
  EXPECT_TRUE(c->barrier(err));
  std::vector<uint16_t> h = {0x3f80, 0x4000};
  EXPECT_TRUE(c->allReduceHalfWire(h.data(), 2, DType::BF16, ReduceOp::Mean, err));
  EXPECT_EQ(h, (std::vector<uint16_t>{0x3f80, 0x4000}));
}

TEST(CommunicatorTest, APlannedJobHasItsSizeButRunsNoCollective) {
  std::unique_ptr<Communicator> c = createPlanningCommunicator(4);
  EXPECT_EQ(c->size(), 4);
  EXPECT_EQ(c->rank(), 0);
  float v = 1;
  std::string err;
  EXPECT_FALSE(c->allReduce(&v, 1, DType::F32, ReduceOp::Sum, err));
  EXPECT_EQ(err, "a job of 4 ranks planned in one process cannot run collectives; start it with "
                 "mpirun -np 4");
}

TEST(CommunicatorTest, ALauncherIsRecognisedByItsEnvironment) {
  const char *saved = std::getenv("OMPI_COMM_WORLD_SIZE");
  std::string keep = saved ? saved : "";
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMIX_RANK");
  unsetenv("PMI_SIZE");
  EXPECT_FALSE(launchedByMpiLauncher());
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_TRUE(launchedByMpiLauncher());
  if (saved)
    setenv("OMPI_COMM_WORLD_SIZE", keep.c_str(), 1);
  else
    unsetenv("OMPI_COMM_WORLD_SIZE");
}
