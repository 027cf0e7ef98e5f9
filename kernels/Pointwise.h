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

#include "ir/Graph.h"
#include "ir/OpAttrs.h"

#include <type_traits>

namespace ampc::kernels {

/// The node whose attributes a functor reads: a Node, or a KernelArgs' node.
inline const Node &attrNode(const Node &n) { return n; }
template <class A>
requires requires(const A &a) { a.node; }
const Node &attrNode(const A &a) { return *a.node; }

/// A functor's state from its node's typed attributes (ir/OpAttrs.def);
/// stateless functors are default-constructed. Host only: the functors
/// themselves (kernels/common) are host/device code and know no IR.
template <class Fn> struct ElementFnState {
  static Fn make(const Node &) { return Fn{}; }
};
template <> struct ElementFnState<GeluFn> {
  static GeluFn make(const Node &n) {
    return GeluFn{attrs::Gelu(n).approximate() == GeluApproximate::Tanh};
  }
};
template <> struct ElementFnState<ClampFn> {
  static ClampFn make(const Node &n) {
    attrs::Clamp a(n);
    return ClampFn{a.min(), a.max()};
  }
};
template <> struct ElementFnState<PowFn> {
  static PowFn make(const Node &n) { return PowFn{attrs::Pow(n).exponent()}; }
};
template <> struct ElementFnState<HardSigmoidFn> {
  static HardSigmoidFn make(const Node &n) {
    attrs::HardSigmoid a(n);
    return HardSigmoidFn{a.alpha(), a.beta()};
  }
};
template <> struct ElementFnState<LeakyReluFn> {
  static LeakyReluFn make(const Node &n) {
    return LeakyReluFn{attrs::LeakyRelu(n).negative_slope()};
  }
};
template <> struct ElementFnState<EluFn> {
  static EluFn make(const Node &n) { return EluFn{attrs::Elu(n).alpha()}; }
};
template <> struct ElementFnState<ScaleFn> {
  static ScaleFn make(const Node &n) { return ScaleFn{attrs::Scale(n).factor()}; }
};

/// The functor Fn of a node (`attrs`: a Node or KernelArgs).
template <class Fn, class Attrs> Fn makeElementFn(const Attrs &attrs) {
  return ElementFnState<Fn>::make(attrNode(attrs));
}

/// Calls use(f) with node `n`'s element functor: Fn's, except that gelu's
/// erf form is GeluErfFn, so that a loop over it has no call of the tanh
/// form's libm function in it and vectorizes. Returns what `use` returns.
template <class Fn, class Use> decltype(auto) withElementFn(const Node &n, Use &&use) {
  if constexpr (std::is_same_v<Fn, GeluFn>)
    if (!makeElementFn<GeluFn>(n).tanhForm)
      return use(GeluErfFn{});
  return use(makeElementFn<Fn>(n));
}

/// The backward functor of activation Fn's backward node (which carries the
/// forward's attributes).
template <class Fn, class Attrs> GradOf<Fn> makeGradFn(const Attrs &attrs) {
  return GradOf<Fn>{makeElementFn<Fn>(attrs)};
}

} // namespace ampc::kernels

#endif
