#!/usr/bin/python3
"""ONNX models in ampc against the same modules in PyTorch, in one run.

torchvision ResNet-18 (10 classes, 64x64 images, batch 32) and a BERT-style
encoder layer (width 256, 4 heads, 64 tokens, batch 16) are exported with
torch.onnx.export and wrapped in model files. For each it prints one line per
figure:

  import    the time `ampc --emit ir` takes on the ONNX file (import, rewrite
            at O1, print), the median of 3
  ampc O0 / O2   the median training-step time (plain SGD, synthetic data)
            after warm-up, from --metrics-out
  torch fp32 / autocast bf16   the same module, loss and optimizer in
            PyTorch on the same machine, median step time after warm-up

Both sides use 2 threads (OMP_NUM_THREADS=2, GOMP_SPINCOUNT=0). Run with
Debian's /usr/bin/python3 (python3-torch, python3-torchvision):

  /usr/bin/python3 bench/onnx_models.py [--build-dir build] [--steps 30]
"""

import os

os.environ["OMP_NUM_THREADS"] = "2"
os.environ["GOMP_SPINCOUNT"] = "0"

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torchvision

warnings.filterwarnings("ignore")
torch.set_num_threads(2)


def median_step_ms(metrics, warmup):
    times = []
    with open(metrics) as f:
        for line in f:
            r = json.loads(line)
            if "step_ms" in r:
                times.append(r["step_ms"])
    return statistics.median(times[warmup:]) if len(times) > warmup else float("nan")


def torch_step_ms(module, x, target, loss_fn, steps, warmup, autocast):
    opt = torch.optim.SGD(module.parameters(), lr=1e-3)
    module.train()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        opt.zero_grad()
        if autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(module(x), target)
        else:
            loss = loss_fn(module(x), target)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times[warmup:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    ampc = os.path.join(args.build_dir, "bin", "ampc")
    work = tempfile.mkdtemp(prefix="ampc-onnx-bench-")
    warmup = 5
    torch.manual_seed(0)
    cases = []
    resnet = torchvision.models.resnet18(weights=None, num_classes=10)
    cases.append(("resnet18", resnet, torch.randn(32, 3, 64, 64), torch.randint(0, 10, (32,)),
                  torch.nn.CrossEntropyLoss(), "label: {shape: [B], dtype: i64}",
                  "{cross_entropy: {input: out, target: label}}", "x: {shape: [B, 3, 64, 64]}"))
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True, activation="gelu")
    cases.append(("bert-layer", layer, torch.randn(16, 64, 256), torch.randn(16, 64, 256),
                  torch.nn.MSELoss(), "target: {shape: [B, 64, 256]}",
                  "{mse_loss: {input: out, target: target}}", "x: {shape: [B, 64, 256]}"))
    print(f"machine: {os.cpu_count()} cpus visible, 2 threads; torch {torch.__version__}")
    for name, module, x, target, loss_fn, extra, loss, x_input in cases:
        path = os.path.join(work, name + ".onnx")
        torch.onnx.export(module, x, path, opset_version=17, input_names=["x"], output_names=["out"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        model_file = os.path.join(work, name + ".yaml")
        with open(model_file, "w") as f:
            f.write(f"model: {{onnx: {name}.onnx}}\nbatch: {len(x)}\ninputs:\n  {x_input}\n  {extra}\n"
                    f"loss: {loss}\noptimizer: {{sgd: {{lr: 0.001}}}}\n"
                    f"train: {{steps: {args.steps}, data: {{synthetic: {{seed: 0, size: {len(x) * 4}}}}}}}\n")
        imports = []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run([ampc, "--emit", "ir", "--opt-level", "O1", path], capture_output=True, check=True)
            imports.append((time.perf_counter() - t) * 1e3)
        print(f"{name:11s} import         {statistics.median(imports):8.1f} ms")
        for level in ("O0", "O2"):
            metrics = os.path.join(work, f"{name}-{level}.jsonl")
            subprocess.run([ampc, "--opt-level", level, "--device", "cpu", model_file, "--metrics-out", metrics,
                            "--progress", "none"], capture_output=True, check=True)
            print(f"{name:11s} ampc {level}        {median_step_ms(metrics, warmup):8.1f} ms/step")
        for label, autocast in (("torch fp32", False), ("torch bf16ac", True)):
            try:
                ms = torch_step_ms(module, x, target, loss_fn, args.steps, warmup, autocast)
                print(f"{name:11s} {label:14s} {ms:8.1f} ms/step")
            except RuntimeError as e:
                print(f"{name:11s} {label:14s}      n/a ({str(e).splitlines()[0][:60]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
