//===- CollectiveKernel.h - The kernels of collective ops -------*- C++ -*-===//
//
// A collective op (OpInfo::collective: all_reduce) has no backend kernel:
// Program::compile binds it to one of these, which moves the node's
// operands through the job's Communicator in host memory. On a GPU the
// CUDA backend runs them with NCCL on the device instead
// (Backend::deviceCollective), or, where NCCL cannot serve (two ranks on one
// GPU, AMPC_NCCL=0), stages these through its host fallback.
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

/// Whether collective node `n` can run in this job: a communicator of the
/// node's `ranks`. False with `err` saying what is wrong.
bool checkCollective(const Node &n, const Communicator *comm, std::string &err);

/// The kernel of collective node `n` over `comm`, on host memory (a device
/// backend runs it through Backend::hostKernel, staged through the host).
/// Null with `err` when there is no communicator or its size is not the
/// node's `ranks`.
std::unique_ptr<kernels::NodeKernel> prepareCollective(const Node &n, Communicator *comm,
                                                       std::string &err);

} // namespace ampc::dist

#endif
