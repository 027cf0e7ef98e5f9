//===- ElementFunctors.h - Per-element functions of the cpu loops -*- C++ -*-===//
//
// Internal to kernels/cpu: the element functions the elementwise loops
// (LoopElementwise.cpp) and the fused chains (LoopFused.cpp) apply, each a
// kernels/common call, so both give the reference's bits. Unary ones carry
// `factor` (scale's attribute; unused by the others) so one stage signature
// serves all.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_CPU_ELEMENTFUNCTORS_H
#define AMPC_KERNELS_CPU_ELEMENTFUNCTORS_H

#include "kernels/common/ActivationMath.h"
#include "kernels/common/CastMath.h"
#include "kernels/common/ElementwiseMath.h"

namespace ampc::kernels::cpu::elem {

struct ReluFn {
  double factor;
  float operator()(float x) const { return reluOp(x); }
};
struct ScaleFn {
  double factor;
  float operator()(float x) const { return scaleOp(x, factor); }
};
struct GeluErfFn {
  double factor;
  float operator()(float x) const { return geluErfOp(x); }
};
struct GeluTanhFn {
  double factor;
  float operator()(float x) const { return geluTanhOp(x); }
};
struct SigmoidFn {
  double factor;
  float operator()(float x) const { return sigmoidOp(x); }
};
struct TanhFn {
  double factor;
  float operator()(float x) const { return tanhOp(x); }
};
template <DType To> struct CastFn {
  double factor;
  float operator()(float x) const { return castValue<To>(x); }
};

struct AddFn {
  float operator()(float x, float y) const { return addOp(x, y); }
};
struct SubFn {
  float operator()(float x, float y) const { return subOp(x, y); }
};
struct MulFn {
  float operator()(float x, float y) const { return mulOp(x, y); }
};
struct DivFn {
  float operator()(float x, float y) const { return divOp(x, y); }
};
struct ReluGradFn {
  float operator()(float dy, float x) const { return reluGradOp(dy, x); }
};
struct GeluErfGradFn {
  float operator()(float dy, float x) const { return geluErfGradOp(dy, x); }
};
struct GeluTanhGradFn {
  float operator()(float dy, float x) const { return geluTanhGradOp(dy, x); }
};
struct SigmoidGradFn {
  float operator()(float dy, float y) const { return sigmoidGradOp(dy, y); }
};
struct TanhGradFn {
  float operator()(float dy, float y) const { return tanhGradOp(dy, y); }
};

} // namespace ampc::kernels::cpu::elem

#endif
