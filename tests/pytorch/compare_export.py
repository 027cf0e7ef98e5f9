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

A convnet with two BatchNorm2d layers (trained at O2 with gradient
accumulation, so that its running statistics move and its micro-batch count
differs from its step count) is exported the same way: the files must be
exactly its torch.nn twin's state_dict, num_batches_tracked included (an
int64 scalar: the checkpoint's micro-batches), the recipe of docs/cli.md --
read from the page and run as written -- must load them with
load_state_dict(strict=True), and the eval-mode twin's outputs must equal
`ampc predict`'s on 10 samples (batch 4: a last partial batch of 2).

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


CONVBN_MODEL = """model: convbn
batch: 4
inputs:
  x: {shape: [B, 3, 8, 8]}
  label: {shape: [B], dtype: i64}
init:
  seed: 0
layers:
  - conv2d: {out_channels: 6, kernel: 3, padding: 1, name: conv1}
  - batchnorm2d: {name: bn1}
  - relu: {}
  - conv2d: {out_channels: 8, kernel: 3, stride: 2, padding: 1, bias: false, name: conv2}
  - batchnorm2d: {name: bn2, momentum: 0.3}
  - relu: {}
  - global_avgpool: {}
  - flatten: {}
  - linear: {out_features: 5, name: fc}
loss: {cross_entropy: {input: fc, target: label}}
optimizer: {sgd: {lr: 0.1, momentum: 0.9}}
train:
  steps: 3
  accumulate: 2
  shuffle: false
  data: {npy: {x: bn-x.npy, label: bn-label.npy}}
"""
CONVBN_MICRO_BATCHES = 3 * 2


class ConvBn(torch.nn.Module):
    """CONVBN_MODEL in torch.nn."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(6)
        self.conv2 = torch.nn.Conv2d(6, 8, 3, stride=2, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8, momentum=0.3)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def docs_recipe():
    """The Python block of docs/cli.md's "ampc export" section, as written."""
    page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "cli.md")
    with open(page) as f:
        text = f.read()
    section = text[text.index("## ampc export"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    if not match or '"mlp-weights"' not in match.group(1):
        print("FAIL: docs/cli.md's export recipe (a python block naming \"mlp-weights\") is gone")
        sys.exit(1)
    return match.group(1)


def load_with_recipe(model, weights):
    """Runs the docs recipe on `model`, reading the folder `weights`."""
    code = docs_recipe().replace('"mlp-weights"', repr(weights))
    exec(compile(code, "docs/cli.md", "exec"), {"model": model})


def check_batchnorm(ampc, folder):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((24, 3, 8, 8)).astype(np.float32) * 2 + 0.5
    label = rng.integers(0, 5, 24).astype(np.int64)
    np.save(os.path.join(folder, "bn-x.npy"), x)
    np.save(os.path.join(folder, "bn-label.npy"), label)
    test_x = rng.standard_normal((10, 3, 8, 8)).astype(np.float32)
    np.save(os.path.join(folder, "bn-test-x.npy"), test_x)
    np.save(os.path.join(folder, "bn-test-label.npy"), np.zeros(10, np.int64))
    with open(os.path.join(folder, "convbn.yaml"), "w") as f:
        f.write(CONVBN_MODEL)
    run([ampc, "-O", "O2", "convbn.yaml", "--progress", "none", "--checkpoint", "bn.ckpt"], folder)
    out = run([ampc, "export", "convbn.yaml", "--checkpoint", "bn.ckpt", "--format", "npy",
               "-o", "bn-weights"], folder)
    print(out.strip())

    model = ConvBn()
    weights = os.path.join(folder, "bn-weights")
    files = sorted(os.listdir(weights))
    expected = sorted(f"{name}.npy" for name in model.state_dict())
    if files != expected:
        print(f"FAIL: exported {files}, the torch model has {expected}")
        return 1
    try:
        load_with_recipe(model, weights)  # strict=True
    except RuntimeError as error:
        print(f"FAIL: the docs/cli.md recipe does not load the batchnorm model: {error}")
        return 1
    for bn in (model.bn1, model.bn2):
        if bn.num_batches_tracked.dtype != torch.int64 or bn.num_batches_tracked.item() != CONVBN_MICRO_BATCHES:
            print(f"FAIL: num_batches_tracked is {bn.num_batches_tracked!r}, "
                  f"not the {CONVBN_MICRO_BATCHES} micro-batches trained")
            return 1
    if float(model.bn1.running_mean.abs().max()) < 1e-3 or float((model.bn2.running_var - 1).abs().max()) < 1e-3:
        print("FAIL: the running statistics did not move in training; the test cannot see them")
        return 1

    model.eval()
    with torch.no_grad():
        torch_out = model(torch.from_numpy(test_x)).numpy()
    run([ampc, "predict", "convbn.yaml", "--checkpoint", "bn.ckpt", "-O", "O0", "--batch", "4",
         "--data", "{npy: {x: bn-test-x.npy, label: bn-test-label.npy}}", "-o", "bn-pred.npy"], folder)
    ampc_out = np.load(os.path.join(folder, "bn-pred.npy"))
    if ampc_out.shape != torch_out.shape:
        print(f"FAIL: ampc predicted {ampc_out.shape}, torch {torch_out.shape}")
        return 1
    d = float(np.abs(ampc_out - torch_out).max()) / max(1.0, float(np.abs(torch_out).max()))
    print(f"batchnorm model: torch (strict load) vs ampc predict, 10 samples: {d:.2e} (tolerance 1e-5)")
    if d > 1e-5:
        print("FAIL: PyTorch's outputs with the exported batchnorm weights differ from ampc's")
        return 1
    print(f"ok: {len(files)} files, num_batches_tracked {CONVBN_MICRO_BATCHES}, loaded strictly")
    return 0


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
        load_with_recipe(model, weights)  # docs/cli.md, "ampc export"

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
        return check_batchnorm(ampc, folder)


if __name__ == "__main__":
    sys.exit(main())
