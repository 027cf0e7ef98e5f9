#!/usr/bin/env python3
"""A list of weighted losses, and amp.num_losses (a scaler per loss), against PyTorch.

The seed MLP, built in PyTorch and imported by ampc from ONNX (both sides
start from the same weights), trains STEPS AdamW steps on one batch with
loss = cross_entropy(logits, label) + W * mse_loss(logits, target), in
ampc's model file:

    loss:
      - cross_entropy: {input: logits, target: label}
      - mse_loss: {input: logits, target: target}
        weight: W

Checked:
- at O0 the trained weights are PyTorch's within 1e-6 (relative, as a
  whole), with one backward for the sum and with amp: {num_losses: 2} (a
  backward per loss, their gradients summed);
- the metrics file logs each term's value, as PyTorch computes it on the
  first step;
- at O2 (bf16) with one scaler and with two, the weights are as near
  PyTorch's f32 ones as PyTorch autocast's (bf16) are, within 2x;
- overflow in one loss's scaler: at O2 with f16 and a weight that makes the
  second loss's scaled f16 gradients overflow, the steps with an overflow
  are skipped, the second scaler backs off until its gradients fit and the
  first keeps its scale; later steps apply. With one scaler for both the
  one scale backs off instead.
Exit 0 pass, 1 fail, 77 without torch.
"""
import argparse
import os
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from recipe_support import (check, distance, exit_code, export_onnx, mlp,
                                train_logged)
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

STEPS = 5
LR = 1e-2
WEIGHT = 0.5
TOLERANCE = 1e-6


def torch_run(start, x, label, target, autocast=False):
    model = mlp()
    model.load_state_dict(start)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    first_terms = None
    for _ in range(STEPS):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(x)
        out = out.float()
        terms = [F.cross_entropy(out, label), F.mse_loss(out, target)]
        if first_terms is None:
            first_terms = [t.item() for t in terms]
        (terms[0] + WEIGHT * terms[1]).backward()
        opt.step()
    return {n: p.detach().double() for n, p in model.named_parameters()}, first_terms


class Ampc:
    def __init__(self, ampc, work, start, x, label, target):
        self.ampc, self.work = ampc, work
        module = mlp()
        module.load_state_dict(start)
        export_onnx(module, x, os.path.join(work, "mlp.onnx"))
        np.save(os.path.join(work, "x.npy"), x.numpy())
        np.save(os.path.join(work, "label.npy"), label.numpy())
        np.save(os.path.join(work, "target.npy"), target.numpy())
        self.names = [n for n, _ in module.named_parameters()]

    def train(self, level, num_losses, weight=WEIGHT, half_type=None):
        tag = f"{level}-n{num_losses}-w{weight}-{half_type or 'default'}"
        model = os.path.join(self.work, f"mlp-{tag}.yaml")
        amp = f"amp: {{num_losses: {num_losses}}}\n" if num_losses != 1 else ""
        with open(model, "w") as f:
            f.write(f"""model: {{onnx: mlp.onnx}}
batch: 16
inputs:
  x: {{shape: [B, 32]}}
  label: {{shape: [B], dtype: i64}}
  target: {{shape: [B, 8]}}
loss:
  - cross_entropy: {{input: logits, target: label}}
  - mse_loss: {{input: logits, target: target}}
    weight: {weight}
optimizer: {{adamw: {{lr: {LR}, weight_decay: 0.0}}}}
{amp}train:
  steps: {STEPS}
  shuffle: false
  data: {{npy: {{x: x.npy, label: label.npy, target: target.npy}}}}
""")
        return train_logged(self.ampc, model, self.names, self.work, level, half_type)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    args = ap.parse_args()
    ampc_path = os.path.abspath(args.ampc)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 32, generator=g)
    label = torch.randint(0, 8, (16,), generator=g)
    target = torch.randn(16, 8, generator=g)
    start = mlp().state_dict()
    want, want_terms = torch_run(start, x, label, target)
    autocast, _ = torch_run(start, x, label, target, autocast=True)
    autocast_distance = distance(autocast, want)
    with tempfile.TemporaryDirectory() as work:
        ampc = Ampc(ampc_path, work, start, x, label, target)
        for num_losses in (1, 2):
            got, steps = ampc.train("O0", num_losses)
            d = distance(got, want) if got else float("inf")
            check(d <= TOLERANCE, f"O0, num_losses {num_losses}: the weights after {STEPS} AdamW "
                  f"steps on cross_entropy + {WEIGHT} * mse_loss are within {d:.1e} of PyTorch's")
            if num_losses == 1 and steps:
                terms = steps[0].get("losses", [])
                check(len(terms) == 2 and all(abs(a - b) <= 1e-5 * abs(b)
                                              for a, b in zip(terms, want_terms)),
                      f"the metrics file logs each loss: {terms} against PyTorch's {want_terms}")
        for num_losses in (1, 2):
            got, _ = ampc.train("O2", num_losses)
            d = distance(got, want) if got else float("inf")
            check(d <= 2 * autocast_distance,
                  f"O2 (bf16), num_losses {num_losses}: {d:.1e} from PyTorch's f32 weights, "
                  f"autocast's bf16 ones {autocast_distance:.1e}")

        # f16 with a weight that overflows the second loss's scaled
        # gradients at the initial scale 2^16.
        got, steps = ampc.train("O2", 2, weight=64.0, half_type="f16")
        scales = [s.get("loss_scales", []) for s in steps]
        skipped = [s.get("skipped") for s in steps]
        init = 65536.0
        check(len(steps) == STEPS and all(len(s) == 2 for s in scales),
              f"O2 f16 num_losses 2: {len(steps)} steps logged with two scales each")
        if len(steps) == STEPS and all(len(s) == 2 for s in scales):
            first = all(s[0] == init for s in scales)
            backed_off = scales[-1][1] < init
            check(first and backed_off and skipped[0] is True,
                  f"an overflow in loss 1 backs off only its scaler and skips the step: scales "
                  f"{[s for s in scales]}, skipped {skipped}")
            check(skipped[-1] is False and got and distance(got, {n: start[n].double()
                                                                  for n in start}) > 1e-4,
                  "once loss 1's scale fits, the steps apply and the weights move")
        _, shared = ampc.train("O2", 1, weight=64.0, half_type="f16")
        shared_scales = [s.get("loss_scale") for s in shared]
        check(bool(shared_scales) and shared_scales[-1] is not None and shared_scales[-1] < init,
              f"with one scaler for both losses that scale backs off: {shared_scales}")
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
