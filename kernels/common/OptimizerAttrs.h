//===- OptimizerAttrs.h - learning_rate's schedule attribute as LrSchedule -===//
//
// Host only: maps the typed `schedule` attribute (ir/OpAttrs.def) onto the
// host/device LrSchedule of OptimizerMath.h, which cannot include the IR.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_OPTIMIZERATTRS_H
#define AMPC_KERNELS_COMMON_OPTIMIZERATTRS_H

#include "ir/OpAttrs.h"
#include "kernels/common/OptimizerMath.h"

namespace ampc::kernels {

inline LrSchedule lrScheduleOf(LrScheduleKind k) {
  switch (k) {
  case LrScheduleKind::Constant:
    return LrSchedule::Constant;
  case LrScheduleKind::Step:
    return LrSchedule::Step;
  case LrScheduleKind::Cosine:
    return LrSchedule::Cosine;
  }
  return LrSchedule::Constant;
}

} // namespace ampc::kernels

#endif
