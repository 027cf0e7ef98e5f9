#!/usr/bin/env python3
"""The step time of an imported ResNet-50 with real data against synthetic.

torchvision's resnet50 (4 classes), exported to ONNX for training, trained
by ampc from (a) one batch of random tensors (.npy, the synthetic baseline)
and (b) a folder of JPEGs (ImageNet-like 500x375, PIL quality 90) through
the ImageNet training transform (RandomResizedCrop(224), flip, Normalize);
and the same module trained by PyTorch from (a) one batch of tensors reused
and (b) ImageFolder + DataLoader(num_workers=N) with torchvision's
transforms. Each line: the mean step time (the first steps left out), of
which the step waited for its batch, and that wait as a share of the step.
For ampc the wait is what the trainer reports ("waiting for data"); for
PyTorch it is the time spent in next(loader).

  /usr/bin/python3 bench/real_data_step.py [--ampc build/bin/ampc]
      [--batch 8] [--steps 6] [--workers 2] [--level O0]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torchvision
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_pipeline import MEAN, STD, make_folder  # noqa: E402

WARMUP = 2
CLASSES = 4


def write_models(tmp, batch, steps, folder):
    torch.manual_seed(0)
    module = torchvision.models.resnet50(weights=None, num_classes=CLASSES)
    x = torch.randn(batch, 3, 224, 224)
    torch.onnx.export(module, (x,), os.path.join(tmp, "resnet50.onnx"), opset_version=17,
                      input_names=["input"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    np.save(os.path.join(tmp, "x.npy"), x.numpy())
    np.save(os.path.join(tmp, "y.npy"), (torch.arange(batch) % CLASSES).numpy())
    head = f"""model: {{onnx: resnet50.onnx}}
batch: {batch}
inputs:
  input: {{shape: [B, 3, 224, 224]}}
  label: {{shape: [B], dtype: i64}}
loss: {{cross_entropy: {{input: logits, target: label}}}}
optimizer: {{sgd: {{lr: 0.01, momentum: 0.9}}}}
train:
  steps: {steps}
"""
    synthetic = head + "  data: {npy: {input: x.npy, label: y.npy}}\n"
    images = head + f"""  data:
    image_folder:
      path: {folder}
      size: [224, 224]
      augment: {{random_resized_crop: {{scale: [0.08, 1.0]}}, hflip: true}}
      normalize: {{mean: {MEAN}, std: {STD}}}
"""
    paths = {}
    for name, text in (("synthetic", synthetic), ("image folder", images)):
        paths[name] = os.path.join(tmp, name.replace(" ", "_") + ".yaml")
        with open(paths[name], "w") as f:
            f.write(text)
    return module, x, paths


def ampc_step(ampc, model, level, threads, workers):
    cmd = [ampc, "-O", level, model, "--progress", "none", "--threads", str(threads)]
    if workers:
        cmd += ["--data-workers", str(workers)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(model))
    if r.returncode:
        raise RuntimeError(r.stderr[-500:])
    m = re.search(r"mean step time ([0-9.]+) ms .* waiting for data ([0-9.]+) ms", r.stdout)
    return float(m.group(1)), float(m.group(2))


def torch_step(x, folder, batch, steps, workers):
    torch.manual_seed(0)
    module = torchvision.models.resnet50(weights=None, num_classes=CLASSES)
    module.train()
    opt = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)
    if folder:
        tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                 transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(folder, tf),
                                             batch_size=batch, shuffle=True, drop_last=True,
                                             num_workers=workers, persistent_workers=workers > 0)
        def batches():
            while True:
                yield from loader
        it = batches()
    else:
        y = torch.arange(batch) % CLASSES
        def same():
            while True:
                yield x, y
        it = same()
    step_s, wait_s = [], []
    for step in range(steps):
        t0 = time.perf_counter()
        xb, yb = next(it)
        t1 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(module(xb), yb).backward()
        opt.step()
        t2 = time.perf_counter()
        if step >= WARMUP:
            step_s.append(t2 - t0)
            wait_s.append(t1 - t0)
    return 1e3 * np.mean(step_s), 1e3 * np.mean(wait_s)


def line(who, data, step, wait):
    print(f"resnet50 {who:18s} {data:12s}: step {step:9.1f} ms, waiting for data {wait:7.1f} ms "
          f"({100 * wait / step:4.1f}%)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", default="build/bin/ampc")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--workers", type=int, default=2, help="PyTorch DataLoader workers")
    ap.add_argument("--data-workers", type=int, default=0,
                    help="ampc --data-workers (0: its default)")
    ap.add_argument("--level", default="O0")
    ap.add_argument("--images", type=int, default=256)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")  # torch.onnx's notes on the export
    ampc = os.path.abspath(args.ampc)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "train")
        make_folder(folder, args.images)
        _, x, models = write_models(tmp, args.batch, args.steps + WARMUP, folder)
        print(f"# {os.uname().machine}, {os.cpu_count()} cores, {args.threads} threads; batch "
              f"{args.batch}, 224x224, {args.steps} steps timed after {WARMUP}; ampc "
              f"{args.level}, PyTorch fp32 with {args.workers} DataLoader workers")
        for name, model in models.items():
            step, wait = ampc_step(ampc, model, args.level, args.threads, args.data_workers)
            line(f"ampc {args.level}", name, step, wait)
        for name, source in (("synthetic", None), ("image folder", folder)):
            step, wait = torch_step(x, source, args.batch, args.steps + WARMUP, args.workers)
            line("pytorch fp32", name, step, wait)
    return 0


if __name__ == "__main__":
    sys.exit(main())
