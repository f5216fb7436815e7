"""bench/cuda_summary.py at the full 720p size on synthetic records: the
Nano-shaped forward fitted to 36 layers, the 35-step schedule, the estimate,
the W8A16 Linears' share of the mixed schedule's overhead (from the forward
profiles), what the estimate is made of (the generation attention on the
engine the forwards ran, the rest, the attention throughput the goal needs,
or that the rest alone misses it), and the estimate with cuDNN's attention
in place of the flash kernel (derived from bench_cuda's attention timings),
checked against the same arithmetic done here; no cuDNN line when its case
failed, nor when the forward itself ran cuDNN's attention (the records say
which engine ran).
Usage: summary_estimate_test.py BENCH_DIR"""
import json
import os
import subprocess
import sys
import tempfile

bench_dir = sys.argv[1]
TOKENS, LAYERS = 44160, 36
FLASH_MS, CUDNN_MS, SDPA_MS = 30.0, 20.0, 25.0  # one generation attention (bench_cuda's problem)
FLASH_TFLOPS, BF16_CEILING = 335.0, 720.0
W8A16_LINEAR_MS, W8A8_LINEAR_MS = 14.0, 9.0  # a layer's Linears in the forward profiles


def forward(impl, mode, layers, fixed, per_layer, attention=None):
    record = {"impl": impl, "bench": "forward", "mode": mode, "layers": layers, "tokens": TOKENS,
              "ms": fixed + per_layer * layers, "prefill_ms": 1.0 + 0.5 * layers}
    if attention:
        record["attention"] = attention
    return record


def records(cudnn_error=False, forward_attention=None, slow=1.0):
    ours = [{"impl": "stepmix", "bench": "forward_info", "hidden": 4096, "ffn": 12288, "heads": 32, "kv_heads": 8,
             "head_dim": 128},
            {"impl": "stepmix", "bench": "loop_step", "tokens": TOKENS, "ms": 2.0},
            {"impl": "stepmix", "bench": "ceiling", "what": "bf16_gemm", "n": 8192, "tflops": BF16_CEILING - 20},
            {"impl": "stepmix", "bench": "attention", "variant": "flash 16 rows/warp", "q_rows": TOKENS,
             "kv_rows": TOKENS + 300, "causal": False, "ms": FLASH_MS, "tflops": FLASH_TFLOPS}]
    cudnn = {"impl": "stepmix", "bench": "attention", "variant": "cudnn sdpa", "q_rows": TOKENS,
             "kv_rows": TOKENS + 300, "causal": False}
    cudnn.update({"optional": True, "error": "no engine"} if cudnn_error else {"ms": CUDNN_MS, "tflops": FLASH_TFLOPS * FLASH_MS / CUDNN_MS})
    ours.append(cudnn)
    peer = [{"impl": "torch", "bench": "ceiling", "what": "bf16_gemm", "n": 8192, "tflops": BF16_CEILING},
            {"impl": "torch", "bench": "attention", "variant": "SDPA default", "q_rows": TOKENS,
             "kv_rows": TOKENS + 300, "causal": False, "ms": SDPA_MS, "tflops": FLASH_TFLOPS * FLASH_MS / SDPA_MS}]
    for layers in (1, 4):
        # Profiles of one forward: only the Linears' ms are read here.
        ours += [{"impl": "stepmix", "bench": "forward_profile", "mode": mode, "layers": layers, "tokens": TOKENS,
                  "ms": 0.0, "profile": {"linear " + mode: {"ms": linear * layers, "calls": 4 * layers},
                                         "linear dense": {"ms": 1.0, "calls": 2},
                                         "attention": {"ms": FLASH_MS * layers, "calls": layers}}}
                 for mode, linear in (("w8a16", W8A16_LINEAR_MS), ("w8a8", W8A8_LINEAR_MS))]
        ours += [forward("stepmix", mode, layers, fixed, per_layer * slow, forward_attention)
                 for mode, fixed, per_layer in (("dense", 12.0, 70.0), ("w8a16", 11.0, 60.0), ("w8a8", 10.0, 50.0))]
        peer += [forward("torch", "dense", layers, 20.0, 60.0), forward("torch", "w8a16", layers, 21.0, 75.0),
                 forward("torch", "w8a8", layers, 22.0, 55.0)]
    return ours, peer


def summarize(ours, peer, tmp):
    paths = [os.path.join(tmp, name) for name in ("stepmix.jsonl", "torch.jsonl", "summary.json")]
    for path, rs in zip(paths, (ours, peer)):
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rs))
    text = subprocess.run([sys.executable, os.path.join(bench_dir, "cuda_summary.py")] + paths, check=True,
                          capture_output=True, text=True).stdout
    return text, json.load(open(paths[2]))


with tempfile.TemporaryDirectory() as tmp:
    text, summary = summarize(*records(), tmp)
    s8, s16, torch_dense = 10 + 50 * LAYERS, 11 + 60 * LAYERS, 20 + 60 * LAYERS
    prefill = 1.0 + 0.5 * LAYERS
    mixed_ms = 6 * (2 * s16 + 2.0) + 29 * (2 * s8 + 2.0) + 2 * prefill
    estimate = summary["forward"]["estimate"]
    assert abs(estimate["stepmix_mixed_s"] - mixed_ms / 1000) < 1e-9, (estimate, mixed_ms)
    derived = estimate["with_cudnn_attention"]
    saved = LAYERS * (FLASH_MS - CUDNN_MS)
    assert derived["derived"] is True and abs(derived["saved_ms_per_forward"] - saved) < 1e-9, derived
    assert abs(derived["w8a8_forward_ms"] - (s8 - saved)) < 1e-9, derived
    assert abs(derived["stepmix_mixed_s"] - (mixed_ms - 70 * saved) / 1000) < 1e-9, derived
    line = [l for l in text.splitlines() if "with cuDNN's attention in place of the flash kernel" in l]
    want = "%.0f ms less per forward): W8A8 forward %.0f ms (%.2fx the PyTorch bf16 peer)" % (
        saved, s8 - saved, torch_dense / (s8 - saved))
    assert len(line) == 1 and want in line[0], (want, line, text)

    # The mixed schedule's own price: the W8A16 Linears' extra over W8A8,
    # per layer from the profiles at 4 layers, at 36 layers, 12 forwards.
    all8_ms = 35 * (2 * s8 + 2.0) + 2 * prefill
    extra = (W8A16_LINEAR_MS - W8A8_LINEAR_MS) * LAYERS
    schedule = summary["forward"]["schedule"]
    assert abs(schedule["w8a16_linear_extra_ms_per_forward"] - extra) < 1e-9, schedule
    assert abs(schedule["w8a16_linears_over_all_w8a8"] - 12 * extra / all8_ms) < 1e-12, schedule
    want = "of that, the W8A16 Linears (bf16 GEMMs where W8A8 runs FP8 ones, %.0f ms more a forward at 36 layers," \
           " from the forward profile) make %+.1f%%" % (extra, 100 * 12 * extra / all8_ms)
    assert want in text, (want, text)

    # What it is made of: the flash kernel's attention (the forwards say no
    # other engine), 70 forwards x 36 layers of it, and the rest.
    breakdown, calls = estimate["breakdown"], 70 * LAYERS
    attention_s = calls * FLASH_MS / 1000
    rest_s = mixed_ms / 1000 - attention_s
    needed = FLASH_TFLOPS * attention_s / (150 - rest_s)
    assert breakdown["attention_engine"] == "flash" and abs(breakdown["attention_s"] - attention_s) < 1e-9, breakdown
    assert abs(breakdown["rest_s"] - rest_s) < 1e-9 and abs(breakdown["attention_tflops_for_goal"] - needed) < 1e-9
    assert abs(breakdown["attention_fraction_of_bf16_ceiling"] - FLASH_TFLOPS / BF16_CEILING) < 1e-12, breakdown
    assert abs(breakdown["torch_attention_s"] - calls * SDPA_MS / 1000) < 1e-9, breakdown
    want = ("made of: generation attention %.1f s (%.0f%%: %d calls of %.2f ms on flash, %.0f TFLOP/s, %.2f of the"
            " bf16 GEMM ceiling), everything else %.1f s" % (attention_s, 100 * attention_s / (mixed_ms / 1000),
                                                            calls, FLASH_MS, FLASH_TFLOPS,
                                                            FLASH_TFLOPS / BF16_CEILING, rest_s))
    assert want in text, (want, text)
    want = "to meet 150 s with the rest unchanged, the attention needs %.0f TFLOP/s (%.2f of" % (
        needed, needed / BF16_CEILING)
    assert want in text, (want, text)

    # Slower forwards whose rest alone is over the goal: no throughput meets it.
    text, summary = summarize(*records(slow=3.0), tmp)
    breakdown = summary["forward"]["estimate"]["breakdown"]
    assert breakdown["rest_s"] >= 150 and breakdown["attention_tflops_for_goal"] is None, breakdown
    assert "the 150 s goal is out of reach whatever the attention costs" in text, text
    assert "the attention needs" not in text, text

    text, summary = summarize(*records(cudnn_error=True), tmp)
    assert "with_cudnn_attention" not in summary["forward"]["estimate"], summary["forward"]["estimate"]
    assert "in place of the flash kernel" not in text, text
    assert "attention cudnn sdpa >=" not in text, text  # a failed optional case is not judged

    # Forwards that say which engine ran: the flash kernel's still get the
    # derived line; cuDNN's (attention_bf16's default where it can) measured
    # it, so nothing is derived, and the table says which engine it was.
    text, summary = summarize(*records(forward_attention="flash"), tmp)
    assert "with_cudnn_attention" in summary["forward"]["estimate"], summary["forward"]["estimate"]
    assert "generation-stream attention in these forwards: flash (" in text, text
    text, summary = summarize(*records(forward_attention="cudnn"), tmp)
    assert "with_cudnn_attention" not in summary["forward"]["estimate"], summary["forward"]["estimate"]
    assert "in place of the flash kernel" not in text, text
    assert "generation-stream attention in these forwards: cudnn (" in text, text
    assert summary["forward"]["attention"] == ["cudnn"], summary["forward"]
    assert abs(summary["forward"]["estimate"]["stepmix_mixed_s"] - mixed_ms / 1000) < 1e-9
    # The breakdown then takes cuDNN's attention record, the engine that ran.
    breakdown = summary["forward"]["estimate"]["breakdown"]
    assert breakdown["attention_engine"] == "cudnn", breakdown
    assert abs(breakdown["attention_s"] - 70 * LAYERS * CUDNN_MS / 1000) < 1e-9, breakdown
print("ok: the full-size estimate and what it is made of, with cuDNN's attention derived for a flash forward and"
      " measured for a cuDNN one")
