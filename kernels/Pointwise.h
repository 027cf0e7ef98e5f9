//===- Pointwise.h - The element functor of a pointwise node ----*- C++ -*-===//
//
// Host side of ir/Pointwise.def: the element functors (kernels/common) and
// how a backend gets the one of a node, its state read from the node's
// attributes when the kernel is prepared.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_POINTWISE_H
#define AMPC_KERNELS_POINTWISE_H

#include "kernels/common/ActivationMath.h"
#include "kernels/common/ElementwiseMath.h"
#include "kernels/common/UnaryMath.h"

namespace ampc::kernels {

/// The functor Fn of a node (`attrs`: a Node or KernelArgs); stateless
/// functors have no fromAttrs.
template <class Fn, class Attrs> Fn makeElementFn(const Attrs &attrs) {
  if constexpr (requires { Fn::fromAttrs(attrs); })
    return Fn::fromAttrs(attrs);
  else
    return Fn{};
}

/// The backward functor of activation Fn's backward node (which carries the
/// forward's attributes).
template <class Fn, class Attrs> GradOf<Fn> makeGradFn(const Attrs &attrs) {
  return GradOf<Fn>{makeElementFn<Fn>(attrs)};
}

} // namespace ampc::kernels

#endif
