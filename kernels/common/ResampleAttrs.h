//===- ResampleAttrs.h - pad/resize attributes as ResampleMath's types -----===//
//
// Host only: maps the typed attributes of pad, pad_grad, resize and
// resize_grad (ir/OpAttrs.def) onto the host/device types of
// ResampleMath.h, which cannot include the IR.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_COMMON_RESAMPLEATTRS_H
#define AMPC_KERNELS_COMMON_RESAMPLEATTRS_H

#include "ir/OpAttrs.h"
#include "kernels/common/ResampleMath.h"

#include <array>

namespace ampc::kernels {

inline PadKind padKindOf(PadMode m) {
  switch (m) {
  case PadMode::Constant:
    return PadKind::Constant;
  case PadMode::Reflect:
    return PadKind::Reflect;
  case PadMode::Edge:
    return PadKind::Edge;
  }
  return PadKind::Constant;
}

/// The (H, W) axes of a resize or resize_grad node resizing `input` dims
/// [N, C, H, W] (inference checked the attributes).
inline std::array<ResizeAxis, 2> resizeAxesOf(const Node &n, llvm::ArrayRef<int64_t> input) {
  attrs::Resize a(n);
  std::array<ResizeAxis, 2> axes;
  for (unsigned d = 0; d < 2; ++d) {
    ResizeAxis &x = axes[d];
    x.inSize = input[2 + d];
    x.outSize = a.size()[d];
    x.inverseScale =
        a.scales().empty() ? double(x.inSize) / double(x.outSize) : 1.0 / a.scales()[d];
    x.resizedLength = a.scales().empty() ? double(x.outSize) : double(x.inSize) * a.scales()[d];
    x.cubicA = a.cubic_coeff_a();
    x.excludeOutside = a.exclude_outside();
    switch (a.coordinate_mode()) {
    case ResizeCoordinates::HalfPixel:
      x.coord = ResizeCoord::HalfPixel;
      break;
    case ResizeCoordinates::PytorchHalfPixel:
      x.coord = ResizeCoord::PytorchHalfPixel;
      break;
    case ResizeCoordinates::AlignCorners:
      x.coord = ResizeCoord::AlignCorners;
      break;
    case ResizeCoordinates::Asymmetric:
      x.coord = ResizeCoord::Asymmetric;
      break;
    }
    switch (a.nearest_mode()) {
    case ResizeNearest::RoundPreferFloor:
      x.round = ResizeRound::RoundPreferFloor;
      break;
    case ResizeNearest::RoundPreferCeil:
      x.round = ResizeRound::RoundPreferCeil;
      break;
    case ResizeNearest::Floor:
      x.round = ResizeRound::Floor;
      break;
    case ResizeNearest::Ceil:
      x.round = ResizeRound::Ceil;
      break;
    }
  }
  return axes;
}

} // namespace ampc::kernels

#endif
