//===- StructuralKeys.h - Which values of two rewrites are the same -*- C++ -*-===//
//
// Two opt levels of one model rewrite the same graph differently: casts
// appear and vanish, backward and optimizer nodes get fresh names, the
// loss scaler replaces autodiff's seed and adds operands to the updates.
// A structural key names a value by what computes it, so that values of the
// two graphs with equal keys hold the same quantity: `ampc diff` matches
// nodes by it and `ampc compare` the numbers they produce.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PASSES_STRUCTURALKEYS_H
#define AMPC_PASSES_STRUCTURALKEYS_H

#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdint>

namespace ampc {

/// Every value's key: a graph input or state tensor by its name; a cast's
/// result as what it casts; a node's result by its op, the attributes its op
/// declares (as set, or by default; dtype attributes left out, since they
/// are the level's precision), its operands' keys and its result index. So
/// the three slices that split a fused q/k/v projection, which differ only
/// in their attributes, have three keys. Where several nodes compute the
/// same (op, attributes, operands), the k-th of them in graph order gets a
/// key of its own, so that the pairing is one to one. The loss scaler's
/// additions are looked through: its scale (the seed of the backward pass,
/// scaled) keys as autodiff's unit seed, and operands that the loss-scale
/// nodes make (the skip flag, the unscale factor) are left out of their
/// users' keys. Gradients with equal keys are then equal up to the loss
/// scale.
llvm::DenseMap<const Value *, uint64_t> computeStructuralKeys(const Graph &g);

} // namespace ampc

#endif
