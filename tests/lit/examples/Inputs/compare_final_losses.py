#!/usr/bin/env python3
"""Reads DIR/O0-SEED.txt and DIR/O2-SEED.txt (ampc's training summaries) for
each seed and checks that each run's loss fell and that the O2 final loss is
within TOLERANCE (relative) of O0's. Prints one line per seed; exits 1 on a
failure."""
import re
import sys


def losses(path):
    with open(path) as f:
        m = re.search(r"trained \d+ steps: loss ([0-9.e+-]+) -> ([0-9.e+-]+)", f.read())
    if not m:
        sys.exit(f"{path}: no 'trained N steps' line")
    return float(m.group(1)), float(m.group(2))


def main(argv):
    folder, tolerance, seeds = argv[1], float(argv[2]), argv[3:]
    ok = True
    for seed in seeds:
        first0, final0 = losses(f"{folder}/O0-{seed}.txt")
        first2, final2 = losses(f"{folder}/O2-{seed}.txt")
        good = final0 < first0 and final2 < first2 and abs(final2 - final0) <= tolerance * final0
        ok = ok and good
        print(f"seed {seed}: O0 {final0} O2 {final2} {'ok' if good else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv)
