#!/usr/bin/env python3
"""Prints torch.optim results on fixed inputs as JSON, for OptimizerTest.

tests/unit/OptimizerTest.cpp (PyTorchReference.*) runs this script with the
system python3 (Debian's python3-torch is seen only by it), feeds the same
inputs to ampc's reference kernels and compares within 1e-6 relative. The
inputs are printed too, so they are defined only here.

Output: one JSON object
  {"params": [...], "grads": [[step 1], [step 2], [step 3]],
   "cases": {name: {"settings": {...}, "params": [[after step 1], ...]}},
   "clip": {"max_norm": m, "grads": [[...], [...]], "total_norm": n,
            "clipped": [[...], [...]]},
   "schedules": {name: {"settings": {...}, "lr": [lr at step 0, 1, ...]}}}
Exits 77 when torch cannot be imported.
"""

import json
import math
import sys

try:
    import torch
except ImportError as error:
    print(f"SKIP: python3-torch not installed ({error})")
    sys.exit(77)

STEPS = 3
PARAMS = [0.5, -1.0, 1.5, 2.0, -0.25]


def f32(values):
    return torch.tensor(values, dtype=torch.float32)


def grads_of_step(t):
    # Mixed signs and magnitudes, different every step.
    return [math.sin(i + 3 * t) * (t + 1) / 2 for i in range(len(PARAMS))]


GRADS = [f32(grads_of_step(t)) for t in range(STEPS)]

# The settings use ampc's attribute names; make() turns them into torch's.
OPTIMIZERS = {
    "sgd": ("sgd", {"lr": 0.1}),
    "sgd_weight_decay": ("sgd", {"lr": 0.1, "weight_decay": 0.01}),
    "sgd_momentum_dampening": ("sgd", {"lr": 0.1, "momentum": 0.9, "dampening": 0.1,
                                       "weight_decay": 0.01}),
    "sgd_nesterov": ("sgd", {"lr": 0.05, "momentum": 0.8, "nesterov": True,
                             "weight_decay": 0.02}),
    "adam": ("adam", {"lr": 0.01, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8,
                      "weight_decay": 0.05}),
    "adam_small_eps": ("adam", {"lr": 0.001, "beta1": 0.8, "beta2": 0.999, "eps": 1e-3}),
    "adamw": ("adamw", {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                        "weight_decay": 0.1}),
}


def make(kind, s, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=s["lr"], momentum=s.get("momentum", 0),
                               dampening=s.get("dampening", 0),
                               nesterov=s.get("nesterov", False),
                               weight_decay=s.get("weight_decay", 0))
    betas = (s["beta1"], s["beta2"])
    wd = s.get("weight_decay", 0)
    if kind == "adam":
        return torch.optim.Adam(params, lr=s["lr"], betas=betas, eps=s["eps"], weight_decay=wd)
    return torch.optim.AdamW(params, lr=s["lr"], betas=betas, eps=s["eps"], weight_decay=wd)


def run_optimizer(kind, settings):
    p = torch.nn.Parameter(f32(PARAMS))
    opt = make(kind, settings, [p])
    history = []
    for t in range(STEPS):
        p.grad = GRADS[t].clone()
        opt.step()
        history.append(p.detach().tolist())
    return history


def run_clip():
    max_norm = 0.75
    grads = [f32([0.3, -0.4, 0.5]), f32([[0.6, 0.1], [-0.2, 0.9]])]
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    total = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return {"max_norm": max_norm, "grads": [g.flatten().tolist() for g in grads],
            "total_norm": float(total),
            "clipped": [p.grad.flatten().tolist() for p in params]}


def run_schedule(make_scheduler, lr, steps):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    sched = make_scheduler(opt)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


def main():
    out = {"params": PARAMS, "grads": [g.tolist() for g in GRADS], "cases": {}, "schedules": {}}
    for name, (kind, settings) in OPTIMIZERS.items():
        out["cases"][name] = {"kind": kind, "settings": settings,
                              "params": run_optimizer(kind, settings)}
    out["clip"] = run_clip()
    out["schedules"]["step"] = {
        "settings": {"schedule": "step", "lr": 0.5, "step_size": 3, "gamma": 0.5},
        "lr": run_schedule(lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5), 0.5, 10)}
    out["schedules"]["cosine"] = {
        "settings": {"schedule": "cosine", "lr": 1.0, "total_steps": 6, "min_lr": 0.1},
        "lr": run_schedule(
            lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=6, eta_min=0.1), 1.0, 6)}
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
