#!/usr/bin/env python3
"""ampc's CUDA training step against PyTorch's on this GPU, in one invocation.

The seed workloads at their own sizes:

  mlp      examples/gpu/mlp-4096.yaml  3 x Linear(4096), batch 512, SGD, MSE
           seed: f32 9.41 s, AMP (autocast + GradScaler) 3.11 s per 150 steps
  convnet  examples/convnet.yaml       14 x conv-bn-relu, batch 256, Adam
           seed: f32 ~31 s/epoch (988 MB), AMP ~13.8 s/epoch (622 MB)
           (an MNIST epoch is 60000 / 256 = 234 steps)

and the models users bring, whose attention and embeddings the seeds lack:

  transformer  examples/transformer.yaml    2 pre-LN encoder blocks, width 128,
                                            sequence 64, batch 32, Adam
  bert-layer   bench/models/bert-layer.yaml one BERT-base layer, sequence 128,
                                            batch 8, Adam
  resnet50     torchvision's ResNet-50 exported by PyTorch to ONNX, 224x224,
               batch 32, SGD (imported)
  gpt          a GPT written the nanoGPT way (6 layers, width 384, context
               256, vocabulary 8192, batch 16), exported to ONNX, SGD
               (imported)

The imported two come from bench/gpu/prepare_imported.py (`prepare --bench`
here, `fill` there: the weights are regenerated on the GPU machine), under
--imported (default .gpuwork/bench); PyTorch trains the same architecture
built from tests/zoo/zoo_models.py, on random data of the same shapes.

For each it runs

  ampc     at O0, O1, O2 and O3 (build-cuda/bin/ampc --device cuda
           --half-type f16, one process per level; per-step times from --metrics-out, device
           memory from the "peak memory" line: the arenas the plan sized), and
  PyTorch  in fp32 and with AMP (torch.autocast("cuda", torch.float16) +
           torch.cuda.amp.GradScaler), each in a process of its own, the
           network built from the same model file (bench/compare_pytorch.py's
           ModelInfo, reused),

and prints one line per configuration: the median step time after warm-up
(CUDA-synchronised), the time for the seed's unit of work (150 steps or an
epoch), the speedup over its own fp32 (ampc O0 / PyTorch fp32), the seed's
figure, and the peak memory (ampc: arena bytes allocated; PyTorch:
torch.cuda.max_memory_allocated and max_memory_reserved).

  python3 bench/gpu/compare_pytorch_gpu.py [--build-dir build-cuda]
      [--workloads mlp,convnet,...] [--steps N] [--warmup N] [--skip-torch]
      [--imported DIR]

Needs a CUDA device; PyTorch with CUDA for the PyTorch lines (without it the
ampc lines are printed and the reason is given). docs/cuda.md explains how to
run it. Exit code 1 when a configuration failed, 77 when no GPU answers.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
from torch_models import ModelGraph  # noqa: E402  (the same network from the model file)
import compare_pytorch as cpu_bench  # noqa: E402  (load_yaml)

# Name -> (model file, steps, warm-up, steps in the seed's unit, the unit's name,
#          seed figures: {mode: (seconds per unit, peak MB or None)}).
WORKLOADS = {
    "mlp": ("examples/gpu/mlp-4096.yaml", 60, 10, 150, "150 steps",
            {"fp32": (9.41, None), "amp": (3.11, None)}),
    "convnet": ("examples/convnet.yaml", 40, 5, 234, "epoch",
                {"fp32": (31.0, 988), "amp": (13.8, 622)}),
    "transformer": ("examples/transformer.yaml", 30, 5, 100, "100 steps", {}),
    "bert-layer": ("bench/models/bert-layer.yaml", 30, 5, 100, "100 steps", {}),
    # Imported: the model file is prepare_imported.py's, under --imported.
    "resnet50": ("imported:resnet50", 30, 5, 100, "100 steps", {}),
    "gpt": ("imported:gpt", 30, 5, 100, "100 steps", {}),
}
AMPC_LEVELS = ["O0", "O1", "O2", "O3"]
TORCH_MODES = ["fp32", "amp"]


# --- PyTorch side (one process per configuration) -------------------------------------------


def timed_steps(loss_fn, opt, mode, steps):
    """Trains `steps` steps of loss_fn() (fp32, or AMP: autocast f16 and a
    GradScaler), each CUDA-synchronised and timed, and prints the worker's
    JSON line: step times, peak memory, the final loss."""
    import torch

    scaler = torch.amp.GradScaler("cuda", enabled=(mode == "amp"))
    torch.cuda.reset_peak_memory_stats()
    times = []
    loss_value = float("nan")
    for _ in range(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=(mode == "amp")):
            loss = loss_fn()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        loss_value = loss.item()  # synchronises
        times.append((time.perf_counter() - start) * 1000)
    print(json.dumps({
        "step_ms": times,
        "peak_allocated": torch.cuda.max_memory_allocated(),
        "peak_reserved": torch.cuda.max_memory_reserved(),
        "final_loss": loss_value,
    }))


def torch_worker(model_path, mode, steps, warmup):
    import torch

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # f32 means f32, as ampc's default
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    graph = ModelGraph(cpu_bench.load_yaml(model_path))
    dev = torch.device("cuda")
    model = graph.torch_module().to(dev)
    loss_fn = graph.torch_loss()
    x, y, _ = graph.torch_inputs()
    x = {k: v.to(dev) for k, v in x.items()}
    y = y.to(dev)
    model.train()
    opt = graph.torch_optimizer(model.parameters())
    timed_steps(lambda: loss_fn(model(x), y), opt, mode, steps)


def torch_worker_imported(name, mode, steps, warmup):
    """PyTorch's step on the architecture prepare_imported.py exported."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, str(HERE))
    from prepare_imported import bench_entries
    import check_zoo  # tests/zoo, on the path prepare_imported puts it

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    entry = next(e for e in bench_entries() if e.name == name)
    dev = torch.device("cuda")
    model = entry.build().to(dev)
    check_zoo.quiet_randomness(model)
    model.train()
    inputs = [t.to(dev) for t in entry.inputs.values()]
    with torch.no_grad():
        out = model(*inputs)
    if entry.loss == "lm":
        target = torch.randint(0, entry.classes, out.shape[:-1], device=dev)
    else:
        target = torch.randint(0, entry.classes, (out.shape[0],), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=check_zoo.LR)

    def loss():
        out = model(*inputs)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), target.reshape(-1))

    timed_steps(loss, opt, mode, steps)


def torch_available():
    try:
        import torch
    except Exception as e:
        return False, f"PyTorch is not importable ({type(e).__name__}: {e})"
    if not torch.cuda.is_available():
        return False, "PyTorch sees no CUDA device (torch.cuda.is_available() is False)"
    try:
        import yaml  # noqa: F401
    except ImportError:
        return False, "PyYAML is not importable: the PyTorch models are built from the model files"
    return True, ""


def run_torch(model_path, mode, steps, warmup, imported=None):
    worker = "--torch-worker-imported" if imported else "--torch-worker"
    cmd = [sys.executable, __file__, worker, imported or str(model_path), mode, str(steps),
           str(warmup)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["exit code %d" % proc.returncode])[-1]}
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    timed = r["step_ms"][warmup:] or r["step_ms"]
    return {"ms": statistics.median(timed), "peak_bytes": r["peak_allocated"],
            "reserved_bytes": r["peak_reserved"], "loss": r["final_loss"]}


# --- ampc side --------------------------------------------------------------------------------


def run_ampc(ampc, model_path, level, steps, warmup):
    with tempfile.TemporaryDirectory(prefix="ampc-gpu-bench-") as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        # f16, as PyTorch's AMP here (the policy's default half type is bf16).
        cmd = [str(ampc), "--device", "cuda", "--opt-level", level, "--half-type", "f16",
               str(model_path), "--steps", str(steps), "--metrics-out", str(metrics),
               "--progress", "none"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            return {"error": lines[-1] if lines else "exit code %d" % proc.returncode}
        records = [json.loads(line) for line in metrics.read_text().splitlines() if line]
    step_ms = [r["step_ms"] - r.get("data_ms", 0) for r in records]
    timed = step_ms[warmup:] or step_ms
    result = {"ms": statistics.median(timed), "loss": records[-1].get("loss") if records else None}
    m = re.search(r"peak memory: planned (\d+) B, allocated (\d+) B", proc.stdout)
    if m:
        result["peak_bytes"] = int(m.group(2))
        result["planned_bytes"] = int(m.group(1))
    return result


# --- Driver -----------------------------------------------------------------------------------


def fmt_mb(n):
    return "-" if n is None else f"{n / 1e6:,.0f} MB"


def gpu_present():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False, "nvidia-smi not found"
    proc = subprocess.run([smi, "-L"], capture_output=True, text=True)
    if proc.returncode != 0 or "GPU" not in proc.stdout:
        return False, (proc.stderr.strip() or "nvidia-smi lists no GPU")
    return True, proc.stdout.strip().splitlines()[0]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker-imported":
        torch_worker_imported(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build-cuda")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--imported", default=str(REPO / ".gpuwork" / "bench"),
                    help="prepare_imported.py's bench folder (weights filled)")
    ap.add_argument("--steps", type=int, help="steps per configuration (default: per workload)")
    ap.add_argument("--warmup", type=int, help="steps left out of the median (default: per workload)")
    ap.add_argument("--skip-torch", action="store_true")
    args = ap.parse_args()

    ok, gpu = gpu_present()
    if not ok:
        print(f"skipped: no GPU ({gpu})")
        return 77
    ampc = (REPO / args.build_dir / "bin" / "ampc").resolve()
    if not ampc.exists():
        print(f"error: {ampc} not found: build with cmake -S . -B {args.build_dir} -G Ninja && "
              f"cmake --build {args.build_dir} --target ampc", file=sys.stderr)
        return 1
    have_torch, why = (False, "--skip-torch") if args.skip_torch else torch_available()
    print(f"GPU: {gpu}")
    if not have_torch:
        print(f"PyTorch lines left out: {why}")
    failed = False
    for name in args.workloads.split(","):
        path, steps, warmup, unit_steps, unit, seed = WORKLOADS[name]
        steps = args.steps or steps
        warmup = min(args.warmup if args.warmup is not None else warmup, steps - 1)
        imported = path.split(":", 1)[1] if path.startswith("imported:") else None
        if imported:
            folder = Path(args.imported) / imported
            model = folder / f"{imported}.yaml"
            if not (folder / "weights.bin").exists():
                print(f"\n{name}: skipped: {folder} has no filled model (prepare_imported.py "
                      f"prepare --bench --out DIR here, fill DIR there)")
                continue
            path = str(model)
        else:
            model = REPO / path
        print(f"\n{name} ({path}), {steps} steps, median after {warmup}; unit = {unit} ({unit_steps} steps)")
        print(f"  {'config':<14}{'ms/step':>10}{'s/' + unit:>14}{'speedup':>10}{'seed s':>9}"
              f"{'peak memory':>16}{'reserved':>12}")
        rows = []
        for level in AMPC_LEVELS:
            rows.append((f"ampc {level}", run_ampc(ampc, model, level, steps, warmup), "O0", None))
        if have_torch:
            for mode in TORCH_MODES:
                rows.append((f"torch {mode}", run_torch(model, mode, steps, warmup, imported),
                             "fp32", seed.get(mode)))
        base = {}
        for label, r, _, _ in rows:
            if label in ("ampc O0", "torch fp32") and "ms" in r:
                base[label.split()[0]] = r["ms"]
        for label, r, _, seed_fig in rows:
            if "error" in r:
                failed = True
                print(f"  {label:<14} failed: {r['error']}")
                continue
            own = base.get(label.split()[0])
            speedup = f"{own / r['ms']:.2f}x" if own else "-"
            seed_s = f"{seed_fig[0]:.2f}" if seed_fig else "-"
            print(f"  {label:<14}{r['ms']:>10.2f}{r['ms'] * unit_steps / 1000:>14.2f}{speedup:>10}"
                  f"{seed_s:>9}{fmt_mb(r.get('peak_bytes')):>16}{fmt_mb(r.get('reserved_bytes')):>12}")
        if "ampc" in base and "torch" in base:
            print(f"  ampc O0 / torch fp32 step time: {base['ampc'] / base['torch']:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
