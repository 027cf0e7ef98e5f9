#!/usr/bin/env python3
"""Cross-checks ampc's ONNX frontend against PyTorch.

Every supported ONNX op is built into a small model with onnx.helper and
run by ampc (tests/onnx/onnx_forward_driver.cpp: import, forward pipeline at
O0, the cpu backend) on random inputs; PyTorch computes the same op on the
same inputs. fp32 results must agree within 1e-5 (relative to the
reference's magnitude, at least 1). Then torchvision ResNet-18, MobileNetV2,
SqueezeNet 1.1 and GoogLeNet (random weights, weights=None), a small
segmentation net (padding, pooling and resizing of every kind torch exports),
two bicubic F.interpolate calls (Resize cubic, align_corners and not),
a small CNN of the activations torch exports as HardSwish, HardSigmoid,
PRelu, LeakyRelu, Elu, Softplus, Abs, Neg, Max and Min, and a BERT-style
encoder layer are exported by torch.onnx.export and their forward outputs
compared within 1e-4; O1 and O2 forwards must stay within 3e-2 of them.

Run by CTest as `onnx-pytorch`. Exits 77 (CTest's skip) when torch, onnx or
torchvision cannot be imported, except under CI=true, where
scripts/install-deps.sh has installed them and their absence is a failure.

  python3 check_onnx.py --driver build/bin/ampc-onnx-forward-driver [--only NAME] [--keep DIR]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import warnings

SKIP = 77
MISSING = 1 if os.environ.get("CI") == "true" else SKIP

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import torchvision
except ImportError as error:
    print(f"{'FAIL' if MISSING == 1 else 'SKIP'}: a Python package is missing ({error})")
    sys.exit(MISSING)

warnings.filterwarnings("ignore")
torch.manual_seed(0)
RNG = np.random.default_rng(0)
OP_TOLERANCE = 1e-5
MODEL_TOLERANCE = 1e-4
HALF_TOLERANCE = 3e-2


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


class Case:
    """One ONNX graph, its inputs and PyTorch's expected outputs."""

    def __init__(self, name, nodes, inputs, outputs, reference, initializers=(), opset=17):
        self.name = name
        self.nodes = nodes
        self.inputs = inputs  # {name: array}
        self.outputs = outputs  # [(name, shape)]
        self.reference = reference  # fn(torch tensors by name) -> [tensors]
        self.initializers = dict(initializers)  # {name: array}
        self.opset = opset

    def model(self):
        def info(name, array):
            t = {np.dtype(np.int64): TensorProto.INT64, np.dtype(np.bool_): TensorProto.BOOL}.get(
                array.dtype, TensorProto.FLOAT)
            return helper.make_tensor_value_info(name, t, list(array.shape))

        graph = helper.make_graph(
            self.nodes, self.name,
            [info(k, v) for k, v in self.inputs.items()],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in self.outputs],
            [numpy_helper.from_array(v, k) for k, v in self.initializers.items()])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        onnx.checker.check_model(m)
        return m

    def expected(self):
        env = {k: torch.from_numpy(v) for k, v in {**self.inputs, **self.initializers}.items()}
        with torch.no_grad():
            return [t.numpy().astype(np.float32) for t in self.reference(env)]


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(value, dtype=dtype), name))


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def asymmetric_linear(x, scale):
    """Upsample-9's linear mode: output o reads input o / scale, clamped,
    between its two neighbours (per spatial dim of [N, C, H, W])."""
    for dim in (2, 3):
        n = x.shape[dim]
        pos = torch.clamp(torch.arange(int(n * scale), dtype=torch.float64) / scale, max=n - 1)
        i0 = pos.floor().long()
        i1 = torch.clamp(i0 + 1, max=n - 1)
        w = (pos - i0).to(x.dtype)
        shape = [1] * 4
        shape[dim] = -1
        w = w.reshape(shape)
        x = x.index_select(dim, i0) * (1 - w) + x.index_select(dim, i1) * w
    return x


def op_cases():
    x4 = rand(2, 3, 8, 8)
    w = rand(4, 3, 3, 3)
    b = rand(4)
    cases = [
        Case("conv", [node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
             {"x": x4}, [("y", (2, 4, 4, 4))],
             lambda e: [F.conv2d(e["x"], e["w"], e["b"], stride=2, padding=1)], {"w": w, "b": b}),
        Case("conv_grouped", [node("Conv", ["x", "w"], ["y"], group=3, dilations=[2, 2])],
             {"x": x4}, [("y", (2, 3, 4, 4))],
             lambda e: [F.conv2d(e["x"], e["w"], groups=3, dilation=2)], {"w": rand(3, 1, 3, 3)}),
        Case("batchnorm", [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
             {"x": x4}, [("y", x4.shape)],
             lambda e: [F.batch_norm(e["x"], e["m"], e["v"], e["s"], e["b"], False, 0.0, 1e-3)],
             {"s": rand(3), "b": rand(3), "m": rand(3), "v": np.abs(rand(3)) + 0.5}),
        Case("relu", [node("Relu", ["x"], ["y"])], {"x": x4}, [("y", x4.shape)],
             lambda e: [F.relu(e["x"])]),
        Case("clip_relu6", [const("lo", 0.0, np.float32), const("hi", 6.0, np.float32),
                            node("Clip", ["x", "lo", "hi"], ["y"])],
             {"x": x4 * 5}, [("y", x4.shape)], lambda e: [F.relu6(e["x"])]),
        Case("sigmoid", [node("Sigmoid", ["x"], ["y"])], {"x": x4}, [("y", x4.shape)],
             lambda e: [torch.sigmoid(e["x"])]),
        Case("tanh", [node("Tanh", ["x"], ["y"])], {"x": x4}, [("y", x4.shape)],
             lambda e: [torch.tanh(e["x"])]),
        Case("erf", [node("Erf", ["x"], ["y"])], {"x": x4}, [("y", x4.shape)],
             lambda e: [torch.erf(e["x"])]),
        Case("sqrt", [node("Sqrt", ["x"], ["y"])], {"x": np.abs(x4) + 0.1}, [("y", x4.shape)],
             lambda e: [torch.sqrt(e["x"])]),
        Case("pow", [const("e", 3.0, np.float32), node("Pow", ["x", "e"], ["y"])],
             {"x": x4}, [("y", x4.shape)], lambda e: [torch.pow(e["x"], 3.0)]),
        # ONNX's other activations and unary math; Max and Min.
        Case("hardsigmoid_torch", [node("HardSigmoid", ["x"], ["y"], alpha=1.0 / 6, beta=0.5)],
             {"x": x4 * 3}, [("y", x4.shape)], lambda e: [F.hardsigmoid(e["x"])]),
        Case("hardsigmoid_default", [node("HardSigmoid", ["x"], ["y"])], {"x": x4 * 3}, [("y", x4.shape)],
             lambda e: [torch.clamp(0.2 * e["x"] + 0.5, 0, 1)]),
        Case("hardswish", [node("HardSwish", ["x"], ["y"])], {"x": x4 * 3}, [("y", x4.shape)],
             lambda e: [F.hardswish(e["x"])]),
        Case("leaky_relu", [node("LeakyRelu", ["x"], ["y"], alpha=0.1)], {"x": x4}, [("y", x4.shape)],
             lambda e: [F.leaky_relu(e["x"], 0.1)]),
        Case("leaky_relu_default", [node("LeakyRelu", ["x"], ["y"])], {"x": x4}, [("y", x4.shape)],
             lambda e: [F.leaky_relu(e["x"], 0.01)]),
        Case("elu", [node("Elu", ["x"], ["y"], alpha=0.5)], {"x": x4 * 2}, [("y", x4.shape)],
             lambda e: [F.elu(e["x"], 0.5)]),
        # Across torch's threshold at 20.
        Case("softplus", [node("Softplus", ["x"], ["y"])], {"x": x4 * 12}, [("y", x4.shape)],
             lambda e: [F.softplus(e["x"])]),
        Case("prelu_channels", [node("PRelu", ["x", "s"], ["y"])], {"x": x4}, [("y", x4.shape)],
             lambda e: [F.prelu(e["x"], e["s"].reshape(-1))], {"s": rand(3, 1, 1)}),
        Case("prelu_features", [node("PRelu", ["x", "s"], ["y"])], {"x": rand(4, 6)}, [("y", (4, 6))],
             lambda e: [F.prelu(e["x"], e["s"])], {"s": rand(6)}),
        Case("prelu_single", [node("PRelu", ["x", "s"], ["y"])], {"x": x4}, [("y", x4.shape)],
             lambda e: [F.prelu(e["x"], e["s"])], {"s": np.array([0.25], np.float32)}),
        Case("neg", [node("Neg", ["x"], ["y"])], {"x": x4}, [("y", x4.shape)], lambda e: [-e["x"]]),
        Case("abs", [node("Abs", ["x"], ["y"])], {"x": x4}, [("y", x4.shape)], lambda e: [torch.abs(e["x"])]),
        Case("exp", [node("Exp", ["x"], ["y"])], {"x": x4}, [("y", x4.shape)], lambda e: [torch.exp(e["x"])]),
        Case("log", [node("Log", ["x"], ["y"])], {"x": np.abs(x4) + 0.05}, [("y", x4.shape)],
             lambda e: [torch.log(e["x"])]),
        Case("reciprocal", [node("Reciprocal", ["x"], ["y"])], {"x": np.sign(x4) * (np.abs(x4) + 0.5)},
             [("y", x4.shape)], lambda e: [torch.reciprocal(e["x"])]),
        Case("max_three_broadcast", [node("Max", ["x", "z", "w"], ["y"])],
             {"x": rand(2, 3, 4), "z": rand(3, 1)}, [("y", (2, 3, 4))],
             lambda e: [torch.maximum(torch.maximum(e["x"], e["z"]), e["w"])], {"w": rand(4)}),
        Case("min_constant", [const("zero", 0.0, np.float32), node("Min", ["x", "zero"], ["y"])],
             {"x": rand(3, 5)}, [("y", (3, 5))], lambda e: [torch.clamp(e["x"], max=0.0)]),
        Case("max_single", [node("Max", ["x"], ["t"]), node("Identity", ["t"], ["y"])], {"x": rand(3, 5)},
             [("y", (3, 5))], lambda e: [e["x"]]),
        # Constants fold: Neg and Max of shape arithmetic.
        Case("shape_neg_max",
             [const("s", [-3, -20]), node("Neg", ["s"], ["n"]), const("c", [2, 5]), node("Max", ["n", "c"], ["shape"]),
              node("Reshape", ["x", "shape"], ["y"])],
             {"x": rand(3, 20)}, [("y", (3, 20))], lambda e: [e["x"]]),
        Case("add_broadcast", [node("Add", ["x", "b"], ["y"])], {"x": rand(2, 3, 4)},
             [("y", (2, 3, 4))], lambda e: [e["x"] + e["b"]], {"b": rand(4)}),
        Case("sub_values", [node("Sub", ["x", "z"], ["y"])], {"x": rand(2, 3, 4), "z": rand(3, 1)},
             [("y", (2, 3, 4))], lambda e: [e["x"] - e["z"]]),
        Case("mul_scalar", [const("c", 0.25, np.float32), node("Mul", ["x", "c"], ["y"])],
             {"x": rand(2, 5)}, [("y", (2, 5))], lambda e: [e["x"] * 0.25]),
        Case("div_values", [node("Div", ["x", "z"], ["y"])],
             {"x": rand(2, 5), "z": np.abs(rand(2, 5)) + 0.5}, [("y", (2, 5))],
             lambda e: [e["x"] / e["z"]]),
        Case("maxpool", [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
             {"x": x4}, [("y", (2, 3, 4, 4))],
             lambda e: [F.max_pool2d(e["x"], 3, 2, 1)]),
        Case("avgpool", [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
             {"x": x4}, [("y", (2, 3, 4, 4))], lambda e: [F.avg_pool2d(e["x"], 2, 2)]),
        Case("avgpool_pad", [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                  count_include_pad=1)],
             {"x": x4}, [("y", x4.shape)],
             lambda e: [F.avg_pool2d(e["x"], 3, 1, 1, count_include_pad=True)]),
        Case("global_avgpool", [node("GlobalAveragePool", ["x"], ["y"])], {"x": x4},
             [("y", (2, 3, 1, 1))], lambda e: [F.adaptive_avg_pool2d(e["x"], 1)]),
        # Windows beyond 2-D floor mode with symmetric pads.
        Case("maxpool_ceil", [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
             {"x": x4}, [("y", (2, 3, 4, 4))], lambda e: [F.max_pool2d(e["x"], 3, 2, ceil_mode=True)]),
        Case("avgpool_ceil_include_pad",
             [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                   ceil_mode=1, count_include_pad=1)],
             {"x": x4}, [("y", (2, 3, 5, 5))],
             lambda e: [F.avg_pool2d(e["x"], 3, 2, 1, ceil_mode=True, count_include_pad=True)]),
        Case("avgpool_ceil_exclude_pad",
             [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                   ceil_mode=1)],
             {"x": x4}, [("y", (2, 3, 5, 5))],
             lambda e: [F.avg_pool2d(e["x"], 3, 2, 1, ceil_mode=True, count_include_pad=False)]),
        Case("avgpool_asymmetric_pads",
             [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 0, 0, 1],
                   count_include_pad=1)],
             {"x": x4}, [("y", (2, 3, 4, 4))], lambda e: [F.avg_pool2d(F.pad(e["x"], (0, 1, 1, 0)), 2)]),
        Case("maxpool_asymmetric_pads",
             [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 2, 0])],
             {"x": x4}, [("y", (2, 3, 4, 8))],
             lambda e: [F.max_pool2d(F.pad(e["x"], (1, 0, 0, 2), value=-float("inf")), (3, 2), (2, 1))]),
        Case("maxpool_dilation",
             [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], dilations=[2, 2])],
             {"x": x4}, [("y", (2, 3, 6, 6))], lambda e: [F.max_pool2d(e["x"], 3, 1, 1, dilation=2)]),
        Case("conv_asymmetric_pads", [node("Conv", ["x", "w"], ["y"], pads=[0, 1, 2, 1])],
             {"x": x4}, [("y", (2, 4, 8, 8))],
             lambda e: [F.conv2d(F.pad(e["x"], (1, 1, 0, 2)), e["w"])], {"w": w}),
        Case("conv_same_upper", [node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
             {"x": x4}, [("y", (2, 4, 4, 4))],
             lambda e: [F.conv2d(F.pad(e["x"], (0, 1, 0, 1)), e["w"], stride=2)], {"w": w}),
        Case("conv_1d", [node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1], strides=[2], dilations=[1])],
             {"x": rand(2, 3, 16)}, [("y", (2, 4, 8))],
             lambda e: [F.conv1d(e["x"], e["w"], e["b"], stride=2, padding=1)],
             {"w": rand(4, 3, 3), "b": rand(4)}),
        Case("maxpool_1d", [node("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], ceil_mode=1)],
             {"x": rand(2, 3, 16)}, [("y", (2, 3, 8))], lambda e: [F.max_pool1d(e["x"], 3, 2, ceil_mode=True)]),
        # torch 1.13's nn.AvgPool1d(3, 2, 1): Pad then AveragePool, folded
        # into one padded pooling (and the 2-D form of Inception-v3's).
        Case("avgpool_1d_pad_folded",
             [const("p", [0, 0, 1, 0, 0, 1]), node("Pad", ["x", "p"], ["t"]),
              node("AveragePool", ["t"], ["y"], kernel_shape=[3], strides=[2])],
             {"x": rand(2, 3, 16)}, [("y", (2, 3, 8))], lambda e: [F.avg_pool1d(e["x"], 3, 2, 1)]),
        Case("avgpool_pad_folded",
             [const("p", [0, 0, 1, 1, 0, 0, 1, 1]), node("Pad", ["x", "p"], ["t"]),
              node("AveragePool", ["t"], ["y"], kernel_shape=[3, 3], strides=[1, 1])],
             {"x": x4}, [("y", x4.shape)], lambda e: [F.avg_pool2d(e["x"], 3, 1, 1)]),
        Case("global_avgpool_1d", [node("GlobalAveragePool", ["x"], ["y"])], {"x": rand(2, 3, 16)},
             [("y", (2, 3, 1))], lambda e: [F.adaptive_avg_pool1d(e["x"], 1)]),
        Case("batchnorm_1d", [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
             {"x": rand(2, 3, 16)}, [("y", (2, 3, 16))],
             lambda e: [F.batch_norm(e["x"], e["m"], e["v"], e["s"], e["b"], False, 0.0, 1e-5)],
             {"s": rand(3), "b": rand(3), "m": rand(3), "v": np.abs(rand(3)) + 0.5}),
        # Pad (opset 13: pads and the constant as inputs).
        Case("pad_constant",
             [const("p", [0, 0, 1, 2, 0, 0, 3, 0]), const("c", 1.5, np.float32),
              node("Pad", ["x", "p", "c"], ["y"])],
             {"x": x4}, [("y", (2, 3, 12, 10))], lambda e: [F.pad(e["x"], (2, 0, 1, 3), value=1.5)]),
        Case("pad_reflect", [const("p", [0, 0, 2, 1, 0, 0, 1, 3]), node("Pad", ["x", "p"], ["y"], mode="reflect")],
             {"x": x4}, [("y", (2, 3, 11, 12))], lambda e: [F.pad(e["x"], (1, 3, 2, 1), mode="reflect")]),
        Case("pad_edge", [const("p", [0, 0, 2, 1, 0, 0, 1, 3]), node("Pad", ["x", "p"], ["y"], mode="edge")],
             {"x": x4}, [("y", (2, 3, 11, 12))], lambda e: [F.pad(e["x"], (1, 3, 2, 1), mode="replicate")]),
        Case("pad_crop", [const("p", [0, 0, -1, 0, 0, 0, 0, -2]), node("Pad", ["x", "p"], ["y"])],
             {"x": x4}, [("y", (2, 3, 7, 6))], lambda e: [e["x"][:, :, 1:, :-2]]),
        # Resize (opset 13: roi, scales, sizes inputs).
        Case("resize_nearest",
             [const("s", [1, 1, 2, 2], np.float32),
              node("Resize", ["x", "", "s"], ["y"], mode="nearest", coordinate_transformation_mode="asymmetric",
                   nearest_mode="floor")],
             {"x": x4}, [("y", (2, 3, 16, 16))], lambda e: [F.interpolate(e["x"], scale_factor=2, mode="nearest")]),
        Case("resize_bilinear",
             [const("sz", [2, 3, 11, 13]),
              node("Resize", ["x", "", "", "sz"], ["y"], mode="linear",
                   coordinate_transformation_mode="pytorch_half_pixel")],
             {"x": x4}, [("y", (2, 3, 11, 13))],
             lambda e: [F.interpolate(e["x"], size=(11, 13), mode="bilinear", align_corners=False)]),
        Case("resize_bilinear_scales",
             [const("s", [1, 1, 1.5, 1.5], np.float32),
              node("Resize", ["x", "", "s"], ["y"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel")],
             {"x": x4}, [("y", (2, 3, 12, 12))],
             lambda e: [F.interpolate(e["x"], scale_factor=1.5, mode="bilinear", align_corners=False)]),
        Case("resize_bilinear_align_corners",
             [const("s", [1, 1, 1.5, 1.5], np.float32),
              node("Resize", ["x", "", "s"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")],
             {"x": x4}, [("y", (2, 3, 12, 12))],
             lambda e: [F.interpolate(e["x"], scale_factor=1.5, mode="bilinear", align_corners=True)]),
        # Cubic as torch exports bicubic (cubic_coeff_a -0.75, no
        # exclude_outside: PyTorch reads the edge element for taps outside).
        Case("resize_bicubic",
             [const("sz", [2, 3, 11, 13]),
              node("Resize", ["x", "", "", "sz"], ["y"], mode="cubic", cubic_coeff_a=-0.75,
                   coordinate_transformation_mode="pytorch_half_pixel")],
             {"x": x4}, [("y", (2, 3, 11, 13))],
             lambda e: [F.interpolate(e["x"], size=(11, 13), mode="bicubic", align_corners=False)]),
        Case("resize_bicubic_down",
             [const("sz", [2, 3, 5, 6]),
              node("Resize", ["x", "", "", "sz"], ["y"], mode="cubic", cubic_coeff_a=-0.75,
                   coordinate_transformation_mode="pytorch_half_pixel")],
             {"x": x4}, [("y", (2, 3, 5, 6))],
             lambda e: [F.interpolate(e["x"], size=(5, 6), mode="bicubic", align_corners=False)]),
        Case("resize_bicubic_scales",
             [const("s", [1, 1, 1.5, 2.5], np.float32),
              node("Resize", ["x", "", "s"], ["y"], mode="cubic", cubic_coeff_a=-0.75,
                   coordinate_transformation_mode="pytorch_half_pixel")],
             {"x": x4}, [("y", (2, 3, 12, 20))],
             lambda e: [F.interpolate(e["x"], scale_factor=(1.5, 2.5), mode="bicubic", align_corners=False)]),
        Case("resize_bicubic_align_corners",
             [const("s", [1, 1, 1.5, 1.5], np.float32),
              node("Resize", ["x", "", "s"], ["y"], mode="cubic", cubic_coeff_a=-0.75,
                   coordinate_transformation_mode="align_corners")],
             {"x": x4}, [("y", (2, 3, 12, 12))],
             lambda e: [F.interpolate(e["x"], scale_factor=1.5, mode="bicubic", align_corners=True)]),
        # Upsample (opset 9), converted to Resize by ONNX's version
        # converter; its asymmetric coordinates and floor must survive.
        Case("upsample_nearest_opset9",
             [const("s", [1, 1, 2, 3], np.float32), node("Upsample", ["x", "s"], ["y"], mode="nearest")],
             {"x": x4}, [("y", (2, 3, 16, 24))],
             lambda e: [e["x"].repeat_interleave(2, 2).repeat_interleave(3, 3)], opset=9),
        Case("upsample_linear_opset9",
             [const("s", [1, 1, 2, 2], np.float32), node("Upsample", ["x", "s"], ["y"], mode="linear")],
             {"x": x4}, [("y", (2, 3, 16, 16))], lambda e: [asymmetric_linear(e["x"], 2)], opset=9),
        Case("resize_nearest_1d",
             [const("s", [1, 1, 3], np.float32),
              node("Resize", ["x", "", "s"], ["y"], mode="nearest", coordinate_transformation_mode="asymmetric",
                   nearest_mode="floor")],
             {"x": rand(2, 3, 5)}, [("y", (2, 3, 15))],
             lambda e: [F.interpolate(e["x"], scale_factor=3, mode="nearest")]),
        Case("flatten", [node("Flatten", ["x"], ["y"], axis=2)], {"x": x4}, [("y", (6, 64))],
             lambda e: [e["x"].reshape(6, 64)]),
        Case("gemm_linear", [node("Gemm", ["x", "w", "b"], ["y"], transB=1)], {"x": rand(4, 6)},
             [("y", (4, 5))], lambda e: [F.linear(e["x"], e["w"], e["b"])],
             {"w": rand(5, 6), "b": rand(5)}),
        Case("gemm_general", [node("Gemm", ["x", "w", "c"], ["y"], alpha=0.5, beta=2.0, transA=1)],
             {"x": rand(6, 4)}, [("y", (4, 5))],
             lambda e: [0.5 * e["x"].t() @ e["w"] + 2.0 * e["c"]], {"w": rand(6, 5), "c": rand(4, 5)}),
        Case("matmul_3d_2d", [node("MatMul", ["x", "w"], ["y"])], {"x": rand(2, 3, 6)},
             [("y", (2, 3, 5))], lambda e: [e["x"] @ e["w"]], {"w": rand(6, 5)}),
        Case("matmul_batched", [node("MatMul", ["x", "z"], ["y"])],
             {"x": rand(2, 4, 3, 6), "z": rand(2, 4, 6, 5)}, [("y", (2, 4, 3, 5))],
             lambda e: [e["x"] @ e["z"]]),
        Case("reshape", [const("s", [0, -1, 4]), node("Reshape", ["x", "s"], ["y"])],
             {"x": rand(2, 3, 8)}, [("y", (2, 6, 4))], lambda e: [e["x"].reshape(2, 6, 4)]),
        Case("transpose", [node("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3])], {"x": rand(2, 3, 4, 5)},
             [("y", (2, 4, 3, 5))], lambda e: [e["x"].permute(0, 2, 1, 3)]),
        Case("softmax", [node("Softmax", ["x"], ["y"], axis=1)], {"x": rand(3, 7)}, [("y", (3, 7))],
             lambda e: [F.softmax(e["x"], 1)]),
        Case("log_softmax", [node("LogSoftmax", ["x"], ["y"])], {"x": rand(3, 7)}, [("y", (3, 7))],
             lambda e: [F.log_softmax(e["x"], -1)]),
        Case("layernorm", [node("LayerNormalization", ["x", "g", "b"], ["y"], epsilon=1e-5)],
             {"x": rand(2, 3, 8)}, [("y", (2, 3, 8))],
             lambda e: [F.layer_norm(e["x"], (8,), e["g"], e["b"], 1e-5)], {"g": rand(8), "b": rand(8)}),
        Case("reduce_mean", [node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0)],
             {"x": rand(2, 3, 8)}, [("y", (2, 8))], lambda e: [e["x"].mean(1)], opset=13),
        Case("gather_embedding", [node("Gather", ["table", "ids"], ["y"])],
             {"ids": RNG.integers(0, 10, (2, 5)).astype(np.int64)}, [("y", (2, 5, 4))],
             lambda e: [F.embedding(e["ids"], e["table"])], {"table": rand(10, 4)}),
        Case("gather_scalar", [const("i", 1), node("Gather", ["x", "i"], ["y"], axis=1)],
             {"x": rand(2, 3, 4)}, [("y", (2, 4))], lambda e: [e["x"][:, 1]]),
        Case("concat", [node("Concat", ["x", "z"], ["y"], axis=1)], {"x": rand(2, 3), "z": rand(2, 4)},
             [("y", (2, 7))], lambda e: [torch.cat([e["x"], e["z"]], 1)]),
        Case("slice", [const("st", [1, -3]), const("en", [3, 1000]), const("ax", [1, 2]),
                       node("Slice", ["x", "st", "en", "ax"], ["y"])],
             {"x": rand(2, 4, 5)}, [("y", (2, 2, 3))], lambda e: [e["x"][:, 1:3, -3:]]),
        Case("unsqueeze_squeeze", [const("a", [0]), const("b", [1]), node("Unsqueeze", ["x", "a"], ["t"]),
                                   node("Squeeze", ["t", "b"], ["y"])],
             {"x": rand(1, 4)}, [("y", (1, 4))], lambda e: [e["x"].unsqueeze(0).squeeze(1)]),
        Case("cast", [node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], {"x": rand(3)}, [("y", (3,))],
             lambda e: [e["x"]]),
        Case("dropout_identity", [node("Dropout", ["x"], ["t"]), node("Identity", ["t"], ["y"])],
             {"x": rand(4, 4)}, [("y", (4, 4))], lambda e: [e["x"]]),
        Case("shape_chain",
             [node("Shape", ["x"], ["s"]), const("i0", 0), node("Gather", ["s", "i0"], ["b"]),
              const("ax", [0]), node("Unsqueeze", ["b", "ax"], ["b1"]), const("rest", [-1]),
              node("Concat", ["b1", "rest"], ["shape"], axis=0), node("Reshape", ["x", "shape"], ["y"])],
             {"x": rand(3, 4, 5)}, [("y", (3, 20))], lambda e: [e["x"].reshape(3, -1)]),
        # The decomposed layernorm of opsets before 17, recognised into layernorm.
        Case("layernorm_decomposed",
             [node("ReduceMean", ["x"], ["m"], axes=[-1]), node("Sub", ["x", "m"], ["d"]),
              const("two", 2.0, np.float32), node("Pow", ["d", "two"], ["p"]),
              node("ReduceMean", ["p"], ["v"], axes=[-1]), const("eps", 1e-5, np.float32),
              node("Add", ["v", "eps"], ["a"]), node("Sqrt", ["a"], ["s"]), node("Div", ["d", "s"], ["n"]),
              node("Mul", ["n", "g"], ["gn"]), node("Add", ["gn", "b"], ["y"])],
             {"x": rand(2, 3, 8)}, [("y", (2, 3, 8))],
             lambda e: [F.layer_norm(e["x"], (8,), e["g"], e["b"], 1e-5)], {"g": rand(8), "b": rand(8)},
             opset=13),
        Case("gelu_erf",
             [const("r2", 1.4142135381698608, np.float32), node("Div", ["x", "r2"], ["t"]),
              node("Erf", ["t"], ["e"]), const("one", 1.0, np.float32), node("Add", ["e", "one"], ["a"]),
              node("Mul", ["x", "a"], ["m"]), const("half", 0.5, np.float32), node("Mul", ["m", "half"], ["y"])],
             {"x": rand(3, 9)}, [("y", (3, 9))], lambda e: [F.gelu(e["x"])]),
    ]
    return cases


def logic_cases():
    """Masks, generators, index arithmetic, reductions, einsum and the
    composed layers (InstanceNormalization, ConvTranspose): on run-time
    values, and folded from constants into buffers the graph reads."""
    ids = RNG.integers(0, 4, (2, 6)).astype(np.int64)
    mask = np.tril(np.ones((5, 5), np.float32))
    x4 = rand(2, 3, 5, 5)
    cases = [
        # nanoGPT's masked_fill: a float buffer sliced and compared with 0.
        Case("causal_mask_where",
             [const("s0", [0, 0]), const("s1", [5, 5]), const("ax", [0, 1]),
              node("Slice", ["bias", "s0", "s1", "ax"], ["b"]), const("zero", 0.0, np.float32),
              node("Equal", ["b", "zero"], ["m"]), const("ninf", -np.inf, np.float32),
              node("Where", ["m", "ninf", "x"], ["y"])],
             {"x": x4}, [("y", x4.shape)],
             lambda e: [e["x"].masked_fill(e["bias"] == 0, float("-inf"))], {"bias": mask}),
        # A padding mask from an int64 input: compare and where at run time.
        Case("padding_mask_where",
             [const("zero", 0), node("Equal", ["ids", "zero"], ["m"]), const("big", -1e4, np.float32),
              const("ax", [1]), node("Unsqueeze", ["m", "ax"], ["m3"]),
              node("Where", ["m3", "big", "x"], ["y"])],
             {"ids": ids, "x": rand(2, 3, 6)}, [("y", (2, 3, 6))],
             lambda e: [e["x"].masked_fill((e["ids"] == 0).unsqueeze(1), -1e4)]),
        Case("compare_logic_values",
             [node("Less", ["x", "z"], ["a"]), node("Greater", ["x", "w"], ["b"]),
              node("Or", ["a", "b"], ["o"]), node("Not", ["o"], ["n"]), node("And", ["n", "a"], ["k"]),
              node("Xor", ["k", "o"], ["q"]), node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
             {"x": rand(3, 4), "z": rand(4), "w": rand(3, 1)}, [("y", (3, 4))],
             lambda e: [torch.logical_xor(torch.logical_and(~((e["x"] < e["z"]) | (e["x"] > e["w"])),
                                                            e["x"] < e["z"]),
                                          (e["x"] < e["z"]) | (e["x"] > e["w"])).float()]),
        # arange positions into a table: Range folds, Gather of a [1, T] range
        # becomes a slice.
        Case("range_positions",
             [const("st", 0), const("lim", 6), const("d", 1), node("Range", ["st", "lim", "d"], ["r"]),
              const("ax", [0]), node("Unsqueeze", ["r", "ax"], ["pos"]), node("Gather", ["wpe", "pos"], ["y"])],
             {}, [("y", (1, 6, 4))],
             lambda e: [F.embedding(torch.arange(6).unsqueeze(0), e["wpe"])], {"wpe": rand(8, 4)}),
        Case("gather_constant_2d_indices",
             [const("idx", [[2, 0], [1, 1]]), node("Gather", ["x", "idx"], ["y"], axis=1)],
             {"x": rand(2, 3, 4)}, [("y", (2, 2, 2, 4))],
             lambda e: [e["x"][:, torch.tensor([[2, 0], [1, 1]])]]),
        Case("gather_runtime_axis2", [node("Gather", ["x", "ids"], ["y"], axis=2)],
             {"x": rand(2, 3, 4), "ids": RNG.integers(0, 4, (5,)).astype(np.int64)}, [("y", (2, 3, 5))],
             lambda e: [e["x"][:, :, e["ids"]]]),
        Case("constant_of_shape_expand",
             [node("Shape", ["x"], ["s"]), node("ConstantOfShape", ["s"], ["c"],
                                                 value=numpy_helper.from_array(np.array([2.0], np.float32))),
              node("Mul", ["x", "c"], ["m"]), const("shape", [2, 3, 4]), node("Expand", ["b", "shape"], ["e"]),
              node("Add", ["m", "e"], ["y"])],
             {"x": rand(2, 3, 4), "b": rand(3, 1)}, [("y", (2, 3, 4))],
             lambda e: [e["x"] * 2 + e["b"].expand(2, 3, 4)]),
        Case("tile", [const("r", [2, 1, 3]), node("Tile", ["x", "r"], ["y"])], {"x": rand(2, 3, 2)},
             [("y", (4, 3, 6))], lambda e: [e["x"].repeat(2, 1, 3)]),
        Case("split", [const("sp", [1, 3]), node("Split", ["x", "sp"], ["a", "b"], axis=-1),
                       node("Concat", ["b", "a"], ["y"], axis=-1)],
             {"x": rand(2, 4)}, [("y", (2, 4))], lambda e: [torch.cat([e["x"][:, 1:], e["x"][:, :1]], -1)]),
        Case("split_equal_qkv", [node("Split", ["x"], ["q", "k", "v"], axis=2), node("Mul", ["q", "k"], ["qk"]),
                                 node("Add", ["qk", "v"], ["y"])],
             {"x": rand(2, 3, 12)}, [("y", (2, 3, 4))],
             lambda e: [e["x"][..., :4] * e["x"][..., 4:8] + e["x"][..., 8:]]),
        Case("strided_slice", [const("st", [0, 1]), const("en", [1000, 1000]), const("ax", [1, 2]),
                               const("sp", [2, 2]), node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
             {"x": rand(2, 5, 6, 3)}, [("y", (2, 3, 3, 3))], lambda e: [e["x"][:, 0::2, 1::2]]),
        Case("trilu_value", [const("k", 1), node("Trilu", ["x", "k"], ["y"], upper=0)], {"x": rand(2, 4, 5)},
             [("y", (2, 4, 5))], lambda e: [torch.tril(e["x"], 1)]),
        Case("mod_cumsum_fold",
             [node("Shape", ["x"], ["s"]), const("three", [3]), node("Mod", ["s", "three"], ["m"]),
              const("ax0", 0), node("CumSum", ["m", "ax0"], ["c"]), node("Cast", ["c"], ["cf"], to=TensorProto.FLOAT),
              node("Add", ["x", "cf"], ["y"])],
             {"x": rand(5, 4, 3)}, [("y", (5, 4, 3))],
             lambda e: [e["x"] + torch.tensor([2.0, 3.0, 3.0])]),
        Case("reduce_max_min_sum_l2",
             [node("ReduceMax", ["x"], ["a"], axes=[2], keepdims=0), node("ReduceMin", ["x"], ["b"], axes=[2],
                                                                         keepdims=0),
              const("ax", [2]), node("ReduceSum", ["x", "ax"], ["c"], keepdims=0),
              node("ReduceL2", ["x"], ["d"], axes=[2], keepdims=0), node("Add", ["a", "b"], ["ab"]),
              node("Add", ["c", "d"], ["cd"]), node("Mul", ["ab", "cd"], ["y"])],
             {"x": rand(2, 3, 7)}, [("y", (2, 3))],
             lambda e: [(e["x"].amax(2) + e["x"].amin(2)) * (e["x"].sum(2) + e["x"].norm(dim=2))]),
        Case("argmax", [node("ArgMax", ["x"], ["i"], axis=1, keepdims=0), node("Cast", ["i"], ["y"],
                                                                             to=TensorProto.FLOAT)],
             {"x": rand(3, 8)}, [("y", (3,))], lambda e: [e["x"].argmax(1).float()]),
        # ReduceL1, ReduceSumSquare, ReduceLogSum and ReduceLogSumExp compose
        # reduce_sum/reduce_max; LogSumExp of large values must not overflow.
        Case("reduce_l1_sumsquare_logsum_logsumexp",
             [node("ReduceL1", ["x"], ["a"], axes=[1], keepdims=0),
              node("ReduceSumSquare", ["x"], ["b"], axes=[1], keepdims=0),
              node("Abs", ["x"], ["ax"]), node("ReduceLogSum", ["ax"], ["c"], axes=[1], keepdims=0),
              node("ReduceLogSumExp", ["big"], ["d"], axes=[-2], keepdims=0),
              node("Add", ["a", "b"], ["ab"]), node("Add", ["c", "d"], ["cd"]), node("Mul", ["ab", "cd"], ["y"])],
             {"x": rand(2, 5, 3), "big": rand(2, 5, 3) * 100}, [("y", (2, 3))],
             lambda e: [(e["x"].abs().sum(1) + (e["x"] * e["x"]).sum(1)) *
                        (e["x"].abs().sum(1).log() + torch.logsumexp(e["big"], 1))]),
        # Pow with a tensor of exponents (torch.pow(a, b)), broadcast, and an
        # integer exponent cast to the base's dtype.
        Case("pow_tensor_exponent",
             [node("Pow", ["a", "b"], ["p"]), node("Pow", ["a", "k"], ["q"]), node("Add", ["p", "q"], ["y"])],
             {"a": np.abs(rand(2, 3, 4)) + 0.1, "b": rand(4), "k": np.array([2, 0, 3, 1], np.int64)},
             [("y", (2, 3, 4))],
             lambda e: [torch.pow(e["a"], e["b"]) + torch.pow(e["a"], e["k"].float())]),
        # GatherElements (torch.gather) along a middle axis, indices smaller
        # than the data in the other dims, and integer index arithmetic at
        # run time (Sub on int64) before it.
        Case("gather_elements",
             [const("one", 1), node("Sub", ["idx1", "one"], ["idx"]),
              node("GatherElements", ["x", "idx"], ["y"], axis=1)],
             {"x": rand(2, 5, 3), "idx1": RNG.integers(1, 6, (2, 4, 2)).astype(np.int64)},
             [("y", (2, 4, 2))],
             lambda e: [torch.gather(e["x"][:, :, :2], 1, e["idx1"] - 1)]),
        # Mod at run time: torch.remainder (the divisor's sign) of int64
        # values, torch.fmod (the dividend's) of floats, broadcast.
        Case("mod_runtime",
             [node("Mod", ["i", "j"], ["r"]), node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
              node("Mod", ["x", "d"], ["f"], fmod=1), node("Add", ["rf", "f"], ["y"])],
             {"i": RNG.integers(-20, 20, (3, 4)).astype(np.int64),
              "j": np.array([3, -3, 7, -5], np.int64), "x": rand(3, 4) * 10,
              "d": np.array([1.5, -2.0, 3.0, 0.7], np.float32)},
             [("y", (3, 4))],
             lambda e: [torch.remainder(e["i"], e["j"]).float() + torch.fmod(e["x"], e["d"])]),
        # ScatterND into run-time data at constant indices (x[idx] = v, as
        # index_put exports): rows 2 and 0 of each batch replaced.
        Case("scatternd_runtime",
             [node("ScatterND", ["x", "idx", "v"], ["y"])],
             {"x": rand(3, 4, 2), "v": rand(2, 4, 2)}, [("y", (3, 4, 2))],
             lambda e: [torch.cat([e["v"][1:2], e["x"][1:2], e["v"][0:1]])],
             initializers={"idx": np.array([[2], [0]], np.int64)}),
        # CumSum of run-time tensors: position ids counted from an int64
        # attention mask (Hugging Face's `mask.cumsum(-1) - 1`), and a float
        # cumsum, exclusive and reversed, over a middle axis.
        Case("cumsum_runtime",
             [const("last", -1), const("mid", 1),
              node("CumSum", ["mask", "last"], ["count"]), node("Cast", ["count"], ["pos"], to=TensorProto.FLOAT),
              node("CumSum", ["x", "mid"], ["cx"], exclusive=1, reverse=1)],
             {"mask": np.array([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]], np.int64), "x": rand(2, 4, 3)},
             [("pos", (2, 6)), ("cx", (2, 4, 3))],
             lambda e: [e["mask"].cumsum(-1).float(),
                        e["x"].flip(1).cumsum(1).flip(1) - e["x"]]),
        # Ties: the first smallest index, or the last with select_last_index.
        Case("argmin_ties",
             [node("ArgMin", ["x"], ["i"], axis=1, keepdims=1), node("ArgMin", ["x"], ["j"], axis=1,
                                                                     keepdims=1, select_last_index=1),
              node("Concat", ["i", "j"], ["k"], axis=1), node("Cast", ["k"], ["y"], to=TensorProto.FLOAT)],
             {"x": RNG.integers(0, 3, (4, 6)).astype(np.float32)}, [("y", (4, 2))],
             lambda e: [torch.stack([e["x"].argmin(1).float(),
                                     5 - e["x"].flip(1).argmin(1).float()], 1)]),
        # Constants fold: ArgMin and ReduceLogSumExp of a Constant.
        Case("argmin_logsumexp_fold",
             [const("c", [[1.0, -2.0, -2.0], [3.0, 0.5, 4.0]], np.float32),
              node("ArgMin", ["c"], ["i"], axis=1, keepdims=0), node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
              node("ReduceLogSumExp", ["c"], ["l"], axes=[1], keepdims=0), node("Add", ["fi", "l"], ["s"]),
              node("Add", ["x", "s"], ["y"])],
             {"x": rand(2)}, [("y", (2,))],
             lambda e: [e["x"] + torch.tensor([1.0, 1.0]) +
                        torch.logsumexp(torch.tensor([[1.0, -2.0, -2.0], [3.0, 0.5, 4.0]]), 1)]),
        # Size is a constant; CastLike casts to the second input's dtype.
        Case("size_castlike",
             [node("Size", ["x"], ["n"]), node("CastLike", ["n", "x"], ["nf"]), node("Mul", ["x", "nf"], ["y"])],
             {"x": rand(2, 3)}, [("y", (2, 3))], lambda e: [e["x"] * 6]),
        # The losses against torch: class weights, an ignore_index inside
        # [0, C) and one outside, every reduction, spatial dims.
        Case("nll_loss_weighted_mean_ignore",
             [node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"], ignore_index=2)],
             {"x": rand(6, 4, 3), "t": RNG.integers(0, 4, (6, 3)).astype(np.int64), "w": rand(4) ** 2},
             [("y", ())], lambda e: [F.nll_loss(e["x"], e["t"], e["w"], ignore_index=2)]),
        Case("nll_loss_sum_none",
             [node("NegativeLogLikelihoodLoss", ["x", "t"], ["a"], reduction="sum", ignore_index=-1),
              node("NegativeLogLikelihoodLoss", ["x", "t"], ["b"], reduction="none", ignore_index=-1),
              node("Mul", ["a", "b"], ["y"])],
             {"x": rand(5, 3), "t": np.array([0, -1, 2, 1, -1], np.int64)}, [("y", (5,))],
             lambda e: [F.nll_loss(e["x"], e["t"], reduction="sum", ignore_index=-1) *
                        F.nll_loss(e["x"], e["t"], reduction="none", ignore_index=-1)]),
        Case("softmax_cross_entropy_log_prob",
             [node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["l", "lp"], ignore_index=1),
              node("Mul", ["lp", "l"], ["y"])],
             {"x": rand(4, 5, 2, 3), "t": RNG.integers(0, 5, (4, 2, 3)).astype(np.int64), "w": rand(5) ** 2},
             [("y", (4, 5, 2, 3))],
             lambda e: [F.log_softmax(e["x"], 1) * F.cross_entropy(e["x"], e["t"], e["w"], ignore_index=1)]),
        Case("einsum_attention", [node("Einsum", ["q", "k"], ["y"], equation="bhid,bhjd->bhij")],
             {"q": rand(2, 3, 4, 5), "k": rand(2, 3, 6, 5)}, [("y", (2, 3, 4, 6))],
             lambda e: [torch.einsum("bhid,bhjd->bhij", e["q"], e["k"])]),
        Case("einsum_maxvit", [node("Einsum", ["p", "v"], ["y"], equation="B G H I J, B G H J D -> B G H I D")],
             {"p": rand(2, 2, 3, 4, 5), "v": rand(2, 2, 3, 5, 6)}, [("y", (2, 2, 3, 4, 6))],
             lambda e: [torch.einsum("bghij,bghjd->bghid", e["p"], e["v"])]),
        Case("einsum_sum_and_transpose", [node("Einsum", ["a", "b"], ["y"], equation="ij,kj->ki")],
             {"a": rand(3, 4), "b": rand(5, 4)}, [("y", (5, 3))],
             lambda e: [torch.einsum("ij,kj->ki", e["a"], e["b"])]),
        Case("einsum_ellipsis", [node("Einsum", ["a", "b"], ["y"], equation="...ij,...jk")],
             {"a": rand(2, 3, 4), "b": rand(2, 4, 5)}, [("y", (2, 3, 5))],
             lambda e: [torch.einsum("...ij,...jk", e["a"], e["b"])]),
        # GroupNorm as PyTorch exports it.
        Case("groupnorm",
             [const("g", [2, 3, -1]), node("Reshape", ["x", "g"], ["r"]),
              const("ones", [1.0, 1.0, 1.0], np.float32), const("zeros", [0.0, 0.0, 0.0], np.float32),
              node("InstanceNormalization", ["r", "ones", "zeros"], ["n"], epsilon=1e-5),
              const("shape", [2, 6, 4, 4]), node("Reshape", ["n", "shape"], ["u"]),
              node("Mul", ["u", "w"], ["m"]), node("Add", ["m", "bb"], ["y"])],
             {"x": rand(2, 6, 4, 4)}, [("y", (2, 6, 4, 4))],
             lambda e: [F.group_norm(e["x"], 3, e["w"].reshape(6), e["bb"].reshape(6), 1e-5)],
             {"w": rand(6, 1, 1), "bb": rand(6, 1, 1)}),
        Case("instancenorm_affine", [node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)],
             {"x": x4}, [("y", x4.shape)],
             lambda e: [F.instance_norm(e["x"], weight=e["s"], bias=e["b"], eps=1e-3)],
             {"s": rand(3), "b": rand(3)}),
        Case("conv_transpose",
             [node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                   output_padding=[1, 1])],
             {"x": x4}, [("y", (2, 4, 10, 10))],
             lambda e: [F.conv_transpose2d(e["x"], e["w"], e["b"], stride=2, padding=1, output_padding=1)],
             {"w": rand(3, 4, 3, 3), "b": rand(4)}),
        Case("conv_transpose_grouped_1d",
             [node("ConvTranspose", ["x", "w"], ["y"], strides=[3], group=2)],
             {"x": rand(2, 4, 5)}, [("y", (2, 6, 17))],
             lambda e: [F.conv_transpose1d(e["x"], e["w"], stride=3, groups=2)], {"w": rand(4, 3, 5)}),
    ]
    return cases


def run_driver(driver, model_path, inputs, work, opt_level="O0", emit=False):
    in_dir = os.path.join(work, "in")
    out_dir = os.path.join(work, f"out-{opt_level}")
    os.makedirs(in_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    for name, array in inputs.items():
        np.save(os.path.join(in_dir, name + ".npy"), array)
    cmd = [driver, model_path, in_dir, out_dir, "--opt-level", opt_level] + (["--emit"] if emit else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"driver failed ({proc.returncode}): {proc.stderr.strip()}")
    outs = []
    i = 0
    while os.path.exists(os.path.join(out_dir, f"out{i}.npy")):
        outs.append(np.load(os.path.join(out_dir, f"out{i}.npy")))
        i += 1
    return outs, proc.stdout


def max_rel_diff(got, want):
    """Largest difference relative to the reference's largest finite value.
    Infinities (a mask's -inf) must sit in the same places with the same sign;
    a mismatch there, or a NaN, counts as an infinite difference."""
    if not want.size:
        return 0.0
    got, want = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(want)
    if not np.array_equal(got[~finite], want[~finite]) or not np.isfinite(got[finite]).all():
        return float("inf")
    if not finite.any():
        return 0.0
    scale = max(1.0, float(np.abs(want[finite]).max()))
    return float(np.abs(got[finite] - want[finite]).max()) / scale


def check(label, got, want, tol):
    if len(got) != len(want):
        print(f"FAIL {label}: {len(got)} outputs, expected {len(want)}")
        return False
    ok = True
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            print(f"FAIL {label}: output {i} has shape {g.shape}, expected {w.shape}")
            ok = False
            continue
        d = max_rel_diff(g, w)
        status = "ok  " if d <= tol else "FAIL"
        print(f"{status} {label}: output {i} {tuple(w.shape)} max rel diff {d:.2e} (tolerance {tol:g})")
        ok &= d <= tol
    return ok


class ActivationNet(torch.nn.Module):
    """A small CNN with the activations torch exports as ONNX's HardSwish,
    HardSigmoid, PRelu (per channel and single), LeakyRelu, Elu, Softplus,
    Abs, Neg, Max and Min."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.p1 = torch.nn.PReLU(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)
        self.p2 = torch.nn.PReLU()
        with torch.no_grad():
            self.p1.weight.uniform_(-0.5, 0.5)

    def forward(self, x):
        x = F.hardswish(self.p1(self.c1(x)))
        x = self.c2(x)
        x = x * F.hardsigmoid(x)
        x = F.elu(F.leaky_relu(x, 0.1), 0.7)
        x = F.softplus(x * 4) - torch.abs(x)
        x = torch.maximum(x, -x) + torch.minimum(x, torch.zeros(1))
        return self.p2(self.fc(x.flatten(1)))


class BicubicNet(torch.nn.Module):
    """F.interpolate(mode="bicubic") as torch exports it: Resize cubic with
    cubic_coeff_a -0.75, up with align_corners and down without."""

    def forward(self, x):
        up = F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=True)
        return F.interpolate(up, size=(11, 7), mode="bicubic", align_corners=False)


class SegmentationNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2, ceil_mode=True)
        self.mid = torch.nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")
        self.up = torch.nn.Upsample(scale_factor=2, mode="nearest")
        self.dec = torch.nn.Conv2d(16, 4, 3, padding=1)
        self.smooth = torch.nn.AvgPool2d(3, 1, 1)
        self.rows = torch.nn.Conv1d(4, 6, 3, padding=1)
        self.norm = torch.nn.BatchNorm1d(6)
        self.rows_pool = torch.nn.MaxPool1d(3, 2, ceil_mode=True)

    def forward(self, x):
        e = F.relu(self.enc(x))
        m = F.relu(self.mid(self.pool(e)))
        d = self.dec(torch.cat([self.up(m), e], 1))
        small = F.avg_pool2d(d, 2)
        mask = F.interpolate(small, size=x.shape[-2:], mode="bilinear", align_corners=False) + self.smooth(d)
        rows = self.rows_pool(F.relu(self.norm(self.rows(d.mean(3)))))
        return mask, rows


def export_models(work):
    """(name, path, inputs, expected outputs) of the torch exports."""
    models = []
    x = torch.randn(2, 3, 64, 64)
    # SqueezeNet 1.1 and GoogLeNet pool with ceil_mode=True (GoogLeNet's
    # Inception blocks with padding too).
    for name, ctor in [("resnet18", torchvision.models.resnet18), ("mobilenet_v2", torchvision.models.mobilenet_v2),
                       ("squeezenet1_1", torchvision.models.squeezenet1_1),
                       ("googlenet", lambda weights: torchvision.models.googlenet(
                           weights=weights, aux_logits=False, init_weights=True))]:
        m = ctor(weights=None)
        # Non-trivial running statistics, so eval-mode batchnorm is really tested.
        m.train()
        with torch.no_grad():
            m(torch.randn(8, 3, 64, 64))
        m.eval()
        path = os.path.join(work, name + ".onnx")
        torch.onnx.export(m, x, path, opset_version=17, input_names=["input"], output_names=["logits"])
        with torch.no_grad():
            models.append((name, path, {"input": x.numpy()}, [m(x).numpy()]))
    net = ActivationNet().eval()
    xa = torch.randn(2, 3, 8, 8)
    path = os.path.join(work, "activation_cnn.onnx")
    torch.onnx.export(net, xa, path, opset_version=17, input_names=["input"], output_names=["logits"])
    with torch.no_grad():
        models.append(("activation_cnn", path, {"input": xa.numpy()}, [net(xa).numpy()]))
    # A small segmentation net: a reflect-padded convolution, ceil-mode
    # pooling, nearest upsampling (U-Net's decoder), bilinear resizing back
    # to the input (FCN's head), nn.AvgPool2d(3, 1, 1) (Pad + AveragePool),
    # and a Conv1d/BatchNorm1d/MaxPool1d branch over the rows.
    seg = SegmentationNet().eval()
    seg_x = torch.randn(2, 3, 32, 32)
    path = os.path.join(work, "segmentation.onnx")
    torch.onnx.export(seg, seg_x, path, opset_version=17, input_names=["input"], output_names=["mask", "rows"])
    with torch.no_grad():
        models.append(("segmentation", path, {"input": seg_x.numpy()}, [t.numpy() for t in seg(seg_x)]))
    bicubic = BicubicNet().eval()
    bicubic_x = torch.randn(2, 3, 9, 8)
    path = os.path.join(work, "bicubic.onnx")
    torch.onnx.export(bicubic, bicubic_x, path, opset_version=17, input_names=["input"], output_names=["y"])
    with torch.no_grad():
        models.append(("bicubic", path, {"input": bicubic_x.numpy()}, [bicubic(bicubic_x).numpy()]))
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True, activation="gelu")
    layer.eval()
    seq = torch.randn(2, 8, 64)
    for opset in (13, 17):
        path = os.path.join(work, f"bert_layer_opset{opset}.onnx")
        torch.onnx.export(layer, seq, path, opset_version=opset, input_names=["x"], output_names=["y"])
        with torch.no_grad():
            models.append((f"bert_layer_opset{opset}", path, {"x": seq.numpy()}, [layer(seq).numpy()]))
    return models


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--driver", required=True)
    parser.add_argument("--only", help="run the cases whose name contains this")
    parser.add_argument("--keep", help="keep the work files in this folder")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="ampc-onnx-")
    os.makedirs(work, exist_ok=True)
    failures = 0
    for case in op_cases() + logic_cases():
        if args.only and args.only not in case.name:
            continue
        case_dir = os.path.join(work, case.name)
        os.makedirs(case_dir, exist_ok=True)
        path = os.path.join(case_dir, case.name + ".onnx")
        onnx.save(case.model(), path)
        try:
            got, _ = run_driver(args.driver, path, case.inputs, case_dir)
        except RuntimeError as e:
            print(f"FAIL op {case.name}: {e}")
            failures += 1
            continue
        failures += not check("op " + case.name, got, case.expected(), OP_TOLERANCE)
    for name, path, inputs, expected in export_models(work):
        if args.only and args.only not in name:
            continue
        case_dir = os.path.join(work, name)
        os.makedirs(case_dir, exist_ok=True)
        for level, tol in (("O0", MODEL_TOLERANCE), ("O1", HALF_TOLERANCE), ("O2", HALF_TOLERANCE)):
            try:
                got, ir = run_driver(args.driver, path, inputs, case_dir, level, emit=level == "O1")
            except RuntimeError as e:
                print(f"FAIL model {name} at {level}: {e}")
                failures += 1
                continue
            failures += not check(f"model {name} {level}", got, expected, tol)
            if level == "O1" and name.startswith("bert"):
                # The recognised subgraphs are single ops, whatever the opset.
                for op in ("layernorm", "gelu"):
                    if f" = {op}(" not in ir and f"= {op} " not in ir and f" {op}(" not in ir:
                        print(f"FAIL model {name}: no {op} in the imported graph")
                        failures += 1
    print(f"{'FAIL' if failures else 'PASS'}: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
