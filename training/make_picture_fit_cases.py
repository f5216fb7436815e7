"""Reference fits of the image-to-video conditioning picture, for tests/io/picture_fit_test.cpp.

The reference pipeline (Diffusers' Cosmos3 pipeline) prepares the conditioning picture with PyTorch:
scale it to cover the request keeping its aspect ratio (sizes ceil(scale * side), in float64), resample
with F.interpolate(mode="bilinear", antialias=True, align_corners=False) on float32 values, crop the
centred window at offsets round((resized - target) / 2), round every value half to even and clamp it to
[0, 255]. This script restates that preparation, runs it on chosen pictures with this machine's PyTorch,
and writes tests/data/picture-fit/cases.safetensors:

  case<i>.source    U8 [h, w, c]   the picture (c = 3, or 1 for a gray picture, made RGB first as PIL's
                                   convert("RGB") does)
  case<i>.expected  U8 [H, W, 3]   the fitted picture

    /usr/bin/python3 training/make_picture_fit_cases.py [--out FILE]
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (source width, source height, channels, target width, target height, what the case is for)
CASES = [
    (90, 60, 3, 48, 32, "shrink, same aspect ratio"),
    (100, 60, 3, 32, 32, "shrink and crop: the window starts between pixels"),
    (37, 23, 3, 64, 48, "enlarge and crop"),
    (64, 64, 3, 32, 32, "exactly half: sums that land on halves, rounded to even"),
    (50, 30, 1, 24, 16, "a gray picture"),
    (17, 200, 3, 16, 16, "a narrow picture"),
    (40, 32, 3, 32, 32, "one side already fits: a crop only"),
    (35, 32, 3, 32, 32, "crop offset round(1.5) = 2"),
    (37, 32, 3, 32, 32, "crop offset round(2.5) = 2"),
    (33, 32, 3, 32, 32, "crop offset round(0.5) = 0"),
    (17, 85, 3, 48, 48, "ceil(85 * 48 / 17) is 241 in float64, not 240"),
    (203, 157, 3, 80, 48, "a large odd shrink"),
    (12, 9, 3, 160, 96, "a large enlargement"),
]


def picture(w, h, c, seed):
    """Texture and noise: edges, gradients and single-pixel detail."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    smooth = np.stack([(xx * 255) // max(w - 1, 1), (yy * 255) // max(h - 1, 1),
                       ((xx // 4 + yy // 3) % 2) * 200 + 20], -1)
    noise = rng.integers(-40, 41, (h, w, 3))
    rgb = np.clip(smooth + noise, 0, 255).astype(np.uint8)
    return rgb[:, :, :1].copy() if c == 1 else rgb


def fit(source, width, height):
    rgb = np.repeat(source, 3, axis=2) if source.shape[2] == 1 else source
    x = torch.from_numpy(rgb.copy()).permute(2, 0, 1).unsqueeze(0).to(torch.float32)
    source_height, source_width = x.shape[-2:]
    scale = max(width / source_width, height / source_height)
    resized_height, resized_width = math.ceil(scale * source_height), math.ceil(scale * source_width)
    x = F.interpolate(x, size=(resized_height, resized_width), mode="bilinear", align_corners=False, antialias=True)
    top, left = round((resized_height - height) / 2), round((resized_width - width) / 2)
    x = x[:, :, top:top + height, left:left + width].round().clamp(0, 255)
    return x[0].permute(1, 2, 0).to(torch.uint8).numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "picture-fit", "cases.safetensors"))
    args = ap.parse_args()
    tensors, dtypes = {}, {}
    for i, (w, h, c, tw, th, _) in enumerate(CASES):
        source = picture(w, h, c, seed=i)
        tensors[f"case{i}.source"] = torch.from_numpy(source)
        tensors[f"case{i}.expected"] = torch.from_numpy(fit(source, tw, th))
        dtypes[f"case{i}.source"] = dtypes[f"case{i}.expected"] = "U8"
    st.save(args.out, tensors, dtypes, metadata={"torch": torch.__version__})
    print(f"{len(CASES)} cases -> {args.out}")


if __name__ == "__main__":
    main()
