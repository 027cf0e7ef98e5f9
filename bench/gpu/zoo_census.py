#!/usr/bin/env python3
"""The real-models zoo on a GPU: which nodes fall back to the host, and
whether the device trains as the CPU does.

For every model that prepare_imported.py laid out under ROOT (its training
export, model file, batch and weights) and every model file named, three
training steps run

  - at O0 on the GPU and at O0 on the CPU (the first step's loss compared,
    within LOSS_TOLERANCE; the worst step's difference printed), and
  - at O2 on the GPU (finite losses),

and the "device:" line each GPU run prints is read: how many nodes ran on the
host fallback, and of which ops. One line per model, then every fallback op
with the models that have it, and the count of models with none.

  zoo_census.py --ampc BIN [--root DIR] [MODEL_FILE...] [--jobs N] [--models a,b]
                [--half-type f16] [--json FILE]

Exit status 1 when a run failed (an error, not a fallback: the census
reports those), 77 without a GPU.
"""

import argparse
import collections
import concurrent.futures
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEVICE_LINE = re.compile(r"device: (\d+) nodes? on the host fallback(?: \(([^)]*)\))?")
# Relative, O0 on the GPU against O0 on the CPU, for the first step's loss
# (the forward of the same weights). The later steps are printed, not judged:
# three SGD steps of a deep net in batchnorm's training mode amplify the order
# of a sum (ampc on the CPU with 1 and 2 threads differs by 1e-2 on
# Inception-v3 and Wide ResNet-50 by the third step).
LOSS_TOLERANCE = 1e-4


def run_level(ampc, model_file, device, level, half, steps, threads):
    with tempfile.TemporaryDirectory(prefix="ampc-census-") as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        cmd = [ampc, "--device", device, "--opt-level", level, "--steps", str(steps),
               "--progress", "none", "--metrics-out", str(metrics), model_file.name]
        if device == "cuda":
            cmd[1:1] = ["--half-type", half]
        else:
            cmd[1:1] = ["--threads", str(threads)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=model_file.parent,
                              timeout=600)
        if proc.returncode != 0:
            lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            return {"error": f"rc {proc.returncode}: " + " | ".join(lines[-3:])}
        records = [json.loads(line) for line in metrics.read_text().splitlines() if line]
    out = {"losses": [float(r["loss"]) for r in records if "loss" in r],
           "ms": [r["step_ms"] for r in records if "step_ms" in r]}
    m = DEVICE_LINE.search(proc.stdout)
    if m:
        out["fallback"] = int(m.group(1))
        out["fallback_ops"] = [s.strip() for s in (m.group(2) or "").split(",") if s.strip()]
    return out


def census(ampc, work, args):
    name, model_file = work
    row = {"name": name}
    gpu0 = run_level(ampc, model_file, "cuda", "O0", args.half_type, args.steps, 0)
    cpu0 = run_level(ampc, model_file, "cpu", "O0", args.half_type, args.steps, args.cpu_threads)
    gpu2 = run_level(ampc, model_file, "cuda", "O2", args.half_type, args.steps, 0)
    row["runs"] = {"cuda O0": gpu0, "cpu O0": cpu0, "cuda O2": gpu2}
    if "losses" in gpu0 and "losses" in cpu0 and gpu0["losses"] and \
            len(gpu0["losses"]) == len(cpu0["losses"]):
        diffs = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(gpu0["losses"], cpu0["losses"])]
        row["loss_diff"], row["loss_diff_worst"] = diffs[0], max(diffs)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--root", help="prepare_imported.py's zoo folder")
    ap.add_argument("model_files", nargs="*", help="more model files (the examples)")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--cpu-threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--half-type", default="bf16")
    ap.add_argument("--models")
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args()
    if not shutil.which("nvidia-smi"):
        print("skipped: no GPU (nvidia-smi not found)")
        return 77
    ampc = str(Path(args.ampc).resolve())
    works = []
    for spec in sorted(Path(args.root).glob("*/weights.json")) if args.root else []:
        works.append((spec.parent.name, spec.parent / json.loads(spec.read_text())["model_file"]))
    for f in args.model_files:
        works.append((Path(f).stem, Path(f).resolve()))
    if args.models:
        wanted = set(args.models.split(","))
        works = [w for w in works if w[0] in wanted]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda w: census(ampc, w, args), works))
    failed, by_op, clean = [], collections.defaultdict(list), 0
    print(f"{'model':<28}{'fallback O0':>12}{'fallback O2':>12}{'O0 loss cuda/cpu':>18}"
          f"{'worst step':>12}{'O2 loss':>10}  fallback ops")
    for row in rows:
        runs = row["runs"]
        errors = [f"{k}: {r['error']}" for k, r in runs.items() if "error" in r]
        if errors:
            failed.append(row["name"])
            print(f"{row['name']:<28} FAIL " + "; ".join(errors))
            continue
        g0, g2 = runs["cuda O0"], runs["cuda O2"]
        ops = sorted(set(g0.get("fallback_ops", [])) | set(g2.get("fallback_ops", [])))
        for op in ops:
            by_op[op].append(row["name"])
        if not g0.get("fallback") and not g2.get("fallback"):
            clean += 1
        diff = row.get("loss_diff", float("nan"))
        worst = row.get("loss_diff_worst", float("nan"))
        o2 = g2["losses"][-1] if g2["losses"] else float("nan")
        flag = "" if diff <= LOSS_TOLERANCE else "  (O0 differs from the CPU)"
        if not math.isfinite(o2):
            flag += "  (O2 loss not finite)"
        print(f"{row['name']:<28}{g0.get('fallback', '?'):>12}{g2.get('fallback', '?'):>12}"
              f"{diff:>18.2e}{worst:>12.2e}{o2:>10.4f}  {', '.join(ops) or '-'}{flag}")
    print(f"\n{clean} of {len(rows)} models with no host-fallback node at O0 and O2")
    for op, models in sorted(by_op.items(), key=lambda kv: -len(kv[1])):
        print(f"  {op}: {len(models)} models ({', '.join(models)})")
    if failed:
        print(f"FAIL: {', '.join(failed)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
