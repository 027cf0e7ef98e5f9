"""The real models of bench/compare_pytorch.py: architectures users bring,
built in PyTorch, exported with torch.onnx.export and trained by ampc from
the ONNX file, and trained by PyTorch from the same module.

Each model is built from seed 0 on both sides, so both train the same
weights on the same single batch (saved as .npy for ampc; PyTorch's loop
reuses the tensors, as for the seed workloads). Dropout and stochastic
depth are set to 0 on both sides before the export: ONNX's training-mode
export has no random stochastic depth, and one function on both sides is
what a step time should be compared on. The sizes keep a PyTorch fp32
step near a second on 2 cores.

  resnet50         torchvision resnet50, batch 8, 128x128
  efficientnet-b0  torchvision efficientnet_b0, batch 16, 128x128
  vit-b-32         torchvision vit_b_32, batch 4, 224x224
  swin-t           torchvision swin_t, batch 2, 224x224
  nanogpt-10m      nanoGPT's "baby GPT" (6 layers, 6 heads, width 384,
                   vocabulary 65: 10.7 M parameters), context 128, batch 2
  bert-base-layer  nn.TransformerEncoderLayer at BERT-base's sizes (width
                   768, 12 heads, MLP 3072, GELU), sequence 128, batch 8,
                   MSE against a random target

The GPT is tests/zoo/zoo_models.py's NanoGpt, the real-models zoo's GPT
written the nanoGPT way; dropout goes through the zoo's quiet_randomness.
"""

import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "zoo"))

LR = 1e-3


@dataclass(frozen=True)
class RealModel:
    """build() -> nn.Module; inputs() -> {name: tensor}; loss: cross_entropy
    over [B, C] logits, lm over [B, T, V], or mse against a target of the
    output's shape; steps and warmup: the timed run's length."""

    build: Callable
    inputs: Callable
    loss: str
    classes: Optional[int]
    steps: int
    warmup: int


def _torchvision(name, **kw):
    def build():
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None, **kw)

    return build


def _images(batch, size):
    def make():
        import torch

        g = torch.Generator().manual_seed(1)
        return {"input": torch.randn(batch, 3, size, size, generator=g)}

    return make


def _tokens(batch, context, vocab):
    def make():
        import torch

        g = torch.Generator().manual_seed(2)
        return {"idx": torch.randint(0, vocab, (batch, context), generator=g)}

    return make


def _sequence(batch, length, width):
    def make():
        import torch

        g = torch.Generator().manual_seed(2)
        return {"x": torch.randn(batch, length, width, generator=g)}

    return make


def _nanogpt():
    import zoo_models  # tests/zoo (imports torch, so only when used)

    return zoo_models.NanoGpt(vocab=65, block=128, dim=384, heads=6, layers=6)


def _bert_base_layer():
    import torch.nn as nn

    return nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                      batch_first=True)


REAL_MODELS = {
    "resnet50": RealModel(_torchvision("resnet50"), _images(8, 128), "cross_entropy", 1000, 6, 2),
    "efficientnet-b0": RealModel(_torchvision("efficientnet_b0"), _images(16, 128),
                                 "cross_entropy", 1000, 6, 2),
    "vit-b-32": RealModel(_torchvision("vit_b_32"), _images(4, 224), "cross_entropy", 1000, 6, 2),
    "swin-t": RealModel(_torchvision("swin_t"), _images(2, 224), "cross_entropy", 1000, 6, 2),
    "nanogpt-10m": RealModel(_nanogpt, _tokens(2, 128, 65), "lm", 65, 6, 2),
    "bert-base-layer": RealModel(_bert_base_layer, _sequence(8, 128, 768), "mse", None, 6, 2),
}


def torch_setup(name):
    """(module in train mode, inputs as a tuple, target, loss function) for
    `name`, the same on every call: seed 0 for the weights."""
    import torch
    import torch.nn.functional as F

    import zoo_models  # tests/zoo

    entry = REAL_MODELS[name]
    torch.manual_seed(0)
    module = entry.build()
    zoo_models.quiet_randomness(module)
    inputs = tuple(entry.inputs().values())
    g = torch.Generator().manual_seed(3)
    if entry.loss == "cross_entropy":
        target = torch.randint(0, entry.classes, (inputs[0].shape[0],), generator=g)

        def loss_fn(out, y):
            return F.cross_entropy(out, y)

    elif entry.loss == "lm":
        target = torch.randint(0, entry.classes, tuple(inputs[0].shape), generator=g)

        def loss_fn(out, y):
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    else:
        with torch.no_grad():
            shape = module(*inputs).shape
        target = torch.randn(*shape, generator=g)

        def loss_fn(out, y):
            return F.mse_loss(out, y)

    module.train()
    return module, inputs, target, loss_fn


def _dtype_yaml(t):
    import torch

    return {torch.int64: "i64", torch.float32: "f32"}[t.dtype]


def write_model_file(name, work):
    """Exports `name` for training into `work` and writes the model file
    that trains it (SGD at LR on the saved batch); returns its path."""
    import numpy as np
    import torch

    entry = REAL_MODELS[name]
    module, inputs, target, _ = torch_setup(name)
    names = list(entry.inputs())
    stem = name.replace("-", "_")
    onnx_path = os.path.join(work, f"{stem}.onnx")
    with warnings.catch_warnings():  # the tracer's notes on Python values in forward()
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, onnx_path, opset_version=17, input_names=names,
                          output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    tensors = list(zip(names, inputs)) + [("target", target)]
    data = {}
    for key, tensor in tensors:
        np.save(os.path.join(work, f"{stem}-{key}.npy"), tensor.numpy())
        data[key] = f"{stem}-{key}.npy"
    input_lines = "\n".join(
        f"  {k}: {{shape: [{', '.join(['B'] + [str(d) for d in t.shape[1:]])}], "
        f"dtype: {_dtype_yaml(t)}}}" for k, t in tensors)
    loss = "mse_loss" if entry.loss == "mse" else "cross_entropy"
    path = os.path.join(work, f"{stem}.yaml")
    with open(path, "w") as f:
        f.write(f"""model: {{onnx: {stem}.onnx}}
batch: {inputs[0].shape[0]}
inputs:
{input_lines}
loss: {{{loss}: {{input: logits, target: target}}}}
optimizer: {{sgd: {{lr: {LR}}}}}
train:
  steps: {entry.steps}
  data: {{npy: {{{', '.join(f'{k}: {v}' for k, v in data.items())}}}}}
""")
    return path
