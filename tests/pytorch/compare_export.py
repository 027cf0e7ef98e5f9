#!/usr/bin/env python3
"""`ampc export --format npy` -> PyTorch load_state_dict -> the same forward.

The MLP of examples/mlp.yaml (3 x Linear with ReLU between, MSE loss), at a
smaller width and on .npy data so that PyTorch sees the same batch, is
trained a few steps at O2 (bf16 parameters with fp32 masters), and its
checkpoint is exported as .npy files. The equivalent torch.nn model loads
them with the recipe of docs/cli.md ("ampc export"), strictly (every
state_dict entry, nothing else), and its MSE loss on the first batch must
equal what `ampc --run forward --resume CHECKPOINT` prints at O0 (the fp32
masters) within 1e-5 relative -- and must differ from the loss of the bf16
half copies, so the test sees that the masters were exported.

Run by CTest as `pytorch-export`. Exits 77 (CTest's skip) when torch cannot
be imported, 1 under CI (CI=true), where scripts/install-deps.sh installs it.

  python3 compare_export.py --ampc build/bin/ampc [--keep DIR]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

SKIP_RETURN_CODE = 77
MISSING_RETURN_CODE = 1 if os.environ.get("CI") == "true" else SKIP_RETURN_CODE

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as error:
    print(f"{'FAIL' if MISSING_RETURN_CODE == 1 else 'SKIP'}: python3-torch not installed ({error})")
    sys.exit(MISSING_RETURN_CODE)

HIDDEN, BATCH, SAMPLES = 64, 16, 64

MODEL = f"""model: mlp
batch: {BATCH}
inputs:
  x: {{shape: [B, {HIDDEN}]}}
  target: {{shape: [B, {HIDDEN}]}}
init:
  seed: 0
layers:
  - linear: {{out_features: {HIDDEN}, name: fc1}}
  - relu: {{}}
  - linear: {{out_features: {HIDDEN}, name: fc2}}
  - relu: {{}}
  - linear: {{out_features: {HIDDEN}, name: out}}
loss: {{mse_loss: {{input: out, target: target}}}}
optimizer: {{sgd: {{lr: 2.0, momentum: 0.9}}}}
train:
  steps: 5
  shuffle: false
  data: {{npy: {{x: x.npy, target: target.npy}}}}
"""


class Mlp(torch.nn.Module):
    """examples/mlp.yaml in torch.nn: the layers' names are the parameters'."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(HIDDEN, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        return self.out(F.relu(self.fc2(F.relu(self.fc1(x)))))


def run(cmd, cwd):
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {result.returncode}\n{result.stdout}{result.stderr}")
        sys.exit(1)
    return result.stdout


def ampc_loss(ampc, folder, level):
    out = run([ampc, "-O", level, "model.yaml", "--run", "forward", "--resume", "o2.ckpt",
               "--device", "cpu-ref"], folder)
    match = re.search(r"^loss = ([0-9.eE+-]+)$", out, re.M)
    if not match:
        print(f"FAIL: no loss in ampc's output:\n{out}")
        sys.exit(1)
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ampc", required=True)
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()
    ampc = os.path.abspath(args.ampc)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or tmp
        os.makedirs(folder, exist_ok=True)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((SAMPLES, HIDDEN)).astype(np.float32)
        teacher = rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32) / np.sqrt(HIDDEN)
        target = (x @ teacher).astype(np.float32)
        np.save(os.path.join(folder, "x.npy"), x)
        np.save(os.path.join(folder, "target.npy"), target)
        with open(os.path.join(folder, "model.yaml"), "w") as f:
            f.write(MODEL)

        run([ampc, "-O", "O2", "model.yaml", "--progress", "none", "--checkpoint", "o2.ckpt"],
            folder)
        run([ampc, "export", "model.yaml", "--checkpoint", "o2.ckpt", "--format", "npy",
             "-o", "weights"], folder)

        model = Mlp()
        weights = os.path.join(folder, "weights")
        files = sorted(os.listdir(weights))
        expected = sorted(f"{name}.npy" for name in model.state_dict())
        if files != expected:
            print(f"FAIL: exported {files}, the torch model has {expected}")
            return 1
        # The recipe of docs/cli.md, "ampc export".
        state = {name: torch.from_numpy(np.load(f"{weights}/{name}.npy"))
                 for name in model.state_dict()}
        model.load_state_dict(state)

        with torch.no_grad():
            torch_loss = F.mse_loss(model(torch.from_numpy(x[:BATCH])),
                                    torch.from_numpy(target[:BATCH])).item()
        fp32_loss = ampc_loss(ampc, folder, "O0")  # the fp32 masters
        half_loss = ampc_loss(ampc, folder, "O3")  # the bf16 half copies
        # ampc prints six decimals: half a unit of the last place besides 1e-5.
        tolerance = 1e-5 * abs(fp32_loss) + 5e-7
        ok = abs(torch_loss - fp32_loss) <= tolerance
        print(f"torch {torch_loss:.7f}  ampc O0 (masters) {fp32_loss:.6f}  "
              f"ampc O3 (bf16 halves) {half_loss:.6f}")
        if not ok:
            print("FAIL: PyTorch's loss with the exported weights differs from ampc's")
            return 1
        if abs(torch_loss - half_loss) <= tolerance:
            print("FAIL: the exported weights match the bf16 copies as well as the masters; "
                  "the test cannot tell them apart")
            return 1
        print(f"ok: {len(files)} files, PyTorch's forward equals ampc's within {tolerance:.1e}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
