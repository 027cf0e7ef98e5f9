#!/usr/bin/env python3
"""Parameter groups against torch.optim's param_groups.

Two models built in PyTorch and imported by ampc from ONNX (so both sides
start from the same weights): the seed MLP (Linear-ReLU-Linear-ReLU-Linear,
named fc1, fc2, head) and the real-models zoo's nanoGPT. Each trains 5 steps
of AdamW at O0 with the recipe's groups -- biases and normalisation weights
without weight decay, the head at its own learning rate -- on both sides,
from one batch. The losses must agree within 1e-6, and the parameters
after the 5 steps (relative, as a whole) within 1e-6 or twice the distance
of the two sides without groups (f32 rounding, which Adam amplifies in
parameters whose gradients are near zero). At O1 the losses must be as
close to PyTorch's f32 ones as PyTorch's own bf16 autocast is, within 2x;
at O2 (bf16 weights) within 1e-2, and nearer the grouped run than the
ungrouped one.
A run without the groups must be far from PyTorch's grouped one (the check
can fail).
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zoo"))
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from zoo_models import NanoGpt
    from recipe_support import check, distance, exit_code
    from recipe_support import mlp as recipe_mlp
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

STEPS = 5
LR, WEIGHT_DECAY, HEAD_LR = 3e-3, 0.1, 1e-2
TOLERANCE = 1e-6


def mlp():
    return recipe_mlp(inputs=64, hidden=64, outputs=64)


def gpt():
    torch.manual_seed(0)
    return NanoGpt(vocab=64, block=16)


# name: (module, inputs, target, loss, ampc groups, torch's grouping)
def cases():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 64, generator=g)
    y = torch.randn(16, 64, generator=g)
    idx = torch.randint(0, 64, (4, 16), generator=g)
    nxt = torch.randint(0, 64, (4, 16), generator=g)
    return {
        "mlp": (mlp(), {"x": x}, y, "mse",
                '[{params: ["*.bias"], weight_decay: 0.0}, {params: [head.weight], lr: %g}]' % HEAD_LR,
                lambda n: 0 if n.endswith(".bias") else 1 if n == "head.weight" else -1),
        "nanogpt": (gpt(), {"idx": idx}, nxt, "lm",
                    '[{params: ["*.bias", "*ln*"], weight_decay: 0.0}, '
                    '{params: ["lm_head.*"], lr: %g}]' % HEAD_LR,
                    lambda n: 0 if n.endswith(".bias") or "ln" in n
                    else 1 if n.startswith("lm_head.") else -1),
    }


def loss_of(kind, out, target):
    if kind == "mse":
        return F.mse_loss(out, target)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def torch_run(module, inputs, target, kind, group_of, autocast=False):
    groups = [[], [], []]  # defaults, group 0, group 1
    for n, p in module.named_parameters():
        groups[group_of(n) + 1].append(p)
    opt = torch.optim.AdamW([
        {"params": groups[0]},
        {"params": groups[1], "weight_decay": 0.0},
        {"params": groups[2], "lr": HEAD_LR},
    ], lr=LR, weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = module(*inputs.values())
        loss = loss_of(kind, out.float(), target)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    return losses, {n: p.detach().double() for n, p in module.named_parameters()}


def ampc_run(args, name, module, inputs, target, kind, groups, work, level="O0"):
    path = os.path.join(work, name + ".onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(inputs.values()), path, opset_version=17,
                          input_names=list(inputs), output_names=["logits"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    data = {}
    for key, t in list(inputs.items()) + [("target", target)]:
        np.save(os.path.join(work, f"{name}-{key}.npy"), t.numpy())
        data[key] = f"{name}-{key}.npy"

    def dtype(t):
        return "i64" if t.dtype == torch.int64 else "f32"
    shapes = "\n".join(f"  {k}: {{shape: [B, {', '.join(map(str, t.shape[1:]))}], dtype: {dtype(t)}}}"
                       for k, t in list(inputs.items()) + [("target", target)])
    loss = ("{mse_loss: {input: logits, target: target}}" if kind == "mse"
            else "{cross_entropy: {input: logits, target: target}}")
    group_text = f", groups: {groups}" if groups else ""
    model = os.path.join(work, f"{name}{'-groups' if groups else ''}-{level}.yaml")
    with open(model, "w") as f:
        f.write(f"""model: {{onnx: {name}.onnx}}
batch: {target.shape[0]}
inputs:
{shapes}
loss: {loss}
optimizer: {{adamw: {{lr: {LR}, weight_decay: {WEIGHT_DECAY}{group_text}}}}}
train:
  steps: {STEPS}
  data: {{npy: {{{', '.join(f'{k}: {v}' for k, v in data.items())}}}}}
""")
    metrics = model + ".jsonl"
    ckpt = model + ".ckpt"
    out_dir = model + ".weights"
    r = subprocess.run([args.ampc, "-O", level, model, "--progress", "none", "--metrics-out",
                        metrics, "--checkpoint", ckpt], capture_output=True, text=True, cwd=work)
    if r.returncode:
        print(r.stderr[-600:])
        return [], {}
    r = subprocess.run([args.ampc, "export", model, "--format", "npy", "-o", out_dir,
                        "--checkpoint", ckpt], capture_output=True, text=True, cwd=work)
    if r.returncode:
        print(r.stderr[-600:])
        return [], {}
    with open(metrics) as f:
        losses = [json.loads(l)["loss"] for l in f if '"loss"' in l]
    weights = {}
    for n, _ in module.named_parameters():
        p = os.path.join(out_dir, n + ".npy")
        if os.path.exists(p):
            weights[n] = torch.from_numpy(np.load(p)).double()
    return losses, weights


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    args = ap.parse_args()
    args.ampc = os.path.abspath(args.ampc)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as work:
        for name, (module, inputs, target, kind, groups, group_of) in cases().items():
            start = {n: p.detach().clone() for n, p in module.named_parameters()}
            want_losses, want = torch_run(module, inputs, target, kind, group_of)
            with torch.no_grad():
                for n, p in module.named_parameters():
                    p.copy_(start[n])
            got_losses, got = ampc_run(args, name, module, inputs, target, kind, groups, work)
            plain_losses, plain = ampc_run(args, name, module, inputs, target, kind, "", work)
            with torch.no_grad():
                for n, p in module.named_parameters():
                    p.copy_(start[n])
            _, want_plain = torch_run(module, inputs, target, kind, lambda n: -1)
            ok = len(got_losses) == STEPS and set(got) == set(want) and set(plain) == set(want)
            loss_diff = max((abs(a - b) / abs(b) for a, b in zip(got_losses, want_losses)),
                            default=math.inf)
            weight_diff = distance(got, want) if ok else math.inf
            # f32 rounding alone, as Adam amplifies it in parameters whose
            # gradients are near zero: both sides without groups.
            baseline = distance(plain, want_plain) if ok else math.inf
            # How far the groups move the weights: what the check resolves.
            moved = distance(plain, want) if ok else math.inf
            check(ok and loss_diff <= TOLERANCE and weight_diff <= max(TOLERANCE, 2 * baseline),
                  f"{name}: {STEPS} AdamW steps with parameter groups at O0: losses within "
                  f"{loss_diff:.1e}, parameters within {weight_diff:.1e} of PyTorch's (without "
                  f"groups on both sides {baseline:.1e})")
            # Mixed precision: O1 (autocast's level) as far from PyTorch's f32
            # losses as PyTorch's bf16 autocast is, within 2x; O2 (bf16
            # weights, f32 master weights updated with the groups) nearer
            # the grouped f32 losses than the ungrouped ones are.
            with torch.no_grad():
                for n, p in module.named_parameters():
                    p.copy_(start[n])
            try:
                peer, _ = torch_run(module, inputs, target, kind, group_of, autocast=True)
                peer_diff = max(abs(a - b) / abs(b) for a, b in zip(peer, want_losses))
            except RuntimeError:  # torch 1.13's CPU autocast fails on some ops
                peer_diff = float("nan")
            with torch.no_grad():
                for n, p in module.named_parameters():
                    p.copy_(start[n])
            plain_want, _ = torch_run(module, inputs, target, kind, lambda n: -1)
            with torch.no_grad():
                for n, p in module.named_parameters():
                    p.copy_(start[n])

            def diff(losses, reference):
                return max((abs(a - b) / abs(b) for a, b in zip(losses, reference)),
                           default=math.inf) if len(losses) == STEPS else math.inf
            o1 = diff(ampc_run(args, name, module, inputs, target, kind, groups, work, "O1")[0],
                      want_losses)
            bound = 2e-2 if math.isnan(peer_diff) else max(2 * peer_diff, 1e-4)
            check(o1 <= bound, f"{name}: at O1 the grouped losses are within {o1:.1e} of "
                               f"PyTorch's f32 (PyTorch's bf16 autocast {peer_diff:.1e})")
            o2_losses, _ = ampc_run(args, name, module, inputs, target, kind, groups, work, "O2")
            o2, o2_plain = diff(o2_losses, want_losses), diff(o2_losses, plain_want)
            check(o2 <= 1e-2 and o2 < o2_plain,
                  f"{name}: at O2 the grouped losses are within {o2:.1e} of PyTorch's grouped "
                  f"f32 ones ({o2_plain:.1e} of its ungrouped ones)")
            check(moved > 100 * TOLERANCE,
                  f"{name}: without the groups the parameters are {moved:.1e} from PyTorch's "
                  f"grouped run (the check resolves the groups)")
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
