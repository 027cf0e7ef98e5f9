"""Helpers the training-recipe cross-checks share (check_losses.py, ...):
the pass/fail tally, running ampc, the seed MLP exported to ONNX, and
reading trained weights back with `ampc export --format npy`."""
import collections
import json
import math
import os
import subprocess
import warnings

import numpy as np
import torch
import torch.nn as nn

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def run(cmd, work):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    if r.returncode:
        print(" ".join(cmd))
        print(r.stdout[-800:], r.stderr[-800:])
    return r


def mlp(inputs=32, hidden=64, outputs=8):
    """The seed MLP: fc1-relu-fc2-relu-head, the same weights every call."""
    torch.manual_seed(0)
    return nn.Sequential(collections.OrderedDict([
        ("fc1", nn.Linear(inputs, hidden)), ("relu1", nn.ReLU()), ("fc2", nn.Linear(hidden, hidden)),
        ("relu2", nn.ReLU()), ("head", nn.Linear(hidden, outputs))]))


def export_onnx(module, x, path, output="logits"):
    """`module` exported for training (no constant folding) with input x."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), path, opset_version=17, input_names=["x"],
                          output_names=[output], training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)


def exported_weights(ampc, model, ckpt, names, work, extra=()):
    """The weights a checkpoint holds, by parameter name, as f64 tensors."""
    out = ckpt + ".npy"
    cmd = [ampc, "export", model, "--format", "npy", "-o", out, "--checkpoint", ckpt, *extra]
    if run(cmd, work).returncode:
        return {}
    return {n: torch.from_numpy(np.load(os.path.join(out, n + ".npy"))).double()
            for n in names if os.path.exists(os.path.join(out, n + ".npy"))}


def train_logged(ampc, model, names, work, level, half_type=None):
    """Trains `model` at `level` with a checkpoint and a metrics file: the
    trained weights (exported_weights) and each step's metrics record, or
    (None, []) when ampc fails."""
    ckpt, metrics = model + ".ckpt", model + ".metrics"
    cmd = [ampc, "-O", level, model, "--progress", "none", "--checkpoint", ckpt,
           "--metrics-out", metrics]
    if half_type:
        cmd += ["--half-type", half_type]
    if run(cmd, work).returncode:
        return None, []
    with open(metrics) as f:
        steps = [json.loads(line) for line in f if line.strip()]
    return exported_weights(ampc, model, ckpt, names, work), steps


def distance(a, b):
    """|a - b| / |b| over all tensors together; inf when the names differ."""
    if not b or set(a) != set(b):
        return math.inf
    num = sum(float(((a[n] - b[n]) ** 2).sum()) for n in b)
    den = sum(float((b[n] ** 2).sum()) for n in b)
    return math.sqrt(num / den)


def exit_code():
    """0 when every check passed, else 1 (saying how many failed)."""
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    return 0
