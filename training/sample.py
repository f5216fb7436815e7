"""Sample the embedded model with UniPC (flow_prediction, bh2, order 2) or Euler, with CFG, and rate the
samples with the Fashion-MNIST classifier.

UniPC follows docs/schedulers.md exactly (float64 scalar coefficients, float32 latent), so
these numbers are what a faithful runtime should reproduce up to its arithmetic precision.

    /usr/bin/python3 training/sample.py --model models/fashion-cosmos3-bf16 --steps 8 20 --guidance 3 \
        --per-class 50 --grid models/fashion-cosmos3-bf16/samples.png
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import classifier as clf  # noqa: E402
import fashion  # noqa: E402
import safetensors_io as st  # noqa: E402
from cosmos3 import Cosmos3Transformer, full_config  # noqa: E402

T_TRAIN = 1000


# ---------------------------------------------------------------- schedules
def flow_schedule(n, shift):
    """UniPC flow sigmas (float32, N+1 values ending in 0) and int64 timesteps (schedulers.md §2.1)."""
    k = np.arange(n, dtype=np.float64)
    base = 1.0 + k * (1.0 / T_TRAIN - 1.0) / n
    sig = shift * base / (1.0 + (shift - 1.0) * base)
    if abs(sig[0] - 1.0) < 1e-6:
        sig[0] -= 1e-6
    timesteps = (sig * T_TRAIN).astype(np.int64)
    sigmas = np.append(sig, 0.0).astype(np.float32)
    return sigmas, timesteps


def _lam(s):
    return math.log(1.0 - s) - math.log(s)


class UniPC:
    """UniPC multistep, flow sigmas, bh2, x0 form, order 2, lower_order_final, final sigma 0."""

    def __init__(self, n, shift):
        self.sigmas, self.timesteps = flow_schedule(n, shift)
        self.sig = [float(s) for s in self.sigmas]  # later arithmetic uses the float32 values
        self.n = n
        self.k = 0
        self.m = []          # x0 predictions m_0..m_k
        self.x_tilde = None  # corrected sample that entered the previous predictor
        self.orders = []

    def step(self, v, x):
        k, s = self.k, self.sig
        m_k = x - s[k] * v
        self.m.append(m_k)
        if k >= 1:
            x_t = self._corrector(k, self.orders[k - 1])
        else:
            x_t = x
        p = min(2, self.n - k, k + 1)
        self.orders.append(p)
        self.x_tilde = x_t
        out = self._predictor(k, p, x_t)
        self.k += 1
        return out

    def _predictor(self, k, order, x_t):
        s, m = self.sig, self.m
        a, b = s[k], s[k + 1]
        if b == 0.0:
            return m[k]  # σ = 0: the update is exactly the last x0 prediction
        h = _lam(b) - _lam(a)
        phi = math.expm1(-h)
        out = (b / a) * x_t - (1.0 - b) * phi * m[k]
        if order == 2:
            r = (_lam(s[k - 1]) - _lam(s[k])) / h
            d = (m[k - 1] - m[k]) / r
            out = out - (1.0 - b) * phi * 0.5 * d
        return out

    def _corrector(self, k, order):
        s, m = self.sig, self.m
        a, b = s[k - 1], s[k]
        h = _lam(b) - _lam(a)
        phi = math.expm1(-h)
        base = (b / a) * self.x_tilde - (1.0 - b) * phi * m[k - 1]
        dt = m[k] - m[k - 1]
        if order == 1:
            return base - (1.0 - b) * phi * 0.5 * dt
        r = (_lam(s[k - 2]) - _lam(s[k - 1])) / h
        d = (m[k - 2] - m[k - 1]) / r
        hh = -h
        g1 = phi / hh - 1.0
        b1 = g1 / phi
        g2 = g1 / hh - 0.5
        b2 = 2.0 * g2 / phi
        rho1 = (b1 - b2) / (1.0 - r)
        rho2 = (b2 - r * b1) / (1.0 - r)
        return base - (1.0 - b) * phi * (rho1 * d + rho2 * dt)


class Euler:
    """Deterministic flow Euler on the same shifted grid: x <- x + (σ_{k+1} - σ_k)·v."""

    def __init__(self, n, shift):
        self.sigmas, self.timesteps = flow_schedule(n, shift)
        self.k = 0

    def step(self, v, x):
        out = x + (float(self.sigmas[self.k + 1]) - float(self.sigmas[self.k])) * v
        self.k += 1
        return out


def selftest_unipc():
    """schedulers.md §8: toy model v = x, x_0 = 1, flow_shift 10."""
    for n, want in ((4, 0.18176533), (6, 0.23706677), (35, 0.35840409)):
        sch = UniPC(n, 10.0)
        x = torch.ones(1, dtype=torch.float64)
        for _ in range(n):
            x = sch.step(x, x)
        assert abs(float(x) - want) < 2e-6, (n, float(x), want)


# ---------------------------------------------------------------- model loading
def load_model(path, weights="ema"):
    """`path` is an exported model folder (transformer/ in BF16) or a training checkpoint (.pt, whose
    debiased EMA weights, or raw weights with weights="raw", are rounded to BF16 as the export does)."""
    if path.endswith(".pt"):
        from train import debiased_ema
        ck = torch.load(path)
        with open(os.path.join(os.path.dirname(path), "config.json")) as f:
            cfg = json.load(f)
        source = debiased_ema(ck) if weights == "ema" else ck["model"]
        weights = {k: st.round_to_bf16(v.float()) for k, v in source.items()}
    else:
        with open(os.path.join(path, "transformer", "config.json")) as f:
            cfg = json.load(f)
        weights, _ = st.load(os.path.join(path, "transformer", "diffusion_pytorch_model.safetensors"))
    model = Cosmos3Transformer(full_config(**cfg))
    model.load_state_dict(weights)
    return model.eval()


# ---------------------------------------------------------------- sampling
@torch.no_grad()
def sample(model, prompts, steps, guidance, shift, seed, sampler="unipc", batch=100):
    """Generate one 28x28 image per prompt; returns [N, 28, 28] in [-1, 1] (clamped)."""
    out = []
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(len(prompts), 1, 1, 28, 28, generator=gen)
    uncond = fashion.encode("")
    for i in range(0, len(prompts), batch):
        ps = prompts[i:i + batch]
        x = noise[i:i + batch].clone()
        b = x.shape[0]
        cond = [fashion.encode(p) for p in ps]
        use_cfg = guidance != 1.0
        ids, lens = fashion.batch_ids(cond + [uncond] * b if use_cfg else cond)
        sch = (UniPC if sampler == "unipc" else Euler)(steps, shift)
        for k in range(steps):
            # UniPC feeds the integer scheduler timestep; Euler (FlowMatch) the float σ·1000
            t = float(sch.timesteps[k]) if sampler == "unipc" else float(sch.sigmas[k]) * T_TRAIN
            xin = torch.cat([x, x]) if use_cfg else x
            v = model(ids, lens, xin, torch.full((xin.shape[0],), t))
            if use_cfg:
                v_c, v_u = v[:b], v[b:]
                v = v_u + guidance * (v_c - v_u)
            x = sch.step(v, x)
        out.append(x[:, 0, 0].clamp(-1, 1))
    return torch.cat(out)


def save_grid(images, rows, cols, path, scale=2):
    from PIL import Image
    imgs = ((images.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).numpy()
    h, w = imgs.shape[1:]
    pad = 2
    canvas = np.full((rows * (h + pad) + pad, cols * (w + pad) + pad), 64, dtype=np.uint8)
    for r in range(rows):
        for c in range(cols):
            y0, x0 = pad + r * (h + pad), pad + c * (w + pad)
            canvas[y0:y0 + h, x0:x0 + w] = imgs[r * cols + c]
    im = Image.fromarray(canvas)
    im = im.resize((im.width * scale, im.height * scale), Image.NEAREST)
    im.save(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="exported folder or training checkpoint .pt")
    ap.add_argument("--weights", choices=["ema", "raw"], default="ema", help="for a .pt checkpoint")
    ap.add_argument("--classifier", default=None, help="classifier folder (default <model>/classifier)")
    ap.add_argument("--steps", type=int, nargs="+", default=[8, 20])
    ap.add_argument("--guidance", type=float, nargs="+", default=[3.0])
    ap.add_argument("--flow-shift", type=float, nargs="+", default=[3.0])
    ap.add_argument("--sampler", choices=["unipc", "euler"], default="unipc")
    ap.add_argument("--per-class", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grid", default=None, help="PNG path: 10 rows (classes) x 10 samples")
    ap.add_argument("--grid-steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    selftest_unipc()

    model = load_model(args.model, args.weights)
    cdir = args.classifier or (os.path.join(args.model, "classifier") if os.path.isdir(args.model)
                               else "models/fashion-cosmos3-bf16/classifier")
    classifier = clf.load(cdir)
    labels = torch.arange(10).repeat_interleave(args.per_class)
    prompts = [fashion.CANONICAL[int(c)] for c in labels]
    results = []
    for shift in args.flow_shift:
        for g in args.guidance:
            for n in args.steps:
                t0 = time.time()
                imgs = sample(model, prompts, n, g, shift, args.seed, args.sampler)
                with torch.no_grad():
                    pred = classifier(imgs).argmax(-1)
                acc = float((pred == labels).float().mean())
                per_class = [round(float((pred[labels == c] == c).float().mean()), 3) for c in range(10)]
                res = {"sampler": args.sampler, "steps": n, "guidance": g, "flow_shift": shift,
                       "samples": len(prompts), "classifier_accuracy": round(acc, 4), "per_class": per_class,
                       "seconds": round(time.time() - t0, 1)}
                results.append(res)
                print(json.dumps(res), flush=True)
    if args.grid:
        gprompts = [fashion.CANONICAL[c] for c in range(10) for _ in range(10)]
        imgs = sample(model, gprompts, args.grid_steps, args.guidance[0], args.flow_shift[0], args.seed + 1,
                      args.sampler)
        save_grid(imgs, 10, 10, args.grid)
        print(json.dumps({"grid": args.grid, "steps": args.grid_steps, "guidance": args.guidance[0],
                          "flow_shift": args.flow_shift[0]}))


if __name__ == "__main__":
    main()
