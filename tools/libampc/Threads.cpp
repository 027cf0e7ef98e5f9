//===- Threads.cpp - The public face of runtime/Threads.h --------------------===//
#include "ampc/Threads.h"

#include "runtime/Threads.h"

namespace ampc::api {

int availableCores() { return ampc::allowedCores(); }
void setThreads(int n) { ampc::setKernelThreads(n); }
int threads() { return ampc::kernelThreads(); }
std::string threadsWarning(int n) { return ampc::threadOversubscription(n); }

} // namespace ampc::api
