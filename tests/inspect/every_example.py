#!/usr/bin/env python3
"""The inspection commands on every example (issue 19's "done when").

For each model: `ampc view` (the page), `ampc diff --levels O1,O2`,
`ampc compare` (O2 against O0), `ampc calibrate --batches 1` and two
profiled training steps (`--profile`). Each must exit 0 and print what it
always prints; a crash, a refusal or a missing section fails the model.

CTest runs the small examples by default (`inspect-examples`) and the large
ones (convnet, mobilenetv2: about a minute and 6 GB) only with
`ctest -C long -L long`.
"""
import argparse
import os
import subprocess
import sys
import tempfile


def commands(ampc, model, out):
    page = os.path.join(out, os.path.basename(model) + ".html")
    return [
        ([ampc, "view", model, "-O", "O2", "-o", page], "wrote "),
        ([ampc, "diff", model, "--levels", "O1,O2"], "memory plan (bytes)"),
        ([ampc, "compare", model, "--worst", "3"], "forward and loss: "),
        ([ampc, "calibrate", model, "--batches", "1"], "overflow in f16: "),
        ([ampc, model, "-O", "O2", "--steps", "2", "--profile", "--progress", "none"], "by op kind"),
    ]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ampc", required=True)
    p.add_argument("models", nargs="+")
    args = p.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as out:
        for model in args.models:
            for cmd, expected in commands(args.ampc, model, out):
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                what = " ".join([os.path.basename(model)] + cmd[1:2])
                if r.returncode != 0 or expected not in r.stdout:
                    failed += 1
                    print(f"FAIL: {what}: exit {r.returncode}, expected {expected!r} in stdout\n"
                          f"{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
                else:
                    print(f"ok: {what}")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
