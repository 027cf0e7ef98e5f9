#!/usr/bin/env python3
"""Models exported by PyTorch, made here and carried to a borrowed GPU
machine without their weights.

A GPU machine of this workplace takes at most 64 MiB of files, and the
real-models zoo's weights are gigabytes (VGG-11 alone is 0.5 GB). So this
script exports each model here (Debian's PyTorch, as the zoo test does),
moves every large float initializer into external data that it does NOT
write, and records each one's mean and standard deviation; `fill` (run on
the GPU machine) writes the external data file with normal values of the
same mean and spread, which is all a fallback census, a CUDA-against-CPU
check and a step time need. Large .npy batches are regenerated the same way.
Initializers of 4 KiB or less, and any tensor holding only 0 and 1 (a
causal mask), stay inside the model as exported; the regenerated ones keep
their statistics, not their values (a batchnorm's running variance among
them, which only evaluation reads).

  prepare_imported.py prepare --out DIR [--zoo] [--bench]   # here: torch 1.13
  prepare_imported.py fill DIR                              # there: numpy only

--zoo: every model of tests/zoo/zoo_models.py at the zoo's sizes (for
bench/gpu/zoo_census.py); --bench: the imported workloads of
bench/gpu/compare_pytorch_gpu.py at benchmark sizes (BENCH below).
"""

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests" / "zoo"))

EXTERNAL_ABOVE = 4 * 1024  # bytes: initializers above this travel as statistics
NPY_ABOVE = 1 << 20  # bytes: batches above this are regenerated
SPEC = "weights.json"
WEIGHTS = "weights.bin"


def bench_entries():
    """The imported workloads of the GPU benchmark, at the sizes people train
    them: ResNet-50 at 224x224, batch 32; a GPT written the nanoGPT way, 6
    layers of width 384, 256 tokens of context, batch 16 (GPT-2's tokenizer
    size would make the head dominate; 8192 keeps it one GEMM among many)."""
    import torch
    import zoo_models as zm

    g = torch.Generator().manual_seed(5)
    image = {"input": torch.randn(32, 3, 224, 224, generator=g)}
    tokens = {"idx": torch.randint(0, 8192, (16, 256), generator=g)}
    return [
        zm.Entry("resnet50", "resnet", zm._tv("resnet50"), image, "cross_entropy", 1000),
        zm.Entry("gpt", "transformer",
                 lambda: zm.NanoGpt(vocab=8192, block=256, dim=384, heads=6, layers=6),
                 tokens, "lm", 8192),
    ]


def externalise(onnx_path):
    """Moves the large float initializers of onnx_path out, recording only
    their statistics in weights.json beside it."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(onnx_path)
    spec, offset = [], 0
    for t in model.graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT:
            continue
        a = numpy_helper.to_array(t)
        if a.nbytes <= EXTERNAL_ABOVE or np.isin(a, (0.0, 1.0)).all():
            continue
        spec.append({"name": t.name, "offset": offset, "length": a.nbytes,
                     "mean": float(a.mean()), "std": float(a.std())})
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        for key, value in (("location", WEIGHTS), ("offset", str(offset)),
                           ("length", str(a.nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        offset += a.nbytes
    onnx.save(model, onnx_path)
    return spec


def shrink_batches(work):
    """Replaces each large .npy file of work with its recipe."""
    recipes = {}
    for f in sorted(Path(work).glob("*.npy")):
        if f.stat().st_size <= NPY_ABOVE:
            continue
        a = np.load(f)
        recipe = {"shape": list(a.shape), "dtype": str(a.dtype)}
        if a.dtype.kind in "iu":
            recipe["high"] = int(a.max()) + 1
        else:
            recipe["mean"], recipe["std"] = float(a.mean()), float(a.std())
        recipes[f.name] = recipe
        f.unlink()
    return recipes


def prepare(entry, work):
    import torch
    import check_zoo

    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    module = check_zoo.realistic_weights(entry.build(), entry)
    check_zoo.quiet_randomness(module)
    module.eval()
    model_file, _ = check_zoo.write_training_model(entry, work, module)
    onnx_path = os.path.join(work, f"{entry.name}-train.onnx")
    spec = {"weights": externalise(onnx_path), "batches": shrink_batches(work),
            "model_file": os.path.basename(model_file)}
    with open(os.path.join(work, SPEC), "w") as f:
        json.dump(spec, f)
    size = sum(p.stat().st_size for p in Path(work).iterdir())
    held = sum(w["length"] for w in spec["weights"])
    print(f"{entry.name}: {size / 1e6:.2f} MB carried, {held / 1e6:.1f} MB of weights left behind")


def fill(root):
    """Writes every weights.bin and regenerated batch under root."""
    for spec_path in sorted(Path(root).rglob(SPEC)):
        work = spec_path.parent
        spec = json.loads(spec_path.read_text())
        rng = np.random.default_rng(7)
        with open(work / WEIGHTS, "wb") as f:
            for w in spec["weights"]:
                n = w["length"] // 4
                values = rng.standard_normal(n, dtype=np.float32) * np.float32(w["std"])
                (values + np.float32(w["mean"])).tofile(f)
        for name, r in spec["batches"].items():
            if "high" in r:
                a = rng.integers(0, r["high"], size=r["shape"]).astype(r["dtype"])
            else:
                a = (rng.standard_normal(r["shape"], dtype=np.float32) * r["std"]
                     + r["mean"]).astype(r["dtype"])
            np.save(work / name, a)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", required=True)
    p.add_argument("--zoo", action="store_true")
    p.add_argument("--bench", action="store_true")
    p.add_argument("--models", help="comma-separated names (default: all of the chosen sets)")
    f = sub.add_parser("fill")
    f.add_argument("root")
    args = ap.parse_args()
    if args.verb == "fill":
        fill(args.root)
        return 0
    import torch
    import zoo_models

    torch.set_num_threads(2)
    wanted = set(args.models.split(",")) if args.models else None
    sets = []
    if args.zoo:
        sets.append(("zoo", zoo_models.zoo()))
    if args.bench:
        sets.append(("bench", bench_entries()))
    for folder, entries in sets:
        for entry in entries:
            if wanted is None or entry.name in wanted:
                prepare(entry, os.path.join(args.out, folder, entry.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
