#!/usr/bin/env python3
"""Writes causal.onnx: one head of causal self-attention written the
nanoGPT way (a lower-triangular buffer, masked_fill with -inf, softmax).

At run time the masked scores are -inf at every level, and the backward
pass holds a scalar fill of 0 (where's gradient to its constant -inf): the
lit test compare-causal.test checks that `ampc compare` counts matching
infinities as exact and does not pair that fill with the loss's seed.
causal-train.yaml wraps it for training.

The file is committed; run this (with Debian's /usr/bin/python3, which has
python3-torch and python3-onnx) only to change it:
  /usr/bin/python3 make_causal_onnx.py
"""

import math
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class CausalAttention(torch.nn.Module):
    def __init__(self, dim=8, block=6):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C))
        att = att.masked_fill(self.bias[:, :T, :T] == 0, float("-inf"))
        return torch.softmax(att, dim=-1) @ v


torch.manual_seed(0)
torch.onnx.export(CausalAttention(), torch.randn(2, 5, 8), os.path.join(HERE, "causal.onnx"),
                  opset_version=17, input_names=["x"], output_names=["out"],
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
