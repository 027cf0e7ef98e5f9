#!/usr/bin/env python3
"""Prints model files too large to commit, for the bad-input tests.

  nested-blocks N       blocks b0 .. b(N-1), each using the next (a chain N deep)
  fan-out N             blocks f0 .. f(N-1), each using the next nine times (9^N relus)
  many-keys N [duplicate]  a `train:` map with N keys k0 .. k(N-1) (and k0 again)
"""
import sys

HEADER = ["model: m", "batch: 4", "inputs:", "  x: {shape: [B, 3]}"]


def nested_blocks(n):
    out = HEADER + ["blocks:"]
    for i in range(n):
        inner = f"b{i + 1}: {{}}" if i + 1 < n else "relu: {}"
        out += [f"  b{i}:", "    params: []", "    layers:", f"      - {inner}"]
    out += ["layers:", "  - b0: {}"]
    return out


def fan_out(n):
    out = HEADER + ["blocks:"]
    for i in range(n):
        inner = f"f{i + 1}: {{}}" if i + 1 < n else "relu: {}"
        out += [f"  f{i}:", "    params: []", "    layers:"] + [f"      - {inner}"] * 9
    out += ["layers:", "  - f0: {}"]
    return out


def many_keys(n, duplicate):
    out = HEADER + ["layers:", "  - relu: {}", "train:"]
    out += [f"  k{i}: 1" for i in range(n)]
    if duplicate:
        out.append("  k0: 2")
    return out


def main(argv):
    kind, n = argv[1], int(argv[2])
    if kind == "nested-blocks":
        lines = nested_blocks(n)
    elif kind == "fan-out":
        lines = fan_out(n)
    elif kind == "many-keys":
        lines = many_keys(n, len(argv) > 3 and argv[3] == "duplicate")
    else:
        sys.exit(f"unknown kind {kind!r}")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv)
