#!/usr/bin/env python3
"""PyTorch eager peer of bench_cuda_forward (bench/cuda_forward_bench.cpp) on the
same GPU: the Cosmos3 transformer forward (generation stream over cached
understanding K/V) at Nano's shape with fewer layers, written the way an eager
Diffusers-style module runs it. Seeded random weights made on the GPU (the
same shapes and scales as stepmix's synthetic checkpoint, not the same values:
this is a timing peer).

  python3 bench/cuda_peer_forward.py [--layers 1,4] [--tokens 44160,1024] [--text 300] [--reps 3] [--tiny]

--tiny: bench_cuda_forward --tiny's model (hidden 512, FFN 1536, 4 / 2 heads of
128), the size tests/cuda/peers_on_cpu.py runs this script at, on the CPU.

Per layer and stream: RMSNorm with float32 statistics (HF style), q/k/v
Linears, per-head q/k RMSNorm, rotary (bf16 cos/sin), keys/values
concatenated after the cached understanding ones, F.scaled_dot_product_attention
with enable_gqa (PyTorch picks the kernel), the out projection, residual,
RMSNorm, gated SiLU MLP, residual; the residual stream is bf16. proj_in,
the float32 timestep embedder, the final norm and proj_out around the layers.
Linears by mode:
  dense  bf16 weights, F.linear;
  w8a16  E4M3 weights with a per-tensor scale, decoded to bf16 on every call
         (no cached copy, as stepmix's default), then F.linear;
  w8a8   every input quantized on every call in eager PyTorch (x / s_x, clamp
         ±448, cast to float8_e4m3fn; each Linear for itself, no sharing
         between siblings), torch._scaled_mm with per-tensor scales, bf16 out.
Timing: CUDA events around whole forwards on GPU-resident inputs (the peer
never copies the latent to or from the host; stepmix's timings include
those copies), median of `reps` after one warm-up; the understanding prefill
timed on its own. Then one more forward, profiled ("forward_profile", as
bench_cuda_forward's): each operation timed from an idle GPU to its
completion (torch.cuda.synchronize on both sides), ms and calls per kind
(the Linears of the mode with their quantize or decode, attention, norms,
q/k norm with rotary, SiLU-gate, residual adds, copies...). One JSON object
per line.
"""
import argparse
import json
import math
import sys
import time

from cuda_peer import ieee_float32_matmul, sdpa_choice  # bench/, the script's own folder

E, I, HQ, HKV, D, C, P = 4096, 12288, 32, 8, 128, 48, 2
FP8_MAX = 448.0


def emit(record):
    print(json.dumps(record), flush=True)


# kind -> [ms, calls] while a profiled forward runs; None for the timed ones.
PROFILE = None


def op(torch, kind, fn, *args):
    """fn(*args), timed into PROFILE under `kind` when a profile is on."""
    if PROFILE is None:
        return fn(*args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn(*args)
    torch.cuda.synchronize()
    entry = PROFILE.setdefault(kind, [0.0, 0])
    entry[0] += 1000.0 * (time.perf_counter() - start)
    entry[1] += 1
    return result


def latent_of(tokens):
    if tokens == 44160:
        return 48, 45, 80
    if tokens == 1024:
        return 1, 64, 64
    side = int(round(math.sqrt(tokens)))
    if side * side != tokens:
        raise SystemExit("--tokens: 44160, 1024 or a square, got %d" % tokens)
    return 1, 2 * side, 2 * side


class Linear:
    def __init__(self, torch, g, out_features, in_features, mode, bias=False):
        self.torch, self.mode = torch, mode
        w = torch.randn(out_features, in_features, generator=g, device="cuda") / math.sqrt(in_features)
        self.bias = (0.02 * torch.randn(out_features, generator=g, device="cuda")).to(torch.bfloat16) if bias else None
        if mode == "dense":
            self.w = w.to(torch.bfloat16)
            return
        s_w = w.abs().max() / FP8_MAX
        self.w8 = (w / s_w).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        self.s_w = s_w.float().reshape(())
        self.s_x = torch.tensor(8.0 / FP8_MAX, device="cuda")  # the synthetic checkpoint's static input_scale

    def __call__(self, x):
        return op(self.torch, "linear " + self.mode, self.apply, x)

    def apply(self, x):
        torch, F = self.torch, self.torch.nn.functional
        if self.mode == "dense":
            return F.linear(x, self.w, self.bias)
        if self.mode == "w8a16":
            return F.linear(x, (self.w8.to(torch.bfloat16) * self.s_w).to(torch.bfloat16), self.bias)
        x8 = (x.float() / self.s_x).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        return torch._scaled_mm(x8, self.w8.t(), scale_a=self.s_x, scale_b=self.s_w, bias=self.bias,
                                out_dtype=torch.bfloat16)


def rms_norm(torch, x, weight, eps=1e-6):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(torch.bfloat16)


def rotate_half(torch, x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Stream:
    """One tower's half of a decoder layer."""

    def __init__(self, torch, g, mode):
        lin = lambda o, i: Linear(torch, g, o, i, mode)
        self.q, self.k, self.v, self.o = lin(HQ * D, E), lin(HKV * D, E), lin(HKV * D, E), lin(E, HQ * D)
        self.gate, self.up, self.down = lin(I, E), lin(I, E), lin(E, I)
        norm = lambda n: (1.0 + 0.05 * torch.randn(n, generator=g, device="cuda")).to(torch.bfloat16)
        self.norm_in, self.norm_post, self.norm_q, self.norm_k = norm(E), norm(E), norm(D), norm(D)


class Peer:
    def __init__(self, torch, layers, mode, seed=20260901):
        self.torch = torch
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        self.layers = [(Stream(torch, g, mode), Stream(torch, g, mode)) for _ in range(layers)]  # (und, gen)
        self.proj_in = Linear(torch, g, E, P * P * C, "dense", bias=True)
        self.proj_out = Linear(torch, g, P * P * C, E, "dense", bias=True)
        self.time_1 = (torch.randn(E, 256, generator=g, device="cuda") / 16, torch.zeros(E, device="cuda"))
        self.time_2 = (torch.randn(E, E, generator=g, device="cuda") / 64, torch.zeros(E, device="cuda"))
        self.norm_out = torch.ones(E, device="cuda", dtype=torch.bfloat16)
        self.embed = torch.randn(1024, E, generator=g, device="cuda").to(torch.bfloat16)
        self.inv_freq = 1.0 / (5e6 ** (torch.arange(0, D // 2, device="cuda", dtype=torch.float32) * 2 / D))
        self.sdpa_backend = None  # SDPA's choice for the generation stream's attention (sdpa_choice)

    def rope(self, positions):  # [S] float32 -> cos, sin [S, 1, D] bf16 (one axis is enough for the cost)
        angles = positions[:, None] * self.inv_freq[None, :]
        emb = self.torch.cat((angles, angles), dim=-1)
        return emb.cos().to(self.torch.bfloat16)[:, None, :], emb.sin().to(self.torch.bfloat16)[:, None, :]

    def attend(self, s, h, cos, sin, cached_kv, causal):
        torch, F = self.torch, self.torch.nn.functional
        n = h.shape[0]

        def norm_rotary(x, weight):
            x = rms_norm(torch, x, weight)
            return x * cos + rotate_half(torch, x) * sin
        q = op(torch, "head_norm_rotary", norm_rotary, s.q(h).view(n, HQ, D), s.norm_q)
        k = op(torch, "head_norm_rotary", norm_rotary, s.k(h).view(n, HKV, D), s.norm_k)
        v = s.v(h).view(n, HKV, D)
        if cached_kv is not None:
            k = op(torch, "copies", torch.cat, (cached_kv[0], k), 0)
            v = op(torch, "copies", torch.cat, (cached_kv[1], v), 0)

        def attention(q, k, v):
            if not causal and self.sdpa_backend is None:  # once per token count, in the warm-up (untimed)
                self.sdpa_backend = sdpa_choice(torch, q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                                v.transpose(0, 1)[None])
            o = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                               v.transpose(0, 1)[None], is_causal=causal, enable_gqa=True)
            return o[0].transpose(0, 1).reshape(n, HQ * D)
        return op(torch, "attention", attention, q, k, v), (k, v)

    def block(self, s, x, cos, sin, cached_kv, causal):
        torch, F = self.torch, self.torch.nn.functional
        o, kv = self.attend(s, op(torch, "rms_norm", rms_norm, torch, x, s.norm_in), cos, sin, cached_kv, causal)
        x = op(torch, "residual_add", torch.add, x, s.o(o))
        h = op(torch, "rms_norm", rms_norm, torch, x, s.norm_post)
        gated = op(torch, "silu_gate", lambda g, u: F.silu(g) * u, s.gate(h), s.up(h))
        return op(torch, "residual_add", torch.add, x, s.down(gated)), kv

    def prefill(self, ids):  # the understanding stream: its K/V per layer
        torch = self.torch
        x = self.embed[ids]
        cos, sin = self.rope(torch.arange(ids.shape[0], device="cuda", dtype=torch.float32))
        kvs = []
        for und, _ in self.layers:
            x, kv = self.block(und, x, cos, sin, None, True)
            kvs.append(kv)
        return kvs

    def forward(self, latent, kvs, L):
        torch, F = self.torch, self.torch.nn.functional
        _, _, T, H, W = latent.shape
        Hp, Wp = (H + (-H) % P) // P, (W + (-W) % P) // P

        def patchify(latent):
            lat = F.pad(latent.to(torch.bfloat16), (0, (-W) % P, 0, (-H) % P))
            return lat[0].reshape(C, T, Hp, P, Wp, P).permute(1, 2, 4, 3, 5, 0).reshape(T * Hp * Wp, P * P * C)
        x = self.proj_in(op(torch, "copies", patchify, latent))

        def timestep():
            freqs = torch.exp(-math.log(10000.0) * torch.arange(128, device="cuda", dtype=torch.float32) / 128)
            angles = torch.tensor([0.5], device="cuda")[:, None] * freqs[None, :]
            sinusoid = torch.cat((angles.cos(), angles.sin()), -1)
            return F.linear(F.silu(F.linear(sinusoid, *self.time_1)), *self.time_2).to(torch.bfloat16)
        x = op(torch, "residual_add", torch.add, x, op(torch, "timestep_mlp", timestep))
        positions = L + 15000 + torch.arange(x.shape[0], device="cuda", dtype=torch.float32) / (Hp * Wp)
        cos, sin = op(torch, "rotary_tables", self.rope, positions)
        for (_, gen), kv in zip(self.layers, kvs):
            x, _ = self.block(gen, x, cos, sin, kv, False)
        out = self.proj_out(op(torch, "rms_norm", rms_norm, torch, x, self.norm_out))
        return op(torch, "copies", lambda out: out.float().reshape(T, Hp, Wp, P, P, C).permute(5, 0, 1, 3, 2, 4)
                  .reshape(1, C, T, Hp * P, Wp * P), out)


def time_ms(torch, fn, reps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return sorted(samples)[len(samples) // 2], samples


def profiled_forward(torch, forward, mode, layers, tokens):
    """One forward with PROFILE on: its "forward_profile" record."""
    global PROFILE
    PROFILE = {}
    try:
        forward()
        profile = {kind: {"ms": ms, "calls": calls} for kind, (ms, calls) in sorted(PROFILE.items())}
    finally:
        PROFILE = None
    return {"impl": "torch", "bench": "forward_profile", "mode": mode, "layers": layers, "tokens": tokens,
            "ms": sum(entry["ms"] for entry in profile.values()), "profile": profile}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", default="1,4")
    parser.add_argument("--tokens", default="44160,1024")
    parser.add_argument("--text", type=int, default=300)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--modes", default="dense,w8a16,w8a8")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    if args.tiny:  # the model's width, read by every class above
        global E, I, HQ, HKV
        E, I, HQ, HKV = 512, 1536, 4, 2
    try:
        import torch
    except ImportError as error:
        emit({"impl": "torch", "bench": "forward_info", "usable": False, "reason": "no torch: %s" % error})
        return 3
    if not torch.cuda.is_available():
        emit({"impl": "torch", "bench": "forward_info", "usable": False, "reason": "torch sees no CUDA device"})
        return 3
    ieee_float32_matmul(torch)
    emit({"impl": "torch", "bench": "forward_info", "usable": True, "torch": torch.__version__,
          "name": torch.cuda.get_device_properties(0).name})
    g = torch.Generator(device="cuda")
    g.manual_seed(7)
    with torch.inference_mode():
        for layers in [int(n) for n in args.layers.split(",")]:
            for mode in args.modes.split(","):
                peer = Peer(torch, layers, mode)
                ids = [torch.randint(0, 1024, (args.text,), generator=g, device="cuda") for _ in range(2)]
                for tokens in [int(n) for n in args.tokens.split(",")]:
                    T, H, W = latent_of(tokens)
                    latent = torch.rand((1, C, T, H, W), generator=g, device="cuda") * 2 - 1
                    torch.cuda.reset_peak_memory_stats()
                    try:
                        kvs = [peer.prefill(i) for i in ids]
                        prefill_ms, _ = time_ms(torch, lambda: peer.prefill(ids[0]), 3)
                        peer.sdpa_backend = None  # set again by the warm-up's first generation attention
                        peer.forward(latent, kvs[0], args.text)  # warm-up
                        turn = [0]

                        def one():
                            peer.forward(latent, kvs[turn[0] % 2], args.text)
                            turn[0] += 1
                        ms, samples = time_ms(torch, one, args.reps)
                        emit({"impl": "torch", "bench": "forward", "mode": mode, "layers": layers, "tokens": tokens,
                              "text": args.text, "ms": ms, "samples": samples, "prefill_ms": prefill_ms,
                              "peak_device_bytes": torch.cuda.max_memory_allocated(),
                              "sdpa_backend": peer.sdpa_backend})
                        emit(profiled_forward(torch, one, mode, layers, tokens))
                    except Exception as error:  # e.g. out of memory: reported, the rest still runs
                        emit({"impl": "torch", "bench": "forward", "mode": mode, "layers": layers, "tokens": tokens,
                              "error": str(error)[:300]})
                    kvs = None
                    torch.cuda.empty_cache()
                del peer
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
