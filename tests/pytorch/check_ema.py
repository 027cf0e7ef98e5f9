#!/usr/bin/env python3
"""EMA weights (train: {ema: {decay: D}}) against torch.optim.swa_utils.AveragedModel.

The seed MLP (Linear-ReLU-Linear-ReLU-Linear, named fc1, fc2, head), built
in PyTorch and imported by ampc from ONNX so that both sides start from the
same weights, trains STEPS AdamW steps at O0 from one batch. PyTorch keeps
AveragedModel(model, avg_fn=decay * avg + (1 - decay) * p) and calls
update_parameters after every optimizer.step(): the first call copies the
weights, each later one averages. Checked:
- `ampc export --ema` writes the average within 1e-6 (relative, as a whole)
  of PyTorch's, or twice the distance of the two sides' trained weights
  (f32 rounding that Adam amplifies), and far from the trained weights (the
  check resolves the average);
- `ampc eval --ema` gives the averaged model's loss on the data within
  1e-5, and `ampc eval` without it the trained model's;
- with gradient accumulation (2 micro-batches a step) the average follows
  the optimizer steps, not the micro-batches;
- at O2 (bf16 weights, f32 masters) the average is of the f32 masters:
  as near PyTorch's f32 average as O2's trained weights are to PyTorch's
  f32 ones (within 2x), and held in f32 (few of its values are bf16
  values, as an average of the rounded model weights would be).
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
    from torch.optim.swa_utils import AveragedModel
    from recipe_support import check, distance, exit_code, mlp, run
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

STEPS = 8
LR = 1e-2
DECAY = 0.75
TOLERANCE = 1e-6


def torch_run(start, x, y, accumulate):
    """STEPS optimizer steps; with accumulate > 1 each step sums the
    gradients of `accumulate` consecutive micro-batches of x, y (their mean,
    as ampc's train.accumulate)."""
    model = mlp()
    model.load_state_dict(start)
    ema = AveragedModel(model, avg_fn=lambda avg, p, n: DECAY * avg + (1 - DECAY) * p)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    micro = x.shape[0] // accumulate
    for _ in range(STEPS):
        opt.zero_grad()
        for k in range(accumulate):
            xs, ys = x[k * micro:(k + 1) * micro], y[k * micro:(k + 1) * micro]
            (F.mse_loss(model(xs), ys) / accumulate).backward()
        opt.step()
        ema.update_parameters(model)
    trained = {n: p.detach().double() for n, p in model.named_parameters()}
    averaged = {n: p.detach().double() for n, p in ema.module.named_parameters()}
    with torch.no_grad():
        eval_trained = F.mse_loss(model(x), y).item()
        eval_averaged = F.mse_loss(ema.module(x), y).item()
    return trained, averaged, eval_trained, eval_averaged


class Ampc:
    def __init__(self, args, work, start, x, y):
        self.ampc, self.work = args.ampc, work
        module = mlp()
        module.load_state_dict(start)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (x,), os.path.join(work, "mlp.onnx"), opset_version=17,
                              input_names=["x"], output_names=["logits"],
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False)
        np.save(os.path.join(work, "x.npy"), x.numpy())
        np.save(os.path.join(work, "y.npy"), y.numpy())
        self.names = [n for n, _ in module.named_parameters()]

    def train(self, level, accumulate, ema=True):
        tag = f"{level}-acc{accumulate}{'' if ema else '-noema'}"
        model = os.path.join(self.work, f"mlp-{tag}.yaml")
        ema_text = f"\n  ema: {{decay: {DECAY}}}" if ema else ""
        with open(model, "w") as f:
            f.write(f"""model: {{onnx: mlp.onnx}}
batch: {16 // accumulate}
inputs:
  x: {{shape: [B, 32]}}
  target: {{shape: [B, 8]}}
loss: {{mse_loss: {{input: logits, target: target}}}}
optimizer: {{adamw: {{lr: {LR}, weight_decay: 0.0}}}}
train:
  steps: {STEPS}
  accumulate: {accumulate}
  shuffle: false{ema_text}
  data: {{npy: {{x: x.npy, target: y.npy}}}}
""")
        ckpt = model + ".ckpt"
        if run([self.ampc, "-O", level, model, "--progress", "none", "--checkpoint", ckpt],
               self.work).returncode:
            return None
        return model, ckpt

    def weights(self, model, ckpt, ema):
        out = f"{model}.{'ema' if ema else 'trained'}"
        cmd = [self.ampc, "export", model, "--format", "npy", "-o", out, "--checkpoint", ckpt]
        if run(cmd + (["--ema"] if ema else []), self.work).returncode:
            return {}
        return {n: torch.from_numpy(np.load(os.path.join(out, n + ".npy"))).double()
                for n in self.names if os.path.exists(os.path.join(out, n + ".npy"))}

    def eval_loss(self, model, ckpt, ema):
        cmd = [self.ampc, "eval", model, "--checkpoint", ckpt, "--json", "--batch", "16"]
        r = run(cmd + (["--ema"] if ema else []), self.work)
        return math.inf if r.returncode else json.loads(r.stdout)["loss"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    args = ap.parse_args()
    args.ampc = os.path.abspath(args.ampc)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 32, generator=g)
    y = torch.randn(16, 8, generator=g)
    start = mlp().state_dict()
    with tempfile.TemporaryDirectory() as work:
        ampc = Ampc(args, work, start, x, y)
        for accumulate in (1, 2):
            want_trained, want_avg, want_eval, want_eval_avg = torch_run(start, x, y, accumulate)
            built = ampc.train("O0", accumulate)
            if not built:
                check(False, f"O0 training with ema (accumulate {accumulate}) runs")
                continue
            model, ckpt = built
            got_avg = ampc.weights(model, ckpt, ema=True)
            got_trained = ampc.weights(model, ckpt, ema=False)
            baseline = distance(got_trained, want_trained)
            avg_diff = distance(got_avg, want_avg)
            resolves = distance(got_trained, want_avg)
            check(avg_diff <= max(TOLERANCE, 2 * baseline) and resolves > 100 * TOLERANCE,
                  f"accumulate {accumulate}: the average after {STEPS} AdamW steps at O0 is "
                  f"within {avg_diff:.1e} of AveragedModel's (trained weights {baseline:.1e} "
                  f"apart; the trained weights are {resolves:.1e} from the average)")
            if accumulate != 1:
                continue
            got_eval_avg = ampc.eval_loss(model, ckpt, ema=True)
            got_eval = ampc.eval_loss(model, ckpt, ema=False)
            check(abs(got_eval_avg - want_eval_avg) <= 1e-5 * abs(want_eval_avg)
                  and abs(got_eval - want_eval) <= 1e-5 * abs(want_eval)
                  and abs(want_eval - want_eval_avg) > 1e-3 * abs(want_eval),
                  f"ampc eval --ema: loss {got_eval_avg:.7f} against the averaged model's "
                  f"{want_eval_avg:.7f}; without --ema {got_eval:.7f} against {want_eval:.7f}")

        # O2: the average of the f32 masters, as far from PyTorch's f32
        # average as O2's trained weights are from its f32 ones (bf16
        # forward and backward), and in f32: an average of the bf16 model
        # weights would mostly be bf16 values.
        want_trained, want_avg, _, _ = torch_run(start, x, y, 1)
        built = ampc.train("O2", 1)
        if built:
            model, ckpt = built
            got_avg = ampc.weights(model, ckpt, ema=True)
            got_trained = ampc.weights(model, ckpt, ema=False)
            o2_avg = distance(got_avg, want_avg)
            o2_baseline = distance(got_trained, want_trained)
            o2_resolves = distance(got_trained, want_avg)
            values = torch.cat([t.flatten() for t in got_avg.values()]) if got_avg else None
            in_bf16 = (float((values.float().bfloat16().float().double() == values).double().mean())
                       if values is not None else 1.0)
            check(o2_avg <= 2 * o2_baseline + 1e-3 and o2_avg < o2_resolves / 4 and in_bf16 < 0.1,
                  f"O2: the average is {o2_avg:.1e} from PyTorch's f32 average (O2's trained "
                  f"weights {o2_baseline:.1e} from its f32 ones, {o2_resolves:.1e} from the "
                  f"average); {100 * in_bf16:.1f}% of its values are bf16 values")
        else:
            check(False, "O2 training with ema runs")

        # A checkpoint without an average: --ema is refused, naming why.
        built = ampc.train("O0", 1, ema=False)
        if built:
            model, ckpt = built
            r = subprocess.run([args.ampc, "eval", model, "--checkpoint", ckpt, "--ema"],
                               capture_output=True, text=True, cwd=work)
            check(r.returncode != 0 and "no averaged weights" in r.stderr,
                  f"eval --ema of a checkpoint trained without ema fails (exit {r.returncode}: "
                  f"{r.stderr.strip()[-120:]})")
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
