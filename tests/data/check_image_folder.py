#!/usr/bin/env python3
"""Image folders against torchvision's ImageFolder, and training from one.

Generates class folders of PNG and JPEG images with PIL (nothing committed),
then checks, through ampc-data-driver (tests/data/data_driver.cpp):
  - the files, their order and labels are ImageFolder's;
  - the evaluation transform (Resize of the shorter side, CenterCrop,
    ToTensor, Normalize) gives torchvision's values within one 8-bit level;
  - training draws are seeded: the same (seed, epoch) gives the same
    samples, another epoch others, every value a normalised pixel;
  - a corrupt file is an error naming it, or left out with bad_files: skip;
then trains a small CNN (built by PyTorch, imported by ampc from ONNX) on a
folder of stripe patterns (of a contrast that goes down to none, so neither
side reaches 100%) with ampc and with PyTorch (the same transforms,
DataLoader) from the same initial weights, eight seeds, and compares their
mean accuracy on a held-out folder,
and predicts a flat folder of files into a CSV with the file names.
Exit 0 pass, 1 fail, 77 when PIL or torchvision is missing.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from PIL import Image
    import torch
    import torchvision
    from torchvision import transforms
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
SIZE = 32
RESIZE = 36
SEEDS = tuple(range(1, 9))
PARITY_STEPS = 300
PARITY_LR = 0.005
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def make_image(rng, label, w, h):
    """A noisy image whose dominant colour is the class (learnable)."""
    base = np.zeros((h, w, 3), np.float32)
    base[..., label % 3] = 170
    noise = rng.normal(0, 40, (h, w, 3))
    # A bright square somewhere: something the crop can move around.
    y, x = rng.integers(0, max(1, h - 6)), rng.integers(0, max(1, w - 6))
    base[y:y + 6, x:x + 6] = 255
    return Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8))


PARITY_MODEL = """model: {{onnx: net.onnx}}
batch: 16
inputs:
  image: {{shape: [B, 3, {size}, {size}]}}
  label: {{shape: [B], dtype: i64}}
loss: {{cross_entropy: {{input: logits, target: label}}}}
optimizer: {{adam: {{lr: {lr}}}}}
train:
  seed: {seed}
  steps: {steps}
  lr_schedule: {{cosine: {{}}}}
  data:
    image_folder:
      path: {path}
      size: [{size}, {size}]
      resize: {resize}
      augment: {{random_resized_crop: {{scale: [0.5, 1.0]}}, hflip: true}}
      normalize: {{mean: {mean}, std: {std}}}
"""


def make_pattern_image(rng, label, w, h):
    """Class 0 horizontal stripes, 1 vertical, 2 a checkerboard, of random
    period, phase, colour and contrast (down to none) under pixel noise."""
    yy, xx = np.mgrid[0:h, 0:w]
    period, phase = rng.uniform(5, 9), rng.uniform(0, 2 * np.pi)
    rows = np.sin(2 * np.pi * yy / period + phase)
    cols = np.sin(2 * np.pi * xx / period + phase)
    pattern = (rows, cols, rows * cols)[label]
    img = rng.uniform(60, 200, 3) + rng.uniform(0, 50) * pattern[..., None] \
        + rng.normal(0, 40, (h, w, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def write_pattern_folder(root, per_class, rng):
    for label, name in enumerate(["horizontal", "vertical", "checker"]):
        os.makedirs(os.path.join(root, name))
        for i in range(per_class):
            img = make_pattern_image(rng, label, int(rng.integers(36, 80)),
                                     int(rng.integers(36, 80)))
            img.save(os.path.join(root, name, f"{i:03d}." + ("png" if i % 2 else "jpg")))


def write_folder(root, classes, per_class, rng, nested=True):
    for label, name in enumerate(classes):
        for i in range(per_class):
            sub = os.path.join(root, name, "deep") if nested and i % 4 == 3 else \
                os.path.join(root, name)
            os.makedirs(sub, exist_ok=True)
            w, h = int(rng.integers(30, 90)), int(rng.integers(30, 90))
            img = make_image(rng, label, w, h)
            if i % 2:
                img.save(os.path.join(sub, f"img{i:03d}.png"))
            else:
                img.save(os.path.join(sub, f"IMG{i:03d}.JPG"), quality=90)
    # Not an image by its name: ignored, as ImageFolder ignores it.
    with open(os.path.join(root, classes[0], "notes.txt"), "w") as f:
        f.write("not an image\n")


MODEL = """model: folder_cnn
batch: 16
inputs:
  image: {{shape: [B, 3, {size}, {size}]}}
  label: {{shape: [B], dtype: i64}}
layers:
  - conv2d: {{out_channels: 8, kernel: 3, padding: 1, input: image, name: c1}}
  - relu: {{name: r1}}
  - maxpool2d: {{kernel: 2, name: p1}}
  - conv2d: {{out_channels: 16, kernel: 3, padding: 1, name: c2}}
  - relu: {{name: r2}}
  - global_avgpool: {{name: gap}}
  - flatten: {{name: flat}}
  - linear: {{out_features: 3, name: logits}}
loss: {{cross_entropy: {{input: logits, target: label}}}}
optimizer: {{adam: {{lr: 0.01}}}}
train:
  seed: 5
  steps: {steps}
  data:
    image_folder:
      path: {path}
      size: [{size}, {size}]
      resize: {resize}
      augment: {{random_resized_crop: {{scale: [0.5, 1.0]}}, hflip: true}}
      normalize: {{mean: {mean}, std: {std}}}
"""


def model_file(dirname, path, steps=60):
    text = MODEL.format(size=SIZE, resize=RESIZE, path=path, steps=steps, mean=MEAN, std=STD)
    p = os.path.join(dirname, "model.yaml")
    with open(p, "w") as f:
        f.write(text)
    return p


def dump(driver, model, epoch, out):
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([driver, model, str(epoch), "0", out], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr
    names = open(os.path.join(out, "names.txt")).read().split("\n")[:-1]
    return (np.load(os.path.join(out, "image.npy")), np.load(os.path.join(out, "label.npy")),
            names), r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--ampc", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    classes = ["ant", "bee", "cat"]
    with tempfile.TemporaryDirectory() as tmp:
        train = os.path.join(tmp, "train")
        val = os.path.join(tmp, "val")
        write_folder(train, classes, 40, rng)
        write_folder(val, classes, 20, rng, nested=False)
        model = model_file(tmp, train)

        # --- listing and the evaluation transform ---------------------------
        got, err = dump(args.driver, model, -1, os.path.join(tmp, "eval"))
        check(got is not None, "the image folder opens: " + err.strip())
        if got is None:
            return 1
        images, labels, names = got
        eval_tf = transforms.Compose([transforms.Resize(RESIZE), transforms.CenterCrop(SIZE),
                                      transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        ref = torchvision.datasets.ImageFolder(train, transform=eval_tf)
        ref_names = [os.path.relpath(p, train) for p, _ in ref.samples]
        check(names == ref_names, f"{len(names)} files in ImageFolder's order")
        check(list(labels) == [c for _, c in ref.samples], "labels are ImageFolder's")
        expected = np.stack([ref[i][0].numpy() for i in range(len(ref))])
        level = 1.0 / 255.0 / min(STD)
        diff = np.abs(images - expected).max()
        exact = np.mean(np.abs(images - expected) < 1e-5)
        check(diff <= level + 1e-5,
              f"evaluation transform vs torchvision: max diff {diff * 255 * min(STD):.3f} levels, "
              f"{exact * 100:.2f}% exact")

        # --- grayscale: a [B, 1, H, W] input --------------------------------
        text = open(model).read().replace("[B, 3, ", "[B, 1, ").replace(
            f"normalize: {{mean: {MEAN}, std: {STD}}}", "normalize: {mean: [0.5], std: [0.25]}")
        gray = os.path.join(tmp, "gray.yaml")
        with open(gray, "w") as f:
            f.write(text)
        got, err = dump(args.driver, gray, -1, os.path.join(tmp, "gray"))
        gray_tf = transforms.Compose([transforms.Grayscale(1), transforms.Resize(RESIZE),
                                      transforms.CenterCrop(SIZE), transforms.ToTensor(),
                                      transforms.Normalize([0.5], [0.25])])
        ref = torchvision.datasets.ImageFolder(train, transform=gray_tf)
        expected = np.stack([ref[i][0].numpy() for i in range(len(ref))])
        diff = np.abs(got[0] - expected).max() * 255 * 0.25 if got is not None else np.inf
        check(got is not None and got[0].shape == expected.shape and diff <= 1 + 1e-3,
              f"grayscale evaluation transform vs torchvision's Grayscale(1): max diff "
              f"{diff:.3f} levels " + err.strip()[:160])
        os.remove(gray)

        # --- training draws --------------------------------------------------
        a, _ = dump(args.driver, model, 0, os.path.join(tmp, "e0a"))
        b, _ = dump(args.driver, model, 0, os.path.join(tmp, "e0b"))
        c, _ = dump(args.driver, model, 1, os.path.join(tmp, "e1"))
        check(a is not None and np.array_equal(a[0], b[0]), "the same seed and epoch: the same samples")
        check(a is not None and c is not None and
              np.mean([not np.array_equal(a[0][i], c[0][i]) for i in range(len(names))]) > 0.9,
              "another epoch: other crops and flips")
        lo = (0 - max(MEAN)) / min(STD) - 1e-5
        hi = (1 - min(MEAN)) / min(STD) + 1e-5
        check(a is not None and a[0].min() >= lo and a[0].max() <= hi,
              "training samples are normalised pixels")

        # --- bad files -------------------------------------------------------
        bad = os.path.join(train, "bee", "broken.png")
        with open(bad, "w") as f:
            f.write("this is text, not a PNG\n")
        got, err = dump(args.driver, model, -1, os.path.join(tmp, "bad"))
        check(got is None and "broken.png" in err and "not a JPEG or PNG image" in err,
              "a file that is not an image is an error naming it: " + err.strip()[:160])
        skip = model_file(tmp, train)
        text = open(skip).read().replace("      resize:", "      bad_files: skip\n      resize:")
        with open(skip, "w") as f:
            f.write(text)
        got, err = dump(args.driver, skip, -1, os.path.join(tmp, "skip"))
        check(got is not None and len(got[2]) == len(names) and "left out 1 of" in err,
              "bad_files: skip leaves it out and says so: " + err.strip()[:160])
        os.remove(bad)
        # A file that starts like a JPEG and is cut short: found when loaded.
        jpeg = os.path.join(train, "cat", "IMG000.JPG")
        whole = open(jpeg, "rb").read()
        with open(jpeg, "wb") as f:
            f.write(whole[:len(whole) // 2])
        got, err = dump(args.driver, model, -1, os.path.join(tmp, "cut"))
        check(got is None and "IMG000.JPG" in err and "truncated JPEG data" in err,
              "a truncated JPEG is an error naming it: " + err.strip()[:160])
        with open(jpeg, "wb") as f:
            f.write(whole)

        # --- resuming mid-epoch ----------------------------------------------
        # 7 batches an epoch: a run stopped at step 4 and resumed to 10 sees
        # the batches (crops, flips, order) of an unbroken run. (A fixed
        # thread team: one that follows the free cores rounds differently.)
        def losses(extra, metrics):
            out = os.path.join(tmp, metrics)
            r = subprocess.run([args.ampc, "-O", "O0", model, "--progress", "none", "--threads",
                                "2", "--metrics-out", out, *extra], capture_output=True, text=True)
            if r.returncode:
                print(r.stderr[-300:])
                return []
            records = [json.loads(l) for l in open(out).read().splitlines()]
            return [(rec["step"], rec["loss"]) for rec in records if "loss" in rec]
        ckpt4 = os.path.join(tmp, "step4.ckpt")
        whole_run = losses(["--steps", "10"], "whole.jsonl")
        first = losses(["--steps", "4", "--checkpoint", ckpt4], "first.jsonl")
        rest = losses(["--steps", "10", "--resume", ckpt4], "rest.jsonl")
        check(len(whole_run) == 10 and first + rest[-6:] == whole_run,
              "resumed at step 4 of an epoch of 7, the run's losses are an unbroken run's, "
              "bit for bit")

        # --- training against PyTorch ----------------------------------------
        # A task neither side saturates: the class is a stripe orientation
        # (or a checkerboard) whose contrast goes from clear to none, under
        # pixel noise, so about one image in seven is a guess. A run's
        # accuracy moves by a point or two with its seed, most of it with
        # the initial weights: each seed's network is built by PyTorch and
        # trained from the same weights on both sides (ampc imports it from
        # ONNX), each side with its own data pipeline, and the mean
        # accuracies over SEEDS are compared.
        hard_train = os.path.join(tmp, "hard-train")
        hard_val = os.path.join(tmp, "hard-val")
        write_pattern_folder(hard_train, 100, rng)
        write_pattern_folder(hard_val, 500, rng)
        ampc_accs, torch_accs = [], []
        for seed in SEEDS:
            torch.manual_seed(seed)
            torch.onnx.export(make_net(), (torch.zeros(16, 3, SIZE, SIZE),),
                              os.path.join(tmp, "net.onnx"), input_names=["image"],
                              output_names=["logits"], opset_version=17,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False)
            model = os.path.join(tmp, "parity.yaml")
            with open(model, "w") as f:
                f.write(PARITY_MODEL.format(size=SIZE, resize=RESIZE, path=hard_train,
                                            steps=PARITY_STEPS, lr=PARITY_LR, seed=seed,
                                            mean=MEAN, std=STD))
            ckpt = os.path.join(tmp, "parity.ckpt")
            r = subprocess.run([args.ampc, "--opt-level", "O1", "--device", "cpu", model,
                                "--checkpoint", ckpt, "--progress", "none"],
                               capture_output=True, text=True)
            check(r.returncode == 0,
                  f"ampc trains from the folder (seed {seed}): " + r.stderr.strip()[-300:])
            r = subprocess.run([args.ampc, "eval", model, "--checkpoint", ckpt, "--data",
                                hard_val, "--json"], capture_output=True, text=True)
            m = re.search(r'"accuracy":\s*([0-9.eE+-]+)', r.stdout)
            acc = float(m.group(1)) if m else -1
            ampc_accs.append(acc / 100 if acc > 1 else acc)
            torch_accs.append(train_pytorch(hard_train, hard_val, seed))
        ampc_acc, torch_acc = np.mean(ampc_accs), np.mean(torch_accs)
        print("accuracy on the held-out folder, per seed: ampc O1 " +
              " ".join(f"{a * 100:.1f}" for a in ampc_accs) + "; PyTorch " +
              " ".join(f"{a * 100:.1f}" for a in torch_accs) + " (chance 33.3%)")
        check(ampc_acc >= torch_acc - 0.01 and torch_acc < 0.97,
              f"ampc reaches PyTorch's accuracy within 1 point: mean {ampc_acc * 100:.1f}% "
              f"against {torch_acc * 100:.1f}% over {len(SEEDS)} seeds")

        # A YAML model trained from the first folder, for predicting.
        model = model_file(tmp, train)
        ckpt = os.path.join(tmp, "ck.bin")
        r = subprocess.run([args.ampc, "--opt-level", "O1", "--device", "cpu", model,
                            "--checkpoint", ckpt, "--progress", "none"],
                           capture_output=True, text=True)
        check(r.returncode == 0, "ampc trains a YAML model from the folder: " +
              r.stderr.strip()[-300:])

        # --- predicting a flat folder ----------------------------------------
        flat = os.path.join(tmp, "flat")
        os.makedirs(flat)
        for i in range(5):
            make_image(rng, i % 3, 40, 50).save(os.path.join(flat, f"photo,{i}.png"))
        out = os.path.join(tmp, "pred.csv")
        r = subprocess.run([args.ampc, "predict", model, "--checkpoint", ckpt, "--data", flat,
                            "-o", out, "--argmax"], capture_output=True, text=True)
        rows = open(out).read().splitlines() if r.returncode == 0 else []
        check(len(rows) == 5 and rows[0].startswith('"photo,0.png",'),
              "predict --data folder/ writes a row per file, named: " +
              (rows[0] if rows else r.stderr.strip()[-200:]))
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    return 0


def make_net():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 32, 3, padding=1),
                               torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(32, 3))


def train_pytorch(train, val, seed):
    """make_net() from `seed` (the weights ampc imports), trained with the
    same transforms, Adam, cosine schedule and steps; its accuracy on val."""
    torch.manual_seed(seed)
    net = make_net()
    tf = transforms.Compose([transforms.RandomResizedCrop(SIZE, scale=(0.5, 1.0)),
                             transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                             transforms.Normalize(MEAN, STD)])
    ev = transforms.Compose([transforms.Resize(RESIZE), transforms.CenterCrop(SIZE),
                             transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(train, tf),
                                         batch_size=16, shuffle=True, drop_last=True)
    opt = torch.optim.Adam(net.parameters(), lr=PARITY_LR)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, PARITY_STEPS)
    step = 0
    while step < PARITY_STEPS:
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            schedule.step()
            step += 1
            if step == PARITY_STEPS:
                break
    net.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(val, ev),
                                                batch_size=64):
            correct += (net(x).argmax(1) == y).sum().item()
            total += len(y)
    return correct / total


if __name__ == "__main__":
    sys.exit(main())
