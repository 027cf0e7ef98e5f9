#!/usr/bin/env python3
"""Several optimizers on a schedule (examples/dcgan.yaml) against PyTorch.

The DCGAN example, written again in PyTorch with the same layer names and
started from the same weights (ampc reads PyTorch's state_dict through
init.from), trains STEPS steps on the same batches: the discriminator's
Adam on even steps with its loss, the generator's Adam on odd steps with
its loss, as the model file's

    optimizer:
      - {name: discriminator, params: ["disc_*"], loss: 0, adam: {...}}
      - {name: generator, params: ["gen_*"], loss: 1, adam: {...}}
    train: {schedule: [discriminator, generator]}

says. Checked:
- after one step the generator's weights are its starting weights exactly
  (not its turn) and the discriminator's have moved;
- at O0 the weights of both networks after STEPS steps are PyTorch's within
  TOLERANCE (relative, as a whole), and each step's two losses (logged in
  the metrics file) are PyTorch's;
- at O1 and O2 (bf16, a loss scaler per loss) the weights are as near
  PyTorch's f32 ones as PyTorch autocast's (bf16) are, within 2x.
Exit 0 pass, 1 fail, 77 without torch.
"""
import argparse
import os
import re
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from recipe_support import check, distance, exit_code, train_logged
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

STEPS = 5
BATCH = 32
LR = 2e-4
BETAS = (0.5, 0.999)
# O0 against PyTorch's f32 run: within 1e-6, or within 3x the f32 noise
# where that is larger. Adam's first steps divide by the root of tiny
# second moments, which magnifies f32 rounding in the smallest gradients
# (batchnorm biases here), so f32 runs differ by more than rounding, by an
# amount that depends on the summation order. One f32 run's distance from
# f64 is one sample of that noise (PyTorch's was 2.1e-7 on one 2-core EPYC
# and 6.7e-6 on another, for the same weights), so the noise is the larger
# of two PyTorch f32 runs' distances: the batch as given, and each batch's
# samples in reverse order (the same sums, rounded in another order).
TOLERANCE = 1e-6
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "dcgan.yaml")


class DCGAN(nn.Module):
    """examples/dcgan.yaml's layers, named as its layers are."""

    def __init__(self):
        super().__init__()
        self.gen_fc = nn.Linear(64, 2048, bias=False)
        self.gen_bn0 = nn.BatchNorm2d(128)
        self.gen_conv1 = nn.Conv2d(128, 64, 3, padding=1, bias=False)
        self.gen_bn1 = nn.BatchNorm2d(64)
        self.gen_conv2 = nn.Conv2d(64, 32, 3, padding=1, bias=False)
        self.gen_bn2 = nn.BatchNorm2d(32)
        self.gen_conv3 = nn.Conv2d(32, 3, 3, padding=1)
        self.disc_conv1 = nn.Conv2d(3, 32, 4, stride=2, padding=1)
        self.disc_conv2 = nn.Conv2d(32, 64, 4, stride=2, padding=1, bias=False)
        self.disc_bn2 = nn.BatchNorm2d(64)
        self.disc_conv3 = nn.Conv2d(64, 128, 4, stride=2, padding=1, bias=False)
        self.disc_bn3 = nn.BatchNorm2d(128)
        self.disc_fc = nn.Linear(2048, 1)

    def forward(self, x, z):
        up = lambda h: F.interpolate(h, scale_factor=2, mode="nearest")
        h = F.relu(self.gen_bn0(self.gen_fc(z).reshape(-1, 128, 4, 4)))
        h = F.relu(self.gen_bn1(self.gen_conv1(up(h))))
        h = F.relu(self.gen_bn2(self.gen_conv2(up(h))))
        fake = torch.tanh(self.gen_conv3(up(h)))
        real = torch.tanh(F.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False))
        h = F.leaky_relu(self.disc_conv1(torch.cat([real, fake])), 0.2)
        h = F.leaky_relu(self.disc_bn2(self.disc_conv2(h)), 0.2)
        h = F.leaky_relu(self.disc_bn3(self.disc_conv3(h)), 0.2)
        return torch.sigmoid(self.disc_fc(h.flatten(1)))


def losses(p):
    """The discriminator's and the generator's loss on the verdicts p."""
    b = p.shape[0] // 2
    ones, zeros = torch.ones(b, 1, dtype=p.dtype), torch.zeros(b, 1, dtype=p.dtype)
    return (F.binary_cross_entropy(p, torch.cat([ones, zeros])),
            F.binary_cross_entropy(p[b:], ones))


def torch_run(start, xs, zs, steps, autocast=False, f64=False, reversed_batches=False):
    model = DCGAN()
    model.load_state_dict(start)
    if f64:
        model, xs, zs = model.double(), xs.double(), zs.double()
    params = dict(model.named_parameters())
    opt_d = torch.optim.Adam([p for n, p in params.items() if n.startswith("disc_")], lr=LR,
                             betas=BETAS)
    opt_g = torch.optim.Adam([p for n, p in params.items() if n.startswith("gen_")], lr=LR,
                             betas=BETAS)
    logged = []
    for step in range(steps):
        x, z = xs[step * BATCH:(step + 1) * BATCH], zs[step * BATCH:(step + 1) * BATCH]
        if reversed_batches:  # every loss is a mean over the batch: the same value
            x, z = x.flip(0), z.flip(0)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            p = model(x, z)
        d_loss, g_loss = losses(p if f64 else p.float())
        logged.append([d_loss.item(), g_loss.item()])
        opt, loss = (opt_d, d_loss) if step % 2 == 0 else (opt_g, g_loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {n: p.detach().double() for n, p in model.named_parameters()}, logged


class Ampc:
    def __init__(self, ampc, work, start, xs, zs):
        self.ampc, self.work = ampc, work
        weights = os.path.join(work, "weights")
        os.makedirs(weights)
        for name, t in start.items():
            if not name.endswith("num_batches_tracked"):
                np.save(os.path.join(weights, name + ".npy"), t.numpy())
        np.save(os.path.join(work, "x.npy"), xs.numpy())
        np.save(os.path.join(work, "z.npy"), zs.numpy())
        self.names = [n for n, _ in DCGAN().named_parameters()]
        with open(EXAMPLE) as f:
            text = f.read()
        text = text.replace("init:\n  seed: 0\n", "init:\n  from: weights\n")
        text = re.sub(r"train:\n(.|\n)*$", "", text)
        self.text = text

    def train(self, level, steps, half_type=None, gen_weight=None):
        tag = f"{level}-{steps}-{half_type or 'default'}-{gen_weight or 1}"
        model = os.path.join(self.work, f"dcgan-{tag}.yaml")
        text = self.text
        if gen_weight:
            term = "  - binary_cross_entropy: {input: p_fake, target: ones}\n"
            text = text.replace(term, term + f"    weight: {gen_weight}\n")
        with open(model, "w") as f:
            f.write(text + f"""train:
  steps: {steps}
  schedule: [discriminator, generator]
  shuffle: false
  data: {{npy: {{x: x.npy, z: z.npy}}}}
""")
        return train_logged(self.ampc, model, self.names, self.work, level, half_type)


def part(weights, prefix):
    return {n: t for n, t in weights.items() if n.startswith(prefix)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    start = DCGAN().state_dict()
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(STEPS * BATCH, 3, 8, 8, generator=g)
    zs = torch.randn(STEPS * BATCH, 64, generator=g)
    want, want_losses = torch_run(start, xs, zs, STEPS)
    exact, _ = torch_run(start, xs, zs, STEPS, f64=True)
    reordered, _ = torch_run(start, xs, zs, STEPS, reversed_batches=True)
    autocast, _ = torch_run(start, xs, zs, STEPS, autocast=True)
    autocast_distance = distance(autocast, want)
    initial = {n: t.double() for n, t in start.items() if n in want}
    with tempfile.TemporaryDirectory() as work:
        ampc = Ampc(os.path.abspath(args.ampc), work, start, xs, zs)

        one, _ = ampc.train("O0", 1)
        gen_still = one and distance(part(one, "gen_"), part(initial, "gen_")) == 0
        disc_moved = one and distance(part(one, "disc_"), part(initial, "disc_")) > 1e-6
        check(bool(gen_still and disc_moved),
              "after step 1 (the discriminator's turn) the generator's weights are unchanged "
              "and the discriminator's have moved")

        got, logged = ampc.train("O0", STEPS)
        for prefix in ("disc_", "gen_"):
            d = distance(part(got, prefix), part(want, prefix)) if got else float("inf")
            noise = [distance(part(run, prefix), part(exact, prefix)) for run in (want, reordered)]
            bound = max(TOLERANCE, 3 * max(noise))
            own = distance(part(got, prefix), part(exact, prefix)) if got else float("inf")
            check(d <= bound, f"O0: the {prefix}* weights after {STEPS} alternating Adam steps "
                  f"are within {d:.1e} of PyTorch's (bound {bound:.1e}; from an f64 run: "
                  f"ampc {own:.1e}, PyTorch f32 {noise[0]:.1e}, reordered {noise[1]:.1e})")
        got_losses = [s.get("losses", []) for s in logged]
        close = len(got_losses) == STEPS and all(
            len(a) == 2 and all(abs(x - y) <= 1e-4 * abs(y) for x, y in zip(a, b))
            for a, b in zip(got_losses, want_losses))
        check(close, f"O0: each step's two losses are PyTorch's: {got_losses} against "
              f"{want_losses}")

        for level in ("O1", "O2"):
            got, logged = ampc.train(level, STEPS)
            d = distance(got, want) if got else float("inf")
            check(d <= 2 * autocast_distance,
                  f"{level} (bf16, a scaler per loss): {d:.1e} from PyTorch's f32 weights, "
                  f"autocast's bf16 ones {autocast_distance:.1e}")
            scales = [s.get("loss_scales", []) for s in logged]
            check(len(scales) == STEPS and all(len(s) == 2 for s in scales),
                  f"{level}: each step logs both losses' scales: {scales}")

        # f16 with the generator's loss weighted up until its scaled
        # gradients overflow at the initial scale 2^16: the generator's
        # steps skip and its scaler backs off, while the discriminator's
        # steps apply and its scale stays.
        got, logged = ampc.train("O2", 6, half_type="f16", gen_weight=2000.0)
        scales = [s.get("loss_scales", [None, None]) for s in logged]
        skipped = [s.get("skipped") for s in logged]
        check(len(logged) == 6 and all(s[0] == 65536 for s in scales) and scales[-1][1] < 65536,
              f"O2 f16, the generator's loss x2000: only its scaler backs off: {scales}")
        check(skipped[0::2] == [False] * 3 and skipped[1] is True,
              f"the discriminator's steps apply, the generator's overflowing ones skip (skipped "
              f"per step: {skipped})")
        check(bool(got) and distance(part(got, "disc_"), part(initial, "disc_")) > 1e-6,
              "the discriminator's weights moved")
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
