#!/usr/bin/env python3
"""Token streams: windows against numpy, and a GPT-style model trained from one.

Writes nanoGPT-format train.bin / val.bin (uint16, numpy's tofile), then
checks through ampc-data-driver that evaluation windows are numpy's slices
t[i*T : i*T+T] and t[i*T+1 : i*T+T+1], that training windows are slices of
the stream at offsets in [0, L-T-1] and repeat for the same epoch, and that
`ampc` trains a small causal transformer from the stream (its loss falls
well below the uniform log(V)) and `ampc eval --data val.bin` evaluates it.
Exit 0 pass, 1 fail, 77 without numpy.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

V, T = 32, 16
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


MODEL = f"""model: tiny_gpt
batch: 8
inputs:
  tokens: {{shape: [B, {T}], dtype: i64}}
  pos: {{shape: [B, {T}], dtype: i64}}
  targets: {{shape: [B, {T}], dtype: i64}}
layers:
  - embedding: {{num_embeddings: {V}, embedding_dim: 32, input: tokens, name: tok}}
  - embedding: {{num_embeddings: {T}, embedding_dim: 32, input: pos, name: pemb}}
  - add: {{inputs: [tok, pemb], name: x}}
  - layernorm: {{name: ln1}}
  - linear: {{out_features: 32, input: ln1, name: q}}
  - reshape: {{shape: [B, -1, 2, 16], name: qh}}
  - permute: {{dims: [0, 2, 1, 3], name: qt}}
  - linear: {{out_features: 32, input: ln1, name: k}}
  - reshape: {{shape: [B, -1, 2, 16], name: kh}}
  - permute: {{dims: [0, 2, 1, 3], name: kt}}
  - linear: {{out_features: 32, input: ln1, name: v}}
  - reshape: {{shape: [B, -1, 2, 16], name: vh}}
  - permute: {{dims: [0, 2, 1, 3], name: vt}}
  - scaled_dot_product_attention: {{inputs: [qt, kt, vt], causal: true, name: att}}
  - permute: {{dims: [0, 2, 1, 3], name: att_t}}
  - reshape: {{shape: [B, -1, 32], name: merged}}
  - linear: {{out_features: 32, name: proj}}
  - add: {{inputs: [x, proj], name: res}}
  - layernorm: {{name: lnf}}
  - linear: {{out_features: {V}, name: logits3}}
  - reshape: {{shape: [-1, {V}], name: logits}}
  - reshape: {{shape: [-1], input: targets, name: flat_targets}}
loss: {{cross_entropy: {{input: logits, target: flat_targets}}}}
optimizer: {{adamw: {{lr: 0.01}}}}
train:
  seed: 1
  steps: 150
  data: {{tokens: {{path: train.bin, dtype: uint16, positions: pos}}}}
"""


def stream(rng, n, vocab=V):
    """A learnable stream: runs that count up by a random stride."""
    out, t = [], 0
    while len(out) < n:
        stride = int(rng.integers(1, 4))
        for _ in range(int(rng.integers(5, 20))):
            t = (t + stride) % vocab
            out.append(t)
    return np.array(out[:n], dtype=np.uint16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--ampc", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        train, val = stream(rng, 20000), stream(rng, 3001)
        train.tofile(os.path.join(tmp, "train.bin"))
        val.tofile(os.path.join(tmp, "val.bin"))
        model = os.path.join(tmp, "model.yaml")
        with open(model, "w") as f:
            f.write(MODEL)

        def dump(epoch, out):
            os.makedirs(out)
            r = subprocess.run([args.driver, model, str(epoch), "0", out], capture_output=True,
                               text=True)
            if r.returncode:
                print(r.stderr)
                return None
            return (np.load(os.path.join(out, "tokens.npy")),
                    np.load(os.path.join(out, "targets.npy")),
                    np.load(os.path.join(out, "pos.npy")))

        ev = dump(-1, os.path.join(tmp, "ev"))
        n = (len(train) - 1) // T
        check(ev is not None and len(ev[0]) == n, f"an epoch is (L - 1) // T = {n} windows")
        if ev is None:
            return 1
        x = np.stack([train[i * T:i * T + T] for i in range(n)]).astype(np.int64)
        y = np.stack([train[i * T + 1:i * T + T + 1] for i in range(n)]).astype(np.int64)
        check(np.array_equal(ev[0], x) and np.array_equal(ev[1], y),
              "evaluation windows are numpy's slices")
        check(np.array_equal(ev[2], np.tile(np.arange(T), (n, 1))), "positions are 0..T-1")
        a, b = dump(3, os.path.join(tmp, "a")), dump(3, os.path.join(tmp, "b"))
        windows = np.lib.stride_tricks.sliding_window_view(train.astype(np.int64), T)
        ok = a is not None
        offsets = []
        for i in range(n if ok else 0):
            hits = np.nonzero((windows[:len(train) - T] == a[0][i]).all(axis=1))[0]
            ok = ok and len(hits) > 0 and any(
                np.array_equal(train[o + 1:o + T + 1], a[1][i]) for o in hits)
            offsets.append(hits[0] if len(hits) else -1)
        check(ok, "training windows are stream slices, targets one token ahead")
        check(a is not None and np.array_equal(a[0], b[0]), "the same epoch: the same windows")
        check(max(offsets, default=0) > 0.9 * len(train) and min(offsets, default=1) < 0.1 * len(train),
              "training offsets cover the stream")

        r = subprocess.run([args.ampc, "--opt-level", "O1", "--device", "cpu", model, "--checkpoint",
                            os.path.join(tmp, "ck.bin"), "--progress", "none"],
                           capture_output=True, text=True)
        line = [l for l in r.stdout.splitlines() if l.startswith("trained")]
        print(line[0] if line else r.stderr[-300:])
        final = float(line[0].split("->")[1]) if line else 99
        check(r.returncode == 0 and final < 0.5 * math.log(V),
              f"a GPT-style model trains from the stream (loss {final:.3f}, uniform "
              f"{math.log(V):.3f})")
        r = subprocess.run([args.ampc, "eval", model, "--checkpoint", os.path.join(tmp, "ck.bin"),
                            "--data", os.path.join(tmp, "val.bin"), "--json"],
                           capture_output=True, text=True)
        try:
            report = json.loads(r.stdout)
        except ValueError:
            report = {}
        check(report.get("samples") == (len(val) - 1) // T and report.get("loss", 99) < 0.6 * math.log(V),
              f"ampc eval --data val.bin: {report.get('samples')} windows, loss "
              f"{report.get('loss')}")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
