#!/usr/bin/env python3
"""LAMB against a numpy reference of Apex FusedLAMB's update.

The reference follows apex/optimizers/fused_lamb.py and
csrc/multi_tensor_lamb.cu: the global norm of every gradient clips them
(divided by norm / max_grad_norm when above it); Adam's moments (beta3 =
1 - beta1 with grad_averaging, else 1), bias correction optional, the decay
added to the gradient (adam_w_mode false) or to the update (true); then per
tensor the trust ratio lr |p| / |u| where the tensor decays (or every
tensor with use_nvlamb), lr where a norm is 0. It runs in f64 on the
gradients PyTorch computes (f32) at its own parameters.

A small MLP (fc1, fc2, head) built in PyTorch and imported by ampc from ONNX
trains 5 steps at O0 from one batch, with biases in a group without weight
decay, in two configurations covering every flag. The losses must agree
within 1e-6 and the parameters within 1e-5 (relative, as a whole), and the
clip must act (the global norm above max_grad_norm).
Exit 0 pass, 1 fail, 77 without torch.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from recipe_support import check, exit_code, mlp
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

STEPS = 5
CONFIGS = {
    "adamw-mode": dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, adam_w_mode=True,
                       grad_averaging=True, bias_correction=True, max_grad_norm=0.25,
                       use_nvlamb=False),
    "l2-nvlamb": dict(lr=5e-3, betas=(0.8, 0.99), eps=1e-4, weight_decay=0.05, adam_w_mode=False,
                      grad_averaging=False, bias_correction=False, max_grad_norm=0.2,
                      use_nvlamb=True),
}


def make_mlp():
    return mlp(inputs=32, hidden=48, outputs=16)


def weight_decay_of(name, cfg):
    return 0.0 if name.endswith(".bias") else cfg["weight_decay"]


def reference(module, x, y, cfg):
    """FusedLAMB in numpy f64; the losses and parameters after STEPS."""
    names = [n for n, _ in module.named_parameters()]
    p = {n: t.detach().double().numpy().copy() for n, t in module.named_parameters()}
    m = {n: np.zeros_like(p[n]) for n in names}
    v = {n: np.zeros_like(p[n]) for n in names}
    b1, b2 = cfg["betas"]
    b3 = 1 - b1 if cfg["grad_averaging"] else 1.0
    losses, norms = [], []
    for t in range(1, STEPS + 1):
        with torch.no_grad():
            for n, param in module.named_parameters():
                param.copy_(torch.from_numpy(p[n]).float())
        module.zero_grad()
        loss = F.mse_loss(module(x), y)
        loss.backward()
        losses.append(loss.item())
        g = {n: param.grad.double().numpy() for n, param in module.named_parameters()}
        norm = math.sqrt(sum(float((g[n] ** 2).sum()) for n in names))
        norms.append(norm)
        divisor = norm / cfg["max_grad_norm"] if norm > cfg["max_grad_norm"] else 1.0
        bc1 = 1 - b1 ** t if cfg["bias_correction"] else 1.0
        bc2 = 1 - b2 ** t if cfg["bias_correction"] else 1.0
        for n in names:
            wd = weight_decay_of(n, cfg)
            grad = g[n] / divisor
            if not cfg["adam_w_mode"]:
                grad = grad + wd * p[n]
            m[n] = b1 * m[n] + b3 * grad
            v[n] = b2 * v[n] + (1 - b2) * grad * grad
            u = (m[n] / bc1) / (np.sqrt(v[n] / bc2) + cfg["eps"])
            if cfg["adam_w_mode"]:
                u = u + wd * p[n]
            ratio = cfg["lr"]
            if cfg["use_nvlamb"] or wd != 0:
                pn, un = float(np.linalg.norm(p[n])), float(np.linalg.norm(u))
                if pn != 0 and un != 0:
                    ratio = cfg["lr"] * pn / un
            p[n] = p[n] - ratio * u
    return losses, p, norms


def ampc_run(ampc, work, name, cfg):
    settings = ", ".join(
        f"{k}: {str(v).lower() if isinstance(v, bool) else list(v) if isinstance(v, tuple) else v}"
        for k, v in cfg.items())
    model = os.path.join(work, f"{name}.yaml")
    with open(model, "w") as f:
        f.write(f"""model: {{onnx: mlp.onnx}}
batch: 16
inputs:
  x: {{shape: [B, 32]}}
  target: {{shape: [B, 16]}}
loss: {{mse_loss: {{input: logits, target: target}}}}
optimizer: {{lamb: {{{settings}, groups: [{{params: ["*.bias"], weight_decay: 0.0}}]}}}}
train:
  steps: {STEPS}
  data: {{npy: {{x: x.npy, target: y.npy}}}}
""")
    metrics, ckpt, out = model + ".jsonl", model + ".ckpt", model + ".weights"
    r = subprocess.run([ampc, "-O", "O0", model, "--progress", "none", "--metrics-out", metrics,
                        "--checkpoint", ckpt], capture_output=True, text=True, cwd=work)
    if r.returncode == 0:
        r = subprocess.run([ampc, "export", model, "--format", "npy", "-o", out, "--checkpoint",
                            ckpt], capture_output=True, text=True, cwd=work)
    if r.returncode:
        print(r.stderr[-600:])
        return [], {}
    with open(metrics) as f:
        losses = [json.loads(l)["loss"] for l in f if '"loss"' in l]
    weights = {n[:-4]: np.load(os.path.join(out, n)).astype(np.float64)
               for n in os.listdir(out) if n.endswith(".npy")}
    return losses, weights


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    args = ap.parse_args()
    ampc = os.path.abspath(args.ampc)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 32, generator=g), torch.randn(16, 16, generator=g)
    with tempfile.TemporaryDirectory() as work:
        module = make_mlp()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (x,), os.path.join(work, "mlp.onnx"), opset_version=17,
                              input_names=["x"], output_names=["logits"],
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False)
        np.save(os.path.join(work, "x.npy"), x.numpy())
        np.save(os.path.join(work, "y.npy"), y.numpy())
        for name, cfg in CONFIGS.items():
            want_losses, want, norms = reference(make_mlp(), x, y, cfg)
            got_losses, got = ampc_run(ampc, work, name, cfg)
            ok = len(got_losses) == STEPS and all(n in got for n in want)
            loss_diff = max((abs(a - b) / abs(b) for a, b in zip(got_losses, want_losses)),
                            default=math.inf)
            num = sum(float(((got[n] - want[n]) ** 2).sum()) for n in want) if ok else math.inf
            den = sum(float((want[n] ** 2).sum()) for n in want)
            weight_diff = math.sqrt(num / den)
            check(ok and loss_diff <= 1e-6 and weight_diff <= 1e-5,
                  f"{name}: {STEPS} LAMB steps at O0: losses within {loss_diff:.1e}, parameters "
                  f"within {weight_diff:.1e} of the FusedLAMB reference")
            check(min(norms) > cfg["max_grad_norm"],
                  f"{name}: the global norm clips every step ({min(norms):.3f} > "
                  f"{cfg['max_grad_norm']})")
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
