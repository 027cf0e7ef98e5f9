#!/usr/bin/env python3
"""Writes mha.onnx: torch.nn.MultiheadAttention as torch.onnx.export writes it.

The exporter splits the fused q/k/v projection (in_proj) into three slices
of one tensor that differ only in their offsets: the lit tests in
tests/lit/onnx/compare-mha.test check that `ampc compare` and `ampc diff`
pair each slice with itself across opt levels. mha-train.yaml wraps it for
training.

The file is committed; run this (with Debian's /usr/bin/python3, which has
python3-torch and python3-onnx) only to change it:
  /usr/bin/python3 make_mha_onnx.py
"""

import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class SelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


torch.manual_seed(0)
torch.onnx.export(SelfAttention(), torch.randn(2, 5, 8), os.path.join(HERE, "mha.onnx"),
                  opset_version=17, input_names=["x"], output_names=["out"],
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
