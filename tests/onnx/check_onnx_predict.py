#!/usr/bin/env python3
"""ampc predict and ampc eval on exported ONNX models' own weights, against PyTorch.

Two torch modules are exported with torch.onnx.export and run by ampc with
no --checkpoint, so their weights are the ONNX initializers:

- a small CNN (conv, relu, global pool, linear): `ampc predict` of 10
  samples at batch 4 (4 + 4 + 2) must equal the module's logits, and
  `ampc eval` of a model file wrapping it (cross_entropy on labels) the
  module's mean loss;
- a tiny language model (embedding, linear, logits reshaped to [B*T, V] as
  a GPT's are): `ampc predict` from a tokens-only .npy must write [N, T, V]
  equal to the module's logits, every row of every sample, and `ampc eval`
  on tokens and targets the module's mean cross-entropy over all tokens.

Run by CTest as `onnx-predict`; exits 77 (skip) without torch or onnx,
except under CI=true.

  python3 check_onnx_predict.py --ampc build/bin/ampc [--keep DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

SKIP = 77
MISSING = 1 if os.environ.get("CI") == "true" else SKIP
try:
    import numpy as np
    import torch
    import onnx  # noqa: F401  (torch.onnx.export's checker)
except ImportError as error:
    print(f"{'FAIL' if MISSING == 1 else 'SKIP'}: a Python package is missing ({error})")
    sys.exit(MISSING)

warnings.filterwarnings("ignore")
N, BATCH = 10, 4
TOLERANCE = 1e-4


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


class TinyLm(torch.nn.Module):
    VOCAB, SEQ = 11, 6

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(self.VOCAB, 8)
        self.proj = torch.nn.Linear(8, self.VOCAB)

    def forward(self, tokens):
        return self.proj(self.emb(tokens)).reshape(-1, self.VOCAB)  # [B*T, V]


class TinyLmWithTargets(torch.nn.Module):
    """TinyLm that also flattens its targets for the loss (a model file that
    wraps an ONNX graph has no layers of its own to do it)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, tokens, targets):
        return self.lm(tokens), targets.reshape(-1)


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def export(module, example, path, input_names, output_names):
    torch.onnx.export(module, example, path, input_names=input_names, output_names=output_names,
                      dynamic_axes={name: {0: "N"} for name in input_names}, opset_version=17)


def close(what, got, want):
    err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
    ok = got.shape == want.shape and err <= TOLERANCE
    print(f"{'ok  ' if ok else 'FAIL'} {what}: shape {got.shape} (want {want.shape}), "
          f"max error {err:.2e}")
    return ok


def check_cnn(ampc, work):
    torch.manual_seed(0)
    module = SmallCnn().eval()
    onnx_path = os.path.join(work, "cnn.onnx")
    export(module, torch.zeros(2, 3, 8, 8), onnx_path, ["x"], ["logits"])
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, 3, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 5, N).astype(np.int64)
    np.save(os.path.join(work, "cnn-x.npy"), x)
    np.save(os.path.join(work, "cnn-labels.npy"), labels)
    with torch.no_grad():
        logits = module(torch.from_numpy(x))
        loss = float(torch.nn.functional.cross_entropy(logits, torch.from_numpy(labels)))
    out = os.path.join(work, "cnn-pred.npy")
    data = f"{{npy: {{x: {os.path.join(work, 'cnn-x.npy')}}}}}"
    run([ampc, "predict", onnx_path, "--batch", str(BATCH), "--data", data, "-o", out])
    ok = close("small CNN: ampc predict vs torch logits", np.load(out), logits.numpy())
    wrapper = os.path.join(work, "cnn-train.yaml")
    with open(wrapper, "w") as f:
        f.write("model: {onnx: cnn.onnx}\nbatch: 4\ninputs:\n  x: {shape: [B, 3, 8, 8]}\n"
                "  label: {shape: [B], dtype: i64}\n"
                "loss: {cross_entropy: {input: logits, target: label}}\n")
    data = (f"{{npy: {{x: {os.path.join(work, 'cnn-x.npy')}, "
            f"label: {os.path.join(work, 'cnn-labels.npy')}}}}}")
    report = json.loads(run([ampc, "eval", wrapper, "--data", data, "--json"]))
    ok &= close("small CNN: ampc eval vs torch cross-entropy", np.array(report["loss"]),
                np.array(loss))
    counted = report["samples"] == N and report["checkpoint_step"] is None
    print(f"{'ok  ' if counted else 'FAIL'} small CNN: ampc eval counts {report['samples']} "
          f"samples (want {N}), checkpoint_step {report['checkpoint_step']} (want null)")
    return ok and counted


def check_lm(ampc, work):
    torch.manual_seed(0)
    module = TinyLm().eval()
    onnx_path = os.path.join(work, "lm.onnx")
    example = torch.zeros(2, TinyLm.SEQ, dtype=torch.int64)
    export(module, example, onnx_path, ["tokens"], ["logits"])
    export(TinyLmWithTargets(module).eval(), (example, example),
           os.path.join(work, "lm-targets.onnx"), ["tokens", "targets"], ["logits", "flat_targets"])
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, TinyLm.VOCAB, (N, TinyLm.SEQ)).astype(np.int64)
    targets = rng.integers(0, TinyLm.VOCAB, (N, TinyLm.SEQ)).astype(np.int64)
    np.save(os.path.join(work, "lm-tokens.npy"), tokens)
    np.save(os.path.join(work, "lm-targets.npy"), targets)
    with torch.no_grad():
        logits = module(torch.from_numpy(tokens))
        loss = float(torch.nn.functional.cross_entropy(logits, torch.from_numpy(targets).reshape(-1)))
    want = logits.numpy().reshape(N, TinyLm.SEQ, TinyLm.VOCAB)  # a sample's T rows together
    out = os.path.join(work, "lm-pred.npy")
    data = f"{{npy: {{tokens: {os.path.join(work, 'lm-tokens.npy')}}}}}"
    run([ampc, "predict", onnx_path, "--batch", str(BATCH), "--data", data, "-o", out])
    ok = close("tiny LM [B*T, V]: ampc predict vs torch logits", np.load(out), want)
    wrapper = os.path.join(work, "lm-train.yaml")
    with open(wrapper, "w") as f:
        f.write(f"model: {{onnx: lm-targets.onnx}}\nbatch: 4\ninputs:\n"
                f"  tokens: {{shape: [B, {TinyLm.SEQ}], dtype: i64}}\n"
                f"  targets: {{shape: [B, {TinyLm.SEQ}], dtype: i64}}\n"
                "loss: {cross_entropy: {input: logits, target: flat_targets}}\n")
    data = (f"{{npy: {{tokens: {os.path.join(work, 'lm-tokens.npy')}, "
            f"targets: {os.path.join(work, 'lm-targets.npy')}}}}}")
    report = json.loads(run([ampc, "eval", wrapper, "--data", data, "--json"]))
    ok &= close("tiny LM: ampc eval vs torch cross-entropy", np.array(report["loss"]),
                np.array(loss))
    # The wrapper predicts from tokens alone (its targets only the loss
    # reads), as the bare file does.
    out2 = os.path.join(work, "lm-pred-wrapped.npy")
    run([ampc, "predict", wrapper, "--batch", "3", "--data",
         f"{{npy: {{tokens: {os.path.join(work, 'lm-tokens.npy')}}}}}", "-o", out2])
    ok &= close("tiny LM wrapped, batch 3: ampc predict vs torch logits", np.load(out2), want)
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ampc", required=True)
    parser.add_argument("--keep", help="write the files here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        ok = check_cnn(args.ampc, work)
        ok &= check_lm(args.ampc, work)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
