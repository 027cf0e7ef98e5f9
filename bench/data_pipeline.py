#!/usr/bin/env python3
"""Image-folder loading: ampc's pipeline against PyTorch's DataLoader.

Generates a folder of JPEGs (ImageNet-like 500x375, noise + gradients, PIL
quality 90), then measures images per second for the ImageNet training
transform (RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
Normalize) and the evaluation one (Resize(256), CenterCrop(224), ...):

  ampc     ampc-data-driver --bench: Batcher::next, the batch's rows decoded
           and transformed on every OpenMP thread (OMP_NUM_THREADS=N)
  pytorch  torchvision.datasets.ImageFolder + DataLoader(num_workers=N)

in the same run, one line per figure. Usage:
  /usr/bin/python3 bench/data_pipeline.py --driver build/bin/ampc-data-driver
      [--images 256] [--workers 2] [--batches 8] [--repeats 3]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image
import torch
import torchvision
from torchvision import transforms

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
BATCH = 32

MODEL = """model: loader
batch: {batch}
inputs:
  image: {{shape: [B, 3, 224, 224]}}
  label: {{shape: [B], dtype: i64}}
layers:
  - global_avgpool: {{input: image, name: gap}}
  - flatten: {{name: flat}}
  - linear: {{out_features: 4, name: logits}}
loss: {{cross_entropy: {{input: logits, target: label}}}}
optimizer: {{sgd: {{lr: 0.1}}}}
train:
  data:
    image_folder:
      path: {path}
      size: [224, 224]
{augment}      normalize: {{mean: {mean}, std: {std}}}
"""


def make_folder(root, images):
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:375, 0:500]
    for i in range(images):
        d = os.path.join(root, f"class{i % 4}")
        os.makedirs(d, exist_ok=True)
        base = np.stack([(xx * (i % 7 + 1)) % 256, (yy * 3) % 256, (xx + yy) % 256], -1)
        img = np.clip(base + rng.normal(0, 25, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(d, f"{i:05d}.jpg"), quality=90)


def ampc_rate(driver, model, batches, workers):
    env = dict(os.environ, OMP_NUM_THREADS=str(workers))
    r = subprocess.run([driver, "--bench", model, str(batches)], capture_output=True, text=True,
                       env=env, check=True)
    return float(re.search(r"images/s ([0-9.eE+-]+)", r.stdout).group(1))


def torch_rate(root, train, batches, workers):
    tf = (transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                              transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
          if train else
          transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                              transforms.ToTensor(), transforms.Normalize(MEAN, STD)]))
    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(root, tf),
                                         batch_size=BATCH, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0, drop_last=True)
    it = iter(loader)
    next(it)  # workers started and warm
    start = time.perf_counter()
    n = 0
    for _ in range(batches):
        try:
            x, _ = next(it)
        except StopIteration:
            it = iter(loader)
            x, _ = next(it)
        n += len(x)
    return n / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", default="build/bin/ampc-data-driver")
    ap.add_argument("--images", type=int, default=320)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "train")
        make_folder(root, args.images)
        models = {}
        for name, augment in [("train", "      augment: {random_resized_crop: {scale: [0.08, 1.0]}, "
                                        "hflip: true}\n"),
                              ("eval", "      resize: 256\n")]:
            p = os.path.join(tmp, name + ".yaml")
            with open(p, "w") as f:
                f.write(MODEL.format(batch=BATCH, path=root, augment=augment, mean=MEAN, std=STD))
            models[name] = p
        print(f"# {args.images} JPEGs 500x375 -> 224x224, batch {BATCH}, {args.workers} "
              f"workers/threads, {args.batches} batches a figure, best of {args.repeats}")
        for name in ("train", "eval"):
            a = t = 0.0
            for _ in range(args.repeats):  # interleaved: both see the same machine
                a = max(a, ampc_rate(args.driver, models[name], args.batches, args.workers))
                t = max(t, torch_rate(root, name == "train", args.batches, args.workers))
            print(f"{name:5s} transform: ampc {a:8.1f} images/s   pytorch DataLoader {t:8.1f} "
                  f"images/s   ampc/pytorch {a / t:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
