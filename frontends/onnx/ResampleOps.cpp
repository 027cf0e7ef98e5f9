//===- ResampleOps.cpp - Pad and Resize ------------------------------------===//
//
// Both need their pads, scales or sizes as constants at import time (they
// are: exporters compute them from shapes, which are static here, and the
// chains fold). Resize resizes the spatial dims of [N, C, H, W] (or the one
// of [N, C, L], run as [N, C, L, 1]).
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

namespace ampc::onnxfe {

bool lowerPad(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"mode"}))
    return false;
  std::string mode = l.stringAttr(n, "mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return l.error("mode '" + mode + "' is not supported (constant, reflect or edge)");
  const ConstTensor *pads = l.constantOf(n, 1, "pads");
  if (!pads)
    return false;
  double value = 0;
  if (l.hasInput(n, 2)) {
    const ConstTensor *c = l.constantOf(n, 2, "constant_value");
    if (!c)
      return false;
    if (c->numElements() > 1)
      return l.error("constant_value must be a scalar");
    if (c->numElements() == 1)
      value = c->values.front();
  }
  std::vector<int64_t> p = pads->asInts();
  if (llvm::all_of(p, [](int64_t v) { return v == 0; })) {
    l.alias(n, 0, 0);
    return true;
  }
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  l.setOutput(
      n, 0,
      l.build1(OpKind::Pad, {x},
               {{"pads", Attribute(p)}, {"mode", Attribute(mode)}, {"value", Attribute(value)}},
               n.output(0)));
  return true;
}

namespace {

/// A constant input that may be given as "" or as a tensor of no elements
/// (Resize's roi, scales, sizes): nullptr then, without an error.
const ConstTensor *optionalConstant(OnnxLowering &l, const onnx::NodeProto &n, int i,
                                    llvm::StringRef what, bool &failed) {
  failed = false;
  if (!l.hasInput(n, i))
    return nullptr;
  const ConstTensor *c = l.constantOf(n, i, what);
  if (!c) {
    failed = true;
    return nullptr;
  }
  return c->numElements() == 0 ? nullptr : c;
}

} // namespace

bool lowerResize(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                        "extrapolation_value", "mode", "nearest_mode"}))
    return false;
  std::string mode = l.stringAttr(n, "mode", "nearest");
  std::string coords = l.stringAttr(n, "coordinate_transformation_mode", "half_pixel");
  std::string nearest = l.stringAttr(n, "nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return l.error("mode '" + mode + "' is not supported (nearest, linear or cubic)");
  if (coords == "tf_crop_and_resize" || coords == "tf_half_pixel_for_nn")
    return l.error("coordinate_transformation_mode '" + coords + "' is not supported");
  // Both only change cubic's weights (ONNX: exclude_outside is 0 or 1).
  double cubicA = l.floatAttr(n, "cubic_coeff_a", -0.75);
  int64_t excludeOutside = l.intAttr(n, "exclude_outside", 0);
  if (excludeOutside != 0 && excludeOutside != 1)
    return l.error("exclude_outside must be 0 or 1, got " + llvm::Twine(excludeOutside));
  if (!std::isfinite(cubicA))
    return l.error("cubic_coeff_a must be finite");
  Value *x = l.valueOf(n, 0);
  if (!x)
    return false;
  const TensorType &t = x->type();
  if (t.rank() != 3 && t.rank() != 4)
    return l.error("only 3-D and 4-D inputs ([N, C, L], [N, C, H, W]) are supported, the input "
                   "is " +
                   t.str());
  bool failed;
  const ConstTensor *scales = optionalConstant(l, n, 2, "scales", failed);
  if (failed)
    return false;
  const ConstTensor *sizes = optionalConstant(l, n, 3, "sizes", failed);
  if (failed)
    return false;
  if (!scales == !sizes)
    return l.error("exactly one of scales and sizes must be given");
  const ConstTensor *given = scales ? scales : sizes;
  if (given->numElements() != int64_t(t.rank()))
    return l.error((scales ? "scales" : "sizes") + llvm::Twine(" must have ") +
                   llvm::Twine(t.rank()) + " values, got " + llvm::Twine(given->numElements()));
  // The batch and channel dims stay; the others resize.
  std::vector<int64_t> size;
  std::vector<double> factors;
  for (unsigned d = 0; d < t.rank(); ++d) {
    int64_t out;
    if (scales) {
      double s = scales->values[d];
      if (!std::isfinite(s) || s <= 0)
        return l.error("scales must be finite and > 0");
      out = saturatingInt(std::floor(double(t.dim(d)) * s));
      factors.push_back(s);
    } else {
      out = saturatingInt(sizes->values[d]);
    }
    if (d < 2) {
      if (out != t.dim(d))
        return l.error("resizing the batch or channel dim (" + llvm::Twine(d) +
                       ") is not supported");
      continue;
    }
    if (out < 1)
      return l.error("the resized dim " + llvm::Twine(d) + " would be " + llvm::Twine(out));
    size.push_back(out);
  }
  if (scales)
    factors.erase(factors.begin(), factors.begin() + 2);
  if (t.rank() == 3) {
    size.push_back(1);
    if (scales)
      factors.push_back(1.0);
  }
  Value *x4 = t.rank() == 3 ? l.reshape(x, {t.dim(0), t.dim(1), t.dim(2), 1}) : x;
  AttrMap attrs{{"size", Attribute(size)},
                {"scales", Attribute(factors)},
                {"mode", Attribute(mode)},
                {"coordinate_mode", Attribute(coords)},
                {"nearest_mode", Attribute(nearest)}};
  // Only cubic reads them; nearest and linear nodes print as before.
  if (mode == "cubic") {
    attrs["cubic_coeff_a"] = Attribute(cubicA);
    attrs["exclude_outside"] = Attribute(excludeOutside == 1);
  }
  Value *y = l.build1(OpKind::Resize, {x4}, std::move(attrs), t.rank() == 4 ? n.output(0) : "");
  if (y && t.rank() == 3)
    y = l.reshape(y, {t.dim(0), t.dim(1), size[0]}, n.output(0));
  l.setOutput(n, 0, y);
  return true;
}

} // namespace ampc::onnxfe
