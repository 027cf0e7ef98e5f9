#!/usr/bin/env python3
"""ampc's image decoding and resizing against PIL, pixel for pixel.

check_images_vs_pil.py --driver build/tests/data/ampc-image-driver [--keep DIR]

Generates images in a temporary folder (PIL's encoders for JPEG and most
PNGs; a small PNG writer here for what PIL cannot write: interlaced PNGs,
16-bit RGB/RGBA/LA, 2/4-bit gray, a short palette), then checks:
  - decode: `ampc-image-driver decode` gives exactly the pixels of PIL's
    Image.open(p).convert("RGB");
  - damaged files (truncated, missing EOI/IEND): the driver accepts exactly
    the files PIL loads, with the same pixels, and refuses the rest;
  - resize: `ampc-image-driver resize` is within 1 level of PIL's
    img.resize((W, H), Image.BILINEAR) everywhere (the fraction of exact
    values is reported; expected 100%).
One summary line per case; exit 0 when all pass, 1 on a failure, 77 when PIL
or numpy is missing.
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile
import zlib

try:
    import numpy as np
    from PIL import Image
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skipped: {e}")
    sys.exit(77)

FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print(f"FAIL  {msg}")


# --- a minimal PNG writer (filter 0 or a mix, optional Adam7) ---------------

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]


def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def _pack_rows(samples, depth):
    """samples: [H, W*channels] unsigned ints -> list of row bytes."""
    rows = []
    for row in samples:
        if depth == 16:
            rows.append(row.astype(">u2").tobytes())
        elif depth == 8:
            rows.append(row.astype(np.uint8).tobytes())
        else:
            per_byte = 8 // depth
            padded = np.zeros(((len(row) + per_byte - 1) // per_byte) * per_byte, np.uint32)
            padded[: len(row)] = row
            packed = np.zeros(len(padded) // per_byte, np.uint32)
            for i in range(per_byte):
                packed |= padded[i::per_byte] << (8 - depth * (i + 1))
            rows.append(packed.astype(np.uint8).tobytes())
    return rows


def _filter_rows(rows, bpp):
    """Each row with a filter type cycling 0..4 (exercises the unfilterer)."""
    out = b""
    prev = bytes(len(rows[0])) if rows else b""
    for i, row in enumerate(rows):
        ftype = i % 5
        cur = np.frombuffer(row, np.uint8).astype(np.int32)
        up = np.frombuffer(prev, np.uint8).astype(np.int32)
        res = np.zeros_like(cur)
        for x in range(len(cur)):
            a = cur[x - bpp] if x >= bpp else 0
            b = up[x]
            c = up[x - bpp] if x >= bpp else 0
            if ftype == 0:
                pred = 0
            elif ftype == 1:
                pred = a
            elif ftype == 2:
                pred = b
            elif ftype == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            res[x] = (cur[x] - pred) & 0xFF
        out += bytes([ftype]) + res.astype(np.uint8).tobytes()
        prev = row
    return out


def write_png(path, samples, depth, color_type, palette=None, interlace=False):
    """samples: [H, W, channels] array of unsigned sample values."""
    height, width, channels = samples.shape
    bpp = max(1, channels * depth // 8)
    if interlace:
        raw = b""
        for x0, y0, dx, dy in ADAM7:
            sub = samples[y0::dy, x0::dx]
            if sub.shape[0] == 0 or sub.shape[1] == 0:
                continue
            raw += _filter_rows(_pack_rows(sub.reshape(sub.shape[0], -1), depth), bpp)
    else:
        raw = _filter_rows(_pack_rows(samples.reshape(height, -1), depth), bpp)
    data = b"\x89PNG\r\n\x1a\n"
    data += _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0,
                                        1 if interlace else 0))
    if palette is not None:
        data += _chunk(b"PLTE", bytes(np.asarray(palette, np.uint8).reshape(-1)))
    data += _chunk(b"IDAT", zlib.compress(raw, 9))
    data += _chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


# --- the images ---------------------------------------------------------------


def noise(rng, w, h, c=3):
    return rng.integers(0, 256, (h, w, c), dtype=np.uint8) if c > 1 else \
        rng.integers(0, 256, (h, w), dtype=np.uint8)


def gradient(w, h):
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255 * x / max(w - 1, 1)
    g = 255 * y / max(h - 1, 1)
    b = 127.5 + 127.5 * np.sin(x / 17.0 + y / 23.0)
    return np.stack([r, g, b], -1).round().astype(np.uint8)


def make_images(d, rng):
    """name -> path of every decode case."""
    images = {}

    def save(name, im, **kw):
        path = os.path.join(d, name)
        im.save(path, **kw)
        images[name] = path

    save("noise-rgb-64x48.png", Image.fromarray(noise(rng, 64, 48)))
    save("gradient-rgb-500x375.png", Image.fromarray(gradient(500, 375)))
    save("noise-L-41x29.png", Image.fromarray(noise(rng, 41, 29, 1), "L"))
    p = Image.fromarray(noise(rng, 37, 23, 1), "L").convert("P")
    p.putpalette(list(noise(rng, 256, 1).reshape(-1)))
    save("noise-P-37x23.png", p)
    p4 = Image.fromarray((noise(rng, 30, 20, 1) % 4).astype(np.uint8), "L").convert("P")
    p4.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 99, 199])
    save("noise-P-4colors-30x20.png", p4)  # PIL writes it 2-bit
    save("noise-1-33x9.png", Image.fromarray(noise(rng, 33, 9, 1) > 127))
    rgba = Image.fromarray(np.dstack([noise(rng, 45, 31), noise(rng, 45, 31, 1)]), "RGBA")
    save("noise-RGBA-45x31.png", rgba)
    save("noise-LA-19x17.png", Image.fromarray(noise(rng, 19, 17, 2), "LA"))
    i16 = rng.integers(0, 65536, (27, 35), dtype=np.uint16)
    i16[0, :8] = [0, 1, 127, 254, 255, 256, 1000, 65535]
    save("noise-I16-35x27.png", Image.fromarray(i16, "I;16"))
    save("rgb-1x1.png", Image.fromarray(noise(rng, 1, 1)))
    save("gradient-rgb-3x500.png", Image.fromarray(gradient(3, 500)))
    save("gradient-rgb-333x251.png", Image.fromarray(gradient(333, 251)))
    trns = Image.fromarray(noise(rng, 20, 10))
    save("rgb-tRNS-20x10.png", trns, transparency=(1, 2, 3))

    # What PIL cannot write.
    def png(name, samples, depth, ctype, **kw):
        path = os.path.join(d, name)
        write_png(path, samples, depth, ctype, **kw)
        images[name] = path

    png("interlaced-rgb-61x43.png", noise(rng, 61, 43), 8, 2, interlace=True)
    png("interlaced-rgb-1x1.png", noise(rng, 1, 1), 8, 2, interlace=True)
    png("interlaced-rgb-3x5.png", noise(rng, 3, 5), 8, 2, interlace=True)
    png("interlaced-gray4-29x13.png", noise(rng, 29, 13, 1)[..., None] % 16, 4, 0,
        interlace=True)
    png("interlaced-rgba16-17x11.png", rng.integers(0, 65536, (11, 17, 4)), 16, 6,
        interlace=True)
    png("rgb16-23x19.png", rng.integers(0, 65536, (19, 23, 3)), 16, 2)
    png("rgba16-23x19.png", rng.integers(0, 65536, (19, 23, 4)), 16, 6)
    png("la16-23x19.png", rng.integers(0, 65536, (19, 23, 2)), 16, 4)
    png("gray2-31x7.png", noise(rng, 31, 7, 1)[..., None] % 4, 2, 0)
    png("gray4-31x7.png", noise(rng, 31, 7, 1)[..., None] % 16, 4, 0)
    png("gray16-lowvalues-16x16.png", rng.integers(0, 300, (16, 16, 1)), 16, 0)
    # A 3-entry palette with indices up to 15: PIL's gray ramp past the PLTE.
    png("palette4-short-plte-21x9.png", noise(rng, 21, 9, 1)[..., None] % 16, 4, 3,
        palette=[[200, 10, 10], [10, 200, 10], [10, 10, 200]])

    photo = gradient(500, 375).astype(np.int32) + rng.integers(-20, 21, (375, 500, 3))
    photo = Image.fromarray(np.clip(photo, 0, 255).astype(np.uint8))
    for quality in (50, 75, 95):
        for sub, tag in ((2, "420"), (0, "444")):
            save(f"photo-q{quality}-{tag}-500x375.jpg", photo, quality=quality, subsampling=sub)
    save("noise-q90-420-333x251.jpg", Image.fromarray(noise(rng, 333, 251)), quality=90,
         subsampling=2)
    save("noise-q85-422-37x23.jpg", Image.fromarray(noise(rng, 37, 23)), quality=85,
         subsampling=1)
    save("gradient-q80-3x500.jpg", Image.fromarray(gradient(3, 500)), quality=80)
    save("rgb-1x1.jpg", Image.fromarray(noise(rng, 1, 1)), quality=75)
    save("gray-q80-333x251.jpg", Image.fromarray(noise(rng, 333, 251, 1), "L"), quality=80)
    save("photo-progressive-500x375.jpg", photo, quality=85, progressive=True)
    save("photo-optimize-restart-500x375.jpg", photo, quality=85, optimize=True,
         restart_marker_blocks=4)
    save("photo-cmyk-97x61.jpg", photo.resize((97, 61)).convert("CMYK"), quality=90)
    return images


# --- driver and comparisons ---------------------------------------------------


def run_driver(driver, args, out):
    proc = subprocess.run([driver] + args + [out], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    with open(out, "rb") as f:
        data = f.read()
    w, h = struct.unpack("<qq", data[:16])
    return np.frombuffer(data[16:], np.uint8).reshape(h, w, 3), None


def pil_rgb(path):
    with Image.open(path) as im:
        return im.convert("RGB")


def check_decode(driver, name, path, out):
    ours, err = run_driver(driver, ["decode", path], out)
    want = np.asarray(pil_rgb(path))
    if ours is None:
        fail(f"decode {name}: driver failed: {err}")
        return
    if ours.shape != want.shape:
        fail(f"decode {name}: shape {ours.shape} != PIL's {want.shape}")
        return
    diff = np.abs(ours.astype(np.int32) - want.astype(np.int32))
    if diff.max() != 0:
        fail(f"decode {name}: {np.count_nonzero(diff)} of {diff.size} values differ "
             f"(max {diff.max()})")
        return
    print(f"ok    decode {name}: {want.shape[1]}x{want.shape[0]}, identical to PIL")


def check_damaged(driver, name, data, d, out):
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.write(data)
    try:
        want = np.asarray(pil_rgb(path))
        pil_err = None
    except Exception as e:  # PIL's OSError / SyntaxError / ValueError
        want, pil_err = None, str(e)
    ours, err = run_driver(driver, ["decode", path], out)
    if want is None and ours is None:
        print(f"ok    damaged {name}: refused like PIL ({err.split(': ', 1)[-1]} / PIL: "
              f"{pil_err})")
    elif want is None:
        fail(f"damaged {name}: PIL refuses it ({pil_err}) but the driver decodes it")
    elif ours is None:
        fail(f"damaged {name}: PIL decodes it but the driver says: {err}")
    elif ours.shape != want.shape or not np.array_equal(ours, want):
        fail(f"damaged {name}: decoded, but the pixels differ from PIL's")
    else:
        print(f"ok    damaged {name}: decoded like PIL, identical pixels")


def check_resize(driver, name, path, w, h, out):
    ours, err = run_driver(driver, ["resize", path, str(w), str(h)], out)
    src = pil_rgb(path)
    want = np.asarray(src.resize((w, h), Image.BILINEAR))
    label = f"resize {name} {src.width}x{src.height} -> {w}x{h}"
    if ours is None:
        fail(f"{label}: driver failed: {err}")
        return
    if ours.shape != want.shape:
        fail(f"{label}: shape {ours.shape} != PIL's {want.shape}")
        return
    diff = np.abs(ours.astype(np.int32) - want.astype(np.int32))
    exact = 100.0 * np.count_nonzero(diff == 0) / diff.size
    if diff.max() > 1:
        fail(f"{label}: max difference {diff.max()} levels ({exact:.3f}% exact)")
        return
    print(f"ok    {label}: max difference {diff.max()}, {exact:.3f}% exact")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", required=True)
    parser.add_argument("--keep", help="write the images here and keep them")
    args = parser.parse_args()
    rng = np.random.default_rng(20240611)

    with tempfile.TemporaryDirectory() as tmp:
        d = args.keep or tmp
        os.makedirs(d, exist_ok=True)
        out = os.path.join(tmp, "out.raw")
        images = make_images(d, rng)
        for name, path in images.items():
            check_decode(args.driver, name, path, out)

        # Damaged files: truncations anywhere are refused by both.
        for name in ("photo-q75-420-500x375.jpg", "photo-progressive-500x375.jpg",
                     "gradient-rgb-500x375.png", "interlaced-rgb-61x43.png"):
            with open(images[name], "rb") as f:
                data = f.read()
            stem = name.rsplit(".", 1)[0]
            ext = name.rsplit(".", 1)[1]
            for frac in (0.3, 0.9):
                check_damaged(args.driver, f"{stem}-cut{int(frac * 100)}.{ext}",
                              data[: int(len(data) * frac)], d, out)
            if ext == "jpg":
                check_damaged(args.driver, f"{stem}-no-eoi.jpg", data[:-2], d, out)
                check_damaged(args.driver, f"{stem}-trailing-junk.jpg", data + b"junk" * 10,
                              d, out)
            else:
                check_damaged(args.driver, f"{stem}-no-iend.png", data[:-12], d, out)

        # Resizes: (image, target size) pairs covering downscale 1.3x, 2x, 7.5x,
        # upscale 2.2x, non-uniform, one axis only, odd and tiny sizes.
        resizes = [
            ("photo-q75-420-500x375.jpg", 385, 288),  # 1.3x down
            ("photo-q75-420-500x375.jpg", 250, 188),  # 2x down
            ("photo-q75-420-500x375.jpg", 67, 50),  # 7.5x down
            ("photo-q75-420-500x375.jpg", 224, 224),  # non-uniform
            ("gradient-rgb-500x375.png", 224, 224),
            ("noise-rgb-64x48.png", 141, 106),  # 2.2x up
            ("noise-rgb-64x48.png", 224, 224),
            ("noise-rgb-64x48.png", 64, 101),  # vertical pass only
            ("noise-rgb-64x48.png", 29, 48),  # horizontal pass only
            ("noise-q90-420-333x251.jpg", 224, 224),
            ("noise-q90-420-333x251.jpg", 44, 33),  # 7.5x down
            ("gradient-rgb-333x251.png", 256, 193),  # 1.3x down
            ("gradient-rgb-3x500.png", 7, 224),
            ("gradient-rgb-3x500.png", 1, 1),
            ("rgb-1x1.png", 224, 224),
            ("noise-L-41x29.png", 90, 64),
            ("gray-q80-333x251.jpg", 224, 224),
            ("noise-P-37x23.png", 81, 51),
            ("noise-RGBA-45x31.png", 99, 68),
        ]
        for name, w, h in resizes:
            check_resize(args.driver, name, images[name], w, h, out)

        timing = subprocess.run([args.driver, "time", images["photo-q75-420-500x375.jpg"], "224",
                                 "224", "200"], capture_output=True, text=True)
        print(f"time  {timing.stdout.strip() or timing.stderr.strip()}")

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all image checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
