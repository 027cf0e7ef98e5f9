#!/usr/bin/env python3
"""An imported GPT trained from a nanoGPT token stream, against PyTorch.

The zoo's nanoGPT (tests/zoo/zoo_models.py: nn.Embedding for tokens and
positions, masked_fill causal attention, GELU MLP, a bias-free head), as
PyTorch exports it for training, learns from a train.bin written the way
nanoGPT's prepare.py writes one (uint16, numpy's tofile):
  - the first five steps, on the stream's windows in their order
    (`shuffle: false`, windows dumped by ampc-data-driver), give PyTorch's
    AdamW losses within 1e-4 at O0;
  - a longer run at O0 and O2 (bf16) brings the loss far below the uniform
    log(V), and `ampc eval --data val.bin` evaluates the model on the fixed
    evaluation windows of another stream.
Exit 0 pass, 1 fail, 77 without torch.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "zoo"))
sys.path.insert(0, HERE)
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from zoo_models import NanoGpt
    from check_tokens import stream
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

V, T, B = 64, 32, 8
LR = 3e-3
PARITY_STEPS = 5
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def model_yaml(steps, shuffle):
    return f"""model: {{onnx: gpt.onnx}}
batch: {B}
inputs:
  idx: {{shape: [B, {T}], dtype: i64}}
  target: {{shape: [B, {T}], dtype: i64}}
loss: {{cross_entropy: {{input: logits, target: target}}}}
optimizer: {{adamw: {{lr: {LR}, weight_decay: 0.0}}}}
train:
  seed: 7
  steps: {steps}
  shuffle: {str(shuffle).lower()}
  data: {{tokens: {{path: train.bin, dtype: uint16}}}}
"""


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def ampc_losses(ampc, model, level, tmp, extra=()):
    metrics = os.path.join(tmp, f"metrics-{level}.jsonl")
    r = run([ampc, "--opt-level", level, "--device", "cpu", model, "--metrics-out", metrics,
             "--progress", "none", *extra], tmp)
    if r.returncode:
        print(r.stderr[-600:])
        return []
    with open(metrics) as f:
        return [float(rec["loss"]) for rec in map(json.loads, f) if "loss" in rec]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--ampc", required=True)
    args = ap.parse_args()
    args.driver, args.ampc = os.path.abspath(args.driver), os.path.abspath(args.ampc)
    rng = np.random.default_rng(1)
    torch.manual_seed(0)
    module = NanoGpt(vocab=V, block=T)
    with tempfile.TemporaryDirectory() as tmp:
        train, val = stream(rng, 30000, V), stream(rng, 4001, V)
        train.tofile(os.path.join(tmp, "train.bin"))
        val.tofile(os.path.join(tmp, "val.bin"))
        example = torch.zeros(B, T, dtype=torch.long)
        torch.onnx.export(module, (example,), os.path.join(tmp, "gpt.onnx"), opset_version=17,
                          input_names=["idx"], output_names=["logits"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)

        # --- the first steps against PyTorch, on ampc's own windows ----------
        parity = os.path.join(tmp, "parity.yaml")
        with open(parity, "w") as f:
            f.write(model_yaml(PARITY_STEPS, shuffle=False))
        out = os.path.join(tmp, "windows")
        os.makedirs(out)
        r = run([args.driver, parity, "0", str(B * PARITY_STEPS), out], tmp)
        check(r.returncode == 0, "ampc-data-driver dumps the windows: " + r.stderr.strip()[-200:])
        if r.returncode:
            return 1
        x = torch.from_numpy(np.load(os.path.join(out, "idx.npy")))
        y = torch.from_numpy(np.load(os.path.join(out, "target.npy")))
        check(bool((x[:, 1:] == y[:, :-1]).all()), "targets are the windows shifted by one")
        want = []
        reference = NanoGpt(vocab=V, block=T)
        reference.load_state_dict(module.state_dict())
        opt = torch.optim.AdamW(reference.parameters(), lr=LR, weight_decay=0.0)
        for step in range(PARITY_STEPS):
            xb, yb = x[step * B:(step + 1) * B], y[step * B:(step + 1) * B]
            opt.zero_grad()
            loss = F.cross_entropy(reference(xb).reshape(-1, V), yb.reshape(-1))
            want.append(loss.item())
            loss.backward()
            opt.step()
        got = ampc_losses(args.ampc, parity, "O0", tmp)
        diff = max((abs(a - b) / abs(b) for a, b in zip(got, want)), default=math.inf)
        print("  ampc O0:", " ".join(f"{v:.6f}" for v in got))
        print("  PyTorch:", " ".join(f"{v:.6f}" for v in want))
        check(len(got) == PARITY_STEPS and diff <= 1e-4,
              f"the first {PARITY_STEPS} steps from train.bin give PyTorch's AdamW losses "
              f"(largest relative difference {diff:.1e})")

        # --- evaluation of the exported weights against PyTorch ------------
        # 125 windows at batch 8: the last 5 run padded (the export holds the
        # batch in its reshapes, so no program for 5 can be built).
        vt = torch.from_numpy(val.astype(np.int64))
        n = (len(val) - 1) // T
        vx = torch.stack([vt[i * T:i * T + T] for i in range(n)])
        vy = torch.stack([vt[i * T + 1:i * T + T + 1] for i in range(n)])
        with torch.no_grad():
            want_eval = F.cross_entropy(module(vx).reshape(-1, V), vy.reshape(-1)).item()
        r = run([args.ampc, "eval", parity, "--data", "val.bin", "--json"], tmp)
        try:
            report = json.loads(r.stdout)
        except ValueError:
            report = {}
            print(r.stderr[-400:])
        got_eval = report.get("loss", math.inf)
        check(report.get("samples") == n and abs(got_eval - want_eval) <= 1e-5 * want_eval,
              f"ampc eval of the exported weights on {n} windows (the last {n % B} padded): loss "
              f"{got_eval:.7f}, PyTorch {want_eval:.7f}")
        preds = os.path.join(tmp, "pred.npy")
        r = run([args.ampc, "predict", parity, "--data", "val.bin", "-o", preds], tmp)
        with torch.no_grad():
            want_logits = module(vx).numpy()
        got_logits = np.load(preds) if r.returncode == 0 else None
        ok = got_logits is not None and got_logits.shape == want_logits.shape
        err = float(np.abs(got_logits - want_logits).max()) if ok else math.inf
        check(ok and err <= 1e-4,
              f"ampc predict --data val.bin: {None if got_logits is None else got_logits.shape} "
              f"logits, max difference from PyTorch {err:.1e} " + r.stderr.strip()[-200:])

        # --- training from the stream, evaluated on another -----------------
        model = os.path.join(tmp, "model.yaml")
        with open(model, "w") as f:
            f.write(model_yaml(150, shuffle=True))
        for level in ("O0", "O2"):
            ckpt = os.path.join(tmp, f"{level}.ckpt")
            losses = ampc_losses(args.ampc, model, level, tmp, ("--checkpoint", ckpt))
            final = sum(losses[-10:]) / 10 if len(losses) == 150 else math.inf
            check(final < 0.4 * math.log(V),
                  f"{level}: the imported GPT learns the stream (mean loss of the last 10 steps "
                  f"{final:.3f}, first {losses[0] if losses else float('nan'):.3f}, uniform "
                  f"{math.log(V):.3f})")
            r = run([args.ampc, "eval", model, "--checkpoint", ckpt, "--data", "val.bin",
                     "--json"], tmp)
            try:
                report = json.loads(r.stdout)
            except ValueError:
                report = {}
                print(r.stderr[-400:])
            check(report.get("samples") == (len(val) - 1) // T
                  and report.get("loss", 99) < 0.5 * math.log(V),
                  f"{level}: ampc eval --data val.bin: {report.get('samples')} windows, loss "
                  f"{report.get('loss')}")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
