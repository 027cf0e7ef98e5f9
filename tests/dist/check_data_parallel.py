#!/usr/bin/env python3
"""Data-parallel training end to end: `mpirun -np 2 ampc ...` against one
process (docs/distributed.md). Each check prints one line; any failure exits 1.

  equivalence  2 ranks of batch B match 1 rank of batch 2B step by step:
               1e-5 relative at O0, 1e-3 at O2 (also with half all-reduce,
               gradient accumulation and clipping); SyncBatchNorm on 2 ranks
               matches batchnorm over the global batch in one process
  evaluation   --eval-every on 2 ranks gives one process's evaluation
  overflow     an f16 overflow on rank 1 alone makes both ranks skip the
               step and back the scale off (the run's final replica check
               fails if rank 1 did not skip with rank 0)
  resume       6 steps on 2 ranks, or 3 + resume + 3, give the same
               checkpoint bytes
  mismatch     a rank with another learning rate: every rank fails, naming it
  killed rank  SIGKILL on rank 1: the job ends, non-zero, within the timeout
  hung rank    SIGSTOP on rank 1: rank 0's collective times out (exit 3)
  cuda         with GPUs (`nvidia-smi -L`), 2 ranks with --device cuda match
               one process: over NCCL with a GPU per rank, staged through
               the host when they share one; skipped, saying so, without GPUs

Usage: check_data_parallel.py --ampc BIN --mpirun MPIEXEC --inputs DIR [--cuda-only]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

FAILED = []


def report(name, ok, detail=""):
    print(("ok     " if ok else "FAILED ") + name + (": " + detail if detail else ""), flush=True)
    if not ok:
        FAILED.append(name)


def run(cmd, cwd, timeout=240, env=None):
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    return p, time.monotonic() - start


def mpirun(args, ranks=2):
    # --allow-run-as-root: CI may run as root; --oversubscribe: more ranks
    # than cores is fine for a test. One thread a rank.
    return [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)]


def losses(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def train(args, tmp, model, extra, ranks, metrics, timeout=240):
    cmd = [args.ampc, model, "--threads", "1", "--progress", "none", "--metrics-out", metrics]
    cmd += extra
    if ranks > 1:
        cmd = mpirun(args, ranks) + cmd
    p, _ = run(cmd, tmp, timeout)
    if p.returncode != 0:
        raise RuntimeError(" ".join(cmd) + " failed (" + str(p.returncode) + "):\n" + p.stdout +
                           p.stderr)
    return losses(metrics), p.stdout


def max_relative(a, b):
    worst = 0.0
    for x, y in zip(a, b):
        worst = max(worst, abs(x["loss"] - y["loss"]) / max(abs(y["loss"]), 1e-12))
    return worst


def check_equivalence(args, tmp, name, model, batch, extra, tolerance):
    single = [a for a in extra if a != "--sync-batchnorm"]  # one process has no ranks to sync
    one, _ = train(args, tmp, model, single + ["--batch", str(2 * batch)], 1,
                   os.path.join(tmp, name + "-1.jsonl"))
    two, out = train(args, tmp, model, extra + ["--batch", str(batch)], 2,
                     os.path.join(tmp, name + "-2.jsonl"))
    ok = len(one) == len(two) and len(one) > 0
    worst = max_relative(two, one) if ok else float("inf")
    # The losses must move, or matching them proves little.
    moved = ok and abs(one[-1]["loss"] - one[0]["loss"]) > 1e-3 * abs(one[0]["loss"])
    report("equivalence " + name, ok and moved and worst <= tolerance and "2 ranks" in out,
           "%d steps, largest relative loss difference %.2e (tolerance %.0e), loss %.5f -> %.5f" %
           (len(one), worst, tolerance, one[0]["loss"], one[-1]["loss"]))


def check_eval(args, tmp):
    # Evaluation while training: every rank evaluates the held-out tenth
    # with its (identical) replica; rank 0 prints it. At O2 with
    # SyncBatchNorm, which keeps the batchnorm parameters in f32 as plain
    # batchnorm does (the evaluation graph shares them by name and type).
    model = os.path.join(args.inputs, "convnet-small.yaml")
    base = ["-O", "O2", "--eval-every", "3"]
    _, one = train(args, tmp, model, base + ["--batch", "16"], 1, os.path.join(tmp, "e1.jsonl"))
    _, two = train(args, tmp, model, base + ["--batch", "8"], 2, os.path.join(tmp, "e2.jsonl"))
    pick = lambda out: [l for l in out.splitlines() if l.startswith("eval on")]
    a, b = pick(one), pick(two)
    ok = len(a) == 1 and len(b) == 1
    if ok:
        la = float(a[0].split("loss ")[1].split(",")[0])
        lb = float(b[0].split("loss ")[1].split(",")[0])
        ok = abs(la - lb) <= 1e-3 * abs(la)
    report("evaluation on 2 ranks", ok, "%s | %s" % (a, b))


def check_overflow(args, tmp):
    shutil.copy(os.path.join(args.inputs, "classifier-csv.yaml"), tmp)
    # Global batches of 2 ranks x 4 rows, unshuffled: step 2 is rows 8..15,
    # rank 1's part rows 12..15. Row 13 overflows f16 (max 65504).
    with open(os.path.join(tmp, "overflow.csv"), "w") as f:
        for i in range(64):
            scale = 1.0e6 if i == 13 else 1.0
            f.write("%g,%g,%g,%g,%d\n" % (scale * ((i % 7) - 3) / 3, ((i * 5) % 11) / 11.0,
                                         ((i * 3) % 5) / 5.0 - 0.5, (i % 2) - 0.5, i % 3))
    model = os.path.join(tmp, "classifier-csv.yaml")
    metrics = os.path.join(tmp, "overflow.jsonl")
    rows, out = train(args, tmp, model, ["-O", "O2", "--half-type", "f16"], 2, metrics)
    skipped = [r["step"] for r in rows if r.get("skipped")]
    scales = [r.get("loss_scale") for r in rows]
    # A record's scale is the one its step ran with: step 3 runs at half.
    ok = skipped == [2] and scales[2] == scales[1] / 2 and "1 of 4 steps skipped" in out
    report("overflow on one rank skips on both", ok,
           "skipped steps %s, scales %s" % (skipped, scales))


def check_resume(args, tmp):
    model = os.path.join(args.inputs, "mlp-small.yaml")
    whole, half, resumed = (os.path.join(tmp, n) for n in ("whole.ckpt", "half.ckpt", "res.ckpt"))
    base = ["-O", "O2", "--batch", "16"]
    train(args, tmp, model, base + ["--steps", "6", "--checkpoint", whole], 2,
          os.path.join(tmp, "r1.jsonl"))
    train(args, tmp, model, base + ["--steps", "3", "--checkpoint", half], 2,
          os.path.join(tmp, "r2.jsonl"))
    train(args, tmp, model, base + ["--steps", "6", "--resume", half, "--checkpoint", resumed], 2,
          os.path.join(tmp, "r3.jsonl"))
    with open(whole, "rb") as a, open(resumed, "rb") as b:
        same = a.read() == b.read()
    report("resume on 2 ranks is bit-exact", same, "6 steps == 3 steps + resume + 3 steps")


def check_mismatch(args, tmp):
    model = os.path.join(args.inputs, "mlp-small.yaml")
    # Rank 1 asks for another learning rate: a different training graph.
    script = ('lr=0.5; [ "$OMPI_COMM_WORLD_RANK" = 1 ] && lr=0.25; exec "$0" "$@" --lr "$lr"')
    cmd = mpirun(args) + ["sh", "-c", script, args.ampc, model, "--threads", "1", "--progress",
                          "none", "--collective-timeout", "60"]
    p, seconds = run(cmd, tmp, 120)
    text = p.stdout + p.stderr
    ok = (p.returncode != 0 and "rank 1 of 2: its training graph or run differs from rank 0's" in
          text and "rank 0 of 2: rank 1's training graph or run differs" in text)
    report("a mismatched model fails on every rank", ok,
           "exit %d after %.1f s%s" % (p.returncode, seconds, "" if ok else ":\n" + text))


def signal_rank_one(args, tmp, signal, timeout):
    """A long run whose rank 1 gets `signal` once training runs: (process, seconds).

    "Runs" is rank 0's first metrics line: both ranks are then past MPI_Init
    and in the step's collectives. A fixed delay was not enough on a loaded
    machine: a rank stopped before MPI_Init leaves the other waiting inside
    it, where no collective timeout watches, until the test's own timeout.
    """
    model = os.path.join(args.inputs, "mlp-small.yaml")
    metrics = os.path.join(tmp, "signal-%s.jsonl" % signal)
    script = ('[ "$OMPI_COMM_WORLD_RANK" = 1 ] && (i=0; while [ ! -s "%s" ] && [ $i -lt 600 ]; '
              'do sleep 0.1; i=$((i + 1)); done; kill -%s $$) & exec "$0" "$@"' % (metrics, signal))
    cmd = mpirun(args) + ["sh", "-c", script, args.ampc, model, "--threads", "1", "--steps",
                          "100000000", "--progress", "none", "--collective-timeout", str(timeout),
                          "--metrics-out", metrics]
    return run(cmd, tmp, 120)


def check_killed(args, tmp):
    p, seconds = signal_rank_one(args, tmp, "9", 20)
    report("a killed rank ends the job", p.returncode != 0 and seconds < 60,
           "exit %d after %.1f s" % (p.returncode, seconds))


def check_hung(args, tmp):
    p, seconds = signal_rank_one(args, tmp, "STOP", 3)
    text = p.stdout + p.stderr
    ok = p.returncode != 0 and seconds < 60 and "waited 3 s for the other ranks" in text
    report("a hung rank times out", ok, "exit %d after %.1f s%s" %
           (p.returncode, seconds, "" if ok else ":\n" + text[-2000:]))


def gpu_count():
    nvidia_smi = shutil.which("nvidia-smi")
    if not nvidia_smi:
        return 0, "nvidia-smi not found"
    p = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True)
    gpus = [l for l in p.stdout.splitlines() if l.startswith("GPU ")]
    return len(gpus), "nvidia-smi -L lists %d GPU(s)" % len(gpus)


def check_cuda(args, tmp):
    count, why = gpu_count()
    if count == 0:
        print("skip   cuda: no GPU (%s)" % why, flush=True)
        return
    # One GPU per rank: NCCL; fewer: both ranks on GPU 0, staged through
    # the host. f32 without TF32: the 1e-5 of the CPU's O0 check would
    # hold too, but the GPU's GEMMs sum in another order than one process's.
    small = os.path.join(args.inputs, "mlp-small.yaml")
    route = "through NCCL" if count >= 2 else "go through the host over MPI"
    one, _ = train(args, tmp, small, ["-O", "O0", "--device", "cuda", "--batch", "32"], 1,
                   os.path.join(tmp, "cuda-1.jsonl"))
    cmd = mpirun(args) + [args.ampc, small, "--threads", "1", "--progress", "none", "-O", "O0",
                          "--device", "cuda", "--batch", "16", "--metrics-out",
                          os.path.join(tmp, "cuda-2.jsonl")]
    p, _ = run(cmd, tmp)
    two = losses(os.path.join(tmp, "cuda-2.jsonl")) if p.returncode == 0 else []
    worst = max_relative(two, one) if two and len(two) == len(one) else float("inf")
    report("cuda on 2 ranks (%s)" % why, p.returncode == 0 and worst <= 1e-4 and
           route in p.stdout + p.stderr,
           "largest relative loss difference %.2e; expected the all-reduces %s%s" %
           (worst, route, "" if p.returncode == 0 else ":\n" + p.stdout + p.stderr))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ampc", required=True)
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--cuda-only", action="store_true", help="the cuda check alone")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="ampc-dist-")
    try:
        if args.cuda_only:
            check_cuda(args, tmp)
            return 1 if FAILED else 0
        small = os.path.join(args.inputs, "mlp-small.yaml")
        accumulate = os.path.join(args.inputs, "mlp-accumulate.yaml")
        check_equivalence(args, tmp, "O0", small, 16, ["-O", "O0"], 1e-5)
        check_equivalence(args, tmp, "O2", small, 16, ["-O", "O2"], 1e-3)
        check_equivalence(args, tmp, "O2-half-allreduce", small, 16,
                          ["-O", "O2", "--allreduce-dtype", "half", "--bucket-mb", "0.01"], 1e-2)
        check_equivalence(args, tmp, "O1-accumulate-clip", accumulate, 8, ["-O", "O1"], 1e-3)
        # SyncBatchNorm (the model file asks for it; one process has plain
        # batchnorm over the whole batch), and the done-when: the
        # seed ConvNet at O2 (a few steps: Adam amplifies bf16 rounding).
        check_equivalence(args, tmp, "sync-batchnorm-O0", os.path.join(args.inputs,
                                                                      "convnet-small.yaml"),
                          8, ["-O", "O0"], 1e-5)
        check_equivalence(args, tmp, "convnet-cpu-O2-sync-batchnorm",
                          os.path.join(args.inputs, "..", "..", "..", "examples",
                                       "convnet-cpu.yaml"),
                          16, ["-O", "O2", "--steps", "3", "--sync-batchnorm"], 1e-3)
        check_eval(args, tmp)
        check_overflow(args, tmp)
        check_resume(args, tmp)
        check_mismatch(args, tmp)
        check_killed(args, tmp)
        check_hung(args, tmp)
        check_cuda(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILED:
        print("%d check(s) failed: %s" % (len(FAILED), ", ".join(FAILED)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
