#!/usr/bin/python3
"""ampc's training step against PyTorch's on this CPU, in one invocation.

For each workload (a model file under bench/models/) it runs

  ampc    at O0, O1, O2 and O3 (build/bin/ampc --device cpu, one process per
          level; the per-step times come from --metrics-out, the peak memory
          from the "peak memory" line), and
  PyTorch in fp32, with torch.autocast("cpu", dtype=torch.bfloat16), and in
          pure bf16 (model.to(torch.bfloat16)), each in a process of its own,
          the network built from the same model file,

and the same for the real models of bench/real_models.py (ResNet-50,
EfficientNet-B0, ViT-B/32, Swin-T, a 10 M-parameter nanoGPT, a BERT-base
layer): built in PyTorch and exported to ONNX, which ampc trains; PyTorch
trains the module itself, in fp32 and under autocast (O1, O2 and O3 are
compared with autocast, the mode a PyTorch user of such a model has). It
prints one line per configuration: the median step time after warm-up,
the speedup over its own fp32 (ampc O0 / PyTorch fp32), the ratio to
PyTorch's matching mode, the achieved GFLOP/s and its share of the GEMM
ceiling measured in the same run, and the peak memory.

Both sides run with 2 threads: OMP_NUM_THREADS=2, GOMP_SPINCOUNT=0 (idle
OpenMP threads sleep instead of spinning, so neither side's pool steals the
other's cores between steps) and torch.set_num_threads(2). With
`--omp-spin user` GOMP_SPINCOUNT and OMP_WAIT_POLICY stay as the caller
has them (libgomp's default: a short spin, then sleep), which is what a
user's run gets; both sides use libgomp, so both get the same waiting.

Run with Debian's /usr/bin/python3 (it sees python3-torch):

  /usr/bin/python3 bench/compare_pytorch.py [--build-dir build] [--quick]
      [--workloads seeds|real|all|mlp-1024,resnet50,...] [--skip-torch] [--steps N]

(default: the seed workloads; `real` the real models, about 40 minutes on
2 cores without AVX-512, where PyTorch's autocast steps take 10-20 s).

Without PyTorch (or PyYAML, which builds the PyTorch models from the model
files) it prints the ampc lines only and says why. docs/benchmarks.md
explains every column. Exit code 1 when a configuration failed.
"""

import os

# OpenMP reads these when its runtime starts: before torch is imported, and
# inherited by every process this script starts.
THREADS = 2
os.environ["OMP_NUM_THREADS"] = str(THREADS)
# GOMP_SPINCOUNT is set in main(), before anything imports torch
# (--omp-spin).

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS = Path(__file__).resolve().parent / "models"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_info import cpu_flags, cpu_name  # noqa: E402  (bench/host_info.py)
from torch_models import ModelGraph  # noqa: E402  (bench/torch_models.py)
import real_models  # noqa: E402  (bench/real_models.py; imports torch only when used)

# Workload name -> (model file, steps, warm-up steps). The steps keep the
# whole run near 10 minutes on 2 cores while leaving enough timed steps for
# a stable median.
WORKLOADS = {
    "mlp-1024": (MODELS / "mlp-1024.yaml", 30, 3),
    "mlp-2048": (MODELS / "mlp-2048.yaml", 20, 3),
    "convnet": (MODELS / "convnet.yaml", 12, 2),
    "transformer": (REPO / "examples" / "transformer.yaml", 20, 3),
    "bert-layer": (MODELS / "bert-layer.yaml", 10, 2),
}
# The real models (bench/real_models.py): their model files are written
# into the run's work folder from PyTorch's export.
REAL = real_models.REAL_MODELS
GROUPS = {"seeds": list(WORKLOADS), "real": list(REAL), "all": list(WORKLOADS) + list(REAL)}
QUICK_STEPS, QUICK_WARMUP = 3, 1
DEFAULT_REPEATS = 3

AMPC_LEVELS = ["O0", "O1", "O2", "O3"]
TORCH_MODES = ["fp32", "autocast-bf16", "bf16"]
# The PyTorch mode each ampc level is compared with: the same arithmetic.
# O0 is fp32; O1 casts per op like autocast; O2 (bf16 model, fp32 master
# weights, fp32 batchnorm) and O3 (all bf16) are nearest to a model cast to
# bf16, the only other whole-model mode PyTorch has.
PAIRING = {"O0": "fp32", "O1": "autocast-bf16", "O2": "bf16", "O3": "bf16"}
# A real model is compared with what its PyTorch user runs: fp32, or
# autocast (a model cast to bf16 by hand is not how they are trained).
REAL_TORCH_MODES = ["fp32", "autocast-bf16"]
REAL_PAIRING = {"O0": "fp32", "O1": "autocast-bf16", "O2": "autocast-bf16", "O3": "autocast-bf16"}
# Issue 40's targets for the real models: O2 at least 1.3x autocast's
# speed, O0 1.2x PyTorch fp32's, O1 faster than O0, O3 not slower than O2.
REAL_TARGETS = {"O2 vs autocast": 1.3, "O0 vs fp32": 1.2}
# Which ceiling a mode's GEMMs run against.
HALF_MODES = {"O1", "O2", "O3", "autocast-bf16", "bf16"}


# --- Model files ---------------------------------------------------------------------------


def load_yaml(path):
    import yaml  # python3-yaml; only needed for the PyTorch side and FLOPs

    with open(path) as f:
        return yaml.safe_load(f)


# --- PyTorch side (one process per configuration) ------------------------------------------


def proc_status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def torch_worker(model_path, mode, steps, warmup):
    """Trains the model `steps` steps in `mode`; prints a JSON line with the
    step times and the growth of the peak resident memory over the process's
    size before the model existed."""
    import torch

    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    graph = ModelGraph(load_yaml(model_path))
    base_kib = proc_status_kib("VmRSS")
    model = graph.torch_module()
    loss_fn = graph.torch_loss()
    x, y, target_integral = graph.torch_inputs()
    if mode == "bf16":
        model = model.to(torch.bfloat16)
        x = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in x.items()}
        if not target_integral:
            y = y.to(torch.bfloat16)
    model.train()
    opt = graph.torch_optimizer(model.parameters())
    # PyTorch 1.13 has no bf16 mse_loss on the CPU: a pure-bf16 model then
    # computes its loss on the output cast to fp32 (one small cast).
    note = ""
    float_loss = False
    if mode == "bf16":
        try:
            with torch.no_grad():
                loss_fn(model(x), y)
        except RuntimeError as e:
            if "not implemented" not in str(e):
                raise
            float_loss = True
            y = y if target_integral else y.float()
            note = f"{type(loss_fn).__name__} has no bf16 CPU kernel: loss on the output cast to fp32"

    def step_loss():
        out = model(x)
        return loss_fn(out.float() if float_loss else out, y)

    timed_training(model, opt, step_loss, mode, steps, warmup, base_kib, note)


def torch_real_worker(name, mode, steps, warmup):
    """torch_worker for a real model (bench/real_models.py)."""
    import torch

    torch.set_num_threads(THREADS)
    base_kib = proc_status_kib("VmRSS")
    model, inputs, target, loss_fn = real_models.torch_setup(name)
    opt = torch.optim.SGD(model.parameters(), lr=real_models.LR)

    def step_loss():
        return loss_fn(model(*inputs).float(), target)

    timed_training(model, opt, step_loss, mode, steps, warmup, base_kib, "")


def timed_training(model, opt, step_loss, mode, steps, warmup, base_kib, note):
    """`steps` training steps of step_loss() (under autocast in that mode);
    prints the JSON line run_torch reads."""
    import torch

    times = []
    loss_value = float("nan")
    for _ in range(steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if mode == "autocast-bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = step_loss()
        else:
            loss = step_loss()
        loss.backward()
        opt.step()
        loss_value = loss.item()  # waits for nothing on the CPU, but reads the result
        times.append((time.perf_counter() - start) * 1000)
    peak_kib = proc_status_kib("VmHWM")
    print(
        json.dumps(
            {
                "step_ms": times,
                "warmup": warmup,
                "peak_bytes": max(0, peak_kib - base_kib) * 1024,
                "final_loss": loss_value,
                "note": note,
            }
        )
    )


def torch_available():
    try:
        import torch  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return False, f"PyTorch is not importable ({type(e).__name__}: {e})"
    try:
        import yaml  # noqa: F401
    except ImportError:
        return False, "PyYAML is not importable: the PyTorch models are built from the model files"
    return True, ""


def run_torch(model, mode, steps, warmup):
    """`model`: a model file's path, or a real model's name."""
    worker = "--torch-real-worker" if model in REAL else "--torch-worker"
    cmd = [sys.executable, __file__, worker, str(model), mode, str(steps), str(warmup)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["exit code %d" % proc.returncode])[-1]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    timed = result["step_ms"][warmup:] or result["step_ms"]
    return {"ms": statistics.median(timed), "peak_bytes": result["peak_bytes"], "peak_kind": "rss",
            "note": result.get("note", "")}


# --- ampc side ---------------------------------------------------------------------------


def run_ampc(ampc, model_path, level, steps, warmup):
    with tempfile.TemporaryDirectory(prefix="ampc-bench-") as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        cmd = [
            str(ampc), "--device", "cpu", "--opt-level", level, str(model_path),
            "--steps", str(steps), "--metrics-out", str(metrics), "--progress", "none",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            return {"error": lines[-1] if lines else "exit code %d" % proc.returncode}
        records = [json.loads(line) for line in metrics.read_text().splitlines() if line]
    # The step itself, without loading its batch: PyTorch's loop reuses one
    # batch made before it, so loading is left out on both sides and shown
    # in its own column.
    step_ms = [r["step_ms"] - r.get("data_ms", 0) for r in records]
    data_ms = [r.get("data_ms", 0) for r in records]
    m = re.search(r"peak memory: planned (\d+) B, allocated (\d+) B", proc.stdout)
    timed = step_ms[warmup:] or step_ms
    result = {"ms": statistics.median(timed), "peak_kind": "plan",
              "data_ms": statistics.median(data_ms[warmup:] or data_ms)}
    if m:
        result["peak_bytes"] = int(m.group(1))
        result["allocated_bytes"] = int(m.group(2))
    return result


# --- The floor ----------------------------------------------------------------------------


def floor_from_ampc(tool, model_path, level):
    """ms of the step's dense kernels each timed alone plus the optimizer's
    traffic at the copy bandwidth (bench/StepFloor.cpp)."""
    proc = subprocess.run([str(tool), str(model_path), level], capture_output=True, text=True)
    m = re.search(r"^floor ms=([0-9.]+)", proc.stdout, re.M)
    if proc.returncode != 0 or not m:
        return None
    dense = re.search(r"^dense kernels=(\d+) distinct=\d+ flops=([0-9.e+]+) ms=([0-9.]+)",
                      proc.stdout, re.M)
    opt = re.search(r"^optimizer bytes=(\d+) bandwidth_gbs=([0-9.]+) ms=([0-9.]+)", proc.stdout, re.M)
    return {"ms": float(m.group(1)), "dense_ms": float(dense.group(3)) if dense else None,
            "flops": float(dense.group(2)) if dense else None,
            "optimizer_ms": float(opt.group(3)) if opt else None}


# --- The GEMM ceiling ----------------------------------------------------------------------


def ceiling_from_ampc(tool):
    """GFLOP/s of one 2048^3 linear on ampc's cpu backend (oneDNN), f32 and bf16."""
    proc = subprocess.run([str(tool)], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    found = dict(re.findall(r"^(\w+) gflops=([0-9.e+]+)", proc.stdout, re.M))
    if "f32" not in found or "bf16" not in found:
        return None
    return {"f32": float(found["f32"]), "bf16": float(found["bf16"]),
            "how": "oneDNN through ampc's cpu backend: one linear, 2048x2048 by 2048x2048, "
                   "median of 10 (bench/GemmCeiling.cpp)"}


def ceiling_from_torch():
    import torch

    torch.set_num_threads(THREADS)
    n = 2048
    result = {}
    for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        for _ in range(2):
            torch.matmul(a, b)
        times = []
        for _ in range(10):
            start = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - start)
        result[name] = 2 * n**3 / statistics.median(times) / 1e9
    result["how"] = "torch.matmul, 2048x2048 by 2048x2048, median of 10"
    return result


def combine_runs(results):
    """One configuration's repeated runs: the median of their medians, the
    spread of those medians relative to it, the largest peak memory."""
    for r in results:
        if "error" in r:
            return r
    ms = [r["ms"] for r in results]
    out = dict(results[-1])
    out["ms"] = statistics.median(ms)
    out["spread"] = (max(ms) - min(ms)) / out["ms"] if out["ms"] > 0 else 0.0
    peaks = [r["peak_bytes"] for r in results if "peak_bytes" in r]
    if peaks:
        out["peak_bytes"] = max(peaks)
    return out


# --- Output --------------------------------------------------------------------------------


def fmt_bytes(n):
    if n is None:
        return "-"
    return f"{n / 2**20:.1f} MiB"


def cpu_features():
    """The instruction sets that decide bf16 speed: AVX-512 (F), AVX512-BF16, AMX-BF16."""
    flags = cpu_flags()
    yes = lambda f: "yes" if f in flags else "no"  # noqa: E731
    return f"AVX-512 {yes('avx512f')}, AVX512-BF16 {yes('avx512_bf16')}, AMX-BF16 {yes('amx_bf16')}"


def torch_blas():
    """The BLAS library PyTorch's fp32 Linear runs on, as loaded in this
    process (Debian's PyTorch calls libblas.so.3, which is whichever BLAS
    the system's alternatives point at): (description, is_reference)."""
    import torch

    a = torch.randn(64, 64)
    torch.nn.functional.linear(a, a)
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            name = os.path.basename(path)
            if "blas" in name.lower() or "mkl_rt" in name:
                libs.add(os.path.realpath(path))
    if not libs:
        return "no BLAS library loaded (PyTorch's own kernels)", False
    for lib in sorted(libs):
        if "openblas" in lib:
            return f"OpenBLAS ({lib})", False
        if "mkl" in lib:
            return f"MKL ({lib})", False
        if "blis" in lib:
            return f"BLIS ({lib})", False
    lib = sorted(libs)[0]
    return f"the reference BLAS ({lib})", True


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("--torch-worker", "--torch-real-worker"):
        _, worker, model, mode, steps, warmup = sys.argv
        (torch_worker if worker == "--torch-worker" else torch_real_worker)(
            model, mode, int(steps), int(warmup))
        return 0

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=str(REPO / "build"), help="the ampc build (default: build)")
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_STEPS} steps per configuration, {QUICK_WARMUP} of warm-up: a smoke test")
    ap.add_argument("--workloads", default="seeds",
                    help="comma-separated, of: seeds, real, all, " + ", ".join(GROUPS["all"]))
    ap.add_argument("--skip-torch", action="store_true", help="ampc lines only")
    ap.add_argument("--omp-spin", choices=["0", "user"], default="0",
                    help="GOMP_SPINCOUNT for both sides: 0 (idle threads sleep; the default) "
                         "or user (as the environment has it)")
    ap.add_argument("--steps", type=int, help="steps per configuration (overrides the defaults)")
    ap.add_argument("--repeats", type=int,
                    help="runs of each configuration, in rounds; ms/step is the median of their "
                         f"medians (default {DEFAULT_REPEATS}, 1 with --quick)")
    args = ap.parse_args()
    if args.omp_spin == "0":
        os.environ["GOMP_SPINCOUNT"] = "0"

    repeats = args.repeats or (1 if args.quick else DEFAULT_REPEATS)
    if repeats < 1:
        ap.error("--repeats must be at least 1")
    workloads = []
    for w in (w.strip() for w in args.workloads.split(",")):
        if not w:
            continue
        if w not in GROUPS and w not in WORKLOADS and w not in REAL:
            ap.error(f"unknown workload '{w}' (known: {', '.join(list(GROUPS) + GROUPS['all'])})")
        workloads += [x for x in GROUPS.get(w, [w]) if x not in workloads]
    bin_dir = Path(args.build_dir) / "bin"
    ampc = bin_dir / "ampc"
    if not ampc.exists():
        print(f"error: {ampc} not found; build it first (ninja -C {args.build_dir} ampc)", file=sys.stderr)
        return 2

    notes = []
    use_torch, why = (False, "--skip-torch") if args.skip_torch else torch_available()
    if not use_torch:
        notes.append(f"PyTorch lines left out: {why}")
    try:
        load_yaml(MODELS / "mlp-1024.yaml")  # PyYAML present?
        have_yaml = True
    except ImportError:
        have_yaml = False
        notes.append("PyYAML is not importable: no FLOP counts, so no GFLOP/s")

    tool = bin_dir / "ampc-gemm-ceiling"
    floor_tool = bin_dir / "ampc-step-floor"
    if not floor_tool.exists():
        notes.append(f"no floor column: build {floor_tool.name} (ninja -C {args.build_dir} "
                     f"{floor_tool.name})")

    def measure_ceiling():
        found = ceiling_from_ampc(tool) if tool.exists() else None
        if found is None and use_torch:
            found = ceiling_from_torch()
        return found

    blas = None
    if use_torch:
        blas, reference = torch_blas()
        if reference:
            notes.append("PyTorch's fp32 Linear runs on the reference BLAS, far below this "
                         "machine's f32 GEMM speed, so fp32 ratios flatter ampc; a user would "
                         "have OpenBLAS (libopenblas0-pthread, which scripts/install-deps.sh "
                         "installs)")

    # --- Measure. Progress goes to stderr; the table is printed once the
    # ceiling is known: it is measured before every workload and after the
    # last, and the highest figure is the ceiling (on a shared machine a
    # measurement taken while something else runs comes out low -- so do the
    # workloads' times then, which `spread` shows).
    started = time.time()
    load_at_start = os.getloadavg()[0]
    ceilings = []
    measured = []  # (workload, flops, ampc_results, torch_results, floors)
    # PyTorch 1.13's bf16 kernels on a CPU without AVX-512 are scalar
    # fallbacks (a BERT layer's step takes minutes): the smoke run, which
    # checks that every configuration runs, leaves those modes out there.
    torch_modes = TORCH_MODES
    if args.quick and "avx512f" not in cpu_flags():
        torch_modes = ["fp32"]
        print("# --quick on a CPU without AVX-512: PyTorch's bf16 modes left out "
              "(minutes a step there); run without --quick to measure them")
    work = tempfile.TemporaryDirectory(prefix="ampc-compare-")
    for w in workloads:
        real = w in REAL
        if real and not use_torch:
            notes.append(f"{w} left out: its model is exported from PyTorch ({why})")
            continue
        if real:
            print(f"[{time.time() - started:5.0f} s] {w}: exporting from PyTorch", file=sys.stderr,
                  flush=True)
            model_path = Path(real_models.write_model_file(w, work.name))
            steps, warmup = REAL[w].steps, REAL[w].warmup
        else:
            model_path, steps, warmup = WORKLOADS[w]
        if args.quick:
            steps, warmup = QUICK_STEPS, QUICK_WARMUP
        if args.steps:
            steps = args.steps
            warmup = min(warmup, steps - 1)
        flops = ModelGraph(load_yaml(model_path)).train_flops if have_yaml and not real else None
        c = measure_ceiling()
        if c:
            ceilings.append(c)

        # Each pair of comparable configurations back to back, and every
        # configuration `repeats` times in rounds: a burst of load from
        # elsewhere then spoils one round of a few configurations, and the
        # median over the rounds leaves it out.
        modes = [m for m in (REAL_TORCH_MODES if real else TORCH_MODES) if m in torch_modes]
        configs = []
        for i, level in enumerate(AMPC_LEVELS):
            configs.append(("ampc", level))
            if use_torch and i < len(modes):
                configs.append(("torch", modes[i]))
        runs = {c: [] for c in configs}
        for round_ in range(repeats):
            for impl, mode in configs:
                print(f"[{time.time() - started:5.0f} s] {w} {impl} {mode} "
                      f"(run {round_ + 1} of {repeats}, {steps} steps)", file=sys.stderr, flush=True)
                if impl == "ampc":
                    runs[(impl, mode)].append(run_ampc(ampc, model_path, mode, steps, warmup))
                else:
                    runs[(impl, mode)].append(run_torch(w if real else model_path, mode, steps,
                                                        warmup))
        ampc_results = {level: combine_runs(runs[("ampc", level)]) for level in AMPC_LEVELS}
        torch_results = {m: combine_runs(runs[("torch", m)]) for m in modes if use_torch}
        floors = {}
        if floor_tool.exists():
            for level in AMPC_LEVELS:
                print(f"[{time.time() - started:5.0f} s] {w} floor {level}", file=sys.stderr,
                      flush=True)
                floors[level] = floor_from_ampc(floor_tool, model_path, level)
        if flops is None and floors.get("O0") and floors["O0"].get("flops"):
            flops = floors["O0"]["flops"]  # the registry's count (the floor tool's)
        measured.append((w, flops, ampc_results, torch_results, floors))
    c = measure_ceiling()
    if c:
        ceilings.append(c)
    ceiling = None
    if ceilings:
        ceiling = {k: max(x[k] for x in ceilings) for k in ("f32", "bf16")}
    else:
        notes.append("no GEMM ceiling: build ampc-gemm-ceiling (bench/) or install PyTorch")

    # --- Print.
    print(f"# ampc vs PyTorch: one training step, CPU, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"# host: {cpu_name()}, {os.cpu_count()} CPUs ({cpu_features()}), load average "
          f"{load_at_start:.2f} at the start; ampc: {ampc}")
    spin = ", ".join(f"{k}={os.environ[k]}" if k in os.environ else f"{k} unset"
                     for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"))
    print(f"# threads: {THREADS} on both sides (OMP_NUM_THREADS={THREADS}, {spin}, "
          f"torch.set_num_threads({THREADS})); each configuration in a process of its own, "
          f"{repeats} time(s) in rounds")
    if use_torch:
        import torch

        print(f"# PyTorch {torch.__version__}; its fp32 Linear's BLAS: {blas}")
    if ceiling:
        print(f"# GEMM ceiling: f32 {ceiling['f32']:.1f} GFLOP/s, bf16 {ceiling['bf16']:.1f} GFLOP/s: "
              f"the highest of {len(ceilings)} measurements during the run (lowest: f32 "
              f"{min(x['f32'] for x in ceilings):.1f}, bf16 {min(x['bf16'] for x in ceilings):.1f}); "
              f"{ceilings[0]['how']}")
    print("# ms/step: median over the steps after warm-up (of each run; then the median over "
          "the runs); spread: (slowest - fastest run) / ms/step; vs fp32: own fp32 time / this time "
          "(ampc: O0, PyTorch: fp32); vs torch: PyTorch's time / ampc's in the paired mode "
          "(O0~fp32, O1~autocast-bf16, O2~bf16, O3~bf16; the real models' O1-O3~autocast-bf16; "
          ">1 = ampc faster); GFLOP/s: "
          "GEMM/conv FLOPs of forward + backward per step / step time; % ceil: of the f32 "
          "ceiling for fp32 modes, the bf16 one otherwise; peak: ampc's memory plan "
          "(= allocated unless marked *), PyTorch's growth of peak RSS; data: ampc's time to "
          "generate and bind the step's batch, not in ms/step (PyTorch reuses one batch made "
          "before its loop); floor: the level's dense kernels (linear, matmul, convolutions, "
          "attention; forward and backward) each timed alone + its optimizer's bytes at the "
          "measured copy bandwidth (bench/StepFloor.cpp); x floor: ms/step / floor")
    for note in notes:
        print(f"# note: {note}")
    WIDTH = max([12] + [len(w) for w in workloads])
    print(f"{'workload':<{WIDTH}} {'impl':<7} {'mode':<14} {'ms/step':>9} {'vs fp32':>8} "
          f"{'vs torch':>9} {'GFLOP/s':>8} {'% ceil':>7} {'peak':>11} {'spread':>7} {'data':>7} "
          f"{'floor':>8} {'x floor':>8}")

    failed = []
    for w, flops, ampc_results, torch_results, floors in measured:

        def line(impl, mode, r, own_fp32, torch_pair):
            if "error" in r and impl == "torch" and w in REAL:
                # PyTorch's own limits on a real model (1.13's autocast fails
                # on Swin-T) are the peer's, not a failure of this run.
                print(f"{w:<{WIDTH}} {impl:<7} {mode:<14} PyTorch cannot: {r['error']}")
                return
            if "error" in r:
                failed.append(f"{w} {impl} {mode}")
                print(f"{w:<{WIDTH}} {impl:<7} {mode:<14} failed: {r['error']}")
                return
            ms = r["ms"]
            vs_fp32 = f"{own_fp32['ms'] / ms:.2f}x" if own_fp32 and "ms" in own_fp32 else "-"
            vs_torch = f"{torch_pair['ms'] / ms:.2f}x" if torch_pair and "ms" in torch_pair else "-"
            gflops = flops / (ms * 1e6) if flops else None
            gf = f"{gflops:.1f}" if gflops else "-"
            ceil = "-"
            if gflops and ceiling:
                ceil = f"{100 * gflops / ceiling['bf16' if mode in HALF_MODES else 'f32']:.0f}%"
            peak = fmt_bytes(r.get("peak_bytes"))
            if r.get("peak_kind") == "rss":
                peak = "~" + peak
            elif "allocated_bytes" in r and r["allocated_bytes"] != r.get("peak_bytes"):
                peak += "*"
            spread = f"{100 * r['spread']:.0f}%" if repeats > 1 else "-"
            data = f"{r['data_ms']:.1f}" if "data_ms" in r else "-"
            fl = floors.get(mode) if impl == "ampc" else None
            floor = f"{fl['ms']:.2f}" if fl else "-"
            x_floor = f"{ms / fl['ms']:.2f}x" if fl and fl["ms"] > 0 else "-"
            print(f"{w:<{WIDTH}} {impl:<7} {mode:<14} {ms:>9.2f} {vs_fp32:>8} {vs_torch:>9} {gf:>8} "
                  f"{ceil:>7} {peak:>11} {spread:>7} {data:>7} {floor:>8} {x_floor:>8}")

        pairing = REAL_PAIRING if w in REAL else PAIRING
        for level in AMPC_LEVELS:
            line("ampc", level, ampc_results[level], ampc_results["O0"],
                 torch_results.get(pairing[level]))
        for mode in TORCH_MODES:
            if mode in torch_results:
                line("torch", mode, torch_results[mode], torch_results["fp32"], None)
                if torch_results[mode].get("note"):
                    print(f"#   {w} torch {mode}: {torch_results[mode]['note']}")
    targets = [check_real_targets(w, a, t) for w, _, a, t, _ in measured if w in REAL]
    for w, verdicts in targets:
        print(f"# targets {w}: " + "; ".join(verdicts))
    print(f"# {len(measured)} workloads in {time.time() - started:.0f} s")
    if failed:
        print(f"# failed: {', '.join(failed)}")
        return 1
    return 0

def check_real_targets(w, ampc_results, torch_results):
    """Issue 40's targets for a real model, each as 'what: figure (met|NOT met)'."""
    ms = {k: r.get("ms") for k, r in ampc_results.items()}
    verdicts = []

    def verdict(what, figure, met):
        verdicts.append(f"{what} {figure} ({'met' if met else 'NOT met'})")

    for what, need in REAL_TARGETS.items():
        level, mode = ("O2", "autocast-bf16") if what.startswith("O2") else ("O0", "fp32")
        theirs = torch_results.get(mode, {}).get("ms")
        if ms.get(level) and theirs:
            verdict(f"{what} >= {need}x:", f"{theirs / ms[level]:.2f}x", theirs / ms[level] >= need)
        elif ms.get(level):
            verdicts.append(f"{what} >= {need}x: no PyTorch figure")
    if ms.get("O1") and ms.get("O0"):
        verdict("O1 faster than O0:", f"{ms['O1']:.1f} vs {ms['O0']:.1f} ms", ms["O1"] < ms["O0"])
    if ms.get("O3") and ms.get("O2"):
        verdict("O3 not slower than O2:", f"{ms['O3']:.1f} vs {ms['O2']:.1f} ms",
                ms["O3"] <= ms["O2"])
    return w, verdicts


if __name__ == "__main__":
    sys.exit(main())
