#!/usr/bin/env python3
"""Writes the small ONNX files the lit tests in tests/lit/onnx read.

The files are committed; run this (with Debian's /usr/bin/python3, which has
python3-onnx) only to change them:  /usr/bin/python3 make_onnx_inputs.py
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def save(model, name, check=True):
    if check:
        onnx.checker.check_model(model)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(model.SerializeToString())


def model(nodes, inputs, outputs, initializers=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, 1) for d in sorted({n.domain for n in nodes if n.domain})]
    return helper.make_model(g, opset_imports=opsets)


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "conv.weight")
b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "conv.bias")
fw = numpy_helper.from_array(rng.standard_normal((10, 4)).astype(np.float32), "fc.weight")
fb = numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc.bias")

# A small valid classifier: conv, relu, global pool, flatten, linear.
good = model([helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["c"], ["r"]),
              helper.make_node("GlobalAveragePool", ["r"], ["p"]),
              helper.make_node("Flatten", ["p"], ["f"]),
              helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1)],
             [vi("x", ["N", 3, 8, 8])], [vi("logits", ["N", 10])], [w, b, fw, fb])
save(good, "small-cnn.onnx")
data = good.SerializeToString()
with open(os.path.join(HERE, "truncated.onnx"), "wb") as f:
    f.write(data[: len(data) // 2])
with open(os.path.join(HERE, "not-onnx.onnx"), "wb") as f:
    f.write(b"model: mlp\nbatch: 4\n")

relu = [helper.make_node("Relu", ["x"], ["y"])]
save(model(relu, [vi("x", [2, 3])], [vi("y", [2, 3])], opset=18), "opset-18.onnx", check=False)
save(model(relu, [vi("x", [2, 3])], [vi("y", [2, 3])], opset=5), "opset-5.onnx", check=False)
save(model([helper.make_node("Hardmax", ["x"], ["y"], name="hm")], [vi("x", [2, 3])], [vi("y", [2, 3])]),
     "unknown-op.onnx")
# Several unsupported op types: one error lists them all.
save(model([helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Hardmax", ["r"], ["h1"], name="hm1"),
            helper.make_node("LpNormalization", ["h1"], ["n"]),
            helper.make_node("Hardmax", ["n"], ["y"], name="hm2")],
           [vi("x", [2, 3])], [vi("y", [2, 3])]), "unknown-ops.onnx")
save(model([helper.make_node("Relu", ["b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second")],
           [vi("x", [2, 3])], [vi("a", [2, 3])]), "cyclic.onnx", check=False)
save(model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")], [vi("x", [2, 3])], [vi("y", [2, 3])]),
     "dangling-input.onnx", check=False)
save(model(relu, [vi("x", ["N", "seq"])], [vi("y", ["N", "seq"])]), "symbolic-dim.onnx")
save(model([helper.make_node("Conv", ["x", "conv.weight"], ["y"], pads=[0, 0, 1, 1], name="conv")],
           [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 7, 7])], [w]), "asymmetric-pads.onnx")
# Resize's cubic mode (imports), and a coordinate mode ampc does not run.
cubic_scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
save(model([helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic", name="up")],
           [vi("x", [1, 3, 4, 4])], [vi("y", [1, 3, 8, 8])], [cubic_scales]), "resize-cubic.onnx")
crop_roi = numpy_helper.from_array(np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32), "roi")
save(model([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="cubic",
                             coordinate_transformation_mode="tf_crop_and_resize", name="up")],
           [vi("x", [1, 3, 4, 4])], [vi("y", [1, 3, 8, 8])], [crop_roi, cubic_scales]), "resize-crop.onnx")
# nn.AvgPool2d(3, 1, 1) as torch 1.13 exports it: Pad, then AveragePool.
pad_pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
save(model([helper.make_node("Pad", ["x", "pads"], ["padded"], name="pad"),
            helper.make_node("AveragePool", ["padded"], ["y"], kernel_shape=[3, 3], name="pool")],
           [vi("x", [1, 3, 8, 8])], [vi("y", [1, 3, 8, 8])], [pad_pads]), "pad-avgpool.onnx")
ext = onnx.TensorProto()
ext.name = "conv.weight"
ext.data_type = TensorProto.FLOAT
ext.dims.extend([4, 3, 3, 3])
ext.data_location = TensorProto.EXTERNAL
for k, v in (("location", "missing-weights.bin"), ("offset", "0"), ("length", str(4 * 108))):
    e = ext.external_data.add()
    e.key, e.value = k, v
save(model([helper.make_node("Conv", ["x", "conv.weight"], ["y"], name="conv")],
           [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 6, 6])], [ext]), "missing-external-data.onnx", check=False)
# The same convolution with its weights beside it in external-weights.bin.
ext_values = (np.arange(108, dtype=np.float32) / 108).reshape(4, 3, 3, 3)
with open(os.path.join(HERE, "external-weights.bin"), "wb") as f:
    f.write(ext_values.tobytes())
ext.external_data[0].value = "external-weights.bin"
save(model([helper.make_node("Conv", ["x", "conv.weight"], ["y"], name="conv")],
           [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 6, 6])], [ext]), "external-data.onnx", check=False)

# A Reshape whose shape is an input of the model (ampc needs it at import:
# --fix-input), with the shape's value and a file of the wrong dtype.
save(model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
           [vi("x", [2, 6]), vi("shape", [2], TensorProto.INT64)], [vi("y", [3, 4])]),
     "reshape-shape-input.onnx")
np.save(os.path.join(HERE, "reshape-shape.npy"), np.array([3, 4], np.int64))
np.save(os.path.join(HERE, "reshape-shape-f32.npy"), np.array([3, 4], np.float32))

# Opset 6, below what the version converter lifts, but Elu is defined the
# same at opset 7: the model is one of opset 7 as it stands.
save(model([helper.make_node("Elu", ["x"], ["y"], alpha=0.5, name="elu")],
           [vi("x", [2, 3])], [vi("y", [2, 3])], opset=6), "opset-6-elu.onnx")

# What an eval-mode torch export leaves of Conv + BatchNorm: one Conv whose
# weight and bias the exporter renamed (onnx::Conv_*), no BatchNormalization.
folded_w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "onnx::Conv_5")
folded_b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "onnx::Conv_6")
save(model([helper.make_node("Conv", ["x", "onnx::Conv_5", "onnx::Conv_6"], ["y"], pads=[1, 1, 1, 1], name="conv")],
           [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 8, 8])], [folded_w, folded_b]), "folded-batchnorm.onnx")

# An output no node produces, at an opset that needs converting: ONNX 1.12's
# checker passes it and its version converter crashes on it (found by
# fuzz-onnx), so ampc checks the graph's structure first.
save(model(relu, [vi("x", [2, 3])], [vi("missing", [2, 3])], opset=11), "unproduced-output.onnx", check=False)
# A node of another domain.
save(model([helper.make_node("MyRelu", ["x"], ["y"], domain="com.example", name="custom")],
           [vi("x", [2, 3])], [vi("y", [2, 3])]), "custom-domain.onnx", check=False)

# A training graph that computes its own loss: a linear layer, then
# SoftmaxCrossEntropyLoss with class weights and an ignore_index, its
# log_prob output kept.
sce_w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "fc.weight")
sce_b = numpy_helper.from_array(np.zeros(4, np.float32), "fc.bias")
sce_cw = numpy_helper.from_array(np.array([1.0, 0.5, 2.0, 1.0], np.float32), "class_weight")
save(model([helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["logits"], transB=1, name="fc"),
            helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "label", "class_weight"],
                             ["sce", "log_prob"], ignore_index=3, reduction="mean", name="sce")],
           [vi("x", ["N", 3]), vi("label", ["N"], TensorProto.INT64)],
           [vi("sce", []), vi("log_prob", ["N", 4])], [sce_w, sce_b, sce_cw], opset=13), "sce-loss.onnx")
