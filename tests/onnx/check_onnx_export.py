#!/usr/bin/env python3
"""Round trips through `ampc export --format onnx`.

A model file wraps a torch.onnx.export'ed model (torchvision ResNet-18 with
its BatchNorms, a BERT-style encoder layer, and a tiny U-Net that pads,
pools and resizes); `ampc export` writes its rewritten inference graph at
O0, O1, O2 and O3. Each file must pass ONNX's
full checker (types included), and ampc's importer must read it back
(tests/onnx/onnx_forward_driver.cpp, no further rewriting: --opt-level O0) to
the outputs ampc computes for the original at that level (within 1e-5 at O0,
1e-3 in half), and at O0 to PyTorch's eval-mode outputs within 1e-4. After
training a few steps and exporting the checkpoint, the round trip must still
hold (the trained weights and batchnorm statistics travel).

The batch stays symbolic: every exported file names dim 0 of its input and
output "batch", keeps the source's output name (`out`, at every level: O2's
cast back to f32 must not rename it), and runs at batches 3 and 6 (the
export was compiled at 4; 3 is a last partial batch's size), its rows
equal to the batch-4 run's and, at O0, to PyTorch's (initial weights) or to
`ampc predict` on the original model with the trained checkpoint (batch 4
over 6 samples: 4 and a partial 2). A model file of ampc's own layers whose
reshapes fold the batch into the rows ([B*64, 4]) and back, with a flatten
of the middle dims and a batchnorm, goes through the same checks (there
`ampc predict` is the only reference).

Run by CTest as `onnx-export`; exits 77 without torch/torchvision/onnx,
except under CI=true.

  python3 check_onnx_export.py --ampc build/bin/ampc --driver build/bin/ampc-onnx-forward-driver
"""

import argparse
import os
import subprocess
import sys
import tempfile
import warnings

SKIP = 77
MISSING = 1 if os.environ.get("CI") == "true" else SKIP
try:
    import numpy as np
    import onnx
    import torch
    import torchvision
except ImportError as error:
    print(f"{'FAIL' if MISSING == 1 else 'SKIP'}: a Python package is missing ({error})")
    sys.exit(MISSING)

warnings.filterwarnings("ignore")


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{os.path.basename(cmd[0])} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def forward(driver, model, inputs, work, level, batch=None):
    in_dir, out_dir = os.path.join(work, "in"), os.path.join(work, "out")
    os.makedirs(in_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, f))
    for k, v in inputs.items():
        np.save(os.path.join(in_dir, k + ".npy"), v)
    run([driver, model, in_dir, out_dir, "--opt-level", level, "--half-type", "f16"]
        + (["--batch", str(batch)] if batch else []))
    return np.load(os.path.join(out_dir, "out0.npy"))


def rel(a, b):
    return float(np.abs(a.astype(np.float64) - b).max()) / max(1.0, float(np.abs(b).max()))


def dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def symbolic_batch_problems(model, output_names):
    """What keeps the exported model from running at any batch, if anything."""
    problems = []
    names = [o.name for o in model.graph.output]
    if names != output_names:
        problems.append(f"outputs are named {names}, the source's {output_names}")
    for vi in list(model.graph.input) + list(model.graph.output):
        if not dims(vi) or dims(vi)[0] != "batch":
            problems.append(f"'{vi.name}' has dims {dims(vi)}, not ['batch', ...]")
    return problems


def predict(ampc, model_file, checkpoint, data, work, level):
    """`ampc predict` on the original model file, batch 4 over the samples."""
    files = {}
    for k, v in data.items():
        files[k] = os.path.join(work, f"predict-{k}.npy")
        np.save(files[k], v)
    spec = "{npy: {" + ", ".join(f"{k}: {f}" for k, f in files.items()) + "}}"
    out = os.path.join(work, "predict.npy")
    run([ampc, "predict", model_file, "--checkpoint", checkpoint, "--data", spec, "-O", level,
         "--batch", "4", "-o", out])
    return np.load(out)


# ampc's own layers: reshapes that fold the batch into the rows and back
# (Reshape targets -1), a flatten of the middle dims (a Reshape copying the
# batch with 0), a flatten(1) (ONNX Flatten) and a batchnorm.
RESHAPES_MODEL = """model: reshapes
batch: 4
inputs:
  x: {shape: [B, 3, 8, 8]}
  label: {shape: [B], dtype: i64}
init: {seed: 0}
layers:
  - conv2d: {out_channels: 4, kernel: 3, padding: 1, name: conv}
  - batchnorm2d: {name: bn}
  - relu: {}
  - flatten: {start_dim: 2, name: spatial}
  - transpose: {dim0: 1, dim1: 2}
  - reshape: {shape: [-1, 4], name: tokens}
  - linear: {out_features: 8, name: proj}
  - gelu: {}
  - reshape: {shape: [B, 64, 8], name: unfolded}
  - reduce_mean: {dims: [1]}
  - flatten: {}
  - linear: {out_features: 5, name: out}
loss: {cross_entropy: {input: out, target: label}}
optimizer: {sgd: {lr: 0.5, momentum: 0.9}}
train: {steps: 3, data: {synthetic: {seed: 0, size: 4}}}
"""


class TinyUNet(torch.nn.Module):
    """Padding, pooling and resizing of the kinds torch exports: a
    reflect-padded convolution, ceil-mode max pooling, nearest upsampling,
    nn.AvgPool2d(3, 1, 1) (Pad + AveragePool), bilinear resizing and bicubic
    resizing (Resize cubic: its cubic_coeff_a must survive the export)."""

    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Conv2d(3, 6, 3, padding=1, padding_mode="reflect")
        self.pool = torch.nn.MaxPool2d(2, ceil_mode=True)
        self.mid = torch.nn.Conv2d(6, 6, 3, padding=1)
        self.dec = torch.nn.Conv2d(12, 4, 3, padding=1)
        self.smooth = torch.nn.AvgPool2d(3, 1, 1)

    def forward(self, x):
        e = torch.relu(self.enc(x))
        m = torch.relu(self.mid(self.pool(e)))
        d = self.dec(torch.cat([torch.nn.functional.interpolate(m, scale_factor=2, mode="nearest"), e], 1))
        coarse = torch.nn.functional.avg_pool2d(d, 2)
        return (self.smooth(d)
                + torch.nn.functional.interpolate(coarse, size=(16, 16), mode="bilinear", align_corners=False)
                + torch.nn.functional.interpolate(coarse, size=(16, 16), mode="bicubic", align_corners=True))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ampc", required=True)
    parser.add_argument("--driver", required=True)
    parser.add_argument("--keep")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="ampc-onnx-export-")
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    failures = 0

    def report(ok, label, what):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {label}: {what}")
        failures += not ok

    resnet = torchvision.models.resnet18(weights=None, num_classes=10)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, activation="gelu")
    # name, torch module (None: a model file of ampc's layers), 6 samples
    # (the first 4 are the compiled batch), the model file's other input,
    # its loss and x's declaration.
    cases = [
        ("resnet18", resnet, rng.standard_normal((6, 3, 32, 32)).astype(np.float32),
         ("label", np.zeros(6, np.int64)), "label: {shape: [B], dtype: i64}",
         "{cross_entropy: {input: out, target: label}}", "x: {shape: [B, 3, 32, 32]}"),
        ("bert_layer", layer, rng.standard_normal((6, 6, 32)).astype(np.float32),
         ("target", np.zeros((6, 6, 32), np.float32)), "target: {shape: [B, 6, 32]}",
         "{mse_loss: {input: out, target: target}}", "x: {shape: [B, 6, 32]}"),
        ("reshapes", None, rng.standard_normal((6, 3, 8, 8)).astype(np.float32),
         ("label", np.zeros(6, np.int64)), None, None, None),
        ("tiny_unet", TinyUNet(), rng.standard_normal((6, 3, 16, 16)).astype(np.float32),
         ("target", np.zeros((6, 4, 16, 16), np.float32)), "target: {shape: [B, 4, 16, 16]}",
         "{mse_loss: {input: out, target: target}}", "x: {shape: [B, 3, 16, 16]}"),
    ]
    for name, module, x6, other_input, extra_input, loss, x_input in cases:
        x = x6[:4]
        model_file = os.path.join(work, name + ".yaml")
        source = None
        if module is None:
            with open(model_file, "w") as f:
                f.write(RESHAPES_MODEL)
        else:
            source = os.path.join(work, name + ".onnx")
            module.train()
            torch.onnx.export(module, torch.from_numpy(x), source, opset_version=17, input_names=["x"],
                              output_names=["out"], training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, dynamic_axes={"x": {0: "batch"}, "out": {0: "batch"}})
            with open(model_file, "w") as f:
                f.write(f"model: {{onnx: {name}.onnx}}\nbatch: {len(x)}\ninputs:\n  {x_input}\n  {extra_input}\n"
                        f"loss: {loss}\noptimizer: {{sgd: {{lr: 0.01}}}}\n"
                        f"train: {{steps: 3, data: {{synthetic: {{seed: 0, size: {len(x)}}}}}}}\n")
            module.eval()
            with torch.no_grad():
                expected = module(torch.from_numpy(x6)).numpy()
        checkpoint = os.path.join(work, name + ".ckpt")
        try:
            run([args.ampc, "--opt-level", "O2", model_file, "--checkpoint", checkpoint, "--progress", "none"])
            # ampc's own outputs for the trained original, at a batch of 4
            # over 6 samples (a last partial batch of 2).
            predicted = predict(args.ampc, model_file, checkpoint, {"x": x6, other_input[0]: other_input[1]},
                                work, "O0")
        except RuntimeError as e:
            print(f"FAIL {name}: training or predicting: {e}")
            failures += 1
            continue
        for trained in (False, True):
            for level in ("O0", "O1", "O2", "O3"):
                label = f"{name} {level}{' trained' if trained else ''}"
                out = os.path.join(work, f"{name}-{level}{'-trained' if trained else ''}.onnx")
                cmd = [args.ampc, "export", model_file, "--format", "onnx", "-O", level, "-o", out]
                if trained:
                    cmd += ["--checkpoint", checkpoint]
                try:
                    run(cmd)
                    exported = onnx.load(out)
                    onnx.checker.check_model(exported, full_check=True)
                    got = forward(args.driver, out, {"x": x}, work, "O0", batch=4)
                    # The same file at other batches: 6, and 3 (a partial batch's size).
                    at = {n: forward(args.driver, out, {"x": x6[:n]}, work, "O0", batch=n) for n in (3, 6)}
                except (RuntimeError, onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
                    print(f"FAIL {label}: {str(e)[:400]}")
                    failures += 1
                    continue
                problems = symbolic_batch_problems(exported, ["out"])
                report(not problems, label, "; ".join(problems) or "batch symbolic, output named 'out'")
                tol = 1e-5 if level == "O0" else 1e-3
                for n, y in at.items():
                    d = rel(y[:4], got[: len(y)])
                    report(d <= tol, label, f"at batch {n} vs the compiled batch 4, shared rows {d:.2e} (tolerance {tol:g})")
                if not trained:
                    if source:
                        # The source's initial weights: ampc's own import of the source
                        # at the same level, and PyTorch at O0.
                        mine = forward(args.driver, source, {"x": x}, work, level, batch=4)
                        d = rel(got, mine)
                        report(d <= tol, label, f"exported vs imported source {d:.2e} (tolerance {tol:g})")
                    if source and level == "O0":
                        d = rel(got, expected[:4])
                        report(d <= 1e-4, label, f"exported vs PyTorch {d:.2e} (tolerance 1e-4)")
                        for n, y in at.items():
                            d = rel(y, expected[:n])
                            report(d <= 1e-4, label, f"at batch {n} vs PyTorch {d:.2e} (tolerance 1e-4)")
                else:
                    # The trained weights changed the outputs, and the levels agree.
                    if level == "O0":
                        trained_o0 = got
                        if source:
                            moved = rel(got, expected[:4])
                            report(moved > 1e-4, label, f"the checkpoint's weights are exported (outputs moved {moved:.2e})")
                        for n, y in at.items():
                            d = rel(y, predicted[:n])
                            report(d <= 1e-5, label, f"at batch {n} vs ampc predict {d:.2e} (tolerance 1e-5)")
                    else:
                        d = rel(got, trained_o0)
                        report(d <= 3e-2, label, f"vs the trained O0 export {d:.2e} (tolerance 3e-2)")
    print(f"{'FAIL' if failures else 'PASS'}: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
