#!/usr/bin/env python3
"""PyTorch peer of bench_cuda (bench/cuda_bench.cpp) on the same GPU, same shapes,
same kind of data (seeded uniform values, never zeros), same timing (CUDA events
around batches of >= 2 ms, median of the batches). One JSON object per line.

  python3 bench/cuda_peer.py [--ceilings] [--linear] [--attention] [--quick | --tiny] [--reps N]

--quick and --tiny take bench_cuda's sizes of the same names (--tiny: the
sizes tests/cuda/peers_on_cpu.py runs this script at, on the CPU).

Linear: bf16 F.linear; torch._scaled_mm on E4M3 operands with per-tensor scales
(use_fast_accum=False, as stepmix); the same after quantizing x in eager PyTorch
(x / s, clamp ±448, cast: what a Python stack runs per layer without fusion); and
a W8A16 eager peer (decode W to bf16, then F.linear).
Attention: F.scaled_dot_product_attention at 44,160 query rows over 300 + 44,160
keys, 32 query / 8 KV heads, head_dim 128: the default choice with enable_gqa,
then each backend forced (flash, cuDNN, efficient), with K/V repeated to 32 heads
where a backend refuses GQA (the repeat is outside the timing).
"""
import argparse
import json
import math
import sys


def emit(record):
    print(json.dumps(record), flush=True)


def time_calls(torch, fn, reps):
    fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    once = max(start.elapsed_time(end), 1e-3)
    calls = min(1000, max(1, math.ceil(2.0 / once)))
    per_call = []
    for _ in range(reps):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls)
    per_call.sort()
    return {"ms": per_call[len(per_call) // 2], "min_ms": per_call[0], "calls_per_batch": calls}


def with_tflops(timing, flop):
    timing["tflops"] = flop / (timing["ms"] * 1e-3) / 1e12
    return timing


def measure(torch, record, fn, reps, flop):
    """Times fn and emits record with its timing, or with the error: one failing
    case (a kernel this build lacks, memory) must not cost the cases after it."""
    try:
        emit({**record, **with_tflops(time_calls(torch, fn, reps), flop)})
    except Exception as error:
        emit({**record, "error": str(error)[:300]})
        torch.cuda.empty_cache()


def ieee_float32_matmul(torch):
    """No TF32 in float32 matmuls (fp32_precision from PyTorch 2.9, where
    allow_tf32 is deprecated)."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "ieee"
    else:
        matmul.allow_tf32 = False


def sdpa_choice(torch, q, k, v):
    """The backend SDPA's default picks for non-causal GQA q, k, v [B, H, S, D]
    (cuDNN's or FlashAttention's kernels on sm_90, by version), or why it is
    not known."""
    try:
        from torch.nn.attention import SDPBackend
        return SDPBackend(int(torch._fused_sdp_choice(q, k, v, enable_gqa=True))).name
    except Exception as error:
        return "unknown (%s)" % str(error)[:80]


def uniform(torch, shape, low, high, dtype, seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return (torch.rand(shape, generator=g, device="cuda", dtype=torch.float32) * (high - low) + low).to(dtype)


def quantize(torch, x, scale):
    return (x.float() / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


def sizes(args):
    """bench_cuda's sizes (Sizes, bench/cuda_bench.cpp): ceiling n, copy bytes, M list,
    (K, N) list, attention (understanding rows, vision rows, q heads, kv heads, head_dim)."""
    if args.tiny:
        return 128, 1 << 20, [16, 48], [(128, 128), (128, 384)], (20, 70, 4, 2, 128)
    if args.quick:
        return 2048, 256 << 20, [256, 1024], [(1024, 1024), (1024, 3072)], (300, 4096, 32, 8, 128)
    return (8192, 2 << 30, [1024, 4096, 44160], [(4096, 4096), (4096, 1024), (4096, 12288), (12288, 4096)],
            (300, 44160, 32, 8, 128))


def ceilings(torch, args):
    n = sizes(args)[0]
    a = uniform(torch, (n, n), -1, 1, torch.bfloat16, 1)
    b = uniform(torch, (n, n), -1, 1, torch.bfloat16, 2)
    flop = 2.0 * n ** 3
    record = {"impl": "torch", "bench": "ceiling", "n": n}
    measure(torch, {**record, "what": "bf16_gemm"}, lambda: torch.matmul(a, b), args.reps, flop)
    one = torch.ones((), device="cuda", dtype=torch.float32)
    a8, b8 = quantize(torch, a, 1 / 448), quantize(torch, b, 1 / 448)
    measure(torch, {**record, "what": "fp8_gemm"},
            lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), args.reps, flop)
    size = sizes(args)[1]
    record = {"impl": "torch", "bench": "ceiling", "what": "device_copy", "bytes": size}
    try:
        src = torch.empty(size, dtype=torch.uint8, device="cuda").fill_(1)
        dst = torch.empty_like(src)
        t = time_calls(torch, lambda: dst.copy_(src), args.reps)
        emit({**record, "ms": t["ms"], "tb_per_s": 2.0 * size / (t["ms"] * 1e-3) / 1e12})
    except Exception as error:
        emit({**record, "error": str(error)[:300]})


def linear(torch, args):
    F = torch.nn.functional
    _, _, ms, kns, _ = sizes(args)
    s_x = torch.tensor(4.0 / 448.0, device="cuda")
    s_w = torch.tensor(0.05 / 448.0, device="cuda")
    for k, n in kns:
        w = uniform(torch, (n, k), -0.05, 0.05, torch.bfloat16, 11)
        w8 = quantize(torch, w, s_w)
        for m in ms:
            x = uniform(torch, (m, k), -4.0, 4.0, torch.bfloat16, 12 + m)
            x8 = quantize(torch, x, s_x)
            flop = 2.0 * m * n * k
            shape = {"M": m, "K": k, "N": n}
            cases = {
                "F.linear bf16": lambda: F.linear(x, w),
                "_scaled_mm": lambda: torch._scaled_mm(x8, w8.t(), scale_a=s_x, scale_b=s_w,
                                                       out_dtype=torch.bfloat16),
                "_scaled_mm+quantize": lambda: torch._scaled_mm(quantize(torch, x, s_x), w8.t(), scale_a=s_x,
                                                                scale_b=s_w, out_dtype=torch.bfloat16),
                "decode+F.linear": lambda: F.linear(x, (w8.to(torch.bfloat16) * s_w).to(torch.bfloat16)),
            }
            for mode, fn in cases.items():
                measure(torch, {"impl": "torch", "bench": "linear", "mode": mode, **shape}, fn, args.reps, flop)
            del x, x8
        del w, w8
        torch.cuda.empty_cache()


def attention(torch, args):
    F = torch.nn.functional
    und, vision, hq, hkv, d = sizes(args)[4]
    # stepmix's layout [S, H, D]; SDPA takes [B, H, S, D] (a strided view, no copy).
    q = uniform(torch, (1, vision, hq, d), -1, 1, torch.bfloat16, 21).transpose(1, 2)
    k = uniform(torch, (1, und + vision, hkv, d), -1, 1, torch.bfloat16, 22).transpose(1, 2)
    v = uniform(torch, (1, und + vision, hkv, d), -1, 1, torch.bfloat16, 23).transpose(1, 2)
    flop = 4.0 * vision * (und + vision) * hq * d
    shape = {"q_rows": vision, "kv_rows": und + vision, "q_heads": hq, "kv_heads": hkv, "head_dim": d,
             "causal": False}
    reps = max(3, args.reps // 3)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    record = {"impl": "torch", "bench": "attention", "variant": "SDPA default", **shape}
    record["backend"] = sdpa_choice(torch, q, k, v)
    # A failure (e.g. a fallback to the math backend that does not fit) is recorded.
    measure(torch, record, lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), reps, flop)
    k_full, v_full = None, None
    for name, backend in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        record = {"impl": "torch", "bench": "attention", "variant": "SDPA " + name, **shape}
        try:
            with sdpa_kernel(backend):
                try:
                    t = time_calls(torch, lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), reps)
                    record["gqa"] = "native"
                except RuntimeError:
                    if k_full is None:
                        k_full = k.repeat_interleave(hq // hkv, dim=1)
                        v_full = v.repeat_interleave(hq // hkv, dim=1)
                    t = time_calls(torch, lambda: F.scaled_dot_product_attention(q, k_full, v_full), reps)
                    record["gqa"] = "K/V repeated outside the timing"
            emit({**record, **with_tflops(t, flop)})
        except Exception as error:
            emit({**record, "error": str(error)[:300]})
    qp = uniform(torch, (1, und, hq, d), -1, 1, torch.bfloat16, 24).transpose(1, 2)
    kp = k[:, :, :und]
    vp = v[:, :, :und]
    measure(torch, {"impl": "torch", "bench": "attention", "variant": "SDPA default", "q_rows": und, "kv_rows": und,
                    "q_heads": hq, "kv_heads": hkv, "head_dim": d, "causal": True},
            lambda: F.scaled_dot_product_attention(qp, kp, vp, is_causal=True, enable_gqa=True), args.reps,
            2.0 * und * (und + 1) * hq * d)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in ("ceilings", "linear", "attention", "quick", "tiny"):
        parser.add_argument("--" + flag, action="store_true")
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    try:
        import torch
    except ImportError as error:
        emit({"impl": "torch", "bench": "info", "usable": False, "reason": "no torch: %s" % error})
        return 3
    if not torch.cuda.is_available():
        emit({"impl": "torch", "bench": "info", "usable": False, "reason": "torch sees no CUDA device",
              "torch": torch.__version__})
        return 3
    props = torch.cuda.get_device_properties(0)
    emit({"impl": "torch", "bench": "info", "usable": True, "torch": torch.__version__, "cuda": torch.version.cuda,
          "cudnn": torch.backends.cudnn.version(), "name": props.name,
          "multiprocessors": props.multi_processor_count})
    ieee_float32_matmul(torch)
    if args.ceilings:
        ceilings(torch, args)
    if args.linear:
        linear(torch, args)
    if args.attention:
        attention(torch, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
