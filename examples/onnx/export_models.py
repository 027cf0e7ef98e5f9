#!/usr/bin/env python3
"""Exports the ONNX models the files in this folder wrap (random weights; no
downloads). Run with a Python that has torch and torchvision (on Debian:
/usr/bin/python3 with python3-torch and python3-torchvision):

  /usr/bin/python3 examples/onnx/export_models.py

writes resnet18.onnx (torchvision ResNet-18, 10 classes, 32x32 inputs) and
bert-layer.onnx (a BERT-style encoder layer: 8 tokens of width 64) next to
this script. Both are exported in training mode without constant folding, so
every parameter and batchnorm statistic keeps its own initializer
(docs/onnx.md).
"""

import os

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)

resnet = torchvision.models.resnet18(weights=None, num_classes=10)
torch.onnx.export(resnet, torch.randn(64, 3, 32, 32), os.path.join(HERE, "resnet18.onnx"),
                  opset_version=17, input_names=["image"], output_names=["logits"],
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)

layer = torch.nn.TransformerEncoderLayer(64, 4, 256, dropout=0.1, batch_first=True, activation="gelu")
torch.onnx.export(layer, torch.randn(16, 8, 64), os.path.join(HERE, "bert-layer.onnx"),
                  opset_version=17, input_names=["tokens"], output_names=["hidden"],
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
print("wrote resnet18.onnx and bert-layer.onnx in", HERE)
