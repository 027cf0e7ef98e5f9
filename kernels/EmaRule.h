//===- EmaRule.h - When ema_update averages, for the host backends --------===//
//
// The reference and cpu kernels of ema_update share this decision; only the
// element loop differs between them (and the CUDA kernel reads the same
// operands on the device).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_EMARULE_H
#define AMPC_KERNELS_EMARULE_H

#include "ir/OpAttrs.h"
#include "kernels/KernelArgs.h"
#include "kernels/common/OptimizerMath.h"
#include "kernels/common/Storage.h"

namespace ampc::kernels {

/// Whether ema_update(average, param, count, [skip]) averages this step:
/// only on the micro-step that ends a group of `accumulate`, and not when
/// `skip` (nonzero) says the step was skipped -- then the parameter did not
/// change, and the average is copied as it is.
inline bool emaApplies(const KernelArgs &a) {
  if (!endsAccumulation(a.step, attrs::EmaUpdate(*a.node).accumulate()))
    return false;
  return a.inputs.size() <= 3 || loadAsDouble(a.in(3).dtype(), a.in(3).data, 0) == 0;
}

} // namespace ampc::kernels

#endif
