"""The VAE part of bench/diffusers_differential.py: Diffusers' AutoencoderKLWan
(bench/diffusers_reference.py) against `stepmix vae decode` and `stepmix vae encode`, float32.

Each random configuration is a Wan2.2-path VAE (1 to 5 levels, widths, residual blocks, attention
scales, temporal downsampling flags, decoder_base_dim absent/null/equal/other, scale factors written
or left to the class defaults, dropout, random latents_mean/std) with seeded weights, then three
decodes (1, 2, 3, 5 or 8 latent frames, small odd sizes; some also as PNG frames) and two or three
encodes (pixels in [-1, 1] or a PNG picture). Metric: max|a − r| / max|r|, bounded as the goldens'
README §7 bounds them: decoded pixels 5e-5, the encoder's mu and normalised latent 1e-5.
Narrow networks, with a layer under 4 channels, are held to NARROW_BOUND instead: a differential run
of 1,514 narrow decodes found them up to 1.8e-3 apart, as far as Diffusers' own float32 result was from
its float64 result, and traced it to the order of float32 sums in convolutions of 2 or 3 channels
(oneDNN's blocked sums against stepmix's); a structural error is orders of magnitude larger.
Encodes take 1 + 4k frames: the reference encodes frame 0, then chunks of 4 frames, whatever the
temporal factor, and drops a shorter last chunk; with a factor of 8 it cannot encode past one frame.
Some encodes ask for other frame counts, which stepmix refuses by design while Diffusers drops frames
(the premise, checked on its result) or fails. A few configurations have a dropout outside [0, 1],
which nn.Dropout refuses, as stepmix does.
"""
import copy
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "training"))
import safetensors_io as st  # noqa: E402
import diffusers_reference as dr  # noqa: E402

BOUND = {"decode": 5e-5, "encode": 1e-5}
NARROW_BOUND = 5e-3
NARROW_WIDTH = 4


def init_weights(vae, seed):
    weights = {}
    for name, p in vae.state_dict().items():
        g = torch.Generator().manual_seed(seed + zlib.crc32(name.encode()))
        if name.endswith("gamma"):
            t = torch.rand(p.shape, generator=g) * 0.5 + 0.75
        elif name.endswith("bias"):
            t = 0.05 * torch.randn(p.shape, generator=g)
        else:
            t = torch.randn(p.shape, generator=g) / p[0].numel() ** 0.5
        weights[name] = t.float()
    return weights


def shortcuts_fit(base, dbase, dim_mult, td):
    """Whether the residual shortcuts' channel regrouping divides (the class asserts it)."""
    e = [base] + [base * m for m in dim_mult]
    d = [dbase * dim_mult[-1]] + [dbase * m for m in dim_mult[::-1]]
    up = td[::-1]
    for i in range(len(dim_mult)):
        last = i == len(dim_mult) - 1
        if (e[i] * (1 if last else (8 if td[i] else 4))) % e[i + 1]:
            return False
        if not last and (d[i + 1] * (8 if up[i] else 4)) % d[i]:
            return False
    return True


def random_config(rng):
    while True:
        levels = rng.choices([1, 2, 3, 4, 5], weights=[1, 2, 4, 5, 1])[0]
        dim_mult = [rng.choice([1, 1, 2, 2, 3, 4]) for _ in range(levels)]
        if rng.random() < 0.5:
            dim_mult = sorted(dim_mult)
        base = rng.choice([2, 3, 4, 6, 8])
        dbase_mode = rng.choice(["absent", "null", "same", "other", "other"])
        dbase = rng.choice([2, 4, 6, 8, 12]) if dbase_mode == "other" else base
        td = [rng.random() < 0.5 for _ in range(levels - 1)]
        if sum(td) <= 3 and shortcuts_fit(base, dbase, dim_mult, td) and max(base, dbase) * max(dim_mult) <= 48:
            break
    dropout = rng.choice([0.0, 0.0, 0.1, 1.0]) if rng.random() > 0.06 else rng.choice([1.5, -0.1])
    cfg = {"_class_name": "AutoencoderKLWan", "_diffusers_version": "0.40.0.dev0", "base_dim": base,
           "dim_mult": dim_mult, "num_res_blocks": rng.choices([1, 2, 3], weights=[5, 3, 1])[0],
           "attn_scales": rng.choice([[], [], [1.0], [0.5, 0.25]]), "temperal_downsample": td, "dropout": dropout,
           "is_residual": True, "in_channels": 12, "out_channels": 12, "patch_size": 2, "z_dim": 48}
    if dbase_mode == "null":
        cfg["decoder_base_dim"] = None
    elif dbase_mode != "absent":
        cfg["decoder_base_dim"] = dbase
    sf, tf = 2 << (levels - 1), 2 ** sum(td)
    if not (sf == 8 and rng.random() < 0.5):  # left out, the class defaults (8, 4) apply
        cfg["scale_factor_spatial"] = sf
    if not (tf == 4 and rng.random() < 0.5):
        cfg["scale_factor_temporal"] = tf
    cfg["latents_mean"] = [round(rng.uniform(-0.5, 0.5), 4) for _ in range(48)]
    cfg["latents_std"] = [round(rng.uniform(0.3, 1.7), 4) for _ in range(48)]
    narrow = min([base] + [(cfg.get("decoder_base_dim") or base) * m for m in dim_mult]) < NARROW_WIDTH
    return cfg, sf, tf, narrow


def rel(a, r):
    scale = float(r.abs().max())
    return float((a.double() - r.double()).abs().max()) / (scale if scale > 0 else 1.0)


def stepmix(binary, *arguments):
    p = subprocess.run([binary, "vae", *arguments], capture_output=True, text=True, env=dict(os.environ, STEPMIX_THREADS="1"))
    return None if p.returncode == 0 else (p.stderr.strip() or p.stdout.strip())


def pil_frames(pixels):
    """VaeImageProcessor.postprocess to PIL: (x/2 + 1/2) clamped, then numpy_to_pil's round(x·255)."""
    v = (pixels * 0.5 + 0.5).clamp(0, 1)
    return (v.permute(0, 2, 3, 4, 1).numpy() * 255).round().astype(np.uint8)[0]


class Config:
    """One configuration: the reference module, stepmix's vae folder, and the de-normalisation."""

    def __init__(self, args, folder, cfg, weight_seed):
        self.args, self.folder, self.cfg = args, folder, cfg
        keys = {k: v for k, v in cfg.items() if not k.startswith("_")}
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(os.path.join(folder, "vae"))
        with open(os.path.join(folder, "vae", "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        Vae = dr.vae_module().AutoencoderKLWan
        try:
            self.vae, self.error = Vae(**keys).eval(), None
        except Exception as e:  # stepmix still needs weights to reach its own checks
            self.vae, self.error = None, f"{type(e).__name__}: {e}"
            keys["dropout"] = 0.0
        self.weights = init_weights(self.vae or Vae(**keys), weight_seed)
        if self.vae is not None:
            self.vae.load_state_dict(self.weights, strict=True)
        st.save(os.path.join(folder, "vae", "diffusion_pytorch_model.safetensors"), self.weights)
        self.mean = torch.tensor(cfg["latents_mean"], dtype=torch.float32).view(1, -1, 1, 1, 1)
        self.inv_std = 1.0 / torch.tensor(cfg["latents_std"], dtype=torch.float32).view(1, -1, 1, 1, 1)

    def float64(self):
        """The same module in float64, for the distance of each side from it."""
        vae = dr.vae_module().AutoencoderKLWan(**{k: v for k, v in self.cfg.items() if not k.startswith("_")}).eval()
        vae.load_state_dict(self.weights, strict=True)
        return vae.double()

    def decode(self, latent, frames_dir=None):
        """(reference pixels or its error, stepmix pixels or its refusal, PNG frames or None)."""
        ref = self.error
        if ref is None:
            try:
                with torch.no_grad():
                    ref = self.vae.decode(latent / self.inv_std + self.mean).sample
            except Exception as e:
                ref = f"{type(e).__name__}: {e}"
        path, out = os.path.join(self.folder, "latent.safetensors"), os.path.join(self.folder, "pixels.safetensors")
        st.save(path, {"latent": latent})
        refusal = stepmix(self.args.stepmix, "decode", "--vae", os.path.join(self.folder, "vae"), "--latent", path,
                          "-o", out, *(["--frames-dir", frames_dir] if frames_dir else []))
        if refusal:
            return ref, refusal.replace(self.folder + os.sep, ""), None
        frames = None
        if frames_dir:
            from PIL import Image
            frames = np.stack([np.asarray(Image.open(os.path.join(frames_dir, f)).convert("RGB"))
                               for f in sorted(os.listdir(frames_dir)) if f.endswith(".png")])
            shutil.rmtree(frames_dir)
        return ref, st.load(out)[0]["pixels"], frames

    def encode(self, pixels, png=None):
        """(reference (mu, latent) or its error, stepmix (mu, latent) or its refusal)."""
        ref = self.error
        if ref is None:
            try:
                with torch.no_grad():
                    mu = self.vae.encode(pixels).latent_dist.mode()
                ref = (mu, (mu - self.mean) * self.inv_std)
            except Exception as e:
                ref = f"{type(e).__name__}: {e}"
        out = os.path.join(self.folder, "encoded.safetensors")
        if png is None:
            source = ["--pixels", os.path.join(self.folder, "pixels_in.safetensors")]
            st.save(source[1], {"pixels": pixels})
        else:
            source = ["--image", png]
        refusal = stepmix(self.args.stepmix, "encode", "--vae", os.path.join(self.folder, "vae"), *source, "-o", out)
        if refusal:
            return ref, refusal.replace(self.folder + os.sep, "")
        t = st.load(out)[0]
        return ref, (t["mu"], t["latent"])


def judge(tally, row, kind, record, ref, sm, bound, config, redo, extra=None):
    """Classifies one decode or encode. redo(vae) reruns the case on another module (float64)."""
    if isinstance(sm, str):
        if isinstance(ref, str):
            return tally.add(row, "both-refused", record, {"stepmix": sm, "reference": ref})
        return tally.add(row, "refused-unexpectedly", record, {"stepmix": sm})
    if isinstance(ref, str):
        return tally.add(row, "only-reference-failed", record, {"reference": ref})
    pairs = [(kind, sm, ref)] if kind == "decode pixels" else [("encode mu", sm[0], ref[0]), ("encode latent", sm[1], ref[1])]
    detail, ok = dict(extra or {}), True
    for name, a, r in pairs:
        if a.shape != r.shape:
            return tally.add(row, "mismatch", record, {"why": f"{name}: shape {list(a.shape)} against {list(r.shape)}"})
        detail[name] = rel(a, r)
        tally.worst(name + (" (narrow)" if row.endswith("(narrow)") else ""), detail[name], record)
        ok &= detail[name] <= bound
    if not ok or (row.endswith("(narrow)") and max(detail[n] for n, _, _ in pairs) > BOUND[kind.split()[0]]):
        with torch.no_grad():  # each side's distance from the float64 module, for the record
            exact = redo(config.float64())
        a, r = pairs[0][1], pairs[0][2]
        detail.update(stepmix_vs_float64=rel(a, exact), reference_vs_float64=rel(r, exact))
        if ok:
            tally.note("narrow networks past the tight bound", detail, record, error=detail[pairs[0][0]],
                       stepmix_from_float64=detail["stepmix_vs_float64"],
                       Diffusers_from_float64=detail["reference_vs_float64"])
    tally.add(row, "match" if ok else "mismatch", record, detail)


def drops_frames(config, pixels, ref):
    """The premise of refusing 1 + 4k + r frames: Diffusers' latent is, bit for bit, its latent of the
    clip without the frames past its last chunk of 4."""
    if isinstance(ref, str):
        return False
    kept = 1 + 4 * ((pixels.shape[2] - 1) // 4)
    with torch.no_grad():
        return kept < pixels.shape[2] and torch.equal(config.vae.encode(pixels[:, :, :kept]).latent_dist.mode(), ref[0])


def frame_counts(rng, tf):
    """Encode frame counts: 1 + 4k (1 only for a factor of 8), or, one time in five, a count stepmix
    refuses (1 + tf·k, or 2 to 5, that is not 1 + 4k; past 1 at a factor of 8)."""
    if rng.random() < 0.2:
        wrong = [f for f in ([1 + tf * k for k in (1, 2, 3)] + [2, 3, 4, 5]) if (f - 1) % 4 or (tf == 8 and f > 1)]
        if wrong:
            return rng.choice(wrong), True
    return (1 if tf == 8 else 1 + 4 * rng.choice([0, 1, 2, 3])), False


def run_config(tally, args, folder, index, rng):
    cfg, sf, tf, narrow = random_config(rng)
    config = Config(args, folder, cfg, rng.randrange(1 << 30))
    suffix = " (narrow)" if narrow else ""
    short = {k: v for k, v in cfg.items() if k not in ("latents_mean", "latents_std", "_class_name", "_diffusers_version")}
    if config.error:  # Diffusers refuses the configuration itself: one decode is enough for stepmix's answer
        ref, sm, _ = config.decode(torch.zeros(1, 48, 1, 1, 1))
        return judge(tally, "config", "decode pixels", {"config": index, "cfg": short}, ref, sm, 0.0, config, None)
    for T in rng.sample([1, 2, 3, 5, 8], 3):
        budget = 60 if sf <= 16 else 16
        for _ in range(100):
            h, w = rng.randint(1, 7), rng.randint(1, 7)
            if T * h * w <= budget and h * w * (sf // 16 + 1) ** 2 <= 40:
                break
        latent = torch.randn((1, 48, T, h, w), generator=torch.Generator().manual_seed(rng.randrange(1 << 30)))
        frames_dir = os.path.join(folder, "frames") if T <= 2 or rng.random() < 0.3 else None
        ref, sm, frames = config.decode(latent, frames_dir)
        record = {"config": index, "cfg": short, "latent": [1, 48, T, h, w]}
        extra = None
        if frames is not None and not isinstance(sm, str):
            own = int((frames != pil_frames(sm)).sum())  # stepmix's PNG frames are its pixels, postprocessed
            extra = {"png_values_unlike_own_pixels": own}
            if own:
                tally.add("decode" + suffix, "mismatch", record, dict(extra, why="PNG frames are not the pixels postprocessed"))
                continue
            if not isinstance(ref, str):
                tally.worst("decode PNG values from Diffusers' pixels (levels)", int(np.abs(frames.astype(int) - pil_frames(ref)).max()), record)
        judge(tally, "decode" + suffix, "decode pixels", record, ref, sm, NARROW_BOUND if narrow else BOUND["decode"],
              config, lambda vae, z=latent / config.inv_std + config.mean: vae.decode(z.double()).sample, extra)
    for _ in range(2 + (rng.random() < 0.5)):
        F, wrong = frame_counts(rng, tf)
        for _ in range(100):
            H, W = sf * rng.randint(1, 4), sf * rng.randint(1, 4)
            if H * W * F <= 64 * 64 * 9 and H * W <= 96 * 96:
                break
        png = None
        seed = rng.randrange(1 << 30)
        if F == 1 and rng.random() < 0.5:  # a PNG picture, read as the pipeline reads one
            from PIL import Image
            u8 = torch.randint(0, 256, (H, W, 3), generator=torch.Generator().manual_seed(seed)).numpy().astype(np.uint8)
            png = os.path.join(folder, "picture.png")
            Image.fromarray(u8).save(png)
            pixels = torch.from_numpy(2.0 * (u8.astype(np.float32) / 255.0) - 1.0).permute(2, 0, 1)[None, :, None].contiguous()
        else:
            pixels = torch.rand((1, 3, F, H, W), generator=torch.Generator().manual_seed(seed)) * 2 - 1
        row = ("encode PNG" if png else "encode") + suffix
        record = {"config": index, "cfg": short, "pixels": [1, 3, F, H, W]}
        ref, sm = config.encode(pixels, png)
        if wrong and isinstance(sm, str) and "frames" in sm and drops_frames(config, pixels, ref):
            tally.add(row, "refused-as-designed", record, {"stepmix": sm, "by_design":
                      "frame counts other than 1 + 4k: Diffusers drops the frames past its last chunk of 4"})
            continue
        if wrong and not isinstance(sm, str):
            tally.add(row, "mismatch", record, {"why": f"{F} frames at temporal factor {tf} were encoded"})
            continue
        judge(tally, row, "encode", record, ref, sm, NARROW_BOUND if narrow else BOUND["encode"], config,
              lambda vae, x=pixels: vae.encode(x.double()).latent_dist.mode())
    shutil.rmtree(folder, ignore_errors=True)


def probes(golden):
    """(label, config changes, operation and input, what stepmix's refusal must say or None)."""
    tf2 = {"temperal_downsample": [True, False, False], "scale_factor_temporal": 2}
    return [
        ("golden tiny decode", {}, ("decode", (1, 48, 2, 2, 3)), None),
        ("golden tiny encode 5 frames", {}, ("encode", (1, 3, 5, 32, 48)), None),
        ("dropout 1.0", {"dropout": 1.0}, ("decode", (1, 48, 2, 2, 3)), None),
        ("temporal factor 1, 5 frames", {"temperal_downsample": [False] * 3, "scale_factor_temporal": 1}, ("encode", (1, 3, 5, 32, 48)), None),
        ("temporal factor 2, 9 frames", tf2, ("encode", (1, 3, 9, 32, 48)), None),
        ("dropout 1.5", {"dropout": 1.5}, ("decode", (1, 48, 2, 2, 3)), None),
        ("z_dim 16", {"z_dim": 16, "latents_mean": golden["latents_mean"][:16], "latents_std": golden["latents_std"][:16]},
         ("decode", (1, 16, 2, 2, 3)), "z_dim: expected 48"),
        ("patch_size 1", {"patch_size": 1, "in_channels": 3, "out_channels": 3, "scale_factor_spatial": 8},
         ("decode", (1, 48, 2, 2, 3)), "patch_size: expected 2"),
        ("is_residual false", {"is_residual": False}, ("decode", (1, 48, 2, 2, 3)), "the Wan2.1 variant is not implemented"),
        ("encode 3 frames", {}, ("encode", (1, 3, 3, 32, 48)), "expected 1 + 4k frames"),
        ("encode pixel 1.0000001", {}, ("encode over", (1, 3, 1, 32, 48)), "expected values in [-1, 1]"),
    ]


def load(args):
    if importlib.util.find_spec("PIL") is None:  # decoded PNG frames and PNG pictures to encode
        from check_report import setup_error
        setup_error("no Pillow; scripts/setup.sh --bench installs python3-pil")
    dr.vae_module()


def run(tally, args, work):
    torch.set_num_threads(1)
    folder = os.path.join(work, "vae")
    golden = json.load(open(os.path.join(ROOT, "tests", "data", "golden", "wan22-vae-tiny", "vae", "config.json")))
    for label, changes, (operation, shape), expect in probes(golden):
        cfg = copy.deepcopy(golden)
        cfg.update(base_dim=4, decoder_base_dim=4, **changes)
        config = Config(args, folder, cfg, 1234)
        g = torch.Generator().manual_seed(7)
        record = {"label": label}
        if operation == "decode":
            latent = torch.randn(shape, generator=g)
            ref, sm, _ = config.decode(latent)
            kind, redo = "decode pixels", lambda vae, z=latent / config.inv_std + config.mean: vae.decode(z.double()).sample
        else:
            pixels = torch.rand(shape, generator=g) * 2 - 1
            if operation == "encode over":  # one value a rounding past 1
                pixels[0, 0, 0, 0, 0] = float(np.nextafter(np.float32(1), np.float32(2)))
            ref, sm = config.encode(pixels)
            kind, redo = "encode", lambda vae, x=pixels: vae.encode(x.double()).latent_dist.mode()
        premise = drops_frames(config, pixels, ref) if "frames" in (expect or "") else not isinstance(ref, str)
        if expect and isinstance(sm, str) and expect in sm and premise:
            tally.add("probes", "refused-as-designed", record, {"stepmix": sm, "by_design": f"{label}: {expect}"})
        elif expect and not isinstance(sm, str):
            tally.add("probes", "mismatch", record, {"why": "expected a refusal: " + expect})
        else:
            judge(tally, "probes", kind, record, ref, sm, BOUND[kind.split()[0]], config, redo)
    for i in range(args.cases):
        run_config(tally, args, folder, i, random.Random(f"{args.seed}:vae:{i}"))
    shutil.rmtree(folder, ignore_errors=True)
