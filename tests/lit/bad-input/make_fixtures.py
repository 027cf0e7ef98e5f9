#!/usr/bin/env python3
"""Writes the .npy fixtures under Inputs/ that the init-from and npy-* tests
load. Standard library only; the files are committed, so run this again only
to change them: python3 tests/lit/bad-input/make_fixtures.py

Every folder is meant for a model whose one parameterised layer is
`linear: {out_features: 4, name: fc}` on a [B, 3] f32 input, so it needs
fc.weight.npy [4, 3] f32 and fc.bias.npy [4] f32; each folder breaks exactly
one thing."""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "Inputs")

FORMATS = {"<f4": "f", "<f8": "d"}


def npy_header(descr, shape, fortran_order=False):
    shape_text = "(" + "".join("%d, " % d for d in shape)
    shape_text = (shape_text[:-2] + ",)") if len(shape) == 1 else (shape_text.rstrip(", ") + ")")
    text = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran_order else "False", shape_text)
    # Version 1.0: magic, version, little-endian u16 header length, then the
    # header padded with spaces and a newline so the data starts 64-aligned.
    unpadded = 10 + len(text) + 1
    text += " " * ((64 - unpadded % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")


def npy(descr, shape, fortran_order=False, values=None):
    count = 1
    for d in shape:
        count *= d
    if values is None:
        values = [0.125 * i for i in range(count)]
    if descr in FORMATS:
        data = struct.pack("<%d%s" % (count, FORMATS[descr]), *values)
    elif descr == "<c8":
        data = b"".join(struct.pack("<ff", v, 0.0) for v in values)
    else:
        raise ValueError(descr)
    return npy_header(descr, shape, fortran_order) + data


def write(folder, files):
    path = os.path.join(INPUTS, folder)
    os.makedirs(path, exist_ok=True)
    for name, content in files.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(content)


def main():
    # Only the npy-* folders are generated; Inputs/ also holds hand-written files.
    if os.path.isdir(INPUTS):
        for entry in os.listdir(INPUTS):
            if entry.startswith("npy-") and os.path.isdir(os.path.join(INPUTS, entry)):
                shutil.rmtree(os.path.join(INPUTS, entry))
    good_weight = npy("<f4", [4, 3])
    good_bias = npy("<f4", [4])
    write("npy-good", {"fc.weight.npy": good_weight, "fc.bias.npy": good_bias})
    write("npy-missing-bias", {"fc.weight.npy": good_weight})
    write("npy-wrong-shape", {"fc.weight.npy": npy("<f4", [3, 4]), "fc.bias.npy": good_bias})
    write("npy-wrong-dtype", {"fc.weight.npy": npy("<f8", [4, 3]), "fc.bias.npy": good_bias})
    write("npy-bad-magic", {"fc.weight.npy": b"PK\x03\x04 this is a zip file, not npy\n" * 4,
                            "fc.bias.npy": good_bias})
    # The header promises 12 floats (48 bytes); only 20 bytes follow.
    write("npy-truncated", {"fc.weight.npy": good_weight[:-28], "fc.bias.npy": good_bias})
    write("npy-fortran-order", {"fc.weight.npy": npy("<f4", [4, 3], fortran_order=True),
                                "fc.bias.npy": good_bias})
    write("npy-unsupported-dtype", {"fc.weight.npy": npy("<c8", [4, 3]), "fc.bias.npy": good_bias})
    garbled = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3 "
    garbled += b" " * (64 - 10 - len(garbled) - 1) + b"\n"
    write("npy-bad-header", {
        "fc.weight.npy": b"\x93NUMPY\x01\x00" + struct.pack("<H", len(garbled)) + garbled +
                         good_weight[-48:],
        "fc.bias.npy": good_bias})


if __name__ == "__main__":
    main()
