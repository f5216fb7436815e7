"""PyTorch eager peer of `stepmix bench`: the training code's Cosmos3 model (training/cosmos3.py), loaded
from the same Diffusers folder, timed on the same denoising loop.

    /usr/bin/python3 bench/peer_generate.py --model models/fashion-cosmos3-bf16 --cond-ids 5,6,1,2 \
        --uncond-ids 1,2 --latent-shape 1,1,28,28 --guidance 3 --timesteps 999,... --sigmas 0.999,...,0

`stepmix bench` passes its own prompt ids, latent shape, guidance, timesteps and sigmas, so both sides
make the same transformer calls at the same timesteps. The peer runs as a PyTorch user would: the model in
bf16 under CPU autocast, both CFG branches in one batch of two, `--threads` torch threads, no K/V cache
for the prompt. Its solver update is the flow Euler step x += (sigma[k+1] - sigma[k]) * v (UniPC's extra
arithmetic costs microseconds on either side). FP8 checkpoints are dequantized (E4M3 code * weight_scale)
to bf16 at load: the peer has no FP8 arithmetic.

Prints one JSON line: step_ms and end_to_end_s spreads (median, p10, p90, min, max), peak_rss_bytes, dtype,
threads, torch version; or {"error": ...} with exit status 3 when it cannot run (e.g. no torch).
"""
import argparse
import glob
import json
import os
import resource
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message):
    print(json.dumps({"error": message}), flush=True)
    sys.exit(3)


try:
    import numpy as np
    import torch
except ImportError as e:  # the peer is optional: stepmix bench reports this and goes on
    fail(f"no PyTorch for {sys.executable}: {e}")

sys.path.insert(0, os.path.join(ROOT, "training"))
try:
    import safetensors_io as st  # noqa: E402
    from cosmos3 import DEFAULT_CONFIG, Cosmos3Transformer, full_config  # noqa: E402
except ImportError as e:
    fail(f"training/cosmos3.py not importable: {e}")


def e4m3_table():
    """float32 value of every E4M3 (fn) code: bias 7, subnormals, 0x7F/0xFF NaN."""
    out = np.zeros(256, dtype=np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exp, man = (code >> 3) & 0xF, code & 0x7
        if exp == 0xF and man == 0x7:
            out[code] = np.nan
        elif exp == 0:
            out[code] = sign * (man / 8.0) * 2.0 ** -6
        else:
            out[code] = sign * (1.0 + man / 8.0) * 2.0 ** (exp - 7)
    return out


def load_weights(folder):
    """All tensors of a transformer folder as float32; FP8 weights dequantized with their weight_scale."""
    tensors, fp8 = {}, {}
    table = e4m3_table()
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        fail(f"{folder}: no *.safetensors")
    for path in files:
        header, base = st.read_header(path)
        header.pop("__metadata__", None)
        loaded, _ = st.load(path)  # skips F8_E4M3
        tensors.update(loaded)
        with open(path, "rb") as f:
            raw = f.read()
        for name, info in header.items():
            if info["dtype"] == "F8_E4M3":
                a, b = info["data_offsets"]
                codes = np.frombuffer(raw[base + a: base + b], dtype=np.uint8)
                fp8[name] = torch.from_numpy(table[codes].reshape(info["shape"]).copy())
    for name, codes in fp8.items():
        module = name[: -len(".weight")]
        tensors[name] = codes * float(tensors[module + ".weight_scale"])
    out = {}
    for name, t in tensors.items():
        if name.endswith((".weight_scale", ".input_scale")):
            continue
        out[name[len("model."):] if name.startswith("model.") else name] = t
    return out, bool(fp8)


def load_model(model_dir):
    folder = os.path.join(model_dir, "transformer")
    if not os.path.isfile(os.path.join(folder, "config.json")):
        folder = model_dir
    with open(os.path.join(folder, "config.json")) as f:
        cfg = {k: v for k, v in json.load(f).items() if k in DEFAULT_CONFIG}
    model = Cosmos3Transformer(full_config(**cfg))
    weights, was_fp8 = load_weights(folder)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = [k for k in missing if not k.startswith("lm_head")]
    if missing:
        fail(f"{folder}: tensors missing for the training model: {missing[:5]}")
    return model.eval(), was_fp8


def spread(values):
    v = np.asarray(values, dtype=np.float64)
    return {"median": float(np.median(v)), "p10": float(np.percentile(v, 10)), "p90": float(np.percentile(v, 90)),
            "min": float(v.min()), "max": float(v.max()), "samples": int(v.size)}


def blas_libraries():
    """BLAS/oneDNN libraries mapped into this process (Debian's torch uses whichever libblas.so.3 the
    alternatives system points at: the reference BLAS is ~15x slower than OpenBLAS)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return []
    return sorted({os.path.realpath(p) for p in paths if any(k in os.path.basename(p) for k in ("blas", "mkl", "dnnl"))})


def ids_arg(text):
    return [int(x) for x in text.split(",")] if text else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--cond-ids", required=True)
    ap.add_argument("--uncond-ids", default="")
    ap.add_argument("--latent-shape", required=True, help="C,T,H,W")
    ap.add_argument("--guidance", type=float, default=1.0)
    ap.add_argument("--timesteps", required=True, help="comma-separated, one per step")
    ap.add_argument("--sigmas", required=True, help="comma-separated, steps + 1 values")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    model, was_fp8 = load_model(args.model)
    c, t, h, w = ids_arg(args.latent_shape)
    timesteps = [float(x) for x in args.timesteps.split(",")]
    sigmas = [float(x) for x in args.sigmas.split(",")]
    if len(sigmas) != len(timesteps) + 1:
        fail("--sigmas needs one value more than --timesteps")
    cfg = args.guidance != 1.0
    prompts = [ids_arg(args.cond_ids)] + ([ids_arg(args.uncond_ids)] if cfg else [])
    lens = torch.tensor([len(p) for p in prompts])
    ids = torch.zeros(len(prompts), int(lens.max()), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, : len(p)] = torch.tensor(p)
    noise = torch.randn(1, c, t, h, w, generator=torch.Generator().manual_seed(0))
    dtype = args.dtype
    if dtype == "bf16":
        model = model.to(torch.bfloat16)

    def generate(step_ms):
        x = noise.clone()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            for k, ts in enumerate(timesteps):
                start = time.perf_counter()
                xin = torch.cat([x, x]) if cfg else x
                v = model(ids, lens, xin, torch.full((xin.shape[0],), ts)).float()
                if cfg:
                    v = v[1:] + args.guidance * (v[:1] - v[1:])
                x = x + (sigmas[k + 1] - sigmas[k]) * v
                step_ms.append((time.perf_counter() - start) * 1e3)
        return x

    try:
        generate([])
    except RuntimeError as e:  # an op without a bf16 kernel in this torch: fall back to float32
        dtype = f"fp32 (bf16 failed: {str(e).splitlines()[0][:120]})"
        model = model.float()
        generate([])
    for _ in range(max(0, args.warmup - 1)):
        generate([])
    step_ms, e2e = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        generate(step_ms)
        e2e.append(time.perf_counter() - start)
    print(json.dumps({
        "dtype": dtype,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "weights": "fp8 dequantized to bf16" if was_fp8 else "checkpoint weights",
        "cfg_batched": cfg,
        "step_ms": spread(step_ms),
        "end_to_end_s": spread(e2e),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "blas": blas_libraries(),
    }), flush=True)


if __name__ == "__main__":
    main()
