//===- LocalCommunicator.cpp - One process: collectives are the identity ---===//
#include "runtime/dist/Communicator.h"

#include <cstdlib>

namespace ampc::dist {

namespace {

class LocalCommunicator final : public Communicator {
public:
  llvm::StringRef name() const override { return "local"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  // The mean of one rank's values is those values: nothing to divide.
  bool allReduce(void *, int64_t, DType, ReduceOp, std::string &) override { return true; }
  bool allReduceHalfWire(uint16_t *, int64_t, DType, ReduceOp, std::string &) override {
    return true;
  }
  bool broadcast(void *, size_t, int root, std::string &err) override {
    if (root == 0)
      return true;
    err = "broadcast from rank " + std::to_string(root) + " of a 1-process job";
    return false;
  }
  bool barrier(std::string &) override { return true; }
};

class PlanningCommunicator final : public Communicator {
public:
  explicit PlanningCommunicator(int size) : size_(size) {}
  llvm::StringRef name() const override { return "planning"; }
  bool planningOnly() const override { return true; }
  int rank() const override { return 0; }
  int size() const override { return size_; }
  bool allReduce(void *, int64_t, DType, ReduceOp, std::string &err) override { return fail(err); }
  bool allReduceHalfWire(uint16_t *, int64_t, DType, ReduceOp, std::string &err) override {
    return fail(err);
  }
  bool broadcast(void *, size_t, int, std::string &err) override { return fail(err); }
  bool barrier(std::string &err) override { return fail(err); }

private:
  bool fail(std::string &err) {
    err = "a job of " + std::to_string(size_) +
          " ranks planned in one process cannot run "
          "collectives; start it with mpirun -np " +
          std::to_string(size_);
    return false;
  }
  int size_;
};

} // namespace

std::unique_ptr<Communicator> createPlanningCommunicator(int size) {
  return std::make_unique<PlanningCommunicator>(size);
}

std::unique_ptr<Communicator> createLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

bool launchedByMpiLauncher() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(var))
      return true;
  return false;
}

} // namespace ampc::dist
