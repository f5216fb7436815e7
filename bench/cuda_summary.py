#!/usr/bin/env python3
"""Tables of one bench/cuda-device-check.sh run: stepmix (bench_cuda) beside the
PyTorch peer (bench/cuda_peer.py) from the same run, with the ratios the
CUDA backend is held to and each number's fraction of the ceiling measured in
the same run (the largest GEMM of the same precision, 8192³ in a full run).
A target whose peer figure is missing (the peer did not run, or its case
failed) reads n/a; one whose stepmix figure is missing reads MISS.

  python3 bench/cuda_summary.py STEPMIX.jsonl TORCH.jsonl SUMMARY.json > SUMMARY.txt

Targets: W8A8 >= 1.0x torch._scaled_mm and >= 1.6x bf16 F.linear at M >= 4096;
attention >= 1.0x SDPA (the default choice); the Nano-shaped W8A8 forward >=
1.2x the PyTorch bf16 peer at 44,160 tokens; the mixed schedule <= 3% over
all-W8A8; a full 35-step 720p / 189-frame Nano generation estimated <= 150 s.

The forward records (bench_cuda_forward, bench/cuda_peer_forward.py) come at
two layer counts; a forward is fitted as fixed + layers x per-layer and
extrapolated to Nano's 36 layers. A denoising step is two forwards (the CFG
passes) plus the loop's CFG combination and scheduler update on the device
(stepmix measures it, "loop_step"; the peer is given none).
"""
import json
import sys

NANO_LAYERS = 36
FULL_TOKENS = 44160  # 720p, 189 frames: the forward the 35-step estimate is for
# Published single-H200 BF16 times of a Cosmos3-Nano T2V 720p generation
# (NVIDIA/cosmos inference_benchmarks.md).
PUBLISHED_S = {"vLLM-Omni": 208.0, "PyTorch": 214.0, "Diffusers": 240.0}
GOAL_S = 150.0  # the goal for that estimate
# bench_cuda's attention record of each engine a forward can report
# (bench_cuda_forward's "attention"): the flash kernel's default variant
# (FlashVariant::Auto, cuda_kernels.hpp) and cuDNN's fused attention.
ENGINE_VARIANT = {"flash": "flash 16 rows/warp", "cudnn": "cudnn sdpa"}


def load(path):
    records = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return records


def pick(records, **match):
    for r in records:
        if all(r.get(k) == v for k, v in match.items()) and "error" not in r:
            return r
    return None


def tflops(r):
    return r["tflops"] if r and "tflops" in r else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, width=7, digits=1):
    return ("%*.*f" % (width, digits, x)) if x is not None else " " * (width - 1) + "-"


def layer_counts(records, impl, mode, tokens, key="ms"):
    return {r["layers"] for r in records if r.get("bench") == "forward" and r.get("impl") == impl
            and r.get("mode") == mode and r.get("tokens") == tokens and key in r}


def fitted(records, impl, mode, tokens, key="ms", only=None):
    """(fixed, per_layer, layer counts) of one forward case, or None: the line
    through the smallest and the largest layer count (per-layer only with one);
    only the layer counts in `only` when it is given."""
    points = sorted((r["layers"], r[key]) for r in records if r.get("bench") == "forward" and r.get("impl") == impl
                    and r.get("mode") == mode and r.get("tokens") == tokens and key in r
                    and (only is None or r["layers"] in only))
    if not points:
        return None
    (l0, t0), (l1, t1) = points[0], points[-1]
    if l1 == l0:
        return 0.0, t1 / l1, [l1]
    per_layer = (t1 - t0) / (l1 - l0)
    return t0 - per_layer * l0, per_layer, [l0, l1]


def best_ceiling(summary, what):
    """The higher of the two sides' ceiling `what` in this run (None without either)."""
    return max([v for v in summary["ceilings"].get(what, {}).values() if v is not None], default=None)


def attention_engines(ours, **match):
    """The engines stepmix's timed forwards (those whose fields equal `match`)
    ran their generation-stream attention on (bench_cuda_forward's
    "attention"; a record without one predates the choice: the flash kernel)."""
    return {r.get("attention", "flash") for r in ours if r.get("bench") == "forward" and "ms" in r
            and all(r.get(k) == v for k, v in match.items())}


def at_layers(fit, layers):
    return fit[0] + fit[1] * layers if fit else None


def measured(records, impl, mode, tokens, fit):
    """The forward record at the largest layer count the fit used."""
    if not fit:
        return None
    return pick([r for r in records if r.get("impl") == impl], bench="forward", mode=mode, tokens=tokens,
                layers=fit[2][-1])


def forward_section(ours, peer, lines, summary):
    records = ours + peer
    lines.append("")
    if not any(r.get("bench") == "forward" and "ms" in r for r in records):
        lines.append("Nano-shaped forward: no timed records (bench_cuda_forward / cuda_peer_forward.py did not run,"
                     " or every case failed: see \"cases that failed\")")
        return
    section = summary.setdefault("forward", {"cases": [], "schedule": {}, "estimate": {}})
    shape = pick(ours, bench="forward_info") or {"hidden": 4096, "ffn": 12288, "heads": 32, "kv_heads": 8,
                                                  "head_dim": 128}
    lines.append("Nano-shaped forward (hidden %s, FFN %s, %s/%s heads, head_dim %s), ms per forward; fitted"
                 " fixed + per-layer from the layer counts run, extrapolated to %d layers"
                 % (shape.get("hidden"), shape.get("ffn"), shape.get("heads"), shape.get("kv_heads"),
                    shape.get("head_dim"), NANO_LAYERS))
    lines.append("  tokens mode   | stepmix layers  measured  per-layer    @36 | torch measured  per-layer    @36 |"
                 " torch/stepmix @36")
    tokens_seen = sorted({r["tokens"] for r in records if r.get("bench") == "forward" and "tokens" in r},
                         reverse=True)
    at36 = {}
    fit_notes = []
    for tokens in tokens_seen:
        for mode in ("dense", "w8a16", "w8a8"):
            # Both sides fitted on the layer counts both ran, so that a side
            # with one point (its fixed cost folded into every layer) is not
            # set against a two-point fit; where they share none, no ratio.
            s_layers, t_layers = layer_counts(ours, "stepmix", mode, tokens), layer_counts(peer, "torch", mode, tokens)
            shared = s_layers & t_layers
            disjoint = bool(s_layers and t_layers and not shared)
            if disjoint:
                fit_notes.append("  %d %s: the two sides ran no layer count in common (stepmix %s, torch %s): "
                                 "no ratio" % (tokens, mode, sorted(s_layers), sorted(t_layers)))
            elif shared and s_layers != t_layers:
                fit_notes.append("  %d %s: fitted on the layer counts both ran, %s (stepmix ran %s, torch %s)"
                                 % (tokens, mode, sorted(shared), sorted(s_layers), sorted(t_layers)))
            only = shared or None
            s_fit = fitted(ours, "stepmix", mode, tokens, only=only)
            t_fit = None if disjoint else fitted(peer, "torch", mode, tokens, only=only)
            s36, t36 = at_layers(s_fit, NANO_LAYERS), at_layers(t_fit, NANO_LAYERS)
            at36[(tokens, mode)] = (s36, t36)
            s_last = measured(ours, "stepmix", mode, tokens, s_fit)
            t_last = measured(peer, "torch", mode, tokens, t_fit)
            section["cases"].append({"tokens": tokens, "mode": mode, "stepmix_fit": s_fit, "torch_fit": t_fit,
                                     "stepmix_at_36": s36, "torch_at_36": t36})
            lines.append("  %6d %-6s | %14s %9s %10s %6s | %14s %10s %6s | %8s" % (
                tokens, mode, ",".join(map(str, s_fit[2])) if s_fit else "-",
                fmt(s_last["ms"] if s_last else None, 9, 1), fmt(s_fit[1] if s_fit else None, 10, 2),
                fmt(s36, 6, 0), fmt(t_last["ms"] if t_last else None, 14, 1),
                fmt(t_fit[1] if t_fit else None, 10, 2), fmt(t36, 6, 0), fmt(ratio(t36, s36), 8, 2)))
    lines.extend(fit_notes)
    # The engine of each layer's generation-stream attention.
    engines = sorted(attention_engines(ours))
    if engines:
        lines.append("  generation-stream attention in these forwards: %s (attention_bf16's choice, "
                     "STEPMIX_CUDA_ATTENTION)" % ", ".join(engines))
        section["attention"] = engines
    # The peer's: which SDPA backend its default picked for the same problem.
    backends = sorted({r["sdpa_backend"] for r in peer if r.get("bench") == "forward" and r.get("sdpa_backend")})
    if backends:
        lines.append("  the PyTorch peer's generation-stream SDPA: %s (its default's choice)" % ", ".join(backends))
        section["torch_sdpa_backends"] = backends
    # (failed forward cases are listed under "cases that failed")
    big = max(tokens_seen)
    s8, s16 = at36.get((big, "w8a8"), (None, None))[0], at36.get((big, "w8a16"), (None, None))[0]
    torch_dense = at36.get((big, "dense"), (None, None))[1]
    value = ratio(torch_dense, s8)
    summary["targets"].append({"target": "Nano-shaped W8A8 forward >= 1.2x the PyTorch bf16 peer at %d tokens "
                                         "(%d layers, fitted)" % (big, NANO_LAYERS),
                               "value": value, "met": value is not None and value >= 1.2,
                               "peer_missing": torch_dense is None})
    if s8 is None or s16 is None:
        return

    host = next((r["ms"] for r in ours if r.get("bench") == "loop_step" and r.get("tokens") == big), 0.0)
    prefill = {mode: at_layers(fitted(ours, "stepmix", mode, big, "prefill_ms"), NANO_LAYERS) or 0.0
               for mode in ("w8a16", "w8a8")}
    step8, step16 = 2 * s8 + host, 2 * s16 + host
    # The published policy: W8A16x3 / W8A8x29 / W8A16x3, the reasoner at W8A16
    # (one prefill per prompt, cached for every step); all-W8A8: every step and
    # the reasoner at W8A8.
    mixed_ms = 6 * step16 + 29 * step8 + 2 * prefill["w8a16"]
    all8_ms = 35 * step8 + 2 * prefill["w8a8"]
    overhead = mixed_ms / all8_ms - 1
    lines.append("")
    lines.append("35 steps at %d tokens, %d layers (a step: 2 forwards + %.2f ms of CFG and UniPC):" % (
        big, NANO_LAYERS, host))
    lines.append("  step W8A8 %.0f ms, W8A16 %.0f ms; understanding prefill of one prompt W8A16 %.0f ms, W8A8 %.0f ms"
                 % (step8, step16, prefill["w8a16"], prefill["w8a8"]))
    lines.append("  mixed W8A16x3 / W8A8x29 / W8A16x3: %.1f s; all-W8A8: %.1f s; mixed over all-W8A8: %+.1f%%" % (
        mixed_ms / 1000, all8_ms / 1000, 100 * overhead))
    section["schedule"] = {"tokens": big, "step_w8a8_ms": step8, "step_w8a16_ms": step16, "loop_step_ms": host,
                           "prefill_ms": prefill, "mixed_s": mixed_ms / 1000, "all_w8a8_s": all8_ms / 1000,
                           "mixed_over_all_w8a8": overhead}
    summary["targets"].append({"target": "mixed schedule <= 3%% over all-W8A8 (35 steps, %d layers, fitted)"
                                         % NANO_LAYERS, "value": overhead, "met": overhead <= 0.03})
    linear_extra = w8a16_linear_extra_ms(ours, big)
    if linear_extra is not None:
        # The policy's own price: its 6 W8A16 steps run their Linears as bf16
        # GEMMs (FP8 weights decoded, bf16 activations) where W8A8 runs FP8.
        share = 12 * linear_extra / all8_ms
        lines.append("  of that, the W8A16 Linears (bf16 GEMMs where W8A8 runs FP8 ones, %.0f ms more a forward at %d"
                     " layers, from the forward profile) make %+.1f%%" % (linear_extra, NANO_LAYERS, 100 * share))
        section["schedule"]["w8a16_linear_extra_ms_per_forward"] = linear_extra
        section["schedule"]["w8a16_linears_over_all_w8a8"] = share
    torch_s = None
    if torch_dense is not None:
        torch_prefill = at_layers(fitted(peer, "torch", "dense", big, "prefill_ms"), NANO_LAYERS) or 0.0
        torch_s = (70 * torch_dense + 2 * torch_prefill) / 1000
    if big != FULL_TOKENS:  # CUDA_CHECK_QUICK's shapes: no 720p estimate to make
        lines.append("")
        lines.append("no 720p / 189-frame estimate: the largest forward run has %d tokens, not %d" % (big, FULL_TOKENS))
        return
    lines.append("")
    lines.append("estimate of a full 35-step 720p / 189-frame Nano generation (70 forwards + the prefill of both"
                 " prompts; text encoding and VAE decode not included):")
    lines.append("  stepmix mixed %.1f s; the PyTorch eager bf16 peer of this run %s s; published single-H200 BF16: %s"
                 % (mixed_ms / 1000, fmt(torch_s, 5, 1), ", ".join("%s %.0f s" % kv for kv in PUBLISHED_S.items())))
    section["estimate"] = {"stepmix_mixed_s": mixed_ms / 1000, "torch_eager_bf16_s": torch_s,
                           "published_s": PUBLISHED_S, "layers": NANO_LAYERS}
    summary["targets"].append({"target": "full 35-step Nano generation estimate <= %.0f s" % GOAL_S,
                               "value": mixed_ms / 1000, "met": mixed_ms / 1000 <= GOAL_S})
    estimate_breakdown(ours, peer, big, mixed_ms, torch_s, summary, lines, section)
    cudnn_attention_estimate(ours, big, s8, mixed_ms, torch_dense, lines, section)


def w8a16_linear_extra_ms(ours, tokens):
    """How much longer a forward's Linears take at W8A16 than at W8A8, at
    Nano's layer count: the forward profiles' Linear kinds at the largest
    layer count both modes were profiled at, per layer, times 36 (None
    without both profiles)."""
    profiles = {}
    for r in ours:
        if r.get("bench") == "forward_profile" and r.get("tokens") == tokens and r.get("mode") in ("w8a16", "w8a8"):
            profiles.setdefault(r["layers"], {})[r["mode"]] = r["profile"]
    both = [layers for layers, modes in profiles.items() if len(modes) == 2]
    if not both:
        return None
    layers = max(both)

    def linear_ms(profile):
        return sum(entry["ms"] for kind, entry in profile.items() if kind.startswith("linear"))
    modes = profiles[layers]
    return (linear_ms(modes["w8a16"]) - linear_ms(modes["w8a8"])) / layers * NANO_LAYERS


def estimate_breakdown(ours, peer, tokens, mixed_ms, torch_s, summary, lines, section):
    """What the 35-step estimate is made of: the generation-stream attention
    (70 forwards x 36 layers of bench_cuda's attention problem, on the engine
    the W8A8 forwards ran) and the rest, beside the PyTorch peer's SDPA
    default in its own estimate; and the attention throughput the rest would
    leave for the estimate to meet its goal. The step policy quantizes
    Linears only (the attention is bf16 at every step), so when the estimate
    misses the goal these are the figures that say what bounds it."""
    engines = attention_engines(ours, mode="w8a8", tokens=tokens)
    if len(engines) != 1 or next(iter(engines)) not in ENGINE_VARIANT:
        return
    engine = next(iter(engines))
    attention = pick(ours, bench="attention", variant=ENGINE_VARIANT[engine], causal=False, q_rows=tokens)
    if not attention or "ms" not in attention:
        return
    calls = 70 * NANO_LAYERS
    attention_s = calls * attention["ms"] / 1000
    rest_s = mixed_ms / 1000 - attention_s
    ceiling = best_ceiling(summary, "bf16_gemm")
    # TFLOP/s at the goal: the same work (the record's TFLOP/s x its time) in
    # what the rest leaves of the goal.
    tflops = attention.get("tflops")
    needed = (tflops * attention_s / (GOAL_S - rest_s)) if tflops and rest_s < GOAL_S else None
    breakdown = {"attention_engine": engine, "attention_ms_per_layer": attention["ms"], "attention_s": attention_s,
                 "rest_s": rest_s, "attention_share": attention_s / (mixed_ms / 1000), "attention_tflops": tflops,
                 "attention_fraction_of_bf16_ceiling": ratio(tflops, ceiling), "attention_tflops_for_goal": needed}
    lines.append("  made of: generation attention %.1f s (%.0f%%: %d calls of %.2f ms on %s, %s TFLOP/s, %s of the"
                 " bf16 GEMM ceiling), everything else %.1f s" % (
                     attention_s, 100 * breakdown["attention_share"], calls, attention["ms"], engine,
                     fmt(tflops, 1, 0), fmt(breakdown["attention_fraction_of_bf16_ceiling"], 1, 2), rest_s))
    if rest_s >= GOAL_S:
        lines.append("  everything but the attention already takes %.1f s: the %.0f s goal is out of reach whatever"
                     " the attention costs" % (rest_s, GOAL_S))
    elif needed is not None:
        lines.append("  to meet %.0f s with the rest unchanged, the attention needs %.0f TFLOP/s (%s of the bf16 GEMM"
                     " ceiling)" % (GOAL_S, needed, fmt(ratio(needed, ceiling), 1, 2)))
    sdpa = pick(peer, bench="attention", variant="SDPA default", causal=False, q_rows=tokens)
    if sdpa and "ms" in sdpa and torch_s is not None:
        breakdown["torch_attention_s"] = calls * sdpa["ms"] / 1000
        lines.append("  the PyTorch peer's estimate: SDPA's default %.1f s of its %.1f s" % (
            breakdown["torch_attention_s"], torch_s))
    section["estimate"]["breakdown"] = breakdown


def cudnn_attention_estimate(ours, tokens, s8, mixed_ms, torch_dense, lines, section):
    """The W8A8 forward and the 35-step estimate with cuDNN's attention in place of the flash kernel.

    Derived, not measured: each layer of a forward runs one generation-stream
    attention, bench_cuda's problem (the vision rows over 300 + vision keys),
    so a forward saves the layers times (flash - cuDNN) of bench_cuda's
    timings; the flash variant is the one attention_bf16 runs. Only when the
    forward ran the flash kernel (attention_bf16 prefers cuDNN's where it
    can: then the forward itself measured it).
    """
    if attention_engines(ours, mode="w8a8", tokens=tokens) - {"flash"}:
        return  # the forward measured cuDNN's attention (or not the flash kernel's): nothing to derive
    flash = pick(ours, bench="attention", variant=ENGINE_VARIANT["flash"], causal=False)
    cudnn = pick(ours, bench="attention", variant=ENGINE_VARIANT["cudnn"], causal=False)
    if not (flash and cudnn and flash.get("q_rows") == tokens and cudnn.get("q_rows") == tokens):
        return
    saved = NANO_LAYERS * (flash["ms"] - cudnn["ms"])
    forward, mixed_s = s8 - saved, (mixed_ms - 70 * saved) / 1000
    lines.append("  with cuDNN's attention in place of the flash kernel (derived from bench_cuda's attention, not"
                 " measured: %.0f ms %s per forward): W8A8 forward %.0f ms (%sx the PyTorch bf16 peer), stepmix"
                 " mixed %.1f s" % (abs(saved), "less" if saved >= 0 else "more", forward,
                                    fmt(ratio(torch_dense, forward), 4, 2).strip(), mixed_s))
    section["estimate"]["with_cudnn_attention"] = {"saved_ms_per_forward": saved, "w8a8_forward_ms": forward,
                                                   "stepmix_mixed_s": mixed_s, "derived": True}


def rate(entry, copy_ceiling):
    """A profile entry's rate in five characters: its TFLOP/s, or the fraction
    of the device copy's TB/s its bytes reach ("0.85c"), or its TB/s ("3.9TB")
    with no ceiling."""
    if entry.get("tflops") is not None:
        return fmt(entry["tflops"], 5, 0)
    if entry.get("tb_per_s") is not None:
        if copy_ceiling:
            return "%4.2fc" % (entry["tb_per_s"] / copy_ceiling)
        return "%3.1fTB" % entry["tb_per_s"]
    return fmt(None, 5, 0)


def forward_profile_section(records, impl, lines, summary):
    """Where a forward's time goes ("forward_profile" records of `impl`:
    bench_cuda_forward's, or the PyTorch peer's), per token count at its
    largest profiled layer count: ms, share of the profiled total and (where
    the record has them) TFLOP/s or, memory-bound, the fraction of the device
    copy's TB/s of each kind of operation, per mode, beside the unprofiled
    forward of the same case (each operation is waited for, so the profiled
    total is a little more)."""
    profiles = [r for r in records if r.get("bench") == "forward_profile" and r.get("impl") == impl
                and "profile" in r]
    if not profiles:
        return
    lines.append("")
    # The device copy's TB/s of the same run: the memory-bound kinds' ceiling.
    ceiling = best_ceiling(summary, "device_copy")
    if impl == "stepmix":
        lines.append("where a forward's time goes (one warm forward, each operation waited for): ms, share, TFLOP/s"
                     " of Linears and attention; for memory-bound kinds, the fraction c of the device copy's %s TB/s"
                     " their bytes read + written reach" % fmt(ceiling, 1, 2))
    else:
        lines.append("where the PyTorch peer's forward's time goes (the same way: each operation waited for): ms,"
                     " share")
    modes = ("dense", "w8a16", "w8a8")
    section = summary.setdefault("forward_profile", [])
    for tokens in sorted({r["tokens"] for r in profiles}, reverse=True):
        layers = max(r["layers"] for r in profiles if r["tokens"] == tokens)
        by_mode = {r["mode"]: r for r in profiles if r["tokens"] == tokens and r["layers"] == layers}
        kinds = sorted({k for r in by_mode.values() for k in r["profile"]},
                       key=lambda k: -max(r["profile"].get(k, {}).get("ms", 0) for r in by_mode.values()))
        lines.append("  %-22s%s" % ("%d tokens, %d layers" % (tokens, layers), "".join("%23s" % m for m in modes)))
        for kind in kinds:
            cells = ""
            for mode in modes:
                r = by_mode.get(mode)
                entry = r["profile"].get(kind) if r else None
                if entry is None:
                    cells += "%23s" % "-"
                    continue
                share = entry["ms"] / r["ms"] if r["ms"] > 0 else 0
                cells += "  %9.2f %4.0f%% %5s" % (entry["ms"], 100 * share, rate(entry, ceiling))
            lines.append("  %-22s%s" % (kind, cells))
        totals = plain = ""
        for mode in modes:
            r = by_mode.get(mode)
            unprofiled = pick(records, impl=impl, bench="forward", mode=mode, tokens=tokens, layers=layers)
            totals += "  %9.2f %11s" % (r["ms"], "") if r else "%23s" % "-"
            plain += "  %9.2f %11s" % (unprofiled["ms"], "") if unprofiled and "ms" in unprofiled else "%23s" % "-"
            if r:
                section.append({"impl": impl, "tokens": tokens, "layers": layers, "mode": mode, "ms": r["ms"],
                                "unprofiled_ms": unprofiled.get("ms") if unprofiled else None,
                                "profile": r["profile"]})
        lines.append("  %-22s%s" % ("profiled total", totals))
        lines.append("  %-22s%s" % ("unprofiled forward", plain))


def cfg_step_section(ours, lines, summary):
    """A CFG step as two calls against one batched call (bench_cuda_forward "cfg_step")."""
    steps = [r for r in ours if r.get("bench") == "cfg_step"]
    if not steps:
        return
    lines.append("")
    lines.append("CFG step, the two passes as two calls against one batched call (ms):")
    section = summary.setdefault("cfg_step", [])
    for r in sorted(steps, key=lambda r: (r["layers"], r["mode"], r["tokens"])):
        gain = r["separate_ms"] / r["batched_ms"] if r["batched_ms"] > 0 else None
        lines.append("  %d layers %-6s %6d tokens: separate %9.1f, batched %9.1f (%sx), peak device %.1f GiB" % (
            r["layers"], r["mode"], r["tokens"], r["separate_ms"], r["batched_ms"], fmt(gain, 4, 2),
            r["peak_device_bytes"] / 2**30))
        section.append({k: r[k] for k in ("layers", "mode", "tokens", "separate_ms", "batched_ms",
                                          "peak_device_bytes")})


def main():
    ours, peer = load(sys.argv[1]), load(sys.argv[2])
    out_json = sys.argv[3] if len(sys.argv) > 3 else None
    lines, summary = [], {"linear": [], "attention": [], "ceilings": {}, "checks": [], "targets": []}

    info = pick(ours, bench="info") or {}
    tinfo = pick(peer, bench="info") or {}
    lines.append("device: %s (%s), %s; torch %s, CUDA %s, cuDNN %s" % (
        info.get("name", "?"), info.get("compute_capability", "?"), info.get("build", "?"),
        tinfo.get("torch", "?"), tinfo.get("cuda", "?"), tinfo.get("cudnn", "?")))
    summary["device"] = {"stepmix": info, "torch": tinfo}

    lines.append("")
    n = (pick(ours, bench="ceiling", what="bf16_gemm") or pick(peer, bench="ceiling", what="bf16_gemm") or {}).get("n")
    lines.append("ceilings (same run): TFLOP/s of an %s^3 GEMM, TB/s of a device copy (read + write)" % (n or "n"))
    for what in ("bf16_gemm", "fp8_gemm", "device_copy"):
        a, b = pick(ours, bench="ceiling", what=what), pick(peer, bench="ceiling", what=what)
        key = "tb_per_s" if what == "device_copy" else "tflops"
        va, vb = (a or {}).get(key), (b or {}).get(key)
        summary["ceilings"][what] = {"stepmix": va, "torch": vb}
        lines.append("  %-12s stepmix %s   torch %s" % (what, fmt(va, 7, 1), fmt(vb, 7, 1)))

    lines.append("")
    lines.append("linear, TFLOP/s; ratios to torch; fractions of the same-precision %s^3 ceiling" % (n or "n"))
    lines.append("      M     K     N |   W8A8  +quant   W8A16  cached    BF16 | scaled_mm +quant F.linear |"
                 " W8A8/smm W8A8/lin BF16/lin | W8A8/fp8 BF16/bf16")
    shapes = sorted({(r["M"], r["K"], r["N"]) for r in ours if r.get("bench") == "linear"})
    for m, k, n in shapes:
        s = {mode: tflops(pick(ours, bench="linear", mode=mode, M=m, K=k, N=n))
             for mode in ("W8A8", "W8A8+quantize", "W8A16", "W8A16 cached", "BF16")}
        t = {mode: tflops(pick(peer, bench="linear", mode=mode, M=m, K=k, N=n))
             for mode in ("_scaled_mm", "_scaled_mm+quantize", "F.linear bf16", "decode+F.linear")}
        row = {"M": m, "K": k, "N": n, "stepmix": s, "torch": t,
               "w8a8_over_scaled_mm": ratio(s["W8A8"], t["_scaled_mm"]),
               "w8a8_over_linear": ratio(s["W8A8"], t["F.linear bf16"]),
               "w8a8_quant_over_scaled_mm_quant": ratio(s["W8A8+quantize"], t["_scaled_mm+quantize"]),
               "bf16_over_linear": ratio(s["BF16"], t["F.linear bf16"]),
               "w8a8_fraction_of_fp8_ceiling": ratio(s["W8A8"], best_ceiling(summary, "fp8_gemm")),
               "bf16_fraction_of_bf16_ceiling": ratio(s["BF16"], best_ceiling(summary, "bf16_gemm"))}
        summary["linear"].append(row)
        lines.append("  %5d %5d %5d | %s %s %s %s %s | %s %s %s | %s %s %s | %s %s" % (
            m, k, n, fmt(s["W8A8"]), fmt(s["W8A8+quantize"]), fmt(s["W8A16"]), fmt(s["W8A16 cached"]),
            fmt(s["BF16"]), fmt(t["_scaled_mm"], 9), fmt(t["_scaled_mm+quantize"], 6), fmt(t["F.linear bf16"], 8),
            fmt(row["w8a8_over_scaled_mm"], 8, 2), fmt(row["w8a8_over_linear"], 8, 2),
            fmt(row["bf16_over_linear"], 8, 2), fmt(row["w8a8_fraction_of_fp8_ceiling"], 8, 2),
            fmt(row["bf16_fraction_of_bf16_ceiling"], 9, 2)))
        if m >= 4096:
            for name, value, goal, peer_value in (
                    ("W8A8 / _scaled_mm", row["w8a8_over_scaled_mm"], 1.0, t["_scaled_mm"]),
                    ("W8A8 / F.linear", row["w8a8_over_linear"], 1.6, t["F.linear bf16"])):
                summary["targets"].append({"target": "%s >= %.1f at M=%d K=%d N=%d" % (name, goal, m, k, n),
                                           "value": value, "met": value is not None and value >= goal,
                                           "peer_missing": peer_value is None})

    lines.append("")
    lines.append("attention, TFLOP/s (4·Sq·Skv·H·D)")
    default = pick(peer, bench="attention", variant="SDPA default", causal=False)
    sdpa = tflops(default)
    fastest = max([tflops(r) for r in peer if r.get("bench") == "attention" and not r.get("causal")
                   and tflops(r) is not None], default=None)
    if sdpa is None:  # the default failed: hold stepmix to the fastest forced backend instead
        sdpa = fastest
    if default and default.get("backend"):
        lines.append("  (SDPA's default chose %s)" % default["backend"])
    for r in ours + peer:
        if r.get("bench") != "attention":
            continue
        value = tflops(r)
        entry = {"impl": r["impl"], "variant": r.get("variant"), "q_rows": r.get("q_rows"),
                 "kv_rows": r.get("kv_rows"), "causal": r.get("causal"), "tflops": value, "ms": r.get("ms"),
                 "error": r.get("error"), "gqa": r.get("gqa"), "backend": r.get("backend")}
        summary["attention"].append(entry)
        rel = ratio(value, sdpa) if not r.get("causal") else None
        lines.append("  %-8s %-26s %6s x %-6s %s %s ms %s%s" % (
            r["impl"], r.get("variant"), r.get("q_rows"), r.get("kv_rows"), fmt(value),
            fmt(r.get("ms"), 8, 2), ("  %.2fx SDPA" % rel) if rel else "",
            ("  error: " + r["error"][:80]) if r.get("error") else ""))
        # An optional case (cuDNN's attention) that failed is listed below, not judged.
        if r["impl"] == "stepmix" and not r.get("causal") and not (r.get("optional") and r.get("error")):
            summary["targets"].append({"target": "attention %s >= 1.0x SDPA default" % r.get("variant"),
                                       "value": rel, "met": rel is not None and rel >= 1.0,
                                       "peer_missing": sdpa is None})
            best = ratio(value, fastest)
            summary["targets"].append({"target": "attention %s >= 1.0x the fastest SDPA backend (beyond the issue's "
                                                 "target)" % r.get("variant"),
                                       "value": best, "met": best is not None and best >= 1.0,
                                       "peer_missing": fastest is None})

    forward_section(ours, peer, lines, summary)
    forward_profile_section(ours, "stepmix", lines, summary)
    forward_profile_section(peer, "torch", lines, summary)
    cfg_step_section(ours, lines, summary)

    lines.append("")
    lines.append("checks")
    for r in ours:
        if r.get("bench") == "check":
            summary["checks"].append(r)
            error = r.get("max_rel_error", r.get("max_abs_error"))
            shape = " M=%s N=%s K=%s" % (r["M"], r["N"], r["K"]) if all(k in r for k in ("M", "N", "K")) else ""
            status = "ok" if r.get("pass") else "odd" if r.get("optional") else "FAIL"
            lines.append("  %-4s %s%s (error %s)%s" % (status, r.get("what"), shape,
                                                      "%.3g" % error if isinstance(error, (int, float)) else
                                                      "not finite", " (optional: not counted)" if r.get("optional")
                                                      else ""))
    failed = [r for r in ours + peer if "error" in r]
    if failed:
        lines.append("")
        lines.append("cases that failed (their records carry the error)")
        for r in failed:
            keys = ("bench", "mode", "variant", "what", "M", "K", "N", "layers", "tokens")
            what = [str(r[k]) for k in keys if k in r]
            lines.append("  %-8s %s: %s%s" % (r.get("impl"), " ".join(what), str(r["error"])[:160],
                                              " (optional: not counted)" if r.get("optional") else ""))
    summary["errors"] = failed
    lines.append("")
    lines.append("targets")
    for t in summary["targets"]:
        # No peer figure (its script did not run, or its case failed): not
        # judged. No stepmix figure stays a MISS.
        if t.pop("peer_missing", False):
            t["met"] = None
        status = "n/a" if t["met"] is None else "met" if t["met"] else "MISS"
        lines.append("  %-4s %s: %s" % (status, t["target"], fmt(t["value"], 5, 2)))

    print("\n".join(lines))
    if out_json:
        with open(out_json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
