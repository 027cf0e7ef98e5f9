#!/usr/bin/env python3
"""The inspection commands on every example (issue 19's "done when").

For each model: `ampc view` (the page), `ampc diff --levels O1,O2`,
`ampc compare` (O2 against O0), `ampc calibrate --batches 1` and two
profiled training steps (`--profile`). Each must exit 0 and print what it
always prints; a crash, a refusal or a missing section fails the model.
And a level against itself: `ampc compare --levels O0,O0` must pair every
value with itself (none without a counterpart) and find every error exactly
0, and `ampc diff --levels O0,O0` must pair every node and find none
changed. Values paired wrongly (slices of one tensor with each other, as
once in an exported nn.MultiheadAttention) show up there first.

CTest runs the small examples by default (`inspect-examples`) and the large
ones (convnet, mobilenetv2: about a minute and 6 GB) only with
`ctest -C long -L long`.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def same_level_compare(stdout):
    """What is wrong with `compare --levels O0,O0`'s report ("" if nothing)."""
    if "no counterpart" in stdout:
        return "values without a counterpart"
    zeros = re.findall(r"^(forward and loss|gradients): all \d+ within the tolerance "
                       r"\(largest error 0\.00e\+00 at ", stdout, re.M)
    return "" if len(zeros) == 2 else "an error other than 0"


def o0_nodes(seen):
    """Keeps the node count of the O0 training graph that `view` reports."""
    def check(stdout):
        m = re.search(r" graph, (\d+) nodes, 0 casts", stdout)
        if not m:
            return "no node count"
        seen["nodes"] = m.group(1)
        return ""
    return check


def same_level_diff(seen):
    """What is wrong with `diff --levels O0,O0`'s report ("" if nothing):
    each of O0's nodes (as many as `view` counts) pairs with itself."""
    def check(stdout):
        m = re.search(r"^nodes: (\d+) at O0, (\d+) at O0 \(casts apart\); 0 compute in another "
                      r"dtype$", stdout, re.M)
        if not m or m.group(1) != m.group(2) or m.group(1) != seen.get("nodes"):
            return f"nodes changed or paired more than one to one (the graph has {seen.get('nodes')})"
        return "nodes on one side alone" if "only at" in stdout else ""
    return check


def commands(ampc, model, out):
    page = os.path.join(out, os.path.basename(model) + ".html")
    page0 = os.path.join(out, os.path.basename(model) + "-O0.html")
    none = lambda stdout: ""
    seen = {}
    return [
        ([ampc, "view", model, "-O", "O2", "-o", page], "wrote ", none),
        ([ampc, "view", model, "-O", "O0", "-o", page0], "wrote ", o0_nodes(seen)),
        ([ampc, "diff", model, "--levels", "O1,O2"], "memory plan (bytes)", none),
        ([ampc, "compare", model, "--worst", "3"], "forward and loss: ", none),
        ([ampc, "compare", model, "--levels", "O0,O0", "--worst", "0"], "forward and loss: ",
         same_level_compare),
        ([ampc, "diff", model, "--levels", "O0,O0"], "memory plan (bytes)",
         same_level_diff(seen)),
        ([ampc, "calibrate", model, "--batches", "1"], "overflow in f16: ", none),
        ([ampc, model, "-O", "O2", "--steps", "2", "--profile", "--progress", "none"], "by op kind",
         none),
    ]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ampc", required=True)
    p.add_argument("models", nargs="+")
    args = p.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as out:
        for model in args.models:
            for cmd, expected, check in commands(args.ampc, model, out):
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                levels = cmd[3:5] if cmd[3:4] in (["--levels"], ["-O"]) else []
                what = " ".join([os.path.basename(model)] + cmd[1:2] + levels)
                wrong = check(r.stdout) if r.returncode == 0 else ""
                if r.returncode != 0 or expected not in r.stdout or wrong:
                    failed += 1
                    print(f"FAIL: {what}: exit {r.returncode}, expected {expected!r} in stdout"
                          f"{': ' + wrong if wrong else ''}\n"
                          f"{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
                else:
                    print(f"ok: {what}")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
