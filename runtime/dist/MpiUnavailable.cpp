//===- MpiUnavailable.cpp - A build without Open MPI -----------------------===//
#include "runtime/dist/Communicator.h"

namespace ampc::dist {

bool mpiAvailable() { return false; }

std::unique_ptr<Communicator> createMpiCommunicator(std::string &err) {
  err = "this ampc was built without MPI (install libopenmpi-dev, e.g. with "
        "scripts/install-deps.sh, and reconfigure)";
  return nullptr;
}

} // namespace ampc::dist
