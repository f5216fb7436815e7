#!/usr/bin/env python3
"""Differential check of stepmix's PNG reader (stepmix::read_png_rgb, printed by the
bench_png_reader harness) against Pillow's Image.open(f).convert("RGB"), the reader the
reference pipeline loads a conditioning picture with, for bench/run-png-pillow.sh.
The PNG files are written here chunk by chunk from fixed seeds: every colour type and
bit depth, plain and Adam7, all five filter types, tRNS, ancillary chunks that ask for
colour conversion (gAMA, cHRM, sRGB, iCCP, sBIT, bKGD), split IDAT, and two kinds of
malformed file that decoders accept. Each file is one of:
- match: both read the same 8-bit RGB pixels;
- mismatch: stepmix read pixels that differ from Pillow's (or Pillow failed);
- refused-as-designed: 16-bit gray without alpha, which stepmix refuses because Pillow
  clips those samples at 255 instead of scaling them; counted only where Pillow still
  shows that clipping on the same file, so the refusal's premise is checked each run;
- refused-unexpectedly: any other refusal.
usage: png_pillow_check.py --reader BIN --work DIR --json OUT
exit status 1 on any mismatch or unexpected refusal, 2 when the setup is broken
"""
import argparse, collections, json, os, struct, subprocess, sys, time, warnings, zlib
import check_report  # bench/check_report.py, next to this script
from check_report import setup_error

try:
    import numpy as np
    import PIL
    from PIL import Image, ImageCms
except ImportError as e:
    setup_error(f"{e}; scripts/setup.sh --bench installs python3-pil and python3-numpy")

OUTCOMES = ("match", "mismatch", "refused-as-designed", "refused-unexpectedly")

# ---- PNG files, written chunk by chunk ------------------------------------------------
# By hand rather than through an encoder, so that files hold what encoders rarely write:
# every filter type, odd sizes with partial bytes and empty Adam7 passes, empty IDATs.

CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # by colour type
TYPE_NAME = {0: "gray", 2: "rgb", 3: "pal", 4: "ga", 6: "rgba"}
# Every (colour type, bit depth) pair the PNG specification allows.
COMBOS = [(0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (2, 8), (2, 16), (3, 1), (3, 2), (3, 4), (3, 8),
          (4, 8), (4, 16), (6, 8), (6, 16)]
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
Case = collections.namedtuple("Case", "name variant gray16")  # gray16: 16-bit gray without alpha


def chunk(kind, data):
    tag = kind.encode()
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def pack_rows(pixels, depth):
    """Samples (height, width, channels) -> the bytes of each row, big-endian, packed below 8 bits."""
    rows = []
    for row in pixels:
        flat = row.reshape(-1).astype(np.uint32)
        if depth >= 8:
            rows.append(flat.astype(">u2" if depth == 16 else np.uint8).tobytes())
            continue
        per_byte = 8 // depth
        padded = np.zeros(-(-len(flat) // per_byte) * per_byte, np.uint32)
        padded[:len(flat)] = flat
        shifts = 8 - depth * np.arange(1, per_byte + 1, dtype=np.uint32)
        rows.append((padded.reshape(-1, per_byte) << shifts).sum(axis=1).astype(np.uint8).tobytes())
    return rows


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def filter_rows(rows, bpp, rng):
    """Each row behind a random filter type (0-4), as an encoder may choose per row."""
    out, prev = bytearray(), bytes(len(rows[0]))
    for row in rows:
        kind = int(rng.integers(0, 5))
        out.append(kind)
        for i, value in enumerate(row):
            a = row[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            out.append((value - (0, a, b, (a + b) // 2, paeth(a, b, c))[kind]) & 0xFF)
        prev = row
    return bytes(out)


def make_png(pixels, ctype, depth, interlace=0, seed=0, palette=None, before_plte=(), after_plte=(),
             idat_sizes=None):
    """The file's bytes; idat_sizes splits the compressed data into IDATs of those sizes (and the rest)."""
    rng = np.random.default_rng(seed + 1000)
    height, width, _ = pixels.shape
    bpp = max(1, CHANNELS[ctype] * depth // 8)
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    subimages = [pixels[y0::dy, x0::dx] for x0, y0, dx, dy in passes]
    raw = b"".join(filter_rows(pack_rows(s, depth), bpp, rng) for s in subimages if s.size)
    data = zlib.compress(raw, 9)
    out = b"\x89PNG\r\n\x1a\n" + chunk("IHDR", struct.pack(">IIBBBBB", width, height, depth, ctype, 0, 0, interlace))
    out += b"".join(chunk(k, d) for k, d in before_plte)
    if palette is not None:
        out += chunk("PLTE", bytes(np.asarray(palette, np.uint8).reshape(-1)))
    out += b"".join(chunk(k, d) for k, d in after_plte)
    cuts = np.cumsum([0] + list(idat_sizes or [])).tolist() + [len(data)]
    out += b"".join(chunk("IDAT", data[a:b]) for a, b in zip(cuts, cuts[1:]))
    return out + chunk("IEND", b"")


def random_image(rng, height, width, ctype, depth, palette_size=None):
    high = palette_size if ctype == 3 else 1 << depth
    return rng.integers(0, high, size=(height, width, CHANNELS[ctype]))


def random_palette(rng, size):
    return rng.integers(0, 256, size=(size, 3))


def srgb_profile():
    """lcms's sRGB profile with a fixed creation date (bytes 24-35), so the files repeat byte for byte."""
    icc = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    icc[24:36] = struct.pack(">6H", 2024, 1, 1, 0, 0, 0)
    return bytes(icc)


GRAY16_CHOSEN = [0, 1, 127, 255, 256, 257, 1000, 32768, 65535]  # where clipping and scaling part


def cases():
    """Yields (file name, variant, colour type, bit depth, PNG bytes); every seed is fixed."""
    # Every colour type and bit depth at sizes that leave partial bytes and empty Adam7 passes;
    # palettes of random length, so some are shorter than the bit depth could index.
    for ctype, depth in COMBOS:
        kind = f"{TYPE_NAME[ctype]}{depth}"
        for interlace in (0, 1):
            for i, (h, w) in enumerate([(1, 1), (5, 3), (1, 17), (17, 1), (20, 33)]):
                seed = ctype * 10000 + depth * 100 + interlace * 10 + i
                rng = np.random.default_rng(seed)
                palette = random_palette(rng, int(rng.integers(1, (1 << depth) + 1))) if ctype == 3 else None
                px = random_image(rng, h, w, ctype, depth, None if palette is None else len(palette))
                yield (f"basic_{kind}_i{interlace}_{w}x{h}.png", f"basic {kind}", ctype, depth,
                       make_png(px, ctype, depth, interlace, seed, palette))
    # tRNS: a palette's alpha table (all entries, typical values, shorter than the palette),
    # or the transparent gray or RGB key, which occurs in the image.
    for ctype, depth in [c for c in COMBOS if c[0] in (0, 2, 3)]:
        kind = f"{TYPE_NAME[ctype]}{depth}"
        for interlace in (0, 1):
            for k, (h, w) in enumerate([(7, 9), (1, 1), (33, 20)]):
                seed = 50000 + ctype * 1000 + depth * 10 + interlace * 5 + k
                rng = np.random.default_rng(seed)
                palette = random_palette(rng, 1 << depth) if ctype == 3 else None
                px = random_image(rng, h, w, ctype, depth, 1 << depth)
                if ctype == 3:  # k: an entry per palette entry, typical values, fewer entries
                    alpha = (rng.choice([0, 1, 128, 254, 255], 1 << depth) if k == 1 else
                             rng.integers(0, 256, (1 << depth) if k == 0 else max(1, (1 << depth) // 2)))
                    trns = bytes(alpha.astype(np.uint8))
                else:
                    px[h // 2, w // 2] = px[0, 0]
                    trns = b"".join(struct.pack(">H", int(v)) for v in px[0, 0])
                yield (f"trns_{kind}_{k}_i{interlace}.png", f"tRNS {kind}", ctype, depth,
                       make_png(px, ctype, depth, interlace, seed, palette, after_plte=[("tRNS", trns)]))
    # Ancillary chunks that ask a reader for colour conversion, which neither side does.
    chrm = ("cHRM", struct.pack(">8I", 31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000))
    iccp = ("iCCP", b"test profile\x00\x00" + zlib.compress(srgb_profile()))
    gama = lambda gamma: ("gAMA", struct.pack(">I", gamma))
    for ctype, depth in [(0, 4), (0, 8), (2, 8), (2, 16), (3, 8), (3, 2), (4, 16), (6, 8), (6, 16)]:
        kind = f"{TYPE_NAME[ctype]}{depth}"
        seed = 70000 + ctype * 100 + depth
        rng = np.random.default_rng(seed)
        palette = random_palette(rng, 1 << depth) if ctype == 3 else None
        px = random_image(rng, 11, 13, ctype, depth, 1 << depth)
        # sBIT has one entry per channel (3 for a palette, whose entries are 8-bit); bKGD is a
        # palette index or one 16-bit sample per colour channel.
        sbit = lambda bits: ("sBIT", bytes([max(1, bits)]) * (3 if ctype == 3 else CHANNELS[ctype]))
        significant = 8 if ctype == 3 else depth
        bkgd = ("bKGD", bytes([int(rng.integers(0, 1 << depth))]) if ctype == 3 else
                b"".join(struct.pack(">H", int(rng.integers(0, 1 << depth))) for _ in range(1 if ctype in (0, 4) else 3)))
        ancillary = {  # variant: (chunks before PLTE, chunks after it)
            "gAMA 0.45455": ([gama(45455)], []), "gAMA 1.0": ([gama(100000)], []), "gAMA 2.2": ([gama(220000)], []),
            "gAMA 0.8": ([gama(80000)], []), "gAMA 0.00001": ([gama(1)], []), "gAMA 0": ([gama(0)], []),
            "gAMA max": ([gama(0x7FFFFFFF)], []),
            "sRGB perceptual": ([("sRGB", b"\x00")], []), "sRGB absolute": ([("sRGB", b"\x03")], []),
            "cHRM": ([chrm], []), "sRGB+gAMA+cHRM": ([gama(45455), chrm, ("sRGB", b"\x00")], []),
            "iCCP": ([iccp], []), "sBIT": ([sbit(significant - 3)], []), "sBIT 1": ([sbit(1)], []),
            "bKGD": ([], [bkgd]), "gAMA+cHRM+sBIT+iCCP+bKGD": ([gama(100000), chrm, sbit(significant - 2), iccp], [bkgd]),
        }
        for tag, (before, after) in ancillary.items():
            for interlace in (0, 1):
                name = f"anc_{kind}_{tag.replace(' ', '_').replace('+', '_')}_i{interlace}.png"
                yield name, tag, ctype, depth, make_png(px, ctype, depth, interlace, seed, palette, before, after)
    # The image data split across IDATs, among them a 1-byte one and empty ones.
    for ctype, depth in COMBOS:
        for interlace in (0, 1):
            seed = 90000 + ctype * 100 + depth + interlace
            rng = np.random.default_rng(seed)
            palette = random_palette(rng, 1 << depth) if ctype == 3 else None
            px = random_image(rng, 19, 23, ctype, depth, 1 << depth)
            yield (f"idat_{TYPE_NAME[ctype]}{depth}_i{interlace}.png", "several IDAT", ctype, depth,
                   make_png(px, ctype, depth, interlace, seed, palette, idat_sizes=[1, 0, 7, 2, 0, 30]))
    # Beyond the specification, but read by decoders: a suggested PLTE in an RGB file, and
    # indices past the end of a short palette.
    for depth in (8, 16):
        rng = np.random.default_rng(99000 + depth)
        px = random_image(rng, 6, 7, 2, depth)
        yield (f"odd_rgb{depth}_with_PLTE.png", "PLTE in RGB", 2, depth,
               make_png(px, 2, depth, 0, 1, random_palette(rng, 16)))
    for depth in (2, 4, 8):
        rng = np.random.default_rng(99100 + depth)
        px = random_image(rng, 6, 7, 3, depth, 1 << depth)
        yield (f"odd_pal{depth}_index_past_palette.png", "index past short palette", 3, depth,
               make_png(px, 3, depth, 0, 1, random_palette(rng, 2)))
    # 16-bit gray with chosen samples: what Pillow makes of them is recorded in the results.
    px = np.array(GRAY16_CHOSEN).reshape(1, -1, 1)
    yield "gray16_values.png", "gray16 chosen values", 0, 16, make_png(px, 0, 16, 0, 1)
    yield ("gray16_values_trns.png", "gray16 chosen values", 0, 16,
           make_png(px, 0, 16, 1, 1, after_plte=[("tRNS", struct.pack(">H", 1000))]))


def write_cases(work):
    os.makedirs(work, exist_ok=True)
    for old in os.listdir(work):  # files of an earlier, different generator
        if old.endswith(".png"):
            os.remove(os.path.join(work, old))
    written = []
    for name, variant, ctype, depth, data in cases():
        with open(os.path.join(work, name), "wb") as f:
            f.write(data)
        written.append(Case(name, variant, ctype == 0 and depth == 16))
    return written

# ---- the two readers ------------------------------------------------------------------


def run_reader(reader, folder, paths):
    """stepmix's answer per file, from one process call: (pixels, None) or (None, refusal). It runs
    in `folder` on bare file names, so that its messages (kept in the results) name no machine path."""
    lines = subprocess.run([os.path.abspath(reader), *paths], capture_output=True, text=True, check=True,
                           cwd=folder).stdout.splitlines()
    if len(lines) != len(paths):
        setup_error(f"{reader} printed {len(lines)} lines for {len(paths)} files")
    answers = []
    for path, line in zip(paths, lines):
        if line.startswith("ERR "):
            answers.append((None, line[4:]))
            continue
        fields = line.split(" ")
        try:
            width, height, channels = map(int, fields[1:4])
            data = bytes.fromhex(fields[4])
        except (ValueError, IndexError):
            data = None
        if fields[0] != "OK" or len(fields) != 5 or data is None or len(data) != width * height * channels:
            setup_error(f"{reader}: not an 'OK w h c hex' or 'ERR message' line for {path}: {line[:80]!r}")
        answers.append((np.frombuffer(data, np.uint8).reshape(height, width, channels), None))
    return answers


def read_with_pillow(path):
    """(RGB pixels, mode, samples as opened) or the exception's text."""
    try:
        with warnings.catch_warnings():
            # convert("RGB") of a palette image with tRNS advises going through RGBA; its RGB
            # (the colour under the transparency) is what the reference pipeline gets.
            warnings.simplefilter("ignore")
            with Image.open(path) as image:
                return np.asarray(image.convert("RGB")), image.mode, np.asarray(image)
    except Exception as e:  # any failure to read is Pillow's answer for this file
        return f"{type(e).__name__}: {e}"


def clips_at_255(pillow):
    """Pillow's convert("RGB") gives min(sample, 255) on every channel: the refusal's premise."""
    if isinstance(pillow, str):
        return False
    rgb, _, samples = pillow
    return rgb.shape == samples.shape + (3,) and (rgb == np.minimum(samples, 255)[..., None]).all()


def first_difference(ours, theirs):
    if ours.shape != theirs.shape:
        return {"stepmix_shape": list(ours.shape), "pillow_shape": list(theirs.shape)}
    differ = (ours != theirs).any(axis=2)
    y, x = (int(v) for v in np.argwhere(differ)[0])
    return {"x": x, "y": y, "stepmix": ours[y, x].tolist(), "pillow": theirs[y, x].tolist(),
            "differing_pixels": int(differ.sum())}


def main():
    parser = argparse.ArgumentParser(description="stepmix::read_png_rgb against Pillow's convert('RGB')")
    parser.add_argument("--reader", required=True, help="the bench_png_reader harness")
    parser.add_argument("--work", required=True, help="folder for the generated PNG files")
    parser.add_argument("--json", required=True, help="results file")
    args = parser.parse_args()
    stamps = [("start", time.monotonic())]
    files = write_cases(args.work)
    stamps.append(("generate", time.monotonic()))
    answers = run_reader(args.reader, args.work, [f.name for f in files])
    stamps.append(("stepmix", time.monotonic()))

    counts = collections.defaultdict(lambda: dict.fromkeys(OUTCOMES, 0))
    mismatches, unexpected, chosen = [], [], {}
    for case, (pixels, refusal) in zip(files, answers):
        pillow = read_with_pillow(os.path.join(args.work, case.name))
        pillow_text = pillow if isinstance(pillow, str) else f"mode {pillow[1]}"
        if refusal is None and not isinstance(pillow, str) and np.array_equal(pixels, pillow[0]):
            outcome = "match"
        elif refusal is None:
            outcome = "mismatch"
            mismatches.append({"file": case.name, "variant": case.variant, "pillow": pillow_text,
                               "first_difference": None if isinstance(pillow, str) else
                               first_difference(pixels, pillow[0])})
        elif case.gray16 and "16-bit grayscale" in refusal and clips_at_255(pillow):
            outcome = "refused-as-designed"
        else:
            outcome = "refused-unexpectedly"
            if case.gray16 and not isinstance(pillow, str):
                pillow_text += ", clips 16-bit gray at 255" if clips_at_255(pillow) else \
                               ", does not clip 16-bit gray at 255: the refusal's premise is gone"
            unexpected.append({"file": case.name, "variant": case.variant, "stepmix": refusal, "pillow": pillow_text})
        counts[case.variant][outcome] += 1
        if case.variant == "gray16 chosen values":
            chosen[case.name] = {"samples": GRAY16_CHOSEN, "stepmix": refusal or "read it",
                                 **({"pillow": pillow} if isinstance(pillow, str) else
                                    {"pillow_mode": pillow[1], "pillow_samples": pillow[2].reshape(-1).tolist(),
                                     "pillow_rgb": pillow[0].reshape(-1, 3).tolist()})}
    stamps.append(("pillow", time.monotonic()))

    total = {k: sum(c[k] for c in counts.values()) for k in OUTCOMES}
    print(f"{'variant':26} {'files':>6} " + " ".join(f"{k:>{len(k)}}" for k in OUTCOMES))
    for variant, c in list(counts.items()) + [("total", total)]:
        print(f"{variant:26} {sum(c.values()):6} " + " ".join(f"{c[k]:{len(k)}}" for k in OUTCOMES))
    for name, record in chosen.items():
        red = [rgb[0] for rgb in record.get("pillow_rgb", [])]
        print(f"{name}: samples {record['samples']}; Pillow (mode {record.get('pillow_mode')}) "
              f"gives R {red or record.get('pillow')}; stepmix {'reads it' if record['stepmix'] == 'read it' else 'refuses it'}")
    for m in mismatches[:10]:
        print(f"MISMATCH {m['file']}: Pillow {m['pillow']}, first difference {json.dumps(m['first_difference'])}")
    for u in unexpected[:10]:
        print(f"REFUSED {u['file']}: stepmix: {u['stepmix']}; Pillow: {u['pillow']}")
    if len(mismatches) > 10 or len(unexpected) > 10:
        print(f"(all {len(mismatches)} mismatches and {len(unexpected)} refusals are in {args.json})")

    result = {"source_commit": check_report.source_commit(), "reader": os.path.relpath(args.reader, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "pillow": PIL.__version__,
              "numpy": np.__version__, "python": sys.version.split()[0], "files": len(files), "total": total,
              "variants": counts, "mismatches": mismatches, "unexpected_refusals": unexpected,
              "gray16_chosen_values": chosen,
              "seconds": check_report.stage_seconds(stamps, 2)}
    check_report.write_result(args.json, result)
    return 1 if total["mismatch"] or total["refused-unexpectedly"] else 0


if __name__ == "__main__":
    check_report.run_main(main)
