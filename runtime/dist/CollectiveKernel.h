//===- CollectiveKernel.h - The kernels of collective ops -------*- C++ -*-===//
//
// A collective op (OpInfo::collective: all_reduce) has no backend kernel:
// Program::compile binds it to one of these, which moves the node's
// operands through the job's Communicator.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DIST_COLLECTIVEKERNEL_H
#define AMPC_RUNTIME_DIST_COLLECTIVEKERNEL_H

#include "ir/Graph.h"
#include "kernels/KernelArgs.h"

#include <memory>
#include <string>

namespace ampc::dist {

class Communicator;

/// The kernel of collective node `n` over `comm`. Null with `err` when there
/// is no communicator, its size is not the node's `ranks`, or the operands
/// live where the host cannot reach them (`hostAccessible` false: a GPU,
/// whose collectives are NCCL's, not built yet).
std::unique_ptr<kernels::NodeKernel> prepareCollective(const Node &n, Communicator *comm,
                                                       bool hostAccessible, std::string &err);

} // namespace ampc::dist

#endif
