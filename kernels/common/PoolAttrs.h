//===- PoolAttrs.h - A pooling node's window attributes as PoolAxis --------===//
//
// Host only: reads the typed window attributes of maxpool2d, avgpool2d and
// their backward ops (ir/OpAttrs.def) into the host/device PoolAxis of
// PoolMath.h, which cannot include the IR. One place for the defaults every
// backend must agree on: stride [] is the kernel, padding [ph, pw] pads both
// sides, [top, left, bottom, right] each side.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_POOLATTRS_H
#define AMPC_KERNELS_COMMON_POOLATTRS_H

#include "ir/OpAttrs.h"
#include "kernels/common/PoolMath.h"

#include <array>

namespace ampc::kernels {

/// The (H, W) axes of a pooling node whose attributes passed its inference
/// rule. avgpool2d has no dilation attribute: its view reads the default, 1.
inline std::array<PoolAxis, 2> poolAxesOf(const Node &n) {
  attrs::MaxPool2d a(n);
  const std::vector<int64_t> &kernel = a.kernel(), &stride = a.stride(), &padding = a.padding(),
                             &dilation = a.dilation();
  std::array<PoolAxis, 2> axes;
  for (unsigned d = 0; d < 2; ++d) {
    axes[d].kernel = kernel[d];
    axes[d].stride = stride.empty() ? kernel[d] : stride[d];
    axes[d].padBegin = padding[d];
    axes[d].padEnd = padding.size() == 4 ? padding[2 + d] : padding[d];
    axes[d].dilation = dilation[d];
  }
  return axes;
}

} // namespace ampc::kernels

#endif
