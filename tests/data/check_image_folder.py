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
then trains a small CNN on a folder with ampc and with PyTorch (the same
transforms, DataLoader) and compares their accuracy on a held-out folder,
and predicts a flat folder of files into a CSV with the file names.
Exit 0 pass, 1 fail, 77 when PIL or torchvision is missing.
"""
import argparse
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
{extra}"""


def model_file(dirname, path, steps=60, extra=""):
    text = MODEL.format(size=SIZE, resize=RESIZE, path=path, steps=steps, mean=MEAN, std=STD,
                        extra=extra)
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

        # --- training against PyTorch ----------------------------------------
        model = model_file(tmp, train, steps=60)
        ckpt = os.path.join(tmp, "ck.bin")
        r = subprocess.run([args.ampc, "--opt-level", "O1", "--device", "cpu", model,
                            "--checkpoint", ckpt, "--progress", "none"],
                           capture_output=True, text=True)
        check(r.returncode == 0, "ampc trains from the folder: " + (r.stderr.strip()[-300:]))
        r = subprocess.run([args.ampc, "eval", model, "--checkpoint", ckpt, "--data", val,
                            "--json"], capture_output=True, text=True)
        m = re.search(r'"accuracy":\s*([0-9.eE+-]+)', r.stdout)
        ampc_acc = float(m.group(1)) if m else -1
        if ampc_acc > 1:
            ampc_acc /= 100
        torch_acc = train_pytorch(train, val)
        print(f"accuracy on the held-out folder: ampc O1 {ampc_acc * 100:.1f}%, "
              f"PyTorch {torch_acc * 100:.1f}% (chance 33.3%)")
        check(ampc_acc >= torch_acc - 0.01 or ampc_acc >= 0.99,
              "ampc reaches PyTorch's accuracy within 1 point")

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


def train_pytorch(train, val):
    torch.manual_seed(5)
    tf = transforms.Compose([transforms.RandomResizedCrop(SIZE, scale=(0.5, 1.0)),
                             transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                             transforms.Normalize(MEAN, STD)])
    ev = transforms.Compose([transforms.Resize(RESIZE), transforms.CenterCrop(SIZE),
                             transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(train, tf),
                                         batch_size=16, shuffle=True, drop_last=True)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 16, 3, padding=1),
                              torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                              torch.nn.Linear(16, 3))
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    step = 0
    while step < 60:
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            step += 1
            if step == 60:
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
