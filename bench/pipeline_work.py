#!/usr/bin/env python3
"""The compiler pipeline's work, counted in instructions rather than time.

    bench/pipeline_work.py [--build-dir build] [--sizes 1000,10000,100000] [--levels O1,O2]

Wall time of the pipeline on big graphs mixes the work the passes do with
how well the graph fits the caches (and with whatever else runs on the
machine). This script counts the instructions the passes execute, which
neither affects: for each size and level it asks ampc-bench-pipeline for
the chain model it times (`--print-model N`: residual blocks
x + relu(linear(x)), three forward nodes each, MSE loss, SGD with
momentum), runs
`ampc --opt-level L --emit ir --graph train` on it under valgrind's
callgrind with collection on only inside PassManager::run, and prints one
line per figure:

    pipeline O1 nodes=10000 instructions=545306793 per_node=54530

A pipeline that grows linearly keeps per_node constant across sizes. Needs
valgrind (apt-get install valgrind); about 5 minutes for the defaults,
ten with 200000.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

def chain_model(bench, nodes):
    """The model ampc-bench-pipeline times at `nodes` forward nodes."""
    proc = subprocess.run([bench, "--print-model", str(nodes)], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: {bench} --print-model {nodes} failed:\n{proc.stderr}")
    return proc.stdout


def count_instructions(ampc, model, level, workdir):
    out = os.path.join(workdir, "callgrind.out")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
           "--toggle-collect=ampc::PassManager::run*",
           ampc, "--opt-level", level, "--emit", "ir", "--graph", "train",
           "-o", os.path.join(workdir, "train.ir"), model]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    m = re.search(r"Collected : (\d+)", proc.stderr)
    if not m:
        sys.exit("error: callgrind printed no instruction count")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--sizes", default="1000,10000,100000",
                    help="forward nodes, comma-separated")
    ap.add_argument("--levels", default="O1,O2")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        print("skipped: valgrind not found (apt-get install valgrind)")
        return 77
    ampc = os.path.join(args.build_dir, "bin", "ampc")
    bench = os.path.join(args.build_dir, "bin", "ampc-bench-pipeline")
    for tool in (ampc, bench):
        if not os.access(tool, os.X_OK):
            sys.exit(f"error: {tool} not found; build ampc and ampc-bench-pipeline first")
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as workdir:
        for level in args.levels.split(","):
            for nodes in sizes:
                model = os.path.join(workdir, f"chain-{nodes}.yaml")
                with open(model, "w") as f:
                    f.write(chain_model(bench, nodes))
                n = count_instructions(ampc, model, level, workdir)
                print(f"pipeline {level} nodes={nodes} instructions={n} per_node={n // nodes}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
