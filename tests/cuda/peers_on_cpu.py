#!/usr/bin/env python3
"""The device check's PyTorch peers (bench/cuda_peer.py, bench/cuda_peer_forward.py)
at --tiny sizes on the CPU, so that their tensor code (shapes, dtypes, layouts,
call signatures) has run before a GPU run depends on their figures.

Debian's PyTorch (1.13, CPU only) stands in for the GPU machine's CUDA build of
PyTorch 2.x: factory calls on "cuda" are made on the CPU, CUDA events are
wall-clock timers, and what 1.13 lacks is written here from PyTorch's
documented rules, each rule checked at every call:
- torch._scaled_mm: mat1 row-major, mat2 column-major, K and N multiples of
  16, 0-dim float32 scales, a bf16 bias of N values, bf16 out_dtype;
- F.scaled_dot_product_attention: 4-D [B, H, S, D] bf16 operands, K/V heads
  equal to the query heads, or dividing them with enable_gqa;
- torch.float8_e4m3fn: bf16 stands in (the peers clamp to ±448 before the cast).
Every case must print its record without an error, and the calls above must
have been made; the forward peer's profiles must hold what each forward runs,
and the summary must tabulate them. Timings mean nothing. Exit 77 (skipped)
without PyTorch.

  python3 tests/cuda/peers_on_cpu.py BENCH_DIR
"""
import contextlib
import enum
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import types

try:
    import torch as real
except ImportError as error:
    print("skipped: no PyTorch (%s)" % error)
    sys.exit(77)

calls = {"_scaled_mm": 0, "scaled_dot_product_attention": 0}


def on_cpu(factory):
    def made_on_cpu(*args, **kwargs):
        kwargs.pop("device", None)
        return factory(*args, **kwargs)
    return made_on_cpu


def scaled_mm(a, b, scale_a=None, scale_b=None, bias=None, out_dtype=None, use_fast_accum=False):
    assert a.dim() == 2 and b.dim() == 2, (a.shape, b.shape)
    assert a.is_contiguous(), "mat1 must be row-major"
    assert b.stride(0) == 1, "mat2 must be column-major (a row-major tensor's .t())"
    assert a.shape[1] == b.shape[0] and a.shape[1] % 16 == 0 and b.shape[1] % 16 == 0, (a.shape, b.shape)
    assert a.dtype == b.dtype == real.bfloat16, "E4M3 operands (bf16 stands in)"
    for scale in (scale_a, scale_b):
        assert isinstance(scale, real.Tensor) and scale.dim() == 0 and scale.dtype == real.float32, scale
    assert out_dtype == real.bfloat16, out_dtype
    assert bias is None or (bias.dtype == real.bfloat16 and bias.shape == (b.shape[1],)), bias
    calls["_scaled_mm"] += 1
    y = (a.float() @ b.float()) * scale_a * scale_b
    return (y if bias is None else y + bias.float()).to(out_dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, enable_gqa=False):
    assert q.dim() == k.dim() == v.dim() == 4 and k.shape == v.shape, (q.shape, k.shape, v.shape)
    batch, heads, rows, dim = q.shape
    assert k.shape[0] == batch and k.shape[3] == dim, (q.shape, k.shape)
    assert k.shape[1] == heads or (enable_gqa and heads % k.shape[1] == 0), (q.shape, k.shape, enable_gqa)
    assert q.dtype == k.dtype == v.dtype == real.bfloat16
    assert not is_causal or rows == k.shape[2]
    calls["scaled_dot_product_attention"] += 1
    k = k.repeat_interleave(heads // k.shape[1], dim=1).float()
    v = v.repeat_interleave(heads // v.shape[1], dim=1).float()
    s = (q.float() @ k.transpose(-1, -2)) / math.sqrt(dim)
    if is_causal:
        s = s.masked_fill(real.ones(rows, rows, dtype=real.bool).triu(1), float("-inf"))
    return (s.softmax(-1) @ v).to(q.dtype)


def fused_sdp_choice(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                     enable_gqa=False):
    """SDPA's backend choice: the operands' rules as above; cuDNN's, what
    PyTorch 2.11 with cuDNN 9.19 picks on sm_90 (SDPBackend.CUDNN_ATTENTION)."""
    assert query.dim() == key.dim() == value.dim() == 4 and key.shape == value.shape, (query.shape, key.shape)
    assert key.shape[1] == query.shape[1] or (enable_gqa and query.shape[1] % key.shape[1] == 0), enable_gqa
    return 3


class Event:
    def __init__(self, enable_timing=False):
        self.at = None

    def record(self):
        self.at = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.at - self.at) * 1000.0


def cuda_torch():
    """A module that is PyTorch 1.13 wherever the peers need nothing else."""
    torch = types.ModuleType("torch")
    for name in ("randn", "rand", "randint", "zeros", "ones", "empty", "tensor", "arange", "Generator"):
        setattr(torch, name, on_cpu(getattr(real, name)))
    torch.float8_e4m3fn = real.bfloat16
    torch._scaled_mm = scaled_mm
    torch._fused_sdp_choice = fused_sdp_choice
    functional = types.SimpleNamespace(**{n: getattr(real.nn.functional, n) for n in dir(real.nn.functional)})
    functional.scaled_dot_product_attention = scaled_dot_product_attention
    torch.nn = types.SimpleNamespace(functional=functional)
    torch.cuda = types.SimpleNamespace(
        is_available=lambda: True, Event=Event, synchronize=lambda: None, empty_cache=lambda: None,
        reset_peak_memory_stats=lambda: None, max_memory_allocated=lambda: 0,
        get_device_properties=lambda index: types.SimpleNamespace(name="CPU (PyTorch 1.13)",
                                                                  multi_processor_count=1))
    torch.backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True)),
                                           cudnn=types.SimpleNamespace(version=lambda: None))
    torch.version = types.SimpleNamespace(cuda=None)
    torch.__version__ = real.__version__
    torch.__getattr__ = lambda name: getattr(real, name)
    attention = types.ModuleType("torch.nn.attention")
    attention.SDPBackend = enum.IntEnum("SDPBackend", [("ERROR", -1), ("MATH", 0), ("FLASH_ATTENTION", 1),
                                                       ("EFFICIENT_ATTENTION", 2), ("CUDNN_ATTENTION", 3)])
    attention.sdpa_kernel = lambda backend: contextlib.nullcontext()
    return torch, attention


def run(module, argv):
    """module.main() with argv; its JSON records."""
    sys.argv = [module.__name__ + ".py"] + argv
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = module.main()
    assert rc == 0, (module.__name__, rc, out.getvalue())
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def main():
    bench_dir = sys.argv[1]  # run() sets sys.argv for the peers
    sys.path.insert(0, bench_dir)
    torch, attention = cuda_torch()
    sys.modules["torch"], sys.modules["torch.nn.attention"] = torch, attention
    import cuda_peer
    import cuda_peer_forward

    kernels = run(cuda_peer, ["--ceilings", "--linear", "--attention", "--tiny", "--reps", "1"])
    forwards = run(cuda_peer_forward, ["--tiny", "--layers", "1,2", "--tokens", "16", "--text", "8", "--reps", "2"])
    records = kernels + forwards
    errors = [r for r in records if "error" in r]
    assert not errors, errors

    def count(**match):
        return sum(all(r.get(k) == v for k, v in match.items()) for r in records)

    assert count(bench="info", usable=True) == 1 and count(bench="forward_info", usable=True) == 1
    for what in ("bf16_gemm", "fp8_gemm", "device_copy"):
        assert count(bench="ceiling", what=what) == 1, what
    for mode in ("F.linear bf16", "_scaled_mm", "_scaled_mm+quantize", "decode+F.linear"):
        assert count(bench="linear", mode=mode) == 4, mode  # 2 M x 2 (K, N), bench_cuda --tiny's
    for variant in ("SDPA default", "SDPA flash", "SDPA cudnn", "SDPA efficient"):
        assert count(bench="attention", variant=variant, q_rows=70, kv_rows=90, causal=False) == 1, variant
    assert count(bench="attention", variant="SDPA default", q_rows=20, causal=True) == 1
    # Which backend SDPA's default picked, in the kernel peer and in every forward.
    assert count(bench="attention", variant="SDPA default", q_rows=70, backend="CUDNN_ATTENTION") == 1
    for mode in ("dense", "w8a16", "w8a8"):
        for layers in (1, 2):
            assert count(bench="forward", mode=mode, layers=layers, tokens=16,
                         sdpa_backend="CUDNN_ATTENTION") == 1, (mode, layers)
            # Its profiled forward: a generation attention a layer, the seven
            # Linears of a layer at the mode, the kinds adding up to the total.
            profile = [r for r in records if r.get("bench") == "forward_profile" and r.get("mode") == mode
                       and r.get("layers") == layers]
            assert len(profile) == 1, (mode, layers)
            kinds = profile[0]["profile"]
            assert kinds["attention"]["calls"] == layers, kinds
            assert kinds["linear " + mode]["calls"] == 7 * layers + (2 if mode == "dense" else 0), kinds
            assert abs(sum(k["ms"] for k in kinds.values()) - profile[0]["ms"]) < 1e-9, profile
    assert all(r["ms"] > 0 for r in records if r.get("bench") == "forward")
    assert calls["_scaled_mm"] > 0 and calls["scaled_dot_product_attention"] > 0, calls
    # The summary's table of the peer's profiles (no stepmix records here).
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, name) for name in ("stepmix.jsonl", "torch.jsonl", "summary.json")]
        open(paths[0], "w").close()
        with open(paths[1], "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records))
        text = subprocess.run([sys.executable, os.path.join(bench_dir, "cuda_summary.py")] + paths, check=True,
                              capture_output=True, text=True).stdout
        table = text[text.index("where the PyTorch peer's forward's time goes"):]
        assert "\n  16 tokens, 2 layers " in table and "\n  linear w8a8 " in table, text
        assert "\n  the PyTorch peer's generation-stream SDPA: CUDNN_ATTENTION (its default's choice)\n" in text, text
        assert [e["impl"] for e in json.load(open(paths[2]))["forward_profile"]] == ["torch"] * 3, paths[2]
    print("ok: %d peer records at --tiny sizes on PyTorch %s (CPU); calls %s" % (len(records), real.__version__,
                                                                                 calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
