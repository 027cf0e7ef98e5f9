#!/usr/bin/python3
"""ampc's and PyTorch's training step next to other work on the same CPU.

For each workload it measures, for ampc and for PyTorch in the same run, the
median and the mean training-step time

  alone       nothing else of ours running,
  +training   next to a second training process of the same implementation
              and workload (ampc next to an ampc training run, PyTorch next
              to a PyTorch one), started first and warmed up, and
  +busy       next to one process spinning `while True: pass`,

and prints one line per (workload, implementation, condition): median and
mean ms/step and the slowdowns contended / alone of both; then per workload
a summary line: ampc's slowdown / PyTorch's for each condition, and whether
the targets hold (ampc's slowdown within 1.25x of PyTorch's; for small-cnn,
ampc never more than 3x slower next to one neighbour). A target is judged on
the worse of the median and the mean: a collapse (threads preempted while
their partners wait) often shows in the mean only. The targets are printed
as yes / no; they never decide the exit code.

Workloads: small-cnn (two conv + batchnorm + relu + maxpool stages and two
linears on 28x28x1 images, batch 32, SGD; written in PyTorch, exported with
torch.onnx.export for ampc and trained by both from the same 4096 random
samples), mlp (examples/mlp.yaml) and transformer (examples/transformer.yaml);
PyTorch builds the last two from the model files (bench/torch_models.py).

PyTorch trains on 2 threads (torch.set_num_threads(2)); ampc on its default
team (the cores it may use: 2 on the project's machine, fewer while another
process shares them; --ampc-threads N pins it with --threads N), and OpenMP's waiting is left as the user has it:
GOMP_SPINCOUNT and OMP_WAIT_POLICY are never set here (the header says
whether the environment sets them), since what idle threads do while another
process wants the cores is what this measures.

Run with Debian's /usr/bin/python3 (it sees python3-torch):

  /usr/bin/python3 bench/contention.py [--build-dir build] [--quick]
      [--workloads small-cnn,mlp,transformer] [--repeats 2] [--level O0]

Each run alone lasts about 2.5 s (its steps from a short calibration run);
a contended run is stopped 10 s after its first step, which the steps column
marks: a collapse would otherwise make it last minutes.

The default run takes 3-5 minutes on a quiet 2-core machine; --quick (small-cnn only, 30
steps, one repeat) is the smoke test CTest runs. Without PyTorch it prints
the ampc lines alone (and --quick falls back to mlp: small-cnn's ONNX file
comes from PyTorch). Exit code 1 when a command failed.
"""

import argparse
import ctypes
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_info import cpu_name  # noqa: E402  (bench/host_info.py)

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

THREADS = 2
WORKLOADS = {
    "small-cnn": None,  # exported into the run's temp dir (torch_setup)
    "mlp": REPO / "examples" / "mlp.yaml",
    "transformer": REPO / "examples" / "transformer.yaml",
}
CONDITIONS = ["alone", "+training", "+busy"]
IMPLS = ["ampc", "torch"]
# The variables that decide whether an idle OpenMP thread spins or sleeps:
# reported, never set.
OMP_VARIABLES = ["OMP_NUM_THREADS", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY"]

WARMUP = 5  # steps left out of every run's figures
TARGET_RUN_S = 2.5  # a measured run's length alone, from the calibration
CALIBRATION_STEPS = 12
MIN_STEPS, MAX_STEPS = WARMUP + 20, 5000
QUICK_STEPS = 30
# A contended run can be 20-30x slower than alone; this long after its
# first step, its steps so far are enough for a median, so it is stopped
# there and marked.
RUN_CAP_S = 10.0
NEIGHBOUR_WARMUP_S = 1.5  # after the neighbour's first step
BUSY_SETTLE_S = 0.5
# For a training process's compile (ampc) or import (PyTorch) and first
# step, on a machine that may be busy with other work.
STARTUP_TIMEOUT_S = 60.0
NEIGHBOUR_STEPS = 10**7  # "forever": it is killed after the measured run
DEFAULT_REPEATS = 2

TARGET_VS_TORCH = 1.25
TARGET_CNN_MAX = 3.0

CNN_BATCH, CNN_SAMPLES = 32, 4096
CNN_MODEL_FILE = """\
model: {onnx: cnn.onnx}
batch: 32
inputs:
  image: {shape: [B, 1, 28, 28], dtype: f32}
  target: {shape: [B], dtype: i64}
loss: {cross_entropy: {input: logits, target: target}}
optimizer: {sgd: {lr: 0.01}}
train:
  steps: 400
  data: {npy: {image: x.npy, target: y.npy}}
"""
TORCH_MISSING = 3  # torch_setup's exit code when PyTorch (or PyYAML) is not importable


# --- PyTorch side (subprocess entry points) ------------------------------------------------


def small_cnn():
    import torch.nn as nn

    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10),
    )


def torch_setup(work_dir):
    """Checks that the PyTorch side can run, writes small-cnn's ONNX file,
    model file and data into work_dir, and prints PyTorch's version. Runs
    in a process of its own, so this script's own process never starts an
    OpenMP pool that could compete with what it measures."""
    try:
        import torch
        import numpy as np
        import yaml  # noqa: F401  (bench/torch_models.py reads the model files with it)
    except ImportError as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return TORCH_MISSING
    work = Path(work_dir)
    torch.manual_seed(0)
    torch.onnx.export(small_cnn(), torch.randn(CNN_BATCH, 1, 28, 28), str(work / "cnn.onnx"),
                      opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["image"], output_names=["logits"])
    rng = np.random.default_rng(0)
    np.save(work / "x.npy", rng.standard_normal((CNN_SAMPLES, 1, 28, 28), dtype=np.float32))
    np.save(work / "y.npy", rng.integers(0, 10, CNN_SAMPLES).astype(np.int64))
    (work / "cnn.yaml").write_text(CNN_MODEL_FILE)
    print(json.dumps({"torch": torch.__version__}))
    return 0


def torch_training(spec):
    """(model, loss function, optimizer, next_batch) for a workload; next_batch
    returns the step's (input, target)."""
    import torch

    if spec["workload"] == "small-cnn":
        import numpy as np

        data = Path(spec["data_dir"])
        x = torch.from_numpy(np.load(data / "x.npy"))
        y = torch.from_numpy(np.load(data / "y.npy"))
        model = small_cnn()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def next_batch():
            idx = torch.randint(0, len(x), (CNN_BATCH,))
            return x[idx], y[idx]

        return model, torch.nn.CrossEntropyLoss(), opt, next_batch

    import yaml

    sys.path.insert(0, str(BENCH))
    from torch_models import ModelGraph  # bench/torch_models.py

    with open(spec["model"]) as f:
        graph = ModelGraph(yaml.safe_load(f))
    model = graph.torch_module()
    inputs, target, _ = graph.torch_inputs()
    # One batch made before the loop, as compare_pytorch.py does.
    return model, graph.torch_loss(), graph.torch_optimizer(model.parameters()), lambda: (inputs, target)


def torch_worker(spec):
    """Trains spec["steps"] steps, appending each step's time to spec["metrics"]
    as a JSON line (the format of ampc's --metrics-out), flushed per step so
    that the parent can see the first step and read a run it had to stop."""
    import torch

    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    model, loss_fn, opt, next_batch = torch_training(spec)
    model.train()
    with open(spec["metrics"], "w") as out:
        for step in range(1, spec["steps"] + 1):
            start = time.perf_counter()
            x, y = next_batch()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            ms = (time.perf_counter() - start) * 1000
            out.write(json.dumps({"step": step, "step_ms": ms}) + "\n")
            out.flush()
    return 0


# --- Child processes ----------------------------------------------------------------------

_children = set()


def _die_with_parent():
    """Runs in the child before exec: the kernel kills it when this script
    dies, so a neighbour never outlives a run killed from outside (CTest's
    timeout sends SIGKILL, which no finally block sees)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the finally blocks still clean up


def start(cmd, log_path):
    log = open(log_path, "w")
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_die_with_parent)
    finally:
        log.close()  # the child holds its own descriptor
    _children.add(proc)
    return proc


def stop(proc):
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    _children.discard(proc)


def stop_all():
    for proc in list(_children):
        stop(proc)


def last_line(log_path, returncode):
    try:
        lines = [l for l in Path(log_path).read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        lines = []
    return lines[-1] if lines else f"exit code {returncode}"


def read_step_ms(metrics):
    """Step times from a metrics file; a line cut off by a kill is skipped."""
    times = []
    try:
        text = Path(metrics).read_text()
    except FileNotFoundError:
        return times
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "step_ms" in record:
            times.append(record["step_ms"])
    return times


# --- Commands -----------------------------------------------------------------------------


class Runner:
    """Builds the command lines of one run of the script and names its files."""

    def __init__(self, ampc, level, work, ampc_threads):
        self.ampc, self.level, self.work = ampc, level, work
        # "auto": ampc's default team (the cores it may use, sized to the
        # cores it gets); a number pins it with --threads.
        self.threads_flag = [] if ampc_threads == "auto" else ["--threads", ampc_threads]
        self.count = 0

    def files(self, tag):
        self.count += 1
        base = self.work / f"{self.count:03d}-{tag}"
        return base.with_suffix(".jsonl"), base.with_suffix(".log")

    def training_cmd(self, impl, workload, model, steps, metrics):
        if impl == "ampc":
            return [str(self.ampc), "--opt-level", self.level, str(model), "--steps", str(steps),
                    *self.threads_flag, "--progress", "none", "--metrics-out", str(metrics)]
        spec = {"workload": workload, "model": str(model), "data_dir": str(self.work),
                "steps": steps, "metrics": str(metrics)}
        return [sys.executable, __file__, "--torch-worker", json.dumps(spec)]


def wait_first_step(proc, metrics, log):
    """None once the training process has written its first step, else why not."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not read_step_ms(metrics):
        if proc.poll() is not None:
            return last_line(log, proc.returncode)
        if time.monotonic() > deadline:
            return f"no training step within {STARTUP_TIMEOUT_S:.0f} s of starting"
        time.sleep(0.05)
    return None


def measure(cmd, metrics, log, warmup):
    """Runs one training process to its end, or to RUN_CAP_S after its first
    step: its step times after the warm-up, a skip (stopped at the cap before
    any), or an error."""
    proc = start(cmd, log)
    cut = False
    try:
        error = wait_first_step(proc, metrics, log)
        if error:
            return {"error": error}
        try:
            proc.wait(timeout=RUN_CAP_S)
        except subprocess.TimeoutExpired:
            cut = True
    finally:
        stop(proc)
    if not cut and proc.returncode != 0:
        return {"error": last_line(log, proc.returncode)}
    timed = read_step_ms(metrics)[warmup:]
    if not timed:
        # Only a machine so loaded that a step takes seconds: no figure,
        # but nothing failed.
        return {"skipped": f"stopped at {RUN_CAP_S:.0f} s before a step after the warm-up"}
    return {"step_ms": timed, "cut": cut}


def start_neighbour(runner, impl, workload, model, condition):
    """Starts the condition's neighbour and returns it once it is warm (None
    for alone), or raises RuntimeError when it fails to start."""
    if condition == "alone":
        return None
    if condition == "+busy":
        _, log = runner.files(f"{workload}-busy")
        proc = start([sys.executable, "-c", "while True: pass"], log)
        time.sleep(BUSY_SETTLE_S)
        return proc
    metrics, log = runner.files(f"{workload}-{impl}-neighbour")
    proc = start(runner.training_cmd(impl, workload, model, NEIGHBOUR_STEPS, metrics), log)
    # Warm means training: past its compile (ampc) or import (PyTorch) and
    # its first steps, which touch every buffer for the first time.
    error = wait_first_step(proc, metrics, log)
    if error:
        stop(proc)
        raise RuntimeError(f"the neighbour failed: {error}")
    time.sleep(NEIGHBOUR_WARMUP_S)
    return proc


def run_condition(runner, impl, workload, model, condition, steps):
    """One measured run of impl on workload under condition."""
    try:
        neighbour = start_neighbour(runner, impl, workload, model, condition)
    except RuntimeError as e:
        return {"error": str(e)}
    try:
        metrics, log = runner.files(f"{workload}-{impl}")
        result = measure(runner.training_cmd(impl, workload, model, steps, metrics), metrics, log, WARMUP)
        if neighbour is not None and neighbour.poll() is not None:
            return {"error": "the neighbour exited during the measured run"}
        return result
    finally:
        stop(neighbour)


def calibrated_steps(runner, impl, workload, model):
    """Steps that make a run alone last about TARGET_RUN_S, from a short run."""
    metrics, log = runner.files(f"{workload}-{impl}-calibration")
    cmd = runner.training_cmd(impl, workload, model, CALIBRATION_STEPS, metrics)
    r = measure(cmd, metrics, log, warmup=3)
    if "step_ms" not in r:
        return r
    ms = max(statistics.median(r["step_ms"]), 1e-3)
    return {"steps": min(MAX_STEPS, max(MIN_STEPS, WARMUP + math.ceil(TARGET_RUN_S * 1000 / ms)))}


def combine(runs):
    """Repeated runs of one configuration: the median of their medians, the
    mean over all their timed steps (a failed run fails the configuration;
    skipped runs are left out, and marked)."""
    for r in runs:
        if "error" in r:
            return r
    timed = [r for r in runs if "step_ms" in r]
    if not timed:
        return runs[0]
    return {"median": statistics.median(statistics.median(r["step_ms"]) for r in timed),
            "mean": statistics.mean(t for r in timed for t in r["step_ms"]),
            "steps": sum(len(r["step_ms"]) for r in timed),
            "cut": len(timed) < len(runs) or any(r["cut"] for r in timed)}


# --- Output -------------------------------------------------------------------------------


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def slowdowns(results, impl, condition):
    """(median slowdown, mean slowdown) of impl under condition, or Nones."""
    alone, here = results.get((impl, "alone"), {}), results.get((impl, condition), {})
    if "median" not in alone or "median" not in here:
        return None, None
    return ratio(here["median"], alone["median"]), ratio(here["mean"], alone["mean"])


def verdict(value, limit):
    return "n/a" if value is None else ("yes" if value <= limit else "no")


def worse(pair):
    return None if None in pair else max(pair)


def print_header(args, ampc, load_at_start, torch_version, repeats, notes):
    env = ", ".join(f"{v}={os.environ[v]}" if v in os.environ else f"{v} unset" for v in OMP_VARIABLES)
    print(f"# ampc vs PyTorch next to other work: one training step, CPU, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"# host: {cpu_name()}, {os.cpu_count()} CPUs, load average {load_at_start:.2f} at the start; "
          f"ampc: {ampc} --opt-level {args.level}")
    team = (f"its default team of {os.cpu_count()} threads, sized to the cores it gets"
            if args.ampc_threads == "auto" else f"--threads {args.ampc_threads}")
    print(f"# threads: ampc {team}; PyTorch torch.set_num_threads({THREADS}); "
          f"environment as the user has it: {env}")
    if torch_version:
        print(f"# PyTorch {torch_version}")
    print(f"# conditions: alone; +training: next to a second training process of the same "
          f"implementation and workload, measured {NEIGHBOUR_WARMUP_S} s after its first step; "
          f"+busy: next to one process spinning `while True: pass`")
    print(f"# ms/step: each run's median over the steps after {WARMUP} warm-up steps (ampc: step_ms "
          f"of --metrics-out, batch included; PyTorch: batch, forward, backward, optimizer), then the "
          f"median over {repeats} run(s) in rounds; mean: over all those steps of all runs; slow: "
          f"contended / alone (median, mean); steps: timed steps in all runs, * = a run stopped "
          f"{RUN_CAP_S:.0f} s after its first step")
    print(f"# targets (worse of median and mean): ampc's slowdown <= {TARGET_VS_TORCH}x PyTorch's; "
          f"small-cnn: ampc's slowdown <= {TARGET_CNN_MAX:g}x next to one neighbour")
    for note in notes:
        print(f"# note: {note}")
    print(f"{'workload':<12} {'impl':<6} {'condition':<10} {'ms/step':>9} {'mean ms':>9} "
          f"{'slow':>7} {'slow mean':>10} {'steps':>7}")


def print_lines(workload, results, impls, failed):
    for impl in impls:
        for condition in CONDITIONS:
            r = results[(impl, condition)]
            if "error" in r:
                failed.append(f"{workload} {impl} {condition}")
                print(f"{workload:<12} {impl:<6} {condition:<10} failed: {r['error']}")
                continue
            if "skipped" in r:
                print(f"{workload:<12} {impl:<6} {condition:<10} no figure: {r['skipped']}")
                continue
            med, mean = slowdowns(results, impl, condition)
            steps = f"{r['steps']}{'*' if r['cut'] else ''}"
            print(f"{workload:<12} {impl:<6} {condition:<10} {r['median']:>9.2f} {r['mean']:>9.2f} "
                  f"{fmt(med, '.2f'):>6}x {fmt(mean, '.2f'):>9}x {steps:>7}")


def print_summary(workload, results, have_torch):
    contended = CONDITIONS[1:]
    parts, vs_torch, cnn_max = [], [], []
    for condition in contended:
        ampc = slowdowns(results, "ampc", condition)
        if have_torch:
            torch_ = slowdowns(results, "torch", condition)
            rel = (ratio(ampc[0], torch_[0]), ratio(ampc[1], torch_[1]))
            parts.append(f"{condition} {fmt(rel[0], '.2f')} (mean {fmt(rel[1], '.2f')})")
            vs_torch.append(f"{condition} {verdict(worse(rel), TARGET_VS_TORCH)}")
        cnn_max.append(f"{condition} {verdict(worse(ampc), TARGET_CNN_MAX)}")
    line = f"{workload:<12} summary "
    if have_torch:
        line += (f"ampc/torch slowdown: {', '.join(parts)}; within {TARGET_VS_TORCH}x of torch: "
                 f"{', '.join(vs_torch)}")
    else:
        line += "no PyTorch to compare with"
    if workload == "small-cnn":
        line += f"; ampc <= {TARGET_CNN_MAX:g}x: {', '.join(cnn_max)}"
    print(line)


# --- Main ---------------------------------------------------------------------------------


def setup_torch(work, log):
    """PyTorch's version, or None and why not (small-cnn's files are in work then)."""
    cmd = [sys.executable, __file__, "--torch-setup", str(work)]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    Path(log).write_text(proc.stdout + proc.stderr)
    if proc.returncode == TORCH_MISSING:
        return None, f"PyTorch lines left out: {proc.stderr.strip()}"
    if proc.returncode != 0:
        raise RuntimeError(f"exporting small-cnn failed: {last_line(log, proc.returncode)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["torch"], None


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build", help="the ampc build (default: build)")
    ap.add_argument("--quick", action="store_true",
                    help=f"small-cnn only, {QUICK_STEPS} steps, one repeat: a smoke test")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated, of: " + ", ".join(WORKLOADS))
    ap.add_argument("--repeats", type=int,
                    help=f"runs of each configuration, in rounds (default {DEFAULT_REPEATS}, 1 with --quick)")
    ap.add_argument("--level", default="O0", choices=["O0", "O1", "O2", "O3"],
                    help="ampc's --opt-level (default O0)")
    ap.add_argument("--ampc-threads", default="auto",
                    help="ampc's team: auto (its default: the cores it may use, fewer while "
                         "another process shares them) or N (--threads N, fixed)")
    args = ap.parse_args()
    args.repeats = args.repeats or (1 if args.quick else DEFAULT_REPEATS)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    args.workloads = ["small-cnn"] if args.quick else [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in args.workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload '{w}' (known: {', '.join(WORKLOADS)})")
    return args


def measure_workload(runner, workload, model, impls, args, started):
    """{(impl, condition): combined result} for one workload."""
    steps = {}
    for impl in impls:
        steps[impl] = {"steps": QUICK_STEPS} if args.quick else calibrated_steps(runner, impl, workload, model)
    runs = {(impl, c): [] for impl in impls for c in CONDITIONS}
    # In rounds, the two implementations back to back under each condition:
    # a burst of load from elsewhere then spoils one round of a few
    # configurations, and the median over the rounds leaves it out.
    for round_ in range(args.repeats):
        for condition in CONDITIONS:
            for impl in impls:
                if "steps" not in steps[impl]:  # the calibration failed or was skipped
                    runs[(impl, condition)].append(steps[impl])
                    continue
                print(f"[{time.time() - started:5.0f} s] {workload} {impl} {condition} (run {round_ + 1} "
                      f"of {args.repeats}, {steps[impl]['steps']} steps)", file=sys.stderr, flush=True)
                runs[(impl, condition)].append(
                    run_condition(runner, impl, workload, model, condition, steps[impl]["steps"]))
    return {key: combine(r) for key, r in runs.items()}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--torch-worker":
        return torch_worker(json.loads(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "--torch-setup":
        return torch_setup(sys.argv[2])

    args = parse_args()
    ampc = Path(args.build_dir) / "bin" / "ampc"
    if not ampc.exists():
        print(f"error: {ampc} not found; build it first (ninja -C {args.build_dir} ampc)", file=sys.stderr)
        return 2
    # SIGTERM (a CI runner's stop) as an exception, so the finally below
    # kills the children.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))

    started = time.time()
    load_at_start = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="ampc-contention-"))
    notes, measured = [], []
    try:
        runner = Runner(ampc.resolve(), args.level, work, args.ampc_threads)
        try:
            torch_version, why = setup_torch(work, work / "torch-setup.log")
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        impls = IMPLS if torch_version else ["ampc"]
        workloads = args.workloads
        if why:
            notes.append(why)
            if "small-cnn" in workloads:
                notes.append("small-cnn left out: its ONNX file comes from torch.onnx.export")
                workloads = [w for w in workloads if w != "small-cnn"]
                if args.quick:
                    workloads = ["mlp"]
        for workload in workloads:
            model = WORKLOADS[workload] or work / "cnn.yaml"
            measured.append((workload, measure_workload(runner, workload, model, impls, args, started)))
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)

    print_header(args, ampc, load_at_start, torch_version, args.repeats, notes)
    failed = []
    for workload, results in measured:
        print_lines(workload, results, impls, failed)
    for workload, results in measured:
        print_summary(workload, results, have_torch=len(impls) > 1)
    print(f"# {len(measured)} workload(s) in {time.time() - started:.0f} s")
    if failed:
        print(f"# failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
