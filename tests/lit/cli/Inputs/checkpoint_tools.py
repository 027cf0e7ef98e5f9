#!/usr/bin/env python3
"""Checks for tests/lit/cli/checkpoint-levels.test, standard library only
(lit runs whichever python3 is first on PATH, which may lack numpy).

  checkpoint_tools.py loss STRAIGHT.jsonl RESUMED.jsonl STEP TOLERANCE
      the resumed run's loss at STEP is within TOLERANCE (relative) of the
      straight run's: the loss continues where the checkpoint left off.
  checkpoint_tools.py export CHECKPOINT DIR
      DIR holds exactly one <name>.npy per parameter and buffer of the
      checkpoint, fp32, of its shape, holding its fp32 master's values where
      the checkpoint has a master, else its own values widened; and for each
      batchnorm (a buffer <bn>.running_mean) <bn>.num_batches_tracked.npy, an
      int64 scalar: the checkpoint's micro_step. Reads the checkpoint as
      docs/checkpoints.md describes the format.
"""

import json
import os
import struct
import sys


def read_checkpoint(path):
    b = open(path, "rb").read()
    assert b[:8] == b"AMPCCKPT", "bad magic"
    assert struct.unpack_from("<I", b, 8)[0] == 1, "format version"
    n, = struct.unpack_from("<Q", b, 12)
    pos = 20
    header = dict(line.split(": ", 1) for line in b[pos:pos + n].decode().splitlines())
    pos += n

    def string():
        nonlocal pos
        k, = struct.unpack_from("<I", b, pos)
        pos += 4 + k
        return b[pos - k:pos].decode()

    tensors = {}
    while pos < len(b) - 8:
        name, kind, dtype = string(), string(), string()
        rank, = struct.unpack_from("<I", b, pos)
        pos += 4
        dims = list(struct.unpack_from(f"<{rank}q", b, pos))
        pos += 8 * rank
        size, = struct.unpack_from("<Q", b, pos)
        pos += 8
        tensors[name] = (kind, dtype, dims, b[pos:pos + size])
        pos += size
    assert int(header["tensors"]) == len(tensors)
    return header, tensors


def as_f32(dtype, raw):
    """The values as Python floats (each exactly an fp32 value)."""
    if dtype == "f32":
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    if dtype == "f16":
        return list(struct.unpack(f"<{len(raw) // 2}e", raw))
    if dtype == "bf16":
        halves = struct.unpack(f"<{len(raw) // 2}H", raw)
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    raise ValueError(f"not a float dtype: {dtype}")


def read_npy(path, descr, fmt, size):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY", f"{path}: not .npy"
    major = b[6]
    if major == 1:
        hlen, = struct.unpack_from("<H", b, 8)
        start = 10
    else:
        hlen, = struct.unpack_from("<I", b, 8)
        start = 12
    header = eval(b[start:start + hlen].decode())  # a Python dict literal
    assert header["descr"] == descr, f"{path}: {header['descr']}, not {descr}"
    assert header["fortran_order"] is False
    data = b[start + hlen:]
    return list(header["shape"]), list(struct.unpack(f"<{len(data) // size}{fmt}", data))


def read_npy_f32(path):
    return read_npy(path, "<f4", "f", 4)


def check_loss(straight, resumed, step, tolerance):
    def loss_at(path):
        for line in open(path):
            record = json.loads(line)
            if record["step"] == step:
                return record["loss"]
        raise SystemExit(f"{path}: no step {step}")
    a, b = loss_at(straight), loss_at(resumed)
    ok = abs(a - b) <= tolerance * abs(a)
    print(f"step {step}: straight {a:.6f} resumed {b:.6f} {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


def check_export(checkpoint, folder):
    header, tensors = read_checkpoint(checkpoint)
    weights = {name: t for name, t in tensors.items() if t[0] in ("param", "buffer")}
    counts = [name[:-len(".running_mean")] + ".num_batches_tracked" for name, t in weights.items()
              if t[0] == "buffer" and name.endswith(".running_mean")]
    expected = sorted(f"{name}.npy" for name in list(weights) + counts)
    found = sorted(os.listdir(folder))
    if found != expected:
        print(f"FAIL: files {found}, expected {expected}")
        return 1
    masters = 0
    for name, (kind, dtype, dims, raw) in weights.items():
        master = tensors.get(f"{name}.master")
        if master and master[0] == "master":
            dtype, raw = master[1], master[3]
            masters += 1
        shape, values = read_npy_f32(os.path.join(folder, f"{name}.npy"))
        if shape != dims or values != as_f32(dtype, raw):
            print(f"FAIL: {name}.npy differs from the checkpoint's {name}")
            return 1
    for name in counts:
        shape, values = read_npy(os.path.join(folder, f"{name}.npy"), "<i8", "q", 8)
        if shape != [] or values != [int(header["micro_step"])]:
            print(f"FAIL: {name}.npy holds {values} of shape {shape}, "
                  f"not the scalar micro_step {header['micro_step']}")
            return 1
    print(f"{len(weights)} files ok, {masters} from masters"
          + (f", {len(counts)} num_batches_tracked = {header['micro_step']}" if counts else ""))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "loss":
        sys.exit(check_loss(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])))
    if sys.argv[1] == "export":
        sys.exit(check_export(sys.argv[2], sys.argv[3]))
    sys.exit(f"unknown check {sys.argv[1]}")
