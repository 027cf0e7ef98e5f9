//===- ElementFunctors.h - Per-element functions of the cpu loops -*- C++ -*-===//
//
// Internal to kernels/cpu: the element functions the elementwise loops
// (LoopElementwise.cpp) and the fused chains (LoopFused.cpp) apply besides
// the pointwise ops' own functors (ir/Pointwise.def, kernels/Pointwise.h),
// each a kernels/common call, so both give the reference's bits.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_ELEMENTFUNCTORS_H
#define AMPC_KERNELS_CPU_ELEMENTFUNCTORS_H

#include "kernels/common/CastMath.h"

namespace ampc::kernels::cpu::elem {

template <DType To> struct CastFn {
  float operator()(float x) const { return castValue<To>(x); }
};

} // namespace ampc::kernels::cpu::elem

#endif
